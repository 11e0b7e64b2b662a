"""The paper's values and the faithfulness rows live in one data file (inspo_cli/config/paper.yaml): the docs page,
`inspo recipe explain` and `inspo recipe check --trl` all read it."""

from __future__ import annotations

from pathlib import Path

import yaml

from inspo_cli.config.paper import DATA, PAPER_VALUES, faithfulness_rows, paper_value
from inspo_cli.config.reference import explain, fields
from inspo_cli.docs_gen.faithfulness import markdown

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_and_paper_value_names_real_recipe_keys():
    keys = {entry.key for entry in fields()}
    assert set(PAPER_VALUES) <= keys
    rows = faithfulness_rows()
    assert len(rows) > 40 and all(row.topic and row.paper and row.inspo and row.why for row in rows)
    assert {key for row in rows for key in row.keys} <= keys


def test_a_value_by_model_size_and_a_value_with_a_note():
    assert paper_value("training.learning_rate", "3b") == 5e-7 and paper_value("rollout.max_turns", "7b") == 6
    assert paper_value("training.learning_rate") == "5e-07 (3B) / 3e-07 (7B)"
    assert paper_value("training.weight_decay") == 0.01  # what --trl compares
    assert PAPER_VALUES["training.weight_decay"] == "0.01 (Search-R1's code; the paper is silent)"  # what explain shows
    assert "  paper:    0.01 (Search-R1's code; the paper is silent)" in explain("training.weight_decay")


def test_an_edit_to_the_data_file_reaches_explain_and_the_page(monkeypatch, tmp_path):
    from inspo_cli.config import paper

    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    data["rows"][0]["why"] = "a reason written once"
    edited = tmp_path / "paper.yaml"
    edited.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr(paper, "DATA", edited)
    paper._data.cache_clear()
    paper.faithfulness_rows.cache_clear()
    try:
        assert "| a reason written once |" in markdown()
        assert paper.faithfulness_rows()[0].why == "a reason written once"
    finally:
        monkeypatch.undo()
        paper._data.cache_clear()
        paper.faithfulness_rows.cache_clear()

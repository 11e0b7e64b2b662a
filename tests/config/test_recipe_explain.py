"""Recipe fields that document themselves: help on every field, `inspo recipe explain`, and the generated reference."""

from __future__ import annotations

import dataclasses

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.config import Recipe
from inspo_cli.config.reference import (
    PAPER_VALUES,
    explain,
    faithfulness_rows,
    fields,
    sections,
)
from inspo_cli.docs_gen.recipe import markdown as markdown_reference


def flat(text: str) -> str:
    """The text with its wrapping undone."""
    return " ".join(text.split())


def test_every_field_of_every_section_has_help():
    missing = [section.name for section in dataclasses.fields(Recipe) if not section.metadata.get("help", "").strip()]
    for section in dataclasses.fields(Recipe):
        missing += [
            f"{section.name}.{f.name}"
            for f in dataclasses.fields(section.default_factory)
            if not f.metadata.get("help", "").strip()
        ]
    assert missing == [], f"fields without metadata={{'help': ...}}: {', '.join(missing)}"
    assert len(list(fields())) == sum(len(dataclasses.fields(cls)) for _, _, cls in sections()) > 100


def test_fields_give_each_key_its_type_and_default():
    entries = {entry.key: entry for entry in fields()}
    assert entries["population.accept"][1:3] == ("str", "beat_parent")
    assert entries["data.max_train_questions"][1:3] == ("int | None", None)
    assert entries["evaluation.benchmarks"][1:3] == ("list[str]", ["world"])  # a default_factory, called
    assert (entries["training.steps"].default, entries["population.size"].default) == (300, 7)


def test_explain_shows_the_default_and_the_help():
    result = invoke("recipe", "explain", "population.accept")
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert out.startswith("population.accept type: str default: beat_parent")
    assert "beat_parent (those not significantly worse than their parent" in out
    assert "faithfulness (docs/faithfulness.md): verification acceptance" in out


def test_explain_shows_the_faithfulness_row():
    out = flat(invoke("recipe", "explain", "training.loss_type").stdout)
    assert "faithfulness (docs/faithfulness.md): loss aggregation" in out
    assert "the paper / Search-R1: eq. 2: token mean per trajectory" in out
    assert "inspo (default): `grpo` (eq. 2)" in out and "why: the paper's equation" in out
    assert "paper: grpo" in out


def test_explain_shows_the_papers_value():
    result = invoke("recipe", "explain", "population.size")
    assert result.exit_code == 0, result.output
    assert "paper:    7" in result.stdout and "default:  7" in result.stdout
    assert "paper:" not in invoke("recipe", "explain", "population.accept_margin").stdout  # the paper gives none


def test_faithfulness_rows_name_recipe_keys():
    keys = {entry.key for entry in fields()}
    rows = faithfulness_rows()
    assert len(rows) > 20, "docs/faithfulness.md's table was not read"
    unknown = {key for row in rows for key in row.keys} - keys
    assert unknown == set(), f"docs/faithfulness.md names fields the recipe does not have: {sorted(unknown)}"
    accept = next(row for row in rows if row.topic == "verification acceptance")
    assert "|D_B| = 200" in accept.why  # a bare | inside a cell is text, not a column
    assert accept.keys == ("population.accept", "population.accept_margin", "population.accept_top_n")


def test_explain_works_for_every_key():
    for entry in fields():
        text = explain(entry.key)
        assert text.startswith(entry.key) and "default:" in text and "help:" in text, entry.key


def test_explain_a_section_lists_its_keys():
    out = invoke("recipe", "explain", "reward").stdout
    assert "reward.metric" in out and "reward.format_weight" in out


def test_an_unknown_key_is_a_one_line_error_with_the_closest_keys():
    result = invoke("recipe", "explain", "population.acept")
    assert_one_line_error(result, "population.acept", "population.accept", "inspo recipe explain --list")
    assert_one_line_error(invoke("recipe", "explain", "accept"), "did you mean population.accept?")
    assert_one_line_error(invoke("recipe", "explain"), "--list")


def test_list_prints_every_key_with_its_default():
    result = invoke("recipe", "explain", "--list")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [entry.key for entry in fields()]
    assert (
        flat(next(line for line in lines if line.startswith("population.accept "))) == "population.accept beat_parent"
    )


def test_the_reference_has_one_table_per_section():
    text = markdown_reference()
    assert [line[3:] for line in text.splitlines() if line.startswith("## ")] == [name for name, _, _ in sections()]
    assert "| `retriever.index` | `str \\| None` | `null` |" in text  # a | in a cell is escaped
    assert "…" in text and "`[Answer the given question." in text  # the long instruction is cut


@pytest.mark.parametrize("name", ["qwen2.5-3b/inspo"])
def test_paper_values_agree_with_recipe_check_trl(repo_root, name):
    """PAPER_VALUES is a copy of the paper's column of `inspo recipe check --trl` (trl_report.appendix_b_rows)."""
    from inspo_cli.config import load_recipe
    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.training.grpo import grpo_kwargs
    from inspo_cli.training.trl_report import appendix_b_rows

    recipe = load_recipe(repo_root / f"recipes/{name}.yaml", check_paths=False)
    recipe.model.name_or_path = "some/model"  # no size in the name: the rows give both sizes' values, as we do
    plan = batch_plan(recipe, 8)
    rows = appendix_b_rows(recipe, grpo_kwargs(recipe, plan, repo_root / "runs/x", device="cuda"), plan)
    trl_fields = {
        "max_steps": "training.steps",
        "num_generations": "training.group_size",
        "steps_per_generation": "training.batch_size",
        "gradient_accumulation_steps": "training.mini_batch_trajectories",
        "per_device_train_batch_size": "training.micro_batch_size",
        "learning_rate": "training.learning_rate",
        "lr_scheduler_type": "training.lr_scheduler",
        "warmup_steps": "training.warmup_ratio",
        "temperature": "rollout.temperature",
        "top_p": "rollout.top_p",
        "beta": "training.kl_beta",
        "epsilon": "training.clip_epsilon",
        "loss_type": "training.loss_type",
        "use_bias_correction_kl": "training.kl_bias_correction",
        "vllm_importance_sampling_correction": "training.vllm_is_correction",
        "weight_decay": "training.weight_decay",
        "entropy_coef": "training.entropy_coef",
        "importance_sampling_level": "training.importance_sampling_level",
        "epsilon_high": "training.clip_epsilon_high",
        "scale_rewards": "training.scale_rewards",
        "num_iterations": "training.num_iterations",
        "top_entropy_quantile": "training.top_entropy_quantile",
    }
    described = {"training.kl_bias_correction": False}  # the row describes the paper's KL; the field's value is this
    checked = set()
    for row in rows:
        target = row["target"]
        key = target.split(": ", 1)[1] if ": " in target else trl_fields.get(target)
        if key is None:  # a derived count (updates per step), not a field
            continue
        paper, ours = row["paper"], PAPER_VALUES.get(key)
        expected = described.get(key, paper)
        shown = "null" if paper is None else paper  # as explain shows a value with a note
        assert ours == expected or (isinstance(ours, str) and ours.startswith(f"{shown} (")), (key, paper, ours)
        checked.add(key)
    # App. B's evaluation interval and the tools (search alone, in Search-R1's tags) have no row: `recipe check
    # --trl` is App. B's table
    assert set(PAPER_VALUES) - checked == {"training.eval_every", "agent.tools", "agent.protocol"}

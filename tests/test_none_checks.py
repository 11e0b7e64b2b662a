"""Values that may be None or of another kind than a file says, met with a clear check instead of a crash deep in
arithmetic or an attribute lookup (found while typing the code, issue 53)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.encoders import HashingEncoder

from retriever import build_index, open_index
from retriever.errors import RetrieverError
from retriever.store import PassageStore

WORLD_CORPUS = Path(__file__).resolve().parents[1] / "data" / "world" / "corpus.jsonl"


@pytest.fixture(scope="module")
def corpus300(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("c300") / "corpus.jsonl"
    with WORLD_CORPUS.open() as f:
        path.write_text("".join(next(f) for _ in range(300)))
    return path


def test_a_flat_faiss_file_under_an_hnsw_index_json_is_one_line_naming_the_file(tmp_path, corpus300):
    encoder = HashingEncoder()
    build_index(corpus300, tmp_path / "idx", kind="dense", faiss_type="flat", encoder=encoder)
    meta_path = tmp_path / "idx" / "index.json"
    meta = json.loads(meta_path.read_text())
    meta["faiss"] = {"type": "hnsw", "fp16": False, "M": 32, "ef_construction": 40, "ef_search": 64}
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RetrieverError, match=r"faiss\.index holds a faiss IndexFlatIP, not the HNSW index") as refused:
        open_index(tmp_path / "idx", encoder=encoder)
    assert "rebuild it" in str(refused.value) and "\n" not in str(refused.value)


def test_a_closed_passage_store_refuses_to_read(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "p0", "contents": '"T"\ntext'}) + "\n")
    import numpy as np

    store = PassageStore(corpus, np.array([0, corpus.stat().st_size]))
    assert store.get([0])[0].id == "p0"
    store.close()
    with pytest.raises(ValueError, match="is closed"):
        store.get([0])


def test_sft_engine_before_the_trainer_gives_it_the_model_says_so_instead_of_calling_none(tiny_model_dir):
    from types import SimpleNamespace

    from helpers.sft import INSTRUCTION, sft_recipe

    from inspo_cli.policy.models import load_tokenizer
    from inspo_cli.training.sft import sft_engine

    recipe = sft_recipe(tiny_model_dir, "answers")
    ctx = SimpleNamespace(recipe=recipe, evaluation=None, tokenizer=load_tokenizer(recipe.model))
    engine = sft_engine(ctx, searching=False)
    assert engine.prompt_ids(INSTRUCTION, "Who?")  # building prompts needs no model
    with pytest.raises(RuntimeError, match="only once SearchSFTTrainer has given it the model"):
        engine.run([INSTRUCTION], ["Who?"])


def test_a_finished_or_overrun_progress_line_shows_no_eta():
    from inspo_cli.progress import plain_line

    assert plain_line("evaluating nq", 500, 500, 60.0) == "evaluating nq: 500/500 (100%)  8.33/s  elapsed 0:01:00"
    assert "ETA" not in plain_line("steps", 12, 10, 6.0)


def test_one_run_without_per_question_results_leaves_the_question_level_error_out_and_says_so():
    from inspo_cli.ablation.compare import RunScores, compare

    def runs(em: float, keep_first: bool) -> list[RunScores]:
        per_question = {"world": {"q0": em, "q1": em, "q2": em}}
        return [RunScores(seed, {"world": em}, per_question if keep_first or seed else None) for seed in range(3)]

    result = compare(runs(0.6, keep_first=False), runs(0.4, keep_first=True), "world")
    assert "question-level error left out on world: some run kept no per-question results" in result.notes
    assert not result.paired_questions


def test_parallel_workers_skip_finished_runs_start_the_rest_and_record_what_each_worker_ended_with(monkeypatch):
    from types import SimpleNamespace

    from inspo_cli.ablation import workers

    runs = [SimpleNamespace(name=name) for name in ("a-s0", "b-s0", "c-s0")]
    started, failures = [], {}

    class Worker:  # a worker process that has already exited: "b" fails, the others finish
        def __init__(self, command, env):
            self.pid, self.returncode = 1, 1 if command[-4] == "b-s0" else 0
            started.append(command[-4])

        def poll(self):
            return self.returncode

    ablation = SimpleNamespace(
        path=Path("abl"),
        plan=SimpleNamespace(runs=lambda: runs),
        record_jobs=lambda jobs: None,
        failures=lambda: failures,
        record_failure=lambda run, why: failures.__setitem__(run.name, why),
    )
    monkeypatch.setattr(workers, "_done", lambda ablation, run, rule: run.name == "a-s0")
    monkeypatch.setattr(workers.subprocess, "Popen", Worker)
    monkeypatch.setattr(workers.time, "sleep", lambda seconds: None)
    outcome = workers.run_parallel(ablation, workers=2, device="cpu")
    assert (outcome.skipped, outcome.finished, outcome.failed) == (["a-s0"], ["c-s0"], ["b-s0"])
    assert started == ["b-s0", "c-s0"] and failures == {"b-s0": "its worker exited with code 1"}


def test_a_recipe_retriever_with_a_url_opens_the_server_and_one_whose_url_went_missing_is_refused():
    from inspo_cli.config import RetrieverConfig
    from inspo_cli.errors import InspoError
    from inspo_cli.retrieval import open_from_config
    from retriever.client import HTTPRetriever

    config = RetrieverConfig(kind="http", url="http://127.0.0.1:9/retrieve")
    assert isinstance(open_from_config(config), HTTPRetriever)  # nothing is sent before the first search
    config.url = None  # a section changed after it was checked
    with pytest.raises(InspoError, match="retriever.url is required when kind=http"):
        open_from_config(config)

"""`training.algorithm: rejection-sampling`: phase 1 keeps exactly the correct trajectories, masks as rollouts do and
continues where a kill stopped it; phase 2 trains only on written tokens; `inspo train` and `--resume` run both.

The sampler is the one fake here, at the `PolicyBackend` seam: a searcher that looks up each hop the world's oracle
names and then answers, right or wrong by a draw from torch's generator (so the per-batch seed decides which)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from accelerate import PartialState
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.runs import metrics, resume_after_a_cut, write_recipe
from helpers.sft import INSTRUCTION, assert_loss_only_on_written_tokens, observation_runs, sft_recipe, world_engine

from inspo_cli.benchmarks import WORLD, load_benchmark
from inspo_cli.config import Recipe, SamplingConfig
from inspo_cli.errors import InspoError
from inspo_cli.policy.generation import Generation
from inspo_cli.policy.models import load_tokenizer
from inspo_cli.runs import RunDir

REPO = Path(__file__).resolve().parents[2]


class WorldSearcher:
    """Searches for each hop the world names, then answers: the gold answer with probability `right`, else a wrong
    one. Records the questions it was asked."""

    def __init__(self, tokenizer, questions, right: float = 0.5):
        self.tokenizer, self.right = tokenizer, right
        self.by_text = {q.question: q for q in questions}
        self.asked: list[str] = []

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for context, budget in zip(contexts, max_new_tokens):
            text = self.tokenizer.decode(context)
            q = next(q for question, q in self.by_text.items() if f"Question: {question}" in text)
            hop = text.split(f"Question: {q.question}")[-1].count("<information>")  # the instruction may show one
            if hop == 0:
                self.asked.append(q.key)
            if hop < len(q.metadata["searches"]):
                reply = f"<search> {q.metadata['searches'][hop]} </search>"
            else:
                answer = q.golden_answers[0] if torch.rand(()) < self.right else "nobody knows"
                reply = f"<answer> {answer} </answer>"
            ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"][:budget]
            out.append(Generation(ids, "stop"))
        return out

    def generating_with(self, model):
        raise AssertionError("the sampler is not trained")


def rs_recipe(model_dir, **sampling) -> Recipe:
    recipe = sft_recipe(model_dir, "answers", algorithm="rejection-sampling")
    return dataclasses.replace(recipe, sampling=SamplingConfig(**{"samples": 3, "batch_size": 3, **sampling}))


@pytest.fixture
def searcher(monkeypatch, tiny_model_dir, repo_root):
    """Every sampler `load_backend` loads is a WorldSearcher over the world's training questions."""
    import inspo_cli.policy.backends as backends

    tokenizer = load_tokenizer(sft_recipe(tiny_model_dir, "answers").model)
    made = []

    def load_backend(
        model, rollout, batch_size=32, device=None, process_index=0, num_processes=1, seed=0, request_seeds=False
    ):
        # vLLM samples from our seeded generator only with request seeds (its engine runs in another process)
        assert request_seeds, "phase 1 loads its sampler without request_seeds=True"
        made.append(WorldSearcher(tokenizer, load_benchmark(WORLD, "train", world_dir=repo_root / "data/world")))
        made[-1].seed = seed
        return made[-1], tokenizer

    monkeypatch.setattr(backends, "load_backend", load_backend)
    return made


def sample(recipe, run_dir: Path):
    from inspo_cli.training.rejection_sampling import sample_phase
    from inspo_cli.training.trainer_inputs import train_questions

    tokenizer = load_tokenizer(recipe.model)
    return sample_phase(recipe, RunDir(run_dir), train_questions(recipe), INSTRUCTION, PartialState(), "cpu", tokenizer)


def batch_rows(run_dir: Path) -> dict[str, list[dict]]:
    return {
        p.name: [r for r in map(json.loads, p.read_text().splitlines())][1:]
        for p in sorted((run_dir / "sampling").glob("batch-*.jsonl"))
    }


def test_phase_one_keeps_exactly_the_correct_trajectories_masked_as_rollouts(tmp_path, tiny_model_dir, searcher):
    recipe = rs_recipe(tiny_model_dir)  # 8 questions x 3 samples, 3 questions a batch
    kept = sample(recipe, tmp_path)
    rows = [row for batch in batch_rows(tmp_path).values() for row in batch]
    assert len(batch_rows(tmp_path)) == 3 and len(rows) == 24
    questions = {q.key: q for q in load_benchmark(WORLD, "train", world_dir=REPO / "data/world", limit=8)}
    assert [(r["key"], r["sample"]) for r in rows] == [(k, i) for k in questions for i in range(3)]
    tokenizer = load_tokenizer(recipe.model)
    for row in rows:
        right = row["answer"] == questions[row["key"]].golden_answers[0]
        assert row["reward"] == float(right) and ("completion_ids" in row) == right
    assert kept == [row for row in rows if "completion_ids" in row] and 0 < len(kept) < 24
    for row in kept:
        q = questions[row["key"]]
        written = tokenizer.decode([i for i, m in zip(row["completion_ids"], row["completion_mask"]) if m])
        assert (
            written
            == "".join(f"<search> {s} </search>" for s in q.metadata["searches"])
            + f"<answer> {q.golden_answers[0]} </answer>"
        )
        runs = observation_runs(row["completion_ids"], row["completion_mask"])
        assert len(runs) == q.metadata["hops"] == row["searches"]
        assert all(tokenizer.decode(r).startswith("\n\n<information>") for r in runs)
    summary = json.loads((tmp_path / "sampling/summary.json").read_text())
    assert (summary["questions"], summary["trajectories"], summary["kept"]) == (8, 24, len(kept))
    assert summary["questions_solved"] == len({row["key"] for row in kept})
    assert sum(t["kept"] for t in summary["by_type"].values()) == len(kept)


def test_a_killed_sampling_phase_samples_only_the_unsaved_batches_and_the_same_trajectories(
    tmp_path, tiny_model_dir, searcher
):
    recipe = rs_recipe(tiny_model_dir)
    straight, cut = tmp_path / "straight", tmp_path / "cut"
    for directory in (straight, cut):
        directory.mkdir()
        sample(recipe, directory)
    (cut / "sampling/summary.json").unlink()  # killed while sampling the last batch: its file was never written
    (cut / "sampling/batch-00002.jsonl").unlink()
    kept = sample(recipe, cut)
    assert searcher[-1].asked == [
        q.key for q in load_benchmark(WORLD, "train", world_dir=REPO / "data/world", limit=8)[6:] for _ in range(3)
    ]
    assert batch_rows(cut) == batch_rows(straight) and kept == sample(recipe, straight)
    assert len(searcher) == 3  # a finished phase 1 loads no sampler again


def test_each_run_seed_samples_its_own_trajectories_and_a_repeated_seed_the_same(tmp_path, tiny_model_dir, searcher):
    recipe = rs_recipe(tiny_model_dir)
    other = dataclasses.replace(recipe, run=dataclasses.replace(recipe.run, seed=recipe.run.seed + 1))
    for name, r in (("a", recipe), ("again", recipe), ("b", other)):
        (tmp_path / name).mkdir()
        sample(r, tmp_path / name)
    assert [s.seed for s in searcher] == [recipe.run.seed] * 2 + [other.run.seed]  # the engine's seed too
    assert batch_rows(tmp_path / "a") == batch_rows(tmp_path / "again") != batch_rows(tmp_path / "b")


def test_a_saved_batch_of_other_questions_is_refused_with_the_fix(tmp_path, tiny_model_dir, searcher):
    sample(rs_recipe(tiny_model_dir), tmp_path)
    with pytest.raises(InspoError, match="delete .*sampling to sample again"):
        sample(rs_recipe(tiny_model_dir, batch_size=4), tmp_path)


def test_rejection_sampled_sft_gives_observations_no_gradient_and_every_written_token_one(
    tmp_path, tiny_model_dir, searcher, world_retriever
):
    from inspo_cli.training.rejection_sampling import rejection_examples
    from inspo_cli.training.trainer_inputs import train_questions

    recipe = rs_recipe(tiny_model_dir)
    kept = sample(recipe, tmp_path)
    tokenizer = load_tokenizer(recipe.model)
    examples = rejection_examples(world_engine(tokenizer, world_retriever), INSTRUCTION, train_questions(recipe), kept)
    assert len(examples) == len(kept)
    assert_loss_only_on_written_tokens(tmp_path / "checkpoints", recipe, tokenizer, examples)


def test_rejection_sampling_recipe_errors_are_one_line(tmp_path, repo_root):
    recipe = write_recipe(
        tmp_path, repo_root, "x", training={"algorithm": "rejection-sampling"}, model={"backend": "vllm"}
    )
    assert_one_line_error(invoke("recipe", "check", recipe), "model.backend", "sampling.backend")
    recipe = write_recipe(tmp_path, repo_root, "x", training={"algorithm": "rejection-sampling"})
    assert_one_line_error(invoke("recipe", "check", recipe, "--set", "sampling.samples=0"), "sampling.samples")


def test_a_sampler_of_another_vocabulary_is_refused(tmp_path, tiny_model_dir):
    """Phase 2 trains on the sampled token ids, so the sampler must share the trained model's vocabulary."""
    from helpers.tiny_model import build_tiny_model

    other = build_tiny_model(tmp_path / "other", vocab_size=300)  # loaded for real, as a transformers sampler
    recipe = rs_recipe(tiny_model_dir, model=str(other))
    with pytest.raises(InspoError, match="another vocabulary"):
        sample(recipe, tmp_path)


@pytest.mark.slow
def test_rejection_sampling_run_trains_and_resumes_from_either_phase(tmp_path, repo_root, tiny_model_dir, searcher):
    """`inspo train`: phase 1 then SFT in one run directory. A run killed in phase 1 (one batch saved) and resumed
    ends as the uninterrupted one; so does one cut back to its first SFT checkpoint."""
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        data={"max_train_questions": 8},
        rollout={"max_turns": 2, "max_tokens_per_turn": 48, "max_observation_tokens": 256, "max_total_tokens": 768},
        training={"algorithm": "rejection-sampling", "steps": 3, "batch_size": 4, "micro_batch_size": 2},
        sampling={"samples": 2, "batch_size": 4},
    )
    runs = tmp_path / "runs"
    for name in ("straight", "resumed", "killed"):
        result = invoke("train", "--recipe", recipe, "--output-dir", runs, "--name", name)
        assert result.exit_code == 0, result.output
    straight = runs / "straight"
    assert "sampling: batch 2/2" in result.output and "SFT on" in result.output
    summary = json.loads((straight / "summary.json").read_text())
    assert summary["steps"] == 3 and summary["sampling"]["trajectories"] == 16 and summary["sampling"]["kept"] > 0
    assert [r["step"] for r in metrics(straight)] == [1, 2, 3]

    resume_after_a_cut(runs / "resumed", straight)  # phase 2 from its checkpoint at step 1

    killed = runs / "killed"  # as a kill during phase 1 leaves it: one batch saved, nothing trained
    for later in (
        "checkpoints",
        "summary.json",
        "metrics.jsonl",
        "sampling/summary.json",
        "sampling/batch-00001.jsonl",
    ):
        path = killed / later
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    result = invoke("train", "--resume", killed)
    assert result.exit_code == 0, result.output
    assert "1 of 2 batches already sampled" in result.output
    later = load_benchmark(WORLD, "train", world_dir=repo_root / "data/world", limit=8)[4:]
    assert set(searcher[-1].asked) == {q.key for q in later}  # only the questions of the unsaved batch
    assert batch_rows(killed) == batch_rows(straight)
    assert [r["loss"] for r in metrics(killed)] == pytest.approx([r["loss"] for r in metrics(straight)])


def test_a_sampler_that_never_answers_right_stops_the_run_with_what_to_change(tmp_path, repo_root, tiny_model_dir):
    """The real transformers sampler (the tiny random model) keeps nothing: one line, and phase 1's files stay."""
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        data={"max_train_questions": 4},
        training={"algorithm": "rejection-sampling", "batch_size": 4, "micro_batch_size": 2},
        sampling={"samples": 2, "batch_size": 2},
    )
    result = invoke("train", "--recipe", recipe, "--output-dir", tmp_path / "runs", "--name", "none")
    assert_one_line_error(result, "kept no trajectory", "sampling.samples")
    summary = json.loads((tmp_path / "runs/none/sampling/summary.json").read_text())
    assert (summary["trajectories"], summary["kept"]) == (8, 0)


@pytest.mark.parametrize("backend, compiled", [("transformers", True), ("vllm", False)])
def test_the_sampler_compiles_its_decoding_only_on_the_transformers_backend(backend, compiled):
    """`model.compile_generation` is the transformers backend's; a vLLM sampler (which compiles its own engine) gets
    it off instead of refusing mid-run, and the model section keeps it for the run's evaluations."""
    from inspo_cli.config import load_recipe
    from inspo_cli.training.rejection_sampling import sampler_config

    recipe = load_recipe(
        "world-table1/rejection-sampling", ["model.compile_generation=true", f"sampling.backend={backend}"]
    )
    sampler = sampler_config(recipe)
    assert (sampler.backend, sampler.compile_generation) == (backend, compiled)
    assert recipe.model.compile_generation and not sampler.lora

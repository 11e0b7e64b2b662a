"""Issue 52: the trainer's rollouts at the speed of plain `generate`.

- With mixed precision (float32 masters under bf16 autocast) a rollout generates from the weights cast once to bf16,
  outside accelerate's autocast wrapper: token for token what `generate` of bf16 weights gives, and the masters, the
  parameters the optimizer holds and the wrapper are back after it, error or not.
- `rollout.generation_batch_size`: a cap on the rows of one generate call, or (0) the step's share fitted to the free
  device memory; the grouping never changes what a greedy row generates.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.fake_retrievers import OverlapRetriever
from helpers.scripted_trainer import QUESTIONS, tiny_recipe

from inspo_cli.config import ModelConfig, RewardConfig, RolloutConfig
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.instructions.sampling import StaticInstruction
from inspo_cli.policy import generation_memory
from inspo_cli.policy.generation_weights import generation_dtype, in_compute_dtype
from inspo_cli.policy.models import load_model, load_tokenizer
from inspo_cli.policy.transformers_backend import TransformersBackend
from inspo_cli.training.grpo import grpo_config
from inspo_cli.training.trainer import SearchGRPOTrainer
from inspo_cli.training.trainer_inputs import question_dataset

PROMPTS = [
    "who founded Hokin Works?",
    "the river",
    "Answer the given question. Question: when was the castle built?",
    "a",
    "Question: which river flows through the old town of Brenmoor and where does it meet the sea?",
]


@pytest.fixture
def bf16_accelerator():
    """An Accelerator for bf16 mixed precision on CPU; accelerate's process-wide state is reset around it, since other
    tests (and trainers) set it up without mixed precision."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state()
    yield Accelerator(mixed_precision="bf16", cpu=True)
    AcceleratorState._reset_state()


def _prepared(accelerator, tiny_model_dir):
    """The tiny policy in float32, prepared by accelerate for bf16 mixed precision as the trainer's is."""
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    return accelerator.prepare(model), tokenizer


def _greedy(model, tokenizer, **kwargs):
    return TransformersBackend(model, tokenizer, temperature=0.0, **kwargs)


def test_inside_a_rollout_the_weights_are_bf16_without_autocast_and_equal_plain_bf16_generate(
    tiny_model_dir, bf16_accelerator
):
    model, tokenizer = _prepared(bf16_accelerator, tiny_model_dir)
    assert "forward" in model.__dict__, "accelerate no longer wraps forward: this test's premise is gone"
    contexts = [tokenizer.encode(p) for p in PROMPTS]
    autocast_seen = []
    model.register_forward_pre_hook(lambda module, args: autocast_seen.append(torch.is_autocast_enabled("cpu")))
    with torch.no_grad(), in_compute_dtype(model, torch.bfloat16) as policy:
        assert {p.dtype for p in policy.parameters()} == {torch.bfloat16}
        ours = _greedy(policy, tokenizer).generate(contexts, [12] * len(contexts))
    assert autocast_seen and not any(autocast_seen)

    bf16, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="bfloat16"), device="cpu")
    plain = _greedy(bf16, tokenizer).generate(contexts, [12] * len(contexts))
    assert [g.token_ids for g in ours] == [g.token_ids for g in plain]


def test_the_masters_and_the_autocast_wrapper_come_back_after_a_rollout_and_after_an_error(
    tiny_model_dir, bf16_accelerator
):
    model, _ = _prepared(bf16_accelerator, tiny_model_dir)
    params = list(model.parameters())
    storage = [p.data_ptr() for p in params]
    values = [p.detach().clone() for p in params]
    wrapper = model.__dict__["forward"]
    for fail in (False, True):
        try:
            with in_compute_dtype(model, torch.bfloat16):
                if fail:
                    raise KeyboardInterrupt  # Ctrl-C mid-rollout
        except KeyboardInterrupt:
            pass
        assert list(model.parameters()) == params  # the optimizer's parameters, not new ones
        assert [p.data_ptr() for p in model.parameters()] == storage  # the masters' own memory
        assert all(torch.equal(p, v) and p.dtype == torch.float32 for p, v in zip(model.parameters(), values))
        assert model.__dict__["forward"] is wrapper


def test_generation_dtype_follows_the_trainers_precision_and_leaves_sharded_launches_alone():
    args = dataclasses.make_dataclass("Args", [("bf16", bool), ("fp16", bool)])
    assert generation_dtype(args(True, False), sharded=False) is torch.bfloat16
    assert generation_dtype(args(False, True), sharded=False) is torch.float16
    assert generation_dtype(args(False, False), sharded=False) is None  # float32: generate from the weights as they are
    assert generation_dtype(args(True, False), sharded=True) is None  # ZeRO-3 / FSDP2 gather in their own dtype


def _trainer(tmp_path, recipe):
    """A SearchGRPOTrainer with the real transformers backend, as `training.grpo.build_grpo` makes it."""
    plan = batch_plan(recipe)
    return SearchGRPOTrainer(
        model=recipe.model.name_or_path,
        args=grpo_config(recipe, plan, tmp_path / "checkpoints"),
        train_dataset=question_dataset(QUESTIONS),
        processing_class=load_tokenizer(recipe.model),
        instructions=StaticInstruction("Answer the given question."),
        retriever=OverlapRetriever(),
        rollout=recipe.rollout,
        reward=RewardConfig(),
        topk=2,
        chat=True,
        generation_batch_size=plan.generation_batch_per_process,
    )


def test_a_mixed_precision_trainer_rolls_out_from_bf16_and_still_trains_its_float32_masters(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tiny_model_dir, learning_rate=5e-7)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, dtype="bfloat16"))
    trainer = _trainer(tmp_path, recipe)
    backend = trainer.engine.backend
    seen = []
    generate = backend.generate

    def recording(contexts, budgets, stop=()):
        seen.append(
            (
                {p.dtype for p in backend.model.parameters()},
                "forward" in backend.model.__dict__
                and backend.model.forward == getattr(backend.model, "_original_forward", None),
            )
        )
        return generate(contexts, budgets, stop)

    backend.generate = recording
    layers = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if ".layers." in n}
    trainer.train()
    assert seen and all(dtypes == {torch.bfloat16} and own_forward for dtypes, own_forward in seen)
    after = dict(trainer.model.named_parameters())
    assert {p.dtype for p in after.values()} == {torch.float32}
    moved = sum(int((after[n] != before).sum()) for n, before in layers.items())
    assert moved / sum(b.numel() for b in layers.values()) > 0.9  # 5e-7 updates land in the float32 masters


# -- rollout.generation_batch_size -------------------------------------------------------------------------------


def test_rows_that_fit_counts_the_padded_width_and_the_longest_budget():
    # 3 rows of widths 10, 20, 30 and budget 10: 1 row = 20 tokens, 2 rows = 2 x 30, 3 rows = 3 x 40
    assert generation_memory.rows_that_fit([10, 20, 30], [10, 10, 10], per_token=1, room=60) == 2
    assert generation_memory.rows_that_fit([10, 20, 30], [10, 10, 10], per_token=1, room=59) == 1
    assert generation_memory.rows_that_fit([10, 20, 30], [10, 10, 10], per_token=1, room=120) == 3
    assert generation_memory.rows_that_fit([10, 20, 30], [10, 50, 10], per_token=1, room=119) == 1  # 2 x (20 + 50)
    assert generation_memory.rows_that_fit([10, 20], [10, 10], per_token=1, room=0) == 1  # a rollout always advances


def test_bytes_per_token_of_qwen25_3b():
    from transformers import Qwen2Config

    config = Qwen2Config(
        hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16, num_key_value_heads=2
    )
    cache = 36 * 2 * 2 * 128  # layers x (keys, values) x kv heads x head dim
    prefill = 4 * 2048 + 16 * 128 + 3 * 11008
    assert generation_memory.bytes_per_token(config, 2) == (cache + prefill) * 2


def test_fitting_to_memory_splits_a_call_and_changes_no_greedy_row(tiny_model_dir, monkeypatch):
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    contexts = [tokenizer.encode(p) for p in PROMPTS]
    budgets = [6, 9, 4, 7, 5]
    whole = _greedy(model, tokenizer, batch_size=8).generate(contexts, budgets)
    per_token = generation_memory.bytes_per_token(model.config, 4)
    widest = max(len(c) for c in contexts) + max(budgets)
    room = 2 * widest * per_token
    monkeypatch.setattr(
        generation_memory, "free_device_bytes", lambda device: int(room / generation_memory.FREE_SHARE) + 1
    )
    fitted = _greedy(model, tokenizer, batch_size=8, fit_memory=True)
    calls, held = [], []
    batch = fitted._generate_batch

    def recording(c, b, s):
        calls.append(len(c))
        held.append(len(c) * (max(map(len, c)) + max(b)) * per_token)
        return batch(c, b, s)

    fitted._generate_batch = recording
    assert [g.token_ids for g in fitted.generate(contexts, budgets)] == [g.token_ids for g in whole]
    assert len(calls) > 1 and sum(calls) == len(contexts) and max(held) <= room
    monkeypatch.setattr(generation_memory, "free_device_bytes", lambda device: None)  # off CUDA: not measured
    calls.clear()
    assert [g.token_ids for g in fitted.generate(contexts, budgets)] == [g.token_ids for g in whole]
    assert calls == [len(contexts)]


def test_the_trainers_backend_takes_the_recipes_generation_batch_size(tmp_path, tiny_model_dir):
    recipe = tiny_recipe(tiny_model_dir)
    auto = _trainer(tmp_path, recipe).engine.backend
    assert (auto.batch_size, auto.fit_memory) == (batch_plan(recipe).generation_batch_per_process, True)
    recipe.rollout = dataclasses.replace(recipe.rollout, generation_batch_size=3)
    fixed = _trainer(tmp_path, recipe).engine.backend
    assert (fixed.batch_size, fixed.fit_memory) == (3, False)


@pytest.mark.parametrize("value", ["-1", "1.5", "auto", "true"])
def test_a_bad_generation_batch_size_is_one_line(value):
    result = invoke("recipe", "check", "recipes/demo.yaml", "--set", f"rollout.generation_batch_size={value}")
    assert_one_line_error(result, "rollout.generation_batch_size")


def test_generation_batch_size_is_documented_and_zero_by_default():
    assert RolloutConfig().generation_batch_size == 0
    result = invoke("recipe", "explain", "rollout.generation_batch_size")
    assert result.exit_code == 0 and "free memory" in result.output


def test_the_planner_sizes_an_auto_call_as_the_backend_does():
    from inspo_cli.config import resource_plan

    assert resource_plan.FREE_SHARE == generation_memory.FREE_SHARE


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_the_rollout_engine_gives_the_same_trajectories_whatever_the_rows_per_call(tiny_model_dir, cap):
    """Every rollout invariant across groupings: greedy ids, the observation mask, stop reasons and turns are those
    of one call for all rows however a cap splits the calls (the memory splits them the same way, above)."""
    from helpers.fake_retrievers import OverlapRetriever as Retriever

    from inspo_cli.agent import RolloutEngine

    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    config = RolloutConfig(
        max_turns=2, max_tokens_per_turn=24, max_observation_tokens=64, max_prompt_tokens=256, max_total_tokens=240
    )

    def run(backend):
        engine = RolloutEngine(backend, Retriever(), tokenizer, config, topk=2, chat=True)
        return [
            (t.prompt_ids, t.completion_ids, t.completion_mask, t.stop_reason, t.turns)
            for t in engine.run(["Answer the given question."] * len(PROMPTS), PROMPTS)
        ]

    assert run(_greedy(model, tokenizer, batch_size=cap)) == run(_greedy(model, tokenizer, batch_size=64))


# -- gradient checkpointing toggled around every generation ------------------------------------------------------


def _require_grads_hooks(model) -> list[str]:
    hooks = model.get_input_embeddings()._forward_hooks.values()
    return [h.__name__ for h in hooks if h.__name__ == "make_inputs_require_grads"]


def test_a_checkpointed_run_keeps_one_input_embedding_hook_however_often_trl_toggles_checkpointing(
    tmp_path, tiny_model_dir
):
    """TRL turns gradient checkpointing off and on around each generation and each log-prob pass; transformers 5.24
    added an input-embedding hook at every turn-on and never removed it (7 after these 3 steps)."""
    recipe = tiny_recipe(tiny_model_dir, steps=3, learning_rate=1e-6)
    recipe = dataclasses.replace(recipe, model=dataclasses.replace(recipe.model, gradient_checkpointing=True))
    trainer = _trainer(tmp_path, recipe)
    during = []
    generate = trainer.engine.backend.generate

    def watching(contexts, budgets, stop=()):
        during.append((trainer.model.is_activation_checkpointing, len(_require_grads_hooks(trainer.model))))
        return generate(contexts, budgets, stop)

    trainer.engine.backend.generate = watching
    trainer.train()
    assert len(during) >= 3  # at least a generate call a step
    assert all(not checkpointing and hooks == 1 for checkpointing, hooks in during)
    assert trainer.model.is_activation_checkpointing and _require_grads_hooks(trainer.model) == [
        "make_inputs_require_grads"
    ]


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copy_registers_its_hook_on_its_own_embeddings(tiny_model_dir, how):
    import copy
    import pickle

    from inspo_cli.training.trl_patches import input_grads_hook_once

    model, _ = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    input_grads_hook_once(model)
    twin = copy.deepcopy(model) if how == "deepcopy" else pickle.loads(pickle.dumps(model))
    for _ in range(3):
        twin.enable_input_require_grads()
    assert _require_grads_hooks(twin) == ["make_inputs_require_grads"] and _require_grads_hooks(model) == []


def test_compiled_rows_are_sized_by_the_static_cache_transformers_will_allocate(tiny_model_dir, monkeypatch):
    """transformers' static cache is rounded up to the backend's bucket and never shorter than the model's earlier
    static caches (`_prepare_static_cache`), so a short call after a long one holds the long one's cache per row."""
    from inspo_cli.policy.compiled_generation import CACHE_BUCKET

    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    eager = TransformersBackend(model, tokenizer, fit_memory=True)
    compiled = TransformersBackend(model, tokenizer, fit_memory=True, compile_generation=True)
    assert eager._cache_tokens(28) == 28 and compiled._cache_tokens(28) == CACHE_BUCKET
    model._previous_max_cache_length = 4 * CACHE_BUCKET  # a call at a width of about 900 before this one
    assert compiled._cache_tokens(28) == 4 * CACHE_BUCKET and eager._cache_tokens(28) == 28
    assert compiled._cache_tokens(5 * CACHE_BUCKET - 3) == 5 * CACHE_BUCKET
    per_token = generation_memory.bytes_per_token(model.config, 4)
    room = 3 * 4 * CACHE_BUCKET * per_token  # three rows of the earlier cache, thirty of this call's own width
    monkeypatch.setattr(
        generation_memory, "free_device_bytes", lambda device: int(room / generation_memory.FREE_SHARE) + 1
    )
    rows = list(range(10))
    assert compiled._next_batch(rows, [[1] * 20] * 10, [8] * 10) == rows[:3]
    assert eager._next_batch(rows, [[1] * 20] * 10, [8] * 10) == rows

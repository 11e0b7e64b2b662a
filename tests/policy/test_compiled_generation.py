"""`model.compile_generation`: a static cache and a compiled decoding forward change nothing a rollout samples.

The compiled side and the eager side run the same tiny model from the same seeds; every rollout invariant is
compared: greedy and seeded-sampled ids, per-row budgets, stop strings, EOS, and the rollout engine's masks.
Compiling takes tens of seconds, so those tests are slow; the recipe field and its plumbing are not."""

from __future__ import annotations

import pytest
import torch
from helpers.cli_helpers import invoke
from helpers.fake_retrievers import OverlapRetriever

from inspo_cli.agent import RolloutEngine
from inspo_cli.config import ModelConfig, RolloutConfig, load_recipe
from inspo_cli.config.loader import RecipeError
from inspo_cli.policy.backends import load_backend
from inspo_cli.policy.compiled_generation import (
    CACHE_BUCKET,
    RECOMPILE_LIMIT,
    cache_length,
    decoding_compile_config,
    static_cache_kwargs,
)
from inspo_cli.policy.models import load_model
from inspo_cli.policy.transformers_backend import TransformersBackend


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")


def backends(tiny, temperature=0.0, batch_size=8):
    """(eager, compiled) backends over the same model."""
    model, tokenizer = tiny
    return tuple(
        TransformersBackend(model, tokenizer, temperature=temperature, batch_size=batch_size, compile_generation=on)
        for on in (False, True)
    )


def contexts(tokenizer):
    return [
        tokenizer.encode(text)
        for text in [
            "who founded Hokin Works?",
            "the river",
            "Answer the given question. Question: when was the castle built?",
        ]
    ]


def seeded(backend, *args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return backend.generate(*args, **kwargs)


def test_the_cache_length_is_rounded_up_to_a_bucket():
    assert CACHE_BUCKET == 256
    assert cache_length(400, 128) == 768
    assert cache_length(200, 56) == 256 and cache_length(200, 57) == 512  # exactly a bucket stays one
    assert cache_length(1, 0) == 256


def test_compiled_generate_asks_for_a_static_cache_and_compiling_on_every_device():
    config = object()
    assert static_cache_kwargs(config, 30, 20) == {
        "cache_implementation": "static",
        "compile_config": config,
        "max_cache_len": 256,
    }


def test_the_recipe_field_is_off_by_default_and_reaches_the_backend(tiny_model_dir, tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("rollout:\n  max_turns: 1\n")
    assert load_recipe(recipe, [], check_paths=False).model.compile_generation is False
    on = load_recipe(
        recipe,
        [f"model.name_or_path={tiny_model_dir}", "model.dtype=float32", "model.compile_generation=true"],
        check_paths=False,
    )
    backend, _ = load_backend(on.model, on.rollout, device="cpu")
    assert backend.compile_config is not None and backend.compile_config._compile_all_devices
    assert backend.with_sampling(0.0).compile_config is backend.compile_config  # evaluation's greedy clone too
    off, _ = load_backend(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), RolloutConfig(), device="cpu")
    assert off.compile_config is None


def test_compile_generation_with_vllm_is_refused_in_one_line(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("model:\n  backend: vllm\n")
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe, ["model.compile_generation=true"], check_paths=False)
    message = str(info.value)
    assert "model.compile_generation" in message and "model.backend=transformers" in message
    assert "\n" not in message.strip()
    assert load_recipe(recipe, [], check_paths=False).model.backend == "vllm"  # off, vLLM stays allowed


def test_several_models_compiling_do_not_run_into_dynamos_recompile_limit():
    import torch._dynamo

    # config.patch, not monkeypatch: monkeypatch's undo deletes a dynamo config entry instead of restoring it
    with torch._dynamo.config.patch(recompile_limit=8):
        decoding_compile_config()
        assert torch._dynamo.config.recompile_limit == RECOMPILE_LIMIT >= 3 * 3  # policy, trainer's copy, reference
    with torch._dynamo.config.patch(recompile_limit=100):
        decoding_compile_config()
        assert torch._dynamo.config.recompile_limit == 100  # a higher limit someone set stays


def test_recipe_explain_describes_the_field():
    result = invoke("recipe", "explain", "model.compile_generation")
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "type: bool default: false" in out
    assert "static KV cache" in out and "bench/compiled_generation.py" in out


@pytest.mark.slow
def test_greedy_ids_budgets_and_finish_are_the_same_compiled(tiny):
    eager, compiled = backends(tiny)
    ctx = contexts(tiny[1])
    reference = eager.generate(ctx, [12, 5, 8])
    assert compiled.generate(ctx, [12, 5, 8]) == reference
    assert [len(g.token_ids) for g in reference] == [12, 5, 8] and {g.finish for g in reference} == {"length"}
    model = tiny[0]
    assert hasattr(model, "_compiled_call"), "transformers did not compile the decoding forward"
    assert model._previous_max_cache_length % CACHE_BUCKET == 0  # the static cache, bucketed
    # another batch size and width: dynamo compiles again (or reuses a dynamic graph), the ids stay the same
    assert compiled.generate(ctx[:2], [30, 3]) == eager.generate(ctx[:2], [30, 3])


@pytest.mark.slow
@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_seeded_sampling_draws_the_same_ids_compiled(tiny, top_p):
    eager, compiled = (b.with_sampling(1.0, top_p) for b in backends(tiny))
    ctx = contexts(tiny[1])
    for seed in (0, 1):
        reference = seeded(eager, ctx, [16, 16, 16], seed=seed)
        assert seeded(compiled, ctx, [16, 16, 16], seed=seed) == reference
    assert seeded(eager, ctx, [16] * 3, seed=0) != seeded(eager, ctx, [16] * 3, seed=1)  # the seed matters


@pytest.mark.slow
def test_a_stop_string_ends_the_turn_at_the_same_token_compiled(tiny):
    eager, compiled = backends(tiny)
    tokenizer = tiny[1]
    ctx = contexts(tokenizer)
    target = eager.generate(ctx, [20, 20, 20])[0].token_ids
    stop = tokenizer.decode(target[4:7])
    assert stop.strip(), "the tiny model produced only whitespace; pick another seed"
    reference = eager.generate(ctx, [20, 20, 20], stop=[stop])
    assert reference[0].finish == "stop" and len(reference[0].token_ids) <= 7
    assert compiled.generate(ctx, [20, 20, 20], stop=[stop]) == reference


@pytest.mark.slow
def test_eos_ends_a_row_at_the_same_token_compiled(tiny, monkeypatch):
    model, tokenizer = tiny
    ctx = contexts(tokenizer)
    target = backends(tiny)[0].generate(ctx, [20, 20, 20])[0].token_ids
    monkeypatch.setattr(model.generation_config, "eos_token_id", [tokenizer.eos_token_id, target[3]])
    eager, compiled = backends(tiny)  # built now: they read the end-of-sequence ids from the generation config
    reference = eager.generate(ctx, [20, 20, 20])
    assert reference[0].finish == "eos" and reference[0].token_ids == target[: target.index(target[3]) + 1]
    assert compiled.generate(ctx, [20, 20, 20]) == reference


@pytest.mark.slow
def test_the_rollout_engine_produces_the_same_trajectories_compiled(tiny):
    tokenizer = tiny[1]
    config = RolloutConfig(
        max_turns=2, max_tokens_per_turn=24, max_observation_tokens=64, max_prompt_tokens=256, max_total_tokens=200
    )
    runs = []
    for backend in backends(tiny, temperature=1.0, batch_size=4):
        engine = RolloutEngine(backend, OverlapRetriever(), tokenizer, config, topk=2, chat=True)
        torch.manual_seed(3)
        runs.append(engine.run(["Answer the given question."] * 6, [f"question {i}?" for i in range(6)]))
    eager, compiled = runs
    assert [(t.prompt_ids, t.completion_ids, t.completion_mask, t.stop_reason, t.turns) for t in compiled] == [
        (t.prompt_ids, t.completion_ids, t.completion_mask, t.stop_reason, t.turns) for t in eager
    ]
    assert any(0 in t.completion_mask for t in eager), "no observation was masked; the comparison proves less"

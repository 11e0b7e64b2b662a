"""vLLM engine settings: vLLM's defaults on GPU, what its CPU build needs on CPU, overridable from the recipe."""

from __future__ import annotations

import os

import pytest

from inspo_cli.config import ModelConfig, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.policy.vllm_engine import colocated_engine_environment, engine_settings


def test_gpu_keeps_vllms_defaults_and_the_recipes_memory_fraction():
    s = engine_settings(ModelConfig(vllm_gpu_memory_utilization=0.35), "cuda")
    assert (s.dtype, s.enforce_eager, s.gpu_memory_utilization, s.cpu_kv_cache_gib) == ("bfloat16", False, 0.35, None)
    assert s.llm_kwargs() == {"dtype": "bfloat16", "enforce_eager": False, "gpu_memory_utilization": 0.35}
    assert s.environment() == {}


def test_cpu_runs_eager_in_float32_with_an_explicit_kv_cache():
    s = engine_settings(ModelConfig(), "cpu")
    assert (s.dtype, s.enforce_eager, s.cpu_kv_cache_gib) == ("float32", True, 2)
    assert s.llm_kwargs()["kv_cache_memory_bytes"] == 2 << 30 and s.llm_kwargs()["enforce_eager"] is True
    assert s.environment() == {"TORCH_COMPILE_DISABLE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}


def test_the_recipe_overrides_the_automatic_choice():
    recipe = load_recipe(
        None, ["model.vllm_enforce_eager=off", "model.vllm_cpu_kv_cache_gib=6", "model.dtype=bfloat16"]
    )
    s = engine_settings(recipe.model, "cpu")
    assert (s.enforce_eager, s.cpu_kv_cache_gib, s.dtype) == (False, 6, "bfloat16")
    assert engine_settings(load_recipe(None, ["model.vllm_enforce_eager=on"]).model, "cuda").enforce_eager is True


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("model.vllm_enforce_eager=sometimes", "model.vllm_enforce_eager"),
        ("model.vllm_cpu_kv_cache_gib=0", "model.vllm_cpu_kv_cache_gib"),
    ],
)
def test_bad_engine_settings_are_refused(override, fragment):
    with pytest.raises(InspoError, match=fragment):
        load_recipe(None, [override])


def test_the_colocated_environment_is_restored_after_the_engine_starts(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "9")
    monkeypatch.delenv("TORCH_COMPILE_DISABLE", raising=False)
    with colocated_engine_environment(engine_settings(ModelConfig(), "cpu")):
        assert os.environ["TORCH_COMPILE_DISABLE"] == "1" and os.environ["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == "9" and "TORCH_COMPILE_DISABLE" not in os.environ

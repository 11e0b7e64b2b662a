"""`inspo train` in one process on a GPU: the planner's arithmetic before anything loads.

On an H200 (2026-11-28) `inspo train` of the 7B recipe started loading, TRL's `device_map="auto"` put part of the
model on the CPU, and the run stopped with accelerate's "You can't move a model that has some modules offloaded"; the
planner had predicted 165 GiB against the card's 140. A recipe that cannot fit the card whatever its lengths is now
refused in one line before the run directory exists; one that fits only below its length bound is warned about.
"""

from __future__ import annotations

import pytest

from inspo_cli.config import load_recipe
from inspo_cli.config.resource_fit import one_gpu_fit
from inspo_cli.errors import InspoError
from inspo_cli.policy.models import model_architecture
from inspo_cli.training import preflight

H200_GIB = 143771 / 1024
H100_GIB = 81559 / 1024
TRANSFORMERS = ["model.backend=transformers"]


def _fit(recipe_name: str, gib: float, sets: tuple[str, ...] = ()):
    recipe = load_recipe(recipe_name, [*TRANSFORMERS, *sets])
    return one_gpu_fit(recipe, model_architecture(recipe.model.name_or_path), gib)


def test_7b_on_one_h200_is_refused_with_the_planned_figure_and_what_fits_instead():
    refused, warning = _fit("qwen2.5-7b/search-r1", H200_GIB)
    assert warning is None
    assert refused.startswith("the recipe needs 165 GiB on one GPU (optimizer step) whatever the trajectories'")
    assert "this GPU has 140 GiB" in refused
    assert "model.lora=true" in refused and "8gpu-zero3.yaml" in refused
    assert "\n" not in refused


def test_3b_fits_one_h200_at_its_bound_and_is_warned_about_on_an_h100():
    assert _fit("qwen2.5-3b/search-r1", H200_GIB) == (None, None)
    refused, warning = _fit("qwen2.5-3b/search-r1", H100_GIB)
    assert refused is None
    assert "trajectories of 8,192 tokens" in warning and "89 GiB (update)" in warning and "80 GiB GPU" in warning


def test_lora_is_not_offered_to_a_lora_recipe_and_a_lora_7b_fits_an_h100():
    assert _fit("qwen2.5-7b/search-r1", H100_GIB, ("model.lora=true",)) == (None, None)
    refused, _ = _fit("qwen2.5-7b/search-r1", 8.0, ("model.lora=true",))
    assert "one GPU + LoRA" in refused and "model.lora=true" not in refused


def test_check_run_refuses_on_one_cuda_process_only(monkeypatch):
    recipe = load_recipe("qwen2.5-7b/search-r1", TRANSFORMERS)
    monkeypatch.setattr(preflight, "gpu_memory_gib", lambda: H200_GIB)
    with pytest.raises(InspoError, match="needs 165 GiB on one GPU"):
        preflight.check_run("train", recipe, 1, "cuda")
    with pytest.raises(InspoError, match="needs 165 GiB"):
        preflight.check_run("train", recipe, 1, "cuda:1")
    # several processes: the launch (ZeRO-3, FSDP2, DDP) decides the memory, `inspo recipe plan --gpus N` plans it
    preflight.check_run(
        "train", load_recipe("qwen2.5-7b/search-r1", [*TRANSFORMERS, "training.batch_size=512"]), 8, "cuda"
    )
    preflight.check_run("train", recipe, 1, "cpu")  # host memory is not planned here
    for sharding in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):  # one process that may offload to the CPU
        monkeypatch.setenv(sharding, "true")
        preflight.check_run("train", recipe, 1, "cuda")
        monkeypatch.setenv(sharding, "false")
    with pytest.raises(InspoError, match="needs 165 GiB"):
        preflight.check_run("train", recipe, 1, "cuda")


def test_check_run_warns_without_refusing_and_skips_a_model_it_cannot_read(monkeypatch, capsys):
    monkeypatch.setattr(preflight, "gpu_memory_gib", lambda: H100_GIB)
    preflight.check_run("train", load_recipe("qwen2.5-3b/search-r1", TRANSFORMERS), 1, "cuda")
    assert "warning: at the recipe's length bound" in capsys.readouterr().err
    unknown = load_recipe("qwen2.5-3b/search-r1", [*TRANSFORMERS, "model.name_or_path=someone/unknown-model"])
    monkeypatch.setattr(preflight, "gpu_memory_gib", lambda: 1.0)
    preflight.check_run("train", unknown, 1, "cuda")  # no config to plan from: the run itself says what is wrong


def test_evolve_is_not_planned_as_training(monkeypatch):
    """`inspo evolve` generates and verifies; it holds no gradients or optimizer state, so the training plan's
    refusal does not apply to it."""
    recipe = load_recipe("qwen2.5-7b/inspo", TRANSFORMERS)
    monkeypatch.setattr(preflight, "gpu_memory_gib", lambda: H200_GIB)
    monkeypatch.setattr(preflight, "read_api_key", lambda optimizer: "a key")  # the optimizer's key: not this check
    preflight.check_run("evolve", recipe, 1, "cuda")
    with pytest.raises(InspoError, match="needs 165 GiB"):
        preflight.check_run("train", recipe, 1, "cuda")

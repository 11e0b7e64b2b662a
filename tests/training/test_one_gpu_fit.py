"""`inspo train` in one process on a GPU: the planner's arithmetic before anything loads.

A recipe that cannot fit the card whatever its lengths is refused in one line before the run directory exists, with
its largest terms and every way out; one that fits only below its length bound is warned about. (On an H200,
2026-11-28, the 7B step with the transformers backend started loading, TRL's `device_map="auto"` put part of the
model on the CPU with 30.4 of 139.8 GiB allocated by the process, and it stopped with accelerate's "You can't move a
model that has some modules offloaded"; that cause is not established, and `inspo train` now loads onto the one GPU
it has.)
"""

from __future__ import annotations

import pytest

from inspo_cli.config import load_recipe
from inspo_cli.config.resource_fit import one_gpu_fit
from inspo_cli.errors import InspoError
from inspo_cli.policy.models import model_architecture
from inspo_cli.training import preflight

H200_GIB = 139.80072021484375  # what torch reported on the H200 (bench/results/gpu_checklist_cuda.json)
H100_GIB = 79.2  # an 80 GB H100 as torch reports it
TRANSFORMERS = ["model.backend=transformers"]


def _fit(recipe_name: str, gib: float, sets: tuple[str, ...] = ()):
    recipe = load_recipe(recipe_name, list(sets))
    return one_gpu_fit(recipe, model_architecture(recipe.model.name_or_path), gib)


def test_the_shipped_7b_recipe_on_one_h200_is_refused_with_its_largest_terms_and_every_way_out():
    """As shipped, vLLM colocated at 0.35 of the card: its share is part of what no length changes."""
    refused, warning = _fit("qwen2.5-7b/search-r1", H200_GIB)
    assert warning is None and "\n" not in refused
    assert refused.startswith("the recipe needs 188.3 GiB on one GPU (update: Adam state 57, vLLM share 49, weights 28")
    assert "whatever the trajectories' lengths and this GPU has 139.8 GiB" in refused
    for way_out in ("model.vllm_enable_sleep_mode=true", "model.lora=true", "8gpu-zero3.yaml"):
        assert way_out in refused
    assert "inspo recipe plan RECIPE --gpus 1 --gpu-memory 139.8 --launch one-gpu" in refused


def test_without_vllm_the_7b_fits_an_h200_only_below_its_bound_and_no_card_of_24_gib():
    """Fused AdamW (transformers' default) holds no temporaries: the 7B's optimizer step is not what refuses it."""
    refused, warning = _fit("qwen2.5-7b/search-r1", H200_GIB, TRANSFORMERS)
    # the bound: a 4,096-token prompt and Search-R1's 4,096-token response cap
    assert refused is None and "trajectories of 8,192 tokens" in warning and "186.7 GiB (update)" in warning
    refused, _ = _fit("qwen2.5-7b/search-r1", 24.0, TRANSFORMERS)
    assert "needs 136.9 GiB" in refused and "vllm" not in refused and "model.lora=true" in refused
    assert "model.lora=true" not in _fit("qwen2.5-7b/search-r1", 8.0, TRANSFORMERS)[0]  # LoRA needs 16.3 GiB
    refused, _ = _fit("qwen2.5-7b/search-r1", 8.0, (*TRANSFORMERS, "model.lora=true"))
    assert "one GPU + LoRA" in refused and "model.lora=true" not in refused  # not offered twice, nor when too big


def test_3b_fits_one_h200_at_its_bound_and_is_warned_about_on_an_h100():
    assert _fit("qwen2.5-3b/search-r1", H200_GIB, TRANSFORMERS) == (None, None)
    refused, warning = _fit("qwen2.5-3b/search-r1", H100_GIB, TRANSFORMERS)
    assert refused is None
    assert "trajectories of 8,192 tokens" in warning and "89.1 GiB (update)" in warning and "79.2 GiB GPU" in warning
    assert _fit("qwen2.5-7b/sft", H200_GIB)[0] is None  # the 7B's SFT fits at its shortest lengths
    assert _fit("qwen2.5-7b/sft", 145.0) == (None, None)  # and at its bound (140.7 GiB, the update): no warning


def test_check_run_refuses_on_one_cuda_process_only(monkeypatch):
    recipe = load_recipe("qwen2.5-7b/search-r1", [])
    monkeypatch.setattr(preflight, "gpu_memory_gib", lambda: H200_GIB)
    with pytest.raises(InspoError, match="needs 188.3 GiB on one GPU"):
        preflight.check_run("train", recipe, 1, "cuda")
    with pytest.raises(InspoError, match="needs 188.3 GiB"):
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
    with pytest.raises(InspoError, match="needs 188.3 GiB"):
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
    recipe = load_recipe("qwen2.5-7b/inspo", [])
    monkeypatch.setattr(preflight, "gpu_memory_gib", lambda: H200_GIB)
    monkeypatch.setattr(preflight, "read_api_key", lambda optimizer: "a key")  # the optimizer's key: not this check
    preflight.check_run("evolve", recipe, 1, "cuda")
    with pytest.raises(InspoError, match="needs 188.3 GiB"):
        preflight.check_run("train", recipe, 1, "cuda")


def test_a_plain_one_gpu_run_loads_the_whole_model_onto_its_gpu(monkeypatch):
    """TRL's `device_map="auto"` may put part of a model on the CPU, which training cannot move: a plain one-process
    run that sees one GPU pins the model to it; every other launch keeps TRL's default."""
    import torch

    from inspo_cli.training.trainer_inputs import one_gpu_device_map

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert one_gpu_device_map("cuda") == {"device_map": {"": 0}}
    assert one_gpu_device_map("cpu") == {}
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    assert one_gpu_device_map("cuda") == {}
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("WORLD_SIZE", "2")  # DDP: TRL loads with device_map=None itself
    assert one_gpu_device_map("cuda") == {}
    monkeypatch.setenv("WORLD_SIZE", "two")  # not a count: left to TRL and torch to refuse, no traceback here
    assert one_gpu_device_map("cuda") == {}
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert one_gpu_device_map("cuda") == {"device_map": {"": 0}}
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # "auto" may spread a model over both on purpose
    assert one_gpu_device_map("cuda") == {}

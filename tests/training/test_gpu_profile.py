"""bench/gpu_profile.py: the few decode steps the GPU checklist profiles, in the 3B step's rollout and in plain
`generate` beside it, to say in one lease why the step decoded at 87 ms per step where plain `generate` took 33. A
wrong figure there sends the next lease after the wrong cause; a crash there loses the step's measurements."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType


@pytest.fixture
def gpu_profile(bench):
    return bench("gpu_profile")


def decode(window, steps: int) -> dict | None:
    """`steps` 'decode steps' of known ops, each an mm, a sum and an item (a host read, a synchronisation on a GPU),
    each followed by `window.step()` as HF calls its stopping criteria; then the profile."""
    a = torch.ones(8, 8)
    for _ in range(steps):
        torch.mm(a, a).sum().item()
        window.step()
    return window.finish()


def test_a_profile_covers_its_window_of_steps_and_counts_their_ops(gpu_profile):
    window = gpu_profile.DecodeProfile(skip=2, active=3)
    result = decode(window, 10)
    assert result["steps"] == 3 and result["gpu"] is False and result["gpu_busy_ms_per_step"] is None
    ops = {op["name"]: op["calls"] for op in result["top_host_ops"]}
    assert ops["aten::mm"] == 1.0 and ops["aten::sum"] == 1.0  # per step: 3 steps of one each
    assert result["synchronising_per_step"]["aten::item"] == 1.0
    assert 3 <= result["host_ops_per_step"] < 10 and result["wall_ms_per_step"] > 0
    assert window.finish() is result  # finishing twice changes nothing


def test_a_generation_that_ends_inside_the_window_is_summarised_over_the_steps_it_made(gpu_profile):
    result = decode(gpu_profile.DecodeProfile(skip=2, active=10), 6)
    assert result["steps"] == 4
    assert {op["name"]: op["calls"] for op in result["top_host_ops"]}["aten::mm"] == 1.0


def test_a_generation_shorter_than_the_skip_profiles_nothing(gpu_profile):
    window = gpu_profile.DecodeProfile(skip=5, active=5)
    for _ in range(4):
        window.step()
    assert window.finish() is None


def test_the_window_fits_the_call(gpu_profile):
    assert (gpu_profile.DecodeProfile.within(500).skip, gpu_profile.DecodeProfile.within(500).active) == (5, 5)
    assert (gpu_profile.DecodeProfile.within(8).skip, gpu_profile.DecodeProfile.within(8).active) == (1, 5)
    assert gpu_profile.DecodeProfile.within(3).active < 2  # too short: the checklist profiles a later call


def test_a_profile_that_fails_costs_the_generation_nothing(gpu_profile, monkeypatch):
    def fails(*args):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(gpu_profile, "summarize", fails)
    window = gpu_profile.DecodeProfile(skip=1, active=2)
    for _ in range(5):
        window.step()  # never raises
    assert window.finish() == {"error": "RuntimeError: CUPTI_ERROR_NOT_INITIALIZED"}
    monkeypatch.undo()
    again = gpu_profile.DecodeProfile(skip=1, active=2)  # the failed profiler was stopped: another one can start
    for _ in range(4):
        again.step()
    assert again.finish()["steps"] == 2


def test_a_profile_that_fails_while_profiling_stops_its_profiler(gpu_profile, monkeypatch):
    calls = []

    def available():  # False when the profile starts, a CUDA error when it stops
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return False

    monkeypatch.setattr(torch.cuda, "is_available", available)
    window = gpu_profile.DecodeProfile(skip=1, active=2)
    for _ in range(4):
        window.step()
    assert window.finish()["error"].startswith("RuntimeError: CUDA error")
    assert not torch.autograd.profiler._is_profiler_enabled  # not left recording the rest of the step


def event(key, count, device=False, cpu_us=0.0, device_us=0.0, annotation=False):
    return SimpleNamespace(
        key=key,
        count=count,
        device_type=DeviceType.CUDA if device else DeviceType.CPU,
        self_cpu_time_total=cpu_us,
        self_device_time_total=device_us,
        is_user_annotation=annotation,
    )


def test_on_a_gpu_the_busy_share_launches_and_synchronisations_are_per_step(gpu_profile):
    # 4 steps of 100 ms wall: 3 kernels (30 ms busy per step) and one annotation that is not GPU work
    averages = [
        event("aten::mm", 400, cpu_us=8_000),
        event("aten::_local_scalar_dense", 8, cpu_us=200_000),
        event("cudaLaunchKernel", 800, cpu_us=40_000),
        event("cudaStreamSynchronize", 4, cpu_us=100_000),
        event("cudaDeviceSynchronize", 1, cpu_us=50),  # the profile's own, as it closes: not the step's
        event("ampere_bf16_gemm", 400, device=True, device_us=100_000),
        event("flash_fwd_splitkv_kernel", 300, device=True, device_us=15_000),
        event("Memcpy DtoH", 4, device=True, device_us=5_000),
        event("ProfilerStep", 4, device=True, device_us=400_000, annotation=True),
    ]
    result = gpu_profile.summarize(averages, steps=4, seconds=0.4, own={"cudaDeviceSynchronize": 1})
    assert result["wall_ms_per_step"] == 100.0 and result["gpu_busy_ms_per_step"] == 30.0
    assert result["gpu_busy_share"] == 0.3 and result["gpu"] is True
    assert result["kernel_launches_per_step"] == 200.0 and result["host_ops_per_step"] == 102.0
    assert result["synchronising_per_step"] == {"cudaStreamSynchronize": 1.0, "aten::_local_scalar_dense": 2.0}
    assert [k["name"] for k in result["top_kernels"]] == ["ampere_bf16_gemm", "flash_fwd_splitkv_kernel", "Memcpy DtoH"]
    assert result["top_kernels"][0] == {"name": "ampere_bf16_gemm", "calls": 100.0, "us": 25_000.0}
    assert result["top_host_ops"][0]["name"] == "aten::_local_scalar_dense"
    assert result["host_op_ms_per_step"] == 87.01  # rounded to 0.01 ms
    brief = gpu_profile.brief({**result, "width": 2400, "rows": 8})
    assert brief["gpu_busy_share"] == 0.3 and brief["top_kernels"][0] == "ampere_bf16_gemm: 25000.0 us"
    assert gpu_profile.brief({"error": "x"}) == {"error": "x"}


@pytest.fixture
def restored(monkeypatch):
    """time_generate_calls patches the backend's class for the rest of the process: put it back after the test."""
    from inspo_cli.policy import transformers_backend

    backend = transformers_backend.TransformersBackend
    for name in ("_generate_batch", "generate"):
        monkeypatch.setattr(backend, name, getattr(backend, name))
    monkeypatch.setattr(transformers_backend._TurnEnd, "__call__", transformers_backend._TurnEnd.__call__)


def test_the_step_profiles_one_rollout_call_and_its_timing_row_says_so(bench, restored, tiny_model_dir):
    from inspo_cli.config import ModelConfig
    from inspo_cli.policy.models import load_model
    from inspo_cli.policy.transformers_backend import TransformersBackend

    timing = bench("gpu_timing")
    profile: dict = {}
    calls = timing.time_generate_calls(profile, profile_call=1)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    torch.manual_seed(0)
    backend = TransformersBackend(model, tokenizer, temperature=1.0, batch_size=2)
    contexts = [[5, 6, 7], [5, 6, 7, 8], [9, 10, 11, 12, 13], [9, 10]]
    generated = backend.generate(contexts, [3, 3, 12, 12])  # two batches of 2 rows, by length
    assert all(len(g.token_ids) <= budget for g, budget in zip(generated, [3, 3, 12, 12]))
    rollout = profile["rollout"]
    assert rollout["rows"] == 2 and rollout["width"] == 5 and 1 <= rollout["steps"] <= 5
    assert rollout["host_ops_per_step"] > 20  # a whole decode step of the model, not the criterion alone
    batches = [c for c in calls if "rows" in c]
    assert [c.get("profiled", False) for c in batches] == [False, True]
    backend.generate(contexts, [12, 12, 12, 12])  # one profile per step: later calls are timed only
    assert profile["rollout"] is rollout and [c.get("profiled", False) for c in calls if "rows" in c][2:] == [
        False,
        False,
    ]


def test_a_call_too_short_for_the_window_leaves_it_to_the_next(bench, restored, tiny_model_dir):
    from inspo_cli.config import ModelConfig
    from inspo_cli.policy.models import load_model
    from inspo_cli.policy.transformers_backend import TransformersBackend

    timing = bench("gpu_timing")
    profile: dict = {}
    calls = timing.time_generate_calls(profile, profile_call=0)
    model, tokenizer = load_model(ModelConfig(name_or_path=str(tiny_model_dir), dtype="float32"), device="cpu")
    backend = TransformersBackend(model, tokenizer, temperature=0.0, batch_size=4)
    backend.generate([[5, 6, 7]], [3])  # one step after the skip: too few to profile
    assert "rollout" not in profile
    backend.generate([[5, 6, 7]], [10])
    assert profile["rollout"]["rows"] == 1
    assert [c.get("profiled", False) for c in calls if "rows" in c] == [False, True]


def test_plain_generate_is_profiled_at_the_widest_width_with_equal_and_padded_rows(bench, tiny_model_dir):
    timing = bench("gpu_timing")
    profile: dict = {}
    rows = timing.plain_reference(tiny_model_dir, "cpu", "float32", [16, 24], rows=2, steps=3, profile=profile)
    assert len(rows) == 4 and set(profile) == {"plain_padded_16", "plain_padded_24", "plain_equal_24"}
    for name, shape in profile.items():
        assert shape["width"] == int(name[-2:]) and shape["rows"] == 2 and shape["steps"] == 5
        assert shape["padded"] is ("padded" in name) and shape["host_ops_per_step"] > 20
    # padded rows build an attention mask every step; equal rows need none
    assert profile["plain_padded_24"]["host_ops_per_step"] > profile["plain_equal_24"]["host_ops_per_step"]
    assert timing.plain_reference(tiny_model_dir, "cpu", "float32", [16], rows=2, steps=3) != []  # no profile asked

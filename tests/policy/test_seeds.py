"""Seeds reach every sampler: each (run seed, process) has its own stream, and vLLM's sampling follows it.

Fast, with a stand-in `vllm` module at the engine's door: `load_backend` seeds the engine from the run seed and the
process, request seeds come from torch's generator, and after TRL's colocated engine starts the process's generators
follow the run seed again. tests/policy/test_vllm_seeds.py checks the same against a real vLLM engine."""

from __future__ import annotations

import random
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from inspo_cli.config import ModelConfig, RolloutConfig
from inspo_cli.policy.backends import load_backend
from inspo_cli.policy.seeds import derived_seed
from inspo_cli.policy.vllm_backend import VLLMBackend
from inspo_cli.policy.vllm_engine import reseed_after_colocated_engine


def test_derived_seeds_are_stable_and_keep_run_seeds_and_processes_apart():
    assert derived_seed(42, 0) == derived_seed(42, 0) == 2104976709  # no per-process salt: a resume gets the same
    assert derived_seed(0, 1) != derived_seed(1, 0)  # `seed + process` gives both one stream
    assert derived_seed(0, "sampling", 1) != derived_seed(1, "sampling", 0)
    seeds = {derived_seed(seed, process) for seed in range(100) for process in range(8)}
    assert len(seeds) == 800 and all(0 <= s < 2**32 for s in seeds)  # numpy refuses seeds from 2**32 on


class FakeLLM:
    """`vllm.LLM` as far as the backend uses it: the keyword arguments it was built with, the sampling params of
    every request, and a fixed one-token answer."""

    made: list[FakeLLM] = []

    def __init__(self, **kwargs):
        self.kwargs, self.params = kwargs, []
        FakeLLM.made.append(self)

    def generate(self, prompts, params, use_tqdm=False):
        self.params.append(params)
        sample = SimpleNamespace(
            token_ids=[5], logprobs=[{5: SimpleNamespace(logprob=-0.5)}], finish_reason="stop", stop_reason=None
        )
        return [SimpleNamespace(outputs=[sample]) for _ in prompts]


@pytest.fixture
def fake_vllm(monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.LLM, vllm.SamplingParams = FakeLLM, lambda **kwargs: SimpleNamespace(**kwargs)
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    vllm.inputs = inputs
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    FakeLLM.made.clear()
    return FakeLLM.made


@pytest.fixture
def generators_restored():
    """These tests seed the process's generators; the tests after them get theirs back."""
    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    yield
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.random.set_rng_state(states[2])


def test_load_backend_seeds_the_vllm_engine_from_the_run_seed_and_the_process(fake_vllm, tiny_model_dir):
    model = ModelConfig(name_or_path=str(tiny_model_dir), backend="vllm")
    for seed, process in ((7, 0), (7, 1), (8, 0)):
        backend, _ = load_backend(
            model, RolloutConfig(), device="cpu", process_index=process, num_processes=2, seed=seed
        )
        assert fake_vllm[-1].kwargs["seed"] == derived_seed(seed, process)
        assert fake_vllm[-1].kwargs["distributed_executor_backend"] == "external_launcher"
        assert isinstance(backend, VLLMBackend) and not backend.request_seeds
    assert len({llm.kwargs["seed"] for llm in fake_vllm}) == 3


def test_request_seeds_follow_torchs_generator_and_differ_between_requests(fake_vllm, generators_restored):
    llm = FakeLLM()
    backend = VLLMBackend(llm, request_seeds=True)

    def seeds(torch_seed: int) -> list[int]:
        torch.manual_seed(torch_seed)
        backend.generate([[1, 2], [1, 2], [3]], [4, 4, 4])
        return [p.seed for p in llm.params[-1]]

    first = seeds(1)
    assert len(set(first)) == 3 and all(0 <= s < 2**63 for s in first)  # vLLM keeps request seeds as int64
    assert seeds(1) == first and seeds(2) != first
    VLLMBackend(llm).generate([[1, 2]], [4])
    assert llm.params[-1][0].seed is None  # no request seeds: the engine's own generator samples


def test_after_the_colocated_engine_the_generators_follow_the_run_seed_per_tensor_parallel_group(generators_restored):
    def draws(seed: int, process: int, tensor_parallel_size: int = 1):
        torch.manual_seed(0)  # as vLLM's worker leaves them for process 0
        reseed_after_colocated_engine(seed, process, tensor_parallel_size)
        return torch.rand(3).tolist(), np.random.rand(), random.random()

    assert draws(1, 0) == draws(1, 0)
    assert draws(1, 0) != draws(2, 0) and draws(1, 0) != draws(1, 1) and draws(0, 1) != draws(1, 0)
    assert draws(1, 0, 2) == draws(1, 1, 2) != draws(1, 2, 2)  # one tensor-parallel group samples alike

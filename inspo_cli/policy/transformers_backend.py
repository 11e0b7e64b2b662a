"""`TransformersBackend`: `model.generate` with left padding and the KV cache, on CPU or GPU.

Rows finish independently: a stopping criterion (`_TurnEnd`) marks each row the moment its turn ends. It does not
report log-probs: TRL recomputes them for the transformers path. Seeds: it samples from this process's torch
generator, which its caller seeds. `model.compile_generation` compiles its decoding step (compiled_generation.py);
`rollout.generation_batch_size` sizes its calls (generation_memory.py). On CUDA it decodes without cuDNN attention
(`generation.decoding_attention`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from inspo_cli.policy import generation_memory
from inspo_cli.policy.compiled_generation import allocated_cache_length, decoding_compile_config, static_cache_kwargs
from inspo_cli.policy.generation import Generation, Sampling, decoding_attention, stop_token_ids


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


class TransformersBackend(Sampling):
    """Batched `generate` over a transformers causal LM (left padding, KV cache, per-row stopping).

    A call generates at most `batch_size` contexts at once; with `fit_memory` (`rollout.generation_batch_size: 0`) on
    a CUDA device, only as many as fit its free memory (`policy.generation_memory`)."""

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
        self.eos_ids = stop_token_ids(tokenizer, getattr(model.generation_config, "eos_token_id", None))
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
        room = generation_memory.free_device_bytes(self.model.device) if self.fit_memory else None
        if room is None:
            return rows
        element_bytes = next(self.model.parameters()).element_size()
        n = generation_memory.rows_that_fit(
            [len(contexts[i]) for i in rows],
            [max_new_tokens[i] for i in rows],
            generation_memory.bytes_per_token(self.model.config, element_bytes),
            int(room * generation_memory.FREE_SHARE),
            self._cache_tokens,
        )
        return rows[:n]

    def _cache_tokens(self, tokens: int) -> int:
        """The KV cache one row of `tokens` holds: as many tokens eagerly; compiled, the static cache transformers
        allocates for them."""
        return tokens if self.compile_config is None else allocated_cache_length(self.model, tokens)

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
        with torch.no_grad(), decoding_attention(device):
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

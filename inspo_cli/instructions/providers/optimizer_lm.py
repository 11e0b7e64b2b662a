"""The optimizer LM: one `LanguageModel` in front of Gemini, Claude, OpenAI-compatible servers and local models.

INSPO asks an LLM for new instructions every few steps (§3.3). Whatever answers, the rest of the code sees only
`LanguageModel` (language_model.py); this file adds what every provider needs the same way, and opening.py opens
one from a recipe:

    optimizer = open_optimizer(recipe.optimizer)     # reads the key from $GEMINI_API_KEY (or api_key_env)
    text = optimizer.complete(prompt)                # retries 429/5xx/timeouts, enforces the budget
    answer = ask(optimizer, prompt)                  # Answer(text, truncated): stopped before the model's end?
    summary["optimizer"] = optimizer.accounting()    # calls, retries, tokens, cost, seconds: safe to write out
    optimizer.resume_from_record(lines)              # a resumed run: calls recorded after its checkpoint, not again

Providers live in `lm_clients.py`; each makes exactly one attempt per `attempt(prompt)` call (their SDKs'
own retries are off) and reports a failure as `AttemptFailed` (`lm_errors.py`, which both files import).
`OptimizerLM` owns retries (exponential backoff with jitter, honouring Retry-After), the call/token budget and the
accounting, so every provider behaves alike; and the record (`call_record.py`): every call a line with its cost at
the run's price (`prices.py`), and, in a run resumed from a checkpoint, the calls recorded after that checkpoint
answered from the record when they are asked again, so the interrupted run's answers are neither paid nor recorded
twice.

API keys come only from the environment and never appear in errors, reprs, logs or accounting (`api_keys.py`).
"""

from __future__ import annotations

import dataclasses
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.api_keys import redactor, secret_forms
from inspo_cli.instructions.providers.call_record import (
    CallRecord,
    ReplayClient,
    completion_of,
    prompt_hash,
    recorded_after,
    recorded_hashes,
)
from inspo_cli.instructions.providers.language_model import Answer
from inspo_cli.instructions.providers.lm_errors import AttemptFailed, Completion, ProviderClient, in_section

if TYPE_CHECKING:
    from inspo_cli.instructions.providers.prices import Price

logger = logging.getLogger(__name__)

INITIAL_BACKOFF_S = 1.0  # the first retry waits 0.5-1 s, the n-th 0.5-1 x 2^(n-1) s ...
MAX_BACKOFF_S = 30.0  # ... up to this


class OptimizerBudgetExhausted(InspoError):
    """The run has spent optimizer.max_calls or optimizer.max_total_tokens; raised before any further call."""


class OptimizerLM:
    """A `LanguageModel` with retries, a call/token budget and accounting around one `ProviderClient`."""

    def __init__(
        self,
        client: ProviderClient,
        *,
        max_retries: int = 5,
        max_calls: int | None = None,
        max_total_tokens: int | None = None,
        secret: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        record: CallRecord | None = None,
        parameters: dict | None = None,
        price: Price | None = None,
        section: str = "optimizer",
    ):
        self._client = client
        self.section = section  # the recipe section it stands for: its errors name that section's fields
        self._record = record  # every call, answered or failed, as a line of the run's optimizer_calls.jsonl
        self._parameters = dict(parameters or {})  # what besides the prompt shapes an answer, for the record
        self._price = price  # `prices.py`; None: unknown, so each call's cost is recorded as null
        # of the answered calls, in billionths of a dollar (whole numbers add up the same in any order, so a resumed
        # run's total is the uninterrupted run's); None once one's cost is unknown
        self._cost_nano: int | None = 0
        # A resumed run: the calls recorded after its checkpoint, by hash, answered from there when asked again
        self._recorded: dict[str, deque[dict]] = {}
        self._recorded_left = self._recorded_used = 0
        self._recorded_from: Path | None = None
        self._say: Callable[[str], None] | None = None
        self.max_retries = max_retries
        self.max_calls = max_calls
        self.max_total_tokens = max_total_tokens
        self._redact = redactor(secret)
        self._secret_forms = secret_forms(secret)
        self._sleep = sleep  # tests pass a recorder so backoff costs no time
        self._rng = rng or random.Random()
        self._lock = threading.Lock()  # proposers may call from several threads; budget checks must not race
        self._calls = self._failed_calls = self._retries = self._estimated_usage_calls = self._truncated = 0
        self._input_tokens = self._output_tokens = 0
        self._stop_reasons: dict[str, int] = {}  # answers stopped before their end, by the provider's reason
        self._wall_s = 0.0

    @property
    def concurrent(self) -> bool:
        """Whether calls from several threads at once go anywhere faster (an API) or only queue (a local model)."""
        return bool(getattr(self._client, "concurrent", True))

    def _said(self, text: str) -> str:
        """A message of the optimizer's as the section this LM stands for says it (`in_section`)."""
        return in_section(text, self.section)

    def __repr__(self) -> str:
        return f"OptimizerLM({self._client.provider}, model={self._client.model!r}, endpoint={self._client.endpoint!r})"

    def complete(self, prompt: str) -> str:
        return self.complete_with_usage(prompt).text

    def answer(self, prompt: str) -> Answer:
        completion = self.complete_with_usage(prompt)
        return Answer(completion.text, completion.truncated, completion.stop_reason if completion.truncated else None)

    def complete_with_usage(self, prompt: str) -> Completion:
        self._reserve_call()
        completion = self._recorded_answer(prompt)  # already a line of the record: not asked, not written again
        if completion is None:
            completion = self._ask(prompt)
        elif isinstance(self._client, ReplayClient):  # a resumed replay: its source's answer to this call is used up
            self._client.pass_over([prompt])
        with self._lock:
            cost = _nano(completion.cost_usd)
            self._cost_nano = None if cost is None or self._cost_nano is None else self._cost_nano + cost
            self._input_tokens += completion.input_tokens
            self._output_tokens += completion.output_tokens
            self._estimated_usage_calls += completion.usage_estimated
            self._truncated += completion.truncated
            if completion.truncated:
                reason = completion.stop_reason or "max_output_tokens"  # a local model says nothing but "no EOS"
                self._stop_reasons[reason] = self._stop_reasons.get(reason, 0) + 1
        return completion

    def _ask(self, prompt: str) -> Completion:
        """The provider's answer (or a replay's), as a line of the record with its cost."""
        started = time.monotonic()
        client = self._client
        try:
            completion = self._attempt_with_retries(prompt)
        except BaseException as error:
            with self._lock:
                self._failed_calls += 1
            if self._record is not None and isinstance(error, InspoError):  # its text is redacted already
                self._record.write(
                    client.provider,
                    client.model,
                    self._parameters,
                    prompt,
                    error=str(error),
                    latency_s=time.monotonic() - started,
                    cost_usd=self._cost_of(0, 0),
                    replayed=isinstance(client, ReplayClient),
                )
            raise
        finally:
            with self._lock:
                self._wall_s += time.monotonic() - started
        if not completion.replayed:  # a replayed answer carries what it cost when it was asked
            completion = dataclasses.replace(
                completion, cost_usd=self._cost_of(completion.input_tokens, completion.output_tokens)
            )
        if self._record is not None:
            self._record.write(
                client.provider,
                client.model,
                self._parameters,
                prompt,
                completion=completion,
                latency_s=time.monotonic() - started,
                cost_usd=completion.cost_usd,
                replayed=completion.replayed,
            )
        return completion

    def _cost_of(self, input_tokens: int, output_tokens: int) -> float | None:
        return None if self._price is None else self._price.cost_usd(input_tokens, output_tokens)

    def resume_from_record(self, lines: int, say: Callable[[str], None] | None = None) -> int:
        """A run resumed from a checkpoint that saw the first `lines` lines of its record: the calls recorded after
        them (made before the interruption) are answered from the record when the resumed run asks them again (the
        same hash, in the order made, as a replay does), without the provider and without a second line; any other
        call, or one that failed when recorded, is asked as usual. `say` is told once how many were answered so. The
        number of calls waiting; 0 without a record, or when none was made after the checkpoint."""
        if self._record is None:
            return 0
        path = self._record.path
        if isinstance(self._client, ReplayClient):  # a resumed replay: what it asked before the checkpoint is answered
            self._client.pass_over(hashes=recorded_hashes(path, min(lines, self._record.rows)))
        if self._record.rows < lines:
            if say is not None:
                found = f"has {self._record.rows} lines, fewer than" if path.exists() else "is missing, not holding"
                say(
                    f"warning: {path} {found} the {lines} the checkpoint saw (it was moved, replaced or cut short); "
                    "the calls made after the checkpoint go to the optimizer again"
                )
            return 0
        recorded, count = recorded_after(path, lines)
        with self._lock:
            self._recorded, self._recorded_left, self._recorded_used, self._say = recorded, count, 0, say
            self._recorded_from = path
        return count

    def record_lines(self) -> int | None:
        """The lines of the record so far (a checkpoint saves it, for `resume_from_record`); None without one."""
        return None if self._record is None else self._record.rows

    def _recorded_answer(self, prompt: str) -> Completion | None:
        """The next recorded answer with this prompt's hash, of the calls a resumed run's record holds after its
        checkpoint; None (the provider answers) when there is none, or that call failed when it was made."""
        if not self._recorded_left:
            return None
        key = prompt_hash(self._client.provider, self._client.model, self._parameters, prompt)
        with self._lock:
            queue = self._recorded.get(key)
            row = queue.popleft() if queue else None
            self._recorded_left -= row is not None
            answered = row is not None and row["answer"] is not None
            self._recorded_used += answered
            tell = self._say if self._say is not None and (not answered or not self._recorded_left) else None
            if tell is not None:
                self._say = None  # once
            used, left = self._recorded_used, self._recorded_left
        if tell is not None:
            plural = "" if used == 1 else "s"
            tell(
                f"resumed: {used} optimizer call{plural} answered from {self._recorded_from} (recorded after the "
                "checkpoint, before the interruption) instead of asked again"
                + (
                    ""
                    if answered
                    else f"; the next has no recorded answer ({left} recorded call"
                    f"{'' if left == 1 else 's'} left unmatched so far), so it goes to the optimizer"
                )
            )
        return completion_of(row, self._price) if row is not None and answered else None

    def accounting(self) -> dict:
        """What the optimizer cost so far, for the run's summary.json (no key, no prompts). `cost_usd` is in US
        dollars at the run's price (replayed answers: what they cost when asked); None when any call's is unknown."""
        with self._lock:
            return {
                "provider": self._client.provider,
                "model": self._client.model,
                "calls": self._calls,
                "failed_calls": self._failed_calls,
                "retries": self._retries,
                "input_tokens": self._input_tokens,
                "output_tokens": self._output_tokens,
                "total_tokens": self._input_tokens + self._output_tokens,
                "cost_usd": None if self._cost_nano is None else round(self._cost_nano / 1e9, 9),
                "estimated_usage_calls": self._estimated_usage_calls,
                "truncated_answers": self._truncated,
                "stop_reasons": dict(self._stop_reasons),
                "wall_s": round(self._wall_s, 3),
                "max_calls": self.max_calls,
                "max_total_tokens": self.max_total_tokens,
            }

    def restore(self, accounting: dict) -> None:
        """Continue the counts (and so the budget) of an earlier process: a resumed run saved `accounting()`."""
        with self._lock:
            self._calls, self._failed_calls = int(accounting["calls"]), int(accounting["failed_calls"])
            self._retries, self._wall_s = int(accounting["retries"]), float(accounting["wall_s"])
            self._input_tokens, self._output_tokens = int(accounting["input_tokens"]), int(accounting["output_tokens"])
            self._estimated_usage_calls = int(accounting["estimated_usage_calls"])
            self._truncated = int(accounting.get("truncated_answers", 0))  # absent in runs saved before it existed
            reasons = accounting.get("stop_reasons")  # the same
            self._stop_reasons = (
                {str(k): int(v) for k, v in reasons.items() if isinstance(v, int)} if isinstance(reasons, dict) else {}
            )
            if "cost_usd" in accounting:
                cost = accounting["cost_usd"]
            else:  # saved before costs were kept: its tokens at the run's price
                cost = self._cost_of(self._input_tokens, self._output_tokens)
            number = isinstance(cost, (int, float)) and not isinstance(cost, bool)
            self._cost_nano = _nano(cost) if number else None

    def _reserve_call(self) -> None:
        with self._lock:
            spent = self._input_tokens + self._output_tokens
            if self.max_calls is not None and self._calls >= self.max_calls:
                why = f"{self._calls} calls (optimizer.max_calls)"
            elif self.max_total_tokens is not None and spent >= self.max_total_tokens:
                why = f"{spent} of {self.max_total_tokens} tokens (optimizer.max_total_tokens)"
            else:
                self._calls += 1
                return
        raise OptimizerBudgetExhausted(
            self._said(
                f"optimizer budget exhausted: {why}; raise it, or set it to null for no limit, to let the optimizer "
                "write more instructions"
            )
        )

    def _attempt_with_retries(self, prompt: str) -> Completion:
        attempts = self.max_retries + 1
        for attempt in range(1, attempts + 1):
            try:
                completion = self._client.attempt(prompt)
                if any(form in completion.text for form in self._secret_forms):
                    raise AttemptFailed(
                        "answered with a text that quotes the API key",
                        retryable=False,
                        hint=f"the server echoes what it is sent: check that optimizer.base_url is a "
                        f"{self._client.provider} endpoint (the answer is not used)",
                    )
                return completion
            except AttemptFailed as failure:
                if not failure.retryable or attempt == attempts:
                    raise InspoError(self._describe(failure, attempt)) from None  # SDK errors may carry headers
                delay = self._backoff_s(attempt, failure.retry_after_s)
                logger.warning(
                    "%s",
                    self._redact(
                        f"{self.section} {self._client.provider} {self._reason(failure)}; retry {attempt} of "
                        f"{self.max_retries} in {delay:.1f} s"
                    ),
                )
                with self._lock:
                    self._retries += 1
                self._sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _backoff_s(self, retry: int, retry_after_s: float | None) -> float:
        if retry_after_s is not None:
            return retry_after_s  # the server knows when it will take us again (already capped)
        # "Equal jitter": half fixed, half random, so clients that failed together do not retry together.
        return min(MAX_BACKOFF_S, INITIAL_BACKOFF_S * 2 ** (retry - 1)) * self._rng.uniform(0.5, 1.0)

    def _reason(self, failure: AttemptFailed) -> str:
        """`failure.reason` with what the server said: the key removed first, then shortened to one short line."""
        detail = " ".join(self._redact(failure.detail).split())
        if len(detail) > MAX_DETAIL_CHARS:
            detail = detail[: MAX_DETAIL_CHARS - 3] + "..."
        return failure.reason + (f" ({detail})" if detail else "")

    def _describe(self, failure: AttemptFailed, attempts: int) -> str:
        client = self._client
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        message = (
            f"optimizer LM call failed: {client.provider} model {client.model!r} at {client.endpoint} "
            f"{self._reason(failure)}{tries}" + (f"; {failure.hint}" if failure.hint else "")
        )
        return self._redact(" ".join(self._said(message).split()))  # one line; the endpoint may hold the key


MAX_DETAIL_CHARS = 200  # of a server's words in an error or log line


def _nano(cost_usd: float | None) -> int | None:
    """Dollars as whole billionths (a call's cost is rounded to those, `prices.Price.cost_usd`); None stays None."""
    return None if cost_usd is None else round(cost_usd * 1_000_000_000)

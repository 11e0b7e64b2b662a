"""What the optimizer LM's providers and its retry loop share: the answer, the failed attempt, and the helpers that
turn an HTTP status, a timeout or an unreachable server into an `AttemptFailed` with a hint for the user.

What a server sent back (an error body, an exception's text) is kept apart from our own words, in
`AttemptFailed.detail`, whole: it may quote the API key, and `OptimizerLM` removes the key from it before it is
shortened for a message (shortening first could cut the key and leave a piece of it that no longer matches).

`lm_clients.py` (the providers) and `lm.py` (retries, budget, accounting) both import this file and it imports
neither, so the dependency runs one way: lm -> lm_clients -> lm_errors.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

RETRY_AFTER_CAP_S = 60.0  # a server asking for a longer pause gets this; the run should not stall for hours
RETRYABLE_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class Completion:
    """One answer and what it cost. Token counts are the provider's own (estimated only where it gave none)."""

    text: str
    input_tokens: int
    output_tokens: int
    usage_estimated: bool = False
    # The answer did not end where the model ended it: stopped at optimizer.max_output_tokens (Gemini MAX_TOKENS,
    # Claude max_tokens, OpenAI length, a local model without EOS) or by the provider (a safety, recitation or content
    # filter, ...): the text ends wherever the stop fell, possibly inside a candidate.
    truncated: bool = False
    stop_reason: str | None = None  # the provider's word for that stop (None: ended naturally, or not said)
    # Read back from a record by a replay (`call_record.ReplayClient`), not asked: nothing was paid for it now, and
    # `cost_usd` is what it cost when it was asked (None: unknown).
    replayed: bool = False
    cost_usd: float | None = None


class AttemptFailed(Exception):
    """One attempt at a provider failed. `reason` completes "<provider> model M at URL ..." in a sentence; `detail` is
    what the server said (unshortened, unredacted: only `OptimizerLM` makes it fit for a message)."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool,
        status: int | None = None,
        retry_after_s: float | None = None,
        hint: str = "",
        detail: str = "",
    ):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s
        self.hint = hint


class ProviderClient(Protocol):
    """One provider's transport: a single attempt per call, no retries, no budget (lm_clients.py; lm.OptimizerLM
    adds those)."""

    provider: str
    model: str
    endpoint: str  # where requests go, for error messages; never contains the key

    def attempt(self, prompt: str) -> Completion: ...


def http_failure(status: int, detail: str = "", retry_after: str | None = None) -> AttemptFailed:
    """The failure for an HTTP error status: 408, 429 and 5xx may succeed later, other 4xx never do."""
    reason = f"answered HTTP {status}"
    if status in (401, 403):
        hint = "check the API key in the environment variable named by optimizer.api_key_env"
    elif status == 404:
        hint = "check optimizer.model and optimizer.base_url"
    elif status == 429:
        hint = "the provider is rate-limiting; wait, lower the call rate, or raise optimizer.max_retries"
    elif status in RETRYABLE_STATUSES:
        hint = "the server is failing; try again later or raise optimizer.max_retries"
    else:
        hint = "check optimizer.model, optimizer.temperature, optimizer.max_output_tokens and optimizer.thinking_budget"
    return AttemptFailed(
        reason,
        retryable=status in RETRYABLE_STATUSES,
        status=status,
        retry_after_s=parse_retry_after(retry_after),
        hint=hint,
        detail=str(detail),
    )


def timeout_failure(timeout_s: float) -> AttemptFailed:
    return AttemptFailed(
        f"timed out after {timeout_s:g} s", retryable=True, hint="raise optimizer.timeout_s or optimizer.max_retries"
    )


def connection_failure(error: BaseException) -> AttemptFailed:
    return AttemptFailed(
        "could not be reached",
        retryable=True,
        detail=str(error) or type(error).__name__,
        hint="check optimizer.base_url and that the server is up",
    )


def malformed_response(provider: str, what: str) -> AttemptFailed:
    return AttemptFailed(
        f"returned a malformed response ({what})",
        retryable=False,
        hint=f"check that optimizer.base_url points at a {provider} endpoint",
    )


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (seconds or an HTTP date), capped; None when absent or unreadable."""
    if value is None or not str(value).strip():
        return None
    value = str(value).strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def retry_after_from_headers(headers: Mapping[str, str] | None) -> str | None:
    """Retry-After, or Anthropic/OpenAI's millisecond variant converted to seconds."""
    if headers is None:
        return None
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            return str(float(milliseconds) / 1000)
        except ValueError:
            pass
    return headers.get("retry-after")


def in_section(text: str, section: str) -> str:
    """An optimizer message said of another recipe section that uses the optimizer's providers (the judge): its
    fields ("optimizer.max_calls" -> "judge.max_calls") and its calls ("optimizer LM call" -> "judge call")."""
    if section == "optimizer":
        return text
    return text.replace("optimizer LM call", f"{section} call").replace("optimizer.", f"{section}.")

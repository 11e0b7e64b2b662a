"""The optimizer's API key: read from the environment, and kept out of every diagnostic.

API keys come only from the environment (`read_api_key`) and never appear in errors, reprs, logs or accounting:
those are built from our own words and what a server sent back (`AttemptFailed.detail`), and the key is removed from
the latter, whole occurrences only, before anything is shortened (`redact`). An answer is data, never rewritten: one
that quotes the key (a server echoing its request) is refused as a failed call instead (`OptimizerLM`, lm.py), so
nothing of it is written anywhere. A key shorter than `MIN_SECRET_CHARS` is a placeholder for a keyless server (EMPTY,
x), not a secret: nothing is matched.
"""

from __future__ import annotations

import base64
import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote, quote_plus

from inspo_cli.errors import InspoError

if TYPE_CHECKING:
    from inspo_cli.config import OptimizerConfig

MIN_SECRET_CHARS = 16  # real keys are 39 (Gemini) to 100+ characters; "EMPTY" or "x" stands for a keyless server


def secret_forms(secret: str | None) -> list[str]:
    """The key as a server might quote it back: as sent, URL-encoded (both ways) and base64 (both alphabets, without
    the padding a quote may leave off); none for a key shorter than `MIN_SECRET_CHARS`, which is no secret."""
    if not secret or len(secret) < MIN_SECRET_CHARS:
        return []
    raw = secret.encode()
    forms = [
        secret,
        quote(secret, safe=""),
        quote_plus(secret),
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
    ]
    return sorted(set(forms), key=len, reverse=True)  # longest first: no form is left half-replaced by a shorter one


def redact(text: str, secret: str | None) -> str:
    """`text` with every whole occurrence of a form of `secret` (`secret_forms`) replaced by `[redacted]`.

    For diagnostics only (a server's error text, a log line): never applied to an answer, which is data. Only whole
    occurrences: a key's public prefix ("sk-proj-") or a short key's letters elsewhere in a text are left alone."""
    for form in secret_forms(secret):
        text = text.replace(form, "[redacted]")
    return text


def redactor(secret: str | None) -> Callable[[str], str]:
    """Removes the key from diagnostics that may quote it: a server's error text (some echo what they were sent)."""
    return functools.partial(redact, secret=secret)


def read_api_key(config: OptimizerConfig) -> str | None:
    """The key from the environment variable named by optimizer.api_key_env; None for local models."""
    if config.provider == "local":
        return None
    name = config.api_key_env
    key = os.environ.get(name or "", "").strip()
    if not key:
        extra = (
            " (a server without authentication, such as vLLM, accepts any value, e.g. EMPTY)"
            if config.provider == "openai"
            else ""
        )
        raise InspoError(
            f"optimizer.provider is {config.provider} but the environment variable {name} is not set; "
            f"export {name}=<your key>{extra}, or set optimizer.api_key_env to the variable that holds it"
        )
    return key

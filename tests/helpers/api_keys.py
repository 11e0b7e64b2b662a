"""An API key that every encoding writes differently, and the forms a server might quote it back in."""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus

ODD_KEY = "sk-FAKE/inspo+7c1e9b42d0=KEY&x y?"  # each encoding below writes it differently


def key_forms(key: str) -> list[str]:
    """How a server might quote a key back: as sent, URL-encoded (both ways), base64 (both alphabets)."""
    raw = key.encode()
    return [
        key,
        quote(key, safe=""),
        quote_plus(key),
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
    ]


def leaks(text: str, key: str) -> list[str]:
    """Every form of `key` found whole in `text` (a key's first characters are no secret: "sk-proj-" starts every
    OpenAI project key, and providers quote keys as their first and last few characters themselves)."""
    return [form for form in key_forms(key) if form in text]

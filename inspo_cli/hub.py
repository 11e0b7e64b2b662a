"""Whether the Hugging Face hub can be reached from here, asked in at most a few seconds.

Compute nodes without internet are common, and there `datasets.load_dataset` does not fail: huggingface_hub retries
each request five times with back-off, printing a line each time, and gives up after about 25 s. One HEAD request to
the hub's endpoint (`HF_ENDPOINT`; through the proxy the environment names, as the hub's client would) answers the
same question in milliseconds when the name does not resolve or nothing listens, and in `TIMEOUT_S` when packets are
dropped, so a caller can fail at once with its own one line. Any HTTP answer, or a TLS problem (this client's
certificates are not the hub client's), counts as reachable: the hub's own client then decides. The answer is kept
for the process: a command asks once.
"""

from __future__ import annotations

import functools
import os
import ssl
import threading
import urllib.error
import urllib.request

DEFAULT_ENDPOINT = "https://huggingface.co"
TIMEOUT_S = 3.0


OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")


def hub_offline_reason() -> str | None:
    """'HF_HUB_OFFLINE=1 is set' when an offline variable is on (offline, `datasets` would only retry and fail)."""
    on = [v for v in OFFLINE_VARIABLES if os.environ.get(v, "").strip().upper() in {"1", "ON", "YES", "TRUE"}]
    return f"{on[0]}={os.environ[on[0]]} is set" if on else None


def endpoint() -> str:
    """The hub's URL, as huggingface_hub and datasets take it from the environment."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached (`cannot reach https://huggingface.co: Name or service not known`), or None when
    it answers (which says nothing of authentication or of the file asked for)."""
    if any(proxy.lower().startswith("socks") for proxy in urllib.request.getproxies().values()):
        return None  # a SOCKS proxy, which the hub's client can use and urllib cannot: let the client try
    return _probe(endpoint())


@functools.cache
def _probe(url: str) -> str | None:
    outcome: list[str | None] = []

    def ask() -> None:  # in a thread: name resolution has no timeout of its own
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=TIMEOUT_S).close()
            outcome.append(None)
        except urllib.error.HTTPError:  # it answered
            outcome.append(None)
        except urllib.error.URLError as e:
            reason = e.reason
            outcome.append(
                None
                if isinstance(reason, ssl.SSLError)
                else getattr(reason, "strerror", None) or str(reason) or type(reason).__name__
            )
        except (OSError, ValueError) as e:  # a timeout while reading; a URL urllib cannot use
            outcome.append(getattr(e, "strerror", None) or str(e) or type(e).__name__)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(TIMEOUT_S + 0.5)
    if outcome and outcome[0] is None:
        return None
    return f"cannot reach {url}: {outcome[0] if outcome else f'no answer in {TIMEOUT_S:g} s'}"


def offline_if_unreachable() -> str | None:
    """When the hub cannot be reached, put huggingface_hub (and so transformers) in offline mode for this process, as
    HF_HUB_OFFLINE=1 would: a cached model still loads, any other fails at once instead of after a minute of retries.
    Returns why, or None when the hub answers or offline mode is already on."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or (why := hub_unreachable()) is None:
        return None
    constants.HF_HUB_OFFLINE = True  # read at each call (`is_offline_mode()`), unlike the environment variable
    return why

"""The `INSPO_*` environment variables, read through one checked reader, like command-line options.

A variable is a setting as surely as a flag, but it is set out of sight (an `export` in a job script written months
ago) and `float(os.environ[...])` takes anything: `0` polls the scheduler in a busy loop, `nan` and `inf` pass "> 0",
and a typo is a traceback from deep inside a command. So every variable inspo reads is declared here with its default
and range; an unset or empty variable takes the default, anything else must parse and lie in the range or the command
stops with one line naming the variable, its value and what to use. `check_environment()` checks them all when the
CLI starts, so a bad value is refused in a second, before any work, not when it is first needed hours into a run.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from inspo_cli.errors import InspoError

# name -> (default, least, most), in seconds. The least keeps a poll from hammering squeue and a log from flooding;
# the most (a day) catches a value given in the wrong unit (milliseconds) before it reads as "it hangs".
SECONDS: dict[str, tuple[float, float, float]] = {
    "INSPO_PROGRESS_SECONDS": (30.0, 1.0, 86400.0),  # plain progress lines when stderr is not a terminal
    "INSPO_POLL_SECONDS": (30.0, 1.0, 86400.0),  # `ablate --collect --wait`: how often to ask the scheduler
}
PATHS: dict[str, str] = {"INSPO_CACHE": "~/.cache/inspo"}  # converted packaged models and merged adapters


def _shown(value: str, limit: int = 40) -> str:
    """The value quoted on one line (repr escapes newlines and control characters), cut short if it is huge."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


def env_seconds(name: str) -> float:
    """The number of seconds in the variable `name` (declared in `SECONDS`), its default when unset or empty;
    `InspoError` (one line) when it is not a finite number within the declared range."""
    default, least, most = SECONDS[name]
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and least <= value <= most):
        raise InspoError(
            f"the environment variable {name} is {_shown(raw)}; use a number of seconds from {least:g} "
            f"to {most:g}, or unset it for the default {default:g}"
        )
    return value


def env_path(name: str) -> Path:
    """The directory in the variable `name` (declared in `PATHS`), `~` expanded, its default when unset or empty;
    `InspoError` when it names something that exists but is not a directory, or a path under a file (which no
    `mkdir` can create). Made absolute, so that a relative value does not mean another cache in every directory a
    command is started from."""
    raw = os.environ.get(name, "").strip()
    fix = f"point it at a directory (it is created if missing), or unset it for the default {PATHS[name]}"
    try:
        path = Path(raw or PATHS[name]).expanduser().absolute()
        existing = next(p for p in (path, *path.parents) if p.exists())  # "/" at the latest
        usable = existing.is_dir()
    except (RuntimeError, OSError) as e:  # `~nosuchuser/...`, no home directory, a name too long
        raise InspoError(
            f"the environment variable {name} is {_shown(raw)}, which cannot be used "
            f"({e.strerror if isinstance(e, OSError) else e}); {fix}"
        ) from None
    if not usable:
        under = "" if existing == path else f" (it is under {_shown(str(existing), 200)}, a file)"
        raise InspoError(f"the environment variable {name} is {_shown(raw)}, which is not a directory{under}; {fix}")
    return path


def check_environment() -> None:
    """Check every declared variable that is set; the CLI calls this before any command runs (but `--help`,
    `--version` and `inspo env`, which must work to diagnose a bad value)."""
    for name in SECONDS:
        env_seconds(name)
    for name in PATHS:
        env_path(name)


def describe_environment() -> dict[str, str]:
    """Each declared variable as `inspo env` shows it: its value, `unset (default ...)`, or why it is refused."""
    described = {}
    for name, read in [*((n, env_seconds) for n in SECONDS), *((n, env_path) for n in PATHS)]:
        raw = os.environ.get(name, "").strip()
        try:
            value = read(name)
        except InspoError as refused:
            described[name] = f"refused: {refused}"
            continue
        described[name] = (
            _shown(raw) if raw else f"unset (default {value:g} s)" if name in SECONDS else f"unset (default {value})"
        )
    return described

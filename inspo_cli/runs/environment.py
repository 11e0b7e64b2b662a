"""What a run records about where it ran (run.json): the versions of the packages that change results, and the
checkout's git revision and whether it had local changes."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from inspo_cli import __version__
from inspo_cli.config import PROJECT_ROOT

TRACKED_PACKAGES = (
    "torch",
    "trl",
    "transformers",
    "peft",
    "accelerate",
    "datasets",
    "vllm",
    "bm25s",
    "faiss-cpu",
    "pyserini",
    "anthropic",
    "google-genai",
)


def package_versions(names: Sequence[str] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of the packages that change results; absent packages are left out."""
    versions = {"python": platform.python_version(), "inspo": __version__}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def git_state(repo: Path = PROJECT_ROOT) -> dict:
    """The checkout's revision and whether it has uncommitted changes; empty when not a git checkout."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    revision = git("rev-parse", "HEAD")
    if revision is None:
        return {}
    return {"revision": revision, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}

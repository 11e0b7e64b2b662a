"""What every benchmark script shares: a description of the machine, and rewriting its own README section."""

from __future__ import annotations

import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inspo_cli.jsonio import atomic_write_text  # noqa: E402


def machine(packages: tuple[str, ...] = ()) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    gpu = "none"
    try:
        import torch

        if torch.cuda.is_available():
            gpu = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    except ImportError:
        pass
    installed = {}
    for name in packages:
        try:
            installed[name] = version(name)
        except PackageNotFoundError:
            pass
    return {
        "cpu_cores": os.cpu_count(),
        "cpu": cpu,
        "gpu": gpu,
        "python": platform.python_version(),
        "packages": installed,
    }


def update_readme_section(name: str, section: str) -> None:
    """Replace bench/README.md's `<!-- name:start -->…<!-- name:end -->` block with `section`; keep the rest."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    readme = ROOT / "bench" / "README.md"
    text = readme.read_text() if readme.exists() else "# Benchmarks\n\nResults are kept in `bench/results/`.\n"
    block = f"{start}\n{section.strip()}\n{end}"
    if start in text and end in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    atomic_write_text(readme, text)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a batch, a repeat count, a token count)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: give at least 1")
    return value


def synchronizer(device):
    """What waits for the device's queued work before a clock is read: CUDA's for any CUDA device (cuda, cuda:N),
    synchronising that device (not the current one), nothing on CPU."""
    import torch

    chosen = torch.device(device)
    if chosen.type != "cuda":
        return lambda: None
    return lambda: torch.cuda.synchronize(chosen)


SMOLLM2 = "smollm2-135m"  # the bench name of SmolLM2-135M's architecture; the others are gpu_checks.QWEN's

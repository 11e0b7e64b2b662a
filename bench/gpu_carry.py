"""What a lent GPU machine needs beside its image, made ready here, before the lease: wheels and a tokenizer.

    python bench/gpu_carry.py            # .whl/ (wheels) and .gpu/tokenizer, then the size check and the run command

The GPU machines have no package index and no hub, and a run carries at most 64 MiB (this checkout's files and the
carried folders together). Their image (2026-11-28: Python 3.12, torch 2.11.0+cu130 and `IMAGE`) lacks the wheels in
`WHEELS`; this downloads each at the version installed here, so the GPU runs the code the tests ran (binary wheels
for CPython 3.12 on manylinux x86-64, no dependencies: the list is complete, and bench/gpu_checklist.py's import check
names anything missing), and saves SmolLM2's tokenizer (the packaged model's) where the checks look for it. Both
folders are kept out of git through its exclude file, so they travel only when `carry` names them. Last it prints
the total that would travel and the `run` command that installs the wheels and runs the checklist.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from _common import ROOT

LIMIT = 64 * 2**20  # what one `run` call carries: tracked files and the carried folders together
WHEELS = (
    "transformers",
    "trl",
    "datasets",
    "dill",
    "multiprocess",
    "bm25s",
    "orjson",
    "gguf",
    "typer",
    "pydantic",
    "pydantic_core",
    "annotated-types",
    "typing-inspection",
    "fastapi",
    "starlette",
    "sniffio",
    "platformdirs",
    "tokenizers",
)
# what the checklist imports (gpu_checklist.NEEDED) that the image had on 2026-11-28 (H100 and H200)
IMAGE = ("torch", "accelerate", "rich", "pyyaml", "safetensors", "huggingface-hub", "peft")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
EXCLUDED = ("/.whl/", "/.gpu/", "/.whl.partial/", "/.whl.old/")
RUN = (
    "python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "
    ".whl/*.whl && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 || exit; nvidia-smi -L; "
    "python3 bench/gpu_checklist.py --out $OUT --checks sdpa,step-qwen2.5-3b,compiled --budget 510"
)
TIMEOUT_S = 580  # the run's limit: the install, then the checklist's 510 s budget (a command may run 600 s)


def pinned(names=WHEELS) -> list[str]:
    """Each wheel at the version installed here; a name not installed here is an error that names it."""
    out = []
    for name in names:
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            raise SystemExit(f"gpu_carry: {name} is not installed here; install the project first") from None
    return out


def download_command(requirements: list[str], dest: Path) -> list[str]:
    platforms = [flag for p in PLATFORMS for flag in ("--platform", p)]
    return [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
        "--implementation", "cp", *platforms, "-d", str(dest), *requirements,
    ]  # fmt: skip


def exclude(root: Path = ROOT) -> None:
    """The two folders in git's exclude file, once: ignored by git, so they travel only when carried. Git says where
    that file is (a worktree's `.git` is a file that points elsewhere)."""
    where = subprocess.run(
        ["git", "rev-parse", "--git-path", "info/exclude"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    path = root / where
    text = path.read_text(errors="surrogateescape") if path.exists() else ""  # git's file: bytes kept as they are
    missing = [line for line in EXCLUDED if line not in text.splitlines()]
    if missing:
        path.parent.mkdir(parents=True, exist_ok=True)
        ending = "" if text.endswith("\n") or not text else "\n"
        path.write_text(text + ending + "\n".join(missing) + "\n", errors="surrogateescape")


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def tracked_bytes(root: Path = ROOT) -> int:
    """What travels besides the carried folders: tracked files and untracked ones git does not ignore."""
    listing = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    names = subprocess.run(listing, cwd=root, capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / n.decode()).stat().st_size for n in names if n and (root / n.decode()).is_file())


def swap_in(fresh: Path, wheels: Path, old: Path) -> None:
    """`fresh` becomes `wheels`; the set there was is deleted only once the new one is in place (one version of each
    wheel: two stop the whole install there)."""
    shutil.rmtree(old, ignore_errors=True)
    if wheels.exists():
        wheels.rename(old)
    try:
        fresh.rename(wheels)
    except OSError:
        if old.exists():
            old.rename(wheels)  # the set there was, back in its place
        raise
    shutil.rmtree(old, ignore_errors=True)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    exclude()
    wheels, tokenizer = ROOT / ".whl", ROOT / ".gpu" / "tokenizer"
    fresh, old = wheels.with_name(".whl.partial"), wheels.with_name(".whl.old")  # beside it: one filesystem
    shutil.rmtree(fresh, ignore_errors=True)
    if subprocess.run(download_command(pinned(), fresh)).returncode != 0:
        shutil.rmtree(fresh, ignore_errors=True)
        raise SystemExit(
            "gpu_carry: pip could not download the wheels (its lines above say why); .whl/ is left as it was"
        )
    swap_in(fresh, wheels, old)
    from transformers import AutoTokenizer

    from inspo_cli.policy.models import resolve_model_path

    shutil.rmtree(tokenizer, ignore_errors=True)
    AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct")).save_pretrained(tokenizer)
    total = tracked_bytes() + size(wheels) + size(ROOT / ".gpu")
    print(
        f"gpu_carry: {len(list(wheels.glob('*.whl')))} wheels ({size(wheels) / 2**20:.1f} MiB), tokenizer "
        f"({size(tokenizer) / 2**20:.1f} MiB); with the checkout's files {total / 2**20:.1f} MiB of the 64 MiB a run "
        "carries"
    )
    if total > LIMIT:
        raise SystemExit("gpu_carry: over the limit; remove or ignore untracked files, or carry fewer wheels")
    print(f'run: carry [".whl", ".gpu"], timeout_s {TIMEOUT_S}, command:\n{RUN}')


if __name__ == "__main__":
    main()

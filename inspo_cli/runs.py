"""Run directories: one folder per run, everything needed to understand and reproduce it.

    run_dir = create_run_dir(recipe, recipe_path="recipes/demo.yaml", command=sys.argv)

creates `runs/<name>/` (name from `run.name`, else the recipe's file name and a timestamp; never reusing an
existing directory) holding `recipe.yaml` (the fully resolved recipe, loadable by `load_recipe`) and
`run.json` (seed, command, package versions, git revision and whether the checkout had local changes).
Training later adds metrics.jsonl, instructions.jsonl, checkpoints/, plots/ and summary.json beside them.
All writes are atomic (`inspo_cli.jsonio`).
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Sequence

from inspo_cli import __version__
from inspo_cli.config import PROJECT_ROOT, Recipe, dump_recipe
from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_json, atomic_write_text

RECIPE_FILE = "recipe.yaml"
RUN_INFO_FILE = "run.json"
TRACKED_PACKAGES = ("torch", "trl", "transformers", "peft", "accelerate", "datasets", "vllm", "bm25s", "faiss-cpu",
                    "pyserini", "anthropic", "google-genai")


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


def _unused_dir(output_dir: Path, name: str) -> Path:
    candidate, n = output_dir / name, 2
    while candidate.exists():
        candidate, n = output_dir / f"{name}-{n}", n + 1
    return candidate


def create_run_dir(recipe: Recipe, recipe_path: str | Path | None = None, command: Sequence[str] = (),
                   output_dir: str | Path | None = None) -> Path:
    """Make a fresh run directory and record the resolved recipe and the environment in it."""
    root = Path(output_dir if output_dir is not None else recipe.run.output_dir)
    stem = Path(recipe_path).stem if recipe_path else "run"
    name = recipe.run.name or f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        run_dir = _unused_dir(root, name)
        run_dir.mkdir()
    except OSError as e:
        raise InspoError(f"cannot create the run directory under {root}: {e.strerror}; pass --output-dir DIR") from None
    atomic_write_text(run_dir / RECIPE_FILE, dump_recipe(recipe))
    atomic_write_json(run_dir / RUN_INFO_FILE, {
        "name": run_dir.name,
        "seed": recipe.run.seed,
        "recipe_source": str(recipe_path) if recipe_path else None,
        "command": list(command),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": package_versions(),
        "git": git_state(),
    })
    return run_dir


def read_run_info(run_dir: str | Path) -> dict:
    path = Path(run_dir) / RUN_INFO_FILE
    if not path.is_file():
        raise InspoError(f"{run_dir} is not a run directory (no {RUN_INFO_FILE}); pass a directory under runs/")
    return json.loads(path.read_text(encoding="utf-8"))


SUMMARY_FILE = "summary.json"
CHECKPOINTS_DIR = "checkpoints"
FINAL_DIR = "final"  # checkpoints/final: the trained policy as a plain model directory
COEVOLUTION_FILE = "coevolution.json"  # INSPO's population, replay buffer and evolutions (in checkpoints; evolve's run dir)


def complete_checkpoints(run_dir: str | Path) -> dict[int, Path]:
    """checkpoints/checkpoint-<update> directories that are complete (HF writes trainer_state.json last), keyed by
    optimizer update; a training step is `batch_size / mini_batch_size` updates."""
    found = {}
    for path in (Path(run_dir) / CHECKPOINTS_DIR).glob("checkpoint-*"):
        number = path.name.removeprefix("checkpoint-")
        if number.isdigit() and (path / "trainer_state.json").is_file():
            found[int(number)] = path
    return dict(sorted(found.items()))


def read_summary(run_dir: str | Path) -> dict | None:
    """summary.json of a finished run; None while it has none."""
    path = Path(run_dir) / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InspoError(f"{path} is not valid JSON ({e.msg}, line {e.lineno}); restore it or delete it") from None


def unfinished_run_recipe(run_dir: str | Path, conflicting: dict[str, object]) -> Recipe:
    """The recipe of a run to resume: it must be a run directory without summary.json (not finished yet), and no
    flag that would change the recipe (`conflicting`: flag name -> value given) may be set."""
    from inspo_cli.config import load_recipe

    given = [flag for flag, value in conflicting.items() if value]
    if given:
        raise InspoError(f"--resume continues a run with its own recipe; drop {', '.join(given)}")
    read_run_info(run_dir)
    if (Path(run_dir) / SUMMARY_FILE).is_file():
        raise InspoError(f"run {run_dir} already finished (it has {SUMMARY_FILE}); start a new run instead")
    return load_recipe(Path(run_dir) / RECIPE_FILE)

"""What `inspo view` was given: runs and ablations, each under a short id that the pages' paths use. Only the files
of these runs and ablations are ever read, and only by their known names; a file a page links to (a figure) must lie
inside its run or ablation with no symbolic link on the way (`contained_file`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspo_cli.errors import InspoError
from inspo_cli.files import not_a_directory
from inspo_cli.runs import RunDir

SAFE_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=+-]*$")  # one path component a page may name: no "..", no "/"
PLAN = "plan.json"  # an ablation directory's (AblationDir.PLAN, not imported: the ablation package loads slowly)
FIGURE_SUFFIXES = (".png", ".jpg", ".jpeg")  # files served as they are: pictures only (an SVG could hold a script)


@dataclass
class RunSource:
    id: str
    label: str
    run: RunDir
    ablation: str | None = None  # the id of the ablation it belongs to
    variant: str | None = None
    seed: int | None = None


@dataclass
class AblationSource:
    id: str
    label: str
    path: Path
    ablation: Any  # an AblationDir
    runs: dict[str, str] = field(default_factory=dict)  # run name -> run id


@dataclass
class Sources:
    runs: dict[str, RunSource] = field(default_factory=dict)
    ablations: dict[str, AblationSource] = field(default_factory=dict)

    def _id(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.=+-]+", "-", name).strip(".-") or "run"
        candidate, n = base, 2
        while candidate in self.runs or candidate in self.ablations or candidate in ("static", "index.html"):
            candidate, n = f"{base}-{n}", n + 1
        return candidate

    def add_run(self, run: RunDir, label: str, **where) -> RunSource:
        resolved = run.path.resolve()
        for known in self.runs.values():  # given twice (itself and in its ablation, or runs/ and the run): once
            if known.run.path.resolve() == resolved:
                if known.ablation is None and where:  # seen alone first: it is still its ablation's run
                    known.ablation, known.variant, known.seed = where["ablation"], where["variant"], where["seed"]
                return known
        source = RunSource(self._id(label), label, run, **where)
        self.runs[source.id] = source
        distilled = run.distill_dir
        if (distilled / RunDir.INFO).is_file() and not distilled.is_symlink():  # `inspo distill`'s run inside it
            self.add_run(RunDir(distilled), f"{label}/distill", **where)
        return source

    def add_ablation(self, path: Path) -> None:
        from inspo_cli.ablation.directory import AblationDir

        ablation = AblationDir.open(path)
        source = AblationSource(self._id(f"ablation-{ablation.plan.name}"), str(path), path, ablation)
        self.ablations[source.id] = source
        for planned in ablation.plan.runs():
            run = ablation.run_dir(planned)
            if (run.path / RunDir.INFO).is_file():
                added = self.add_run(
                    run,
                    f"{ablation.plan.name}/{planned.name}",
                    ablation=source.id,
                    variant=planned.variant,
                    seed=planned.seed,
                )
                source.runs[planned.name] = added.id


def is_run(path: Path) -> bool:
    return (path / RunDir.INFO).is_file()


def is_ablation(path: Path) -> bool:
    return (path / PLAN).is_file()


def discover(paths: list[Path]) -> Sources:
    """Runs and ablations from the command line: a run directory, an ablation's --out, or a folder holding them
    (runs/: each run and ablation directly inside it)."""
    sources = Sources()
    for path in paths:
        if (problem := not_a_directory(path, "RUN_OR_ABLATION")) is not None:
            raise InspoError(problem)
        if is_ablation(path):
            sources.add_ablation(path)
        elif is_run(path):
            sources.add_run(RunDir.open(path), path.name)
        else:
            found = False
            for child in sorted(p for p in path.iterdir() if p.is_dir() and not p.is_symlink()):
                if is_ablation(child):
                    sources.add_ablation(child)
                    found = True
                elif is_run(child):
                    sources.add_run(RunDir.open(child), f"{path.name}/{child.name}")
                    found = True
            if not found:
                raise InspoError(
                    f"RUN_OR_ABLATION {path}: neither a run (no {RunDir.INFO}), an ablation (no {PLAN}) nor a folder "
                    "holding them; pass a run directory, an ablation's --out, or runs/"
                )
    return sources


def contained_file(root: Path, parts: list[str], suffixes: tuple[str, ...] = FIGURE_SUFFIXES) -> Path | None:
    """The file `root/parts...` when every part is a plain name, no part is a symbolic link (even one that points
    inside), it is a regular file with one of `suffixes`, and it resolves inside `root`; else None (a 404)."""
    if not parts or not all(SAFE_PART.match(p) for p in parts) or not parts[-1].lower().endswith(suffixes):
        return None
    path = root
    for part in parts:
        path = path / part
        if path.is_symlink():
            return None
    try:
        inside = path.resolve().is_relative_to(root.resolve())
    except OSError:
        return None
    return path if inside and path.is_file() else None

"""An ablation's directory: the one owner of its layout.

plan.json            the plan (variants, seeds, runs); a re-run must plan the same, and then continues
recipes/<variant>.yaml   each variant's resolved recipe (what `--print-commands` hands to `inspo train`)
runs/<variant>-s<seed>/  one run directory per run (`RunDir`)
failures.json        runs that failed in their last attempt, with the error; cleared when they finish
jobs.json            per run, the job it was last started as (a SLURM array task, or
                     local:<host>:<pid>:<start time>) and how often SLURM requeued it; what `--status` and
                     re-submitting read
.lock                the ablation's lock: planning, failures.json and jobs.json are changed under it; a
                     `recipes/` folder without it beside it is the user's, never taken for a cut-short planning
.recipes.partial/, .recipes.old/   recipes being written, and those a --replan replaces (removed under the lock)
slurm/               with --scheduler slurm: submitit's folder (each task's stdout and stderr)
ablation.md/.json/.csv   the table: one row per variant, EM per benchmark and the average with 95% intervals,
                     and every variant against the reference (Δ, interval, p-value, power)

ablation = AblationDir.start("runs/ablations/inspo-fig3", plan)   # new, or the same plan again
ablation = AblationDir.open("runs/ablations/inspo-fig3")          # an existing one (--collect)
ablation.status(run)      # "finished" | "partial" | "absent"
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from dataclasses import replace
from pathlib import Path

from inspo_cli.ablation.plan import Plan, PlannedRun, resolve
from inspo_cli.config import dump_recipe, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.files import make_dir, not_a_directory
from inspo_cli.jsonio import Range, atomic_write_json, atomic_write_text, read_json
from inspo_cli.runs import RunDir

FINISHED, PARTIAL, ABSENT = "finished", "partial", "absent"


class AblationDir:
    PLAN = "plan.json"
    RECIPES = "recipes"
    PARTIAL_RECIPES = ".recipes.partial"  # recipes being written; renamed to RECIPES when complete
    OLD_RECIPES = ".recipes.old"  # re-planning: the recipes replaced, removed once the new ones are in place
    RUNS = "runs"
    FAILURES = "failures.json"
    TABLE = "ablation"  # .md, .json, .csv
    JOBS = "jobs.json"
    SLURM_LOGS = "slurm"
    LOCK = ".lock"  # held while a shared file (failures.json, jobs.json) is read, changed and written
    JOBS_BYTES = 16 << 20  # jobs.json: ~100 bytes per run
    JOBS_SHAPE = {str: {"job?": str, "requeued?": Range(0, 1_000_000, integer=True), "started?": str}}

    def __init__(self, path: str | Path, plan: Plan):
        self.path, self.plan = Path(path), plan

    def __str__(self) -> str:
        return str(self.path)

    @classmethod
    def start(cls, path: str | Path, plan: Plan, changed: str | None = None) -> AblationDir:
        """A new ablation directory with `plan`, or an existing one whose plan is the same (to continue it). Planning
        holds the directory's lock, so two commands planning into it at once neither interleave their recipes nor
        leave any behind: the second waits, then continues what the first planned (or refuses another plan).

        A variant whose recipe, resolved now, differs from the one planned (its base recipe was edited) is never
        used silently: `changed` None refuses, naming the first difference; "replan" writes the current recipes,
        while no run has started; "keep" goes on with the planned ones, and `notice` says so."""
        path = Path(path)
        cls._refuse_foreign(path)  # before the lock file is created in someone else's folder
        ablation = cls(path, plan)
        make_dir(path, "ablation directory")
        with ablation.locked():
            if (path / cls.PLAN).is_file():
                ablation._continue(changed)
            else:
                cls._refuse_foreign(path)
                ablation.write_plan()
        return ablation

    notice: str | None = None  # what `start` did that the user should hear of (a changed recipe)
    _PLANNING = {PLAN, RECIPES, PARTIAL_RECIPES, OLD_RECIPES, LOCK}

    @classmethod
    def _refuse_foreign(cls, path: Path) -> None:
        """Refuse a folder that holds files but no plan; what planning cut short leaves is cleared by `write_plan`.
        A recipes/ is planning's only beside the lock that planning holds while it writes: a user's own recipes/
        folder has none, and is never taken for one (write_plan would delete it)."""
        if not path.is_dir() or (path / cls.PLAN).is_file():
            return
        names = {p.name for p in path.iterdir()}
        if not names <= cls._PLANNING or (cls.RECIPES in names and cls.LOCK not in names):
            raise InspoError(f"{path} already holds files but no {cls.PLAN}; pass --out NEW_DIR")

    def _continue(self, changed: str | None) -> None:
        existing = self.open(self.path)
        added = self.plan.added_seeds(existing.plan)
        if not added and not existing.plan.same_as(self.plan):
            same_variants = existing.plan.same_as(replace(self.plan, seeds=existing.plan.seeds))
            raise InspoError(
                f"{self.path} holds another ablation (its {self.PLAN} plans "
                + (
                    f"seeds {_seeds(existing.plan.seeds)}); pass those to continue it, those followed by new ones "
                    "to add seeds, or --out NEW_DIR"
                    if same_variants
                    else "other variants); pass --out NEW_DIR, or the same arguments as before to continue it"
                )
            )
        if added:
            self._tell(
                f"added seed{'s' if len(added) > 1 else ''} {_seeds(added)} to {self.path} (planned: "
                f"{_seeds(existing.plan.seeds)})"
            )
        change = self._recipe_change()
        started = [r.name for r in self.plan.runs() if self.run_dir(r).path.exists()]
        if change is not None and changed == "keep":
            self._tell(
                f"going on with the recipes planned in {self.recipes_dir}, although variant {change[0]}'s "
                f"differs now ({change[1]})"
            )
        elif change is not None and changed == "replan" and not started:
            self.write_plan()
            self._tell(f"re-planned {self.path} with the current recipes (variant {change[0]}: {change[1]})")
            return
        elif change is not None:
            runs = len(self.plan.runs())
            options = (
                f"{len(started)} of {runs} runs started with the planned recipes, so --replan would mix them; "
                "pass --keep-planned to go on with the planned ones"
                if started
                else "no run has started: pass --replan to plan it again with the current recipes, or "
                "--keep-planned to go on with the planned ones"
            )
            raise InspoError(
                f"{self.path} was planned with other recipes: variant {change[0]}'s {change[1]}; "
                f"{options}, or --out NEW_DIR for a new ablation"
            )
        atomic_write_json(self.path / self.PLAN, self.plan.as_dict())  # the same runs; descriptions as planned now

    def _tell(self, text: str) -> None:
        self.notice = f"{self.notice}; {text}" if self.notice else text

    def _recipe_change(self) -> tuple[str, str] | None:
        """The first variant whose recipe resolved now differs from its planned recipes/<variant>.yaml, and how."""
        import yaml

        for variant in self.plan.variants:
            file = self.recipe_file(variant.name)
            try:  # loaded as planned (paths as they were resolved then); a key added since takes its default
                planned = dump_recipe(load_recipe(file, check_paths=False))
            except InspoError as error:
                return variant.name, f"planned recipe {file} no longer loads ({' '.join(str(error).split())})"
            now = dump_recipe(resolve(variant))
            if planned != now:
                return variant.name, _difference(yaml.safe_load(planned), yaml.safe_load(now))
        return None

    @classmethod
    def open(cls, path: str | Path) -> AblationDir:
        path = Path(path)
        file = path / cls.PLAN
        if (problem := not_a_directory(path, "ablation directory")) is not None:
            raise InspoError(problem)
        if not file.is_file():
            raise InspoError(
                f"{path} is not an ablation directory (no {cls.PLAN}); pass the --out of an `inspo ablate` run"
            )
        return cls(
            path,
            Plan.from_dict(
                read_json(
                    file,
                    Plan.SHAPE,
                    "copy it again, or plan anew into a new --out (the runs' own directories stay usable)",
                )
            ),
        )

    def write_plan(self) -> None:
        """Every variant's resolved recipe, then plan.json (before any run starts). The recipes are written into a
        side folder renamed into place when complete, and plan.json last, so an interrupted planning leaves only
        what `start` recognises and clears."""
        partial, old = self.path / self.PARTIAL_RECIPES, self.path / self.OLD_RECIPES
        for leftover in (partial, old):
            shutil.rmtree(leftover, ignore_errors=True)
        if not (self.path / self.PLAN).is_file():  # recipes of a planning cut short: not a plan's
            shutil.rmtree(self.recipes_dir, ignore_errors=True)
        make_dir(partial, "ablation directory")
        for variant in self.plan.variants:
            atomic_write_text(partial / f"{variant.name}.yaml", dump_recipe(resolve(variant)))
        if self.recipes_dir.exists():  # re-planned: the planned recipes make way, whole
            os.replace(self.recipes_dir, old)
        os.replace(partial, self.recipes_dir)
        shutil.rmtree(old, ignore_errors=True)
        atomic_write_json(self.path / self.PLAN, self.plan.as_dict())

    recipes_dir = property(lambda self: self.path / self.RECIPES)
    runs_dir = property(lambda self: self.path / self.RUNS)
    failures_file = property(lambda self: self.path / self.FAILURES)
    jobs_file = property(lambda self: self.path / self.JOBS)
    slurm_logs = property(lambda self: self.path / self.SLURM_LOGS)

    @contextlib.contextmanager
    def locked(self):
        """Hold the ablation's lock: runs that end at once (--workers, SLURM tasks) must not lose each other's
        changes to failures.json or jobs.json. flock works on local disks and on NFSv4."""
        with open(self.path / self.LOCK, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def recipe_file(self, variant: str) -> Path:
        return self.recipes_dir / f"{variant}.yaml"

    def table_file(self, suffix: str, metric: str = "em") -> Path:
        """ablation.md/.json/.csv; ablation-<metric>.* for a table of another score than EM (`--metric`)."""
        return self.path / (f"{self.TABLE}.{suffix}" if metric == "em" else f"{self.TABLE}-{metric}.{suffix}")

    def run_dir(self, run: PlannedRun) -> RunDir:
        return RunDir(self.runs_dir / run.name)

    def status(self, run: PlannedRun) -> str:
        directory = self.run_dir(run)
        if directory.summary_file.is_file():
            return FINISHED
        return PARTIAL if directory.info_file.is_file() else ABSENT

    def failures(self) -> dict[str, str]:
        if not self.failures_file.is_file():
            return {}
        return read_json(self.failures_file, {str: str}, "delete it: it only notes the last error of each failed run")

    def record_failure(self, run: PlannedRun, message: str | None) -> None:
        """Note (or, with None, clear) the failure of a run's last attempt."""
        with self.locked():
            failures = self.failures()
            if message is None:
                if failures.pop(run.name, None) is None:
                    return
            else:
                failures[run.name] = message
            atomic_write_json(self.failures_file, failures)

    def jobs(self) -> dict[str, dict]:
        """jobs.json: {run: {"job": ..., "requeued": n, "started": time}}."""
        fix = "delete it: it only records the job of each run (re-running the command starts them again)"
        if not os.path.lexists(self.jobs_file):
            return {}
        if not self.jobs_file.is_file():  # a FIFO or a directory there is refused, never read as "no jobs"
            raise InspoError(f"{self.jobs_file}: is not a regular file (a directory, a FIFO or a device); {fix}")
        return read_json(self.jobs_file, self.JOBS_SHAPE, fix, self.JOBS_BYTES)

    def record_jobs(self, started: dict[str, str]) -> None:
        """Note the job each run (by name) now runs as."""
        import time

        with self.locked():
            jobs = self.jobs()
            for name, job in started.items():
                jobs.setdefault(name, {}).update(job=job, started=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            atomic_write_json(self.jobs_file, jobs)

    def count_requeue(self, name: str) -> None:
        with self.locked():
            jobs = self.jobs()
            entry = jobs.setdefault(name, {})
            entry["requeued"] = entry.get("requeued", 0) + 1
            atomic_write_json(self.jobs_file, jobs)


def _difference(planned, now, key: str = "") -> str:
    """Where two resolved recipes (as data) first differ: `training.learning_rate is 1e-06 now, 5e-07 planned`."""
    if isinstance(planned, dict) and isinstance(now, dict):
        for name in [*planned, *(k for k in now if k not in planned)]:
            if planned.get(name) != now.get(name):
                return _difference(planned.get(name), now.get(name), f"{key}.{name}" if key else str(name))

    def show(value) -> str:
        text = repr(value)
        return text if len(text) <= 60 else text[:60] + "..."

    return f"{key or 'recipe'} is {show(now)} now, {show(planned)} planned"


def _seeds(seeds) -> str:
    seeds = list(seeds)
    shown = ", ".join(str(s) for s in seeds[:20])
    return shown + (f", ... ({len(seeds)} seeds)" if len(seeds) > 20 else "")

"""An ablation's directory: the one owner of its layout.

    plan.json            the plan (variants, seeds, runs); a re-run must plan the same, and then continues
    recipes/<variant>.yaml   each variant's resolved recipe (what `--print-commands` hands to `inspo train`)
    runs/<variant>-s<seed>/  one run directory per run (`RunDir`)
    failures.json        runs that failed in their last attempt, with the error; cleared when they finish
    jobs.json            per run, the job it was last started as (a SLURM array task, or local:<host>:<pid>) and
                         how often SLURM requeued it; what `--status` and re-submitting read
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
from pathlib import Path

from inspo_cli.ablation.plan import Plan, PlannedRun
from inspo_cli.config import dump_recipe
from inspo_cli.errors import InspoError
from inspo_cli.files import make_dir, not_a_directory
from inspo_cli.jsonio import atomic_write_json, atomic_write_text, read_json
from inspo_cli.runs import RunDir

FINISHED, PARTIAL, ABSENT = "finished", "partial", "absent"


class AblationDir:
    PLAN = "plan.json"
    RECIPES = "recipes"
    PARTIAL_RECIPES = ".recipes.partial"  # recipes being written; renamed to RECIPES when complete
    RUNS = "runs"
    FAILURES = "failures.json"
    TABLE = "ablation"  # .md, .json, .csv
    JOBS = "jobs.json"
    SLURM_LOGS = "slurm"
    LOCK = ".lock"  # held while a shared file (failures.json, jobs.json) is read, changed and written
    JOBS_SHAPE = {str: {"job?": str, "requeued?": int, "started?": str}}

    def __init__(self, path: str | Path, plan: Plan):
        self.path, self.plan = Path(path), plan

    def __str__(self) -> str:
        return str(self.path)

    @classmethod
    def start(cls, path: str | Path, plan: Plan) -> AblationDir:
        """A new ablation directory with `plan`, or an existing one whose plan is the same (to continue it)."""
        path = Path(path)
        if (path / cls.PLAN).is_file():
            existing = cls.open(path)
            if not existing.plan.same_as(plan):
                raise InspoError(f"{path} holds another ablation (its {cls.PLAN} plans other variants or seeds); "
                                 "pass --out NEW_DIR, or the same arguments as before to continue it")
            atomic_write_json(path / cls.PLAN, plan.as_dict())  # the same runs; descriptions as planned now
            return cls(path, plan)
        if path.exists() and any(path.iterdir()):
            if {p.name for p in path.iterdir()} <= {cls.RECIPES, cls.PARTIAL_RECIPES}:  # planning was cut short
                for leftover in (path / cls.RECIPES, path / cls.PARTIAL_RECIPES):
                    shutil.rmtree(leftover, ignore_errors=True)
            else:
                raise InspoError(f"{path} already holds files but no {cls.PLAN}; pass --out NEW_DIR")
        ablation = cls(path, plan)
        ablation.write_plan()
        return ablation

    @classmethod
    def open(cls, path: str | Path) -> AblationDir:
        path = Path(path)
        file = path / cls.PLAN
        if (problem := not_a_directory(path, "ablation directory")) is not None:
            raise InspoError(problem)
        if not file.is_file():
            raise InspoError(f"{path} is not an ablation directory (no {cls.PLAN}); pass the --out of an "
                             "`inspo ablate` run")
        return cls(path, Plan.from_dict(read_json(file, Plan.SHAPE, "copy it again, or plan anew into a new --out "
                                                                   "(the runs' own directories stay usable)")))

    def write_plan(self) -> None:
        """Every variant's resolved recipe, then plan.json (before any run starts). The recipes are written into a
        side folder renamed into place when complete, and plan.json last, so an interrupted planning leaves only
        what `start` recognises and clears."""
        from inspo_cli.ablation.plan import resolve

        partial = self.path / self.PARTIAL_RECIPES
        shutil.rmtree(partial, ignore_errors=True)
        make_dir(partial, "ablation directory")
        for variant in self.plan.variants:
            atomic_write_text(partial / f"{variant.name}.yaml", dump_recipe(resolve(variant)))
        os.replace(partial, self.recipes_dir)
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

    def table_file(self, suffix: str) -> Path:
        return self.path / f"{self.TABLE}.{suffix}"

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
        if not self.jobs_file.is_file():
            return {}
        return read_json(self.jobs_file, self.JOBS_SHAPE,
                         "delete it: it only records the job of each run (re-running the command starts them again)")

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

"""`RunDir`, the one owner of a run directory's layout (the package docstring lists it): every file name is spelled
here, and so are checkpoint discovery and the reading of a finished or unfinished run."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from inspo_cli.config import Recipe, dump_recipe, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.files import not_a_directory
from inspo_cli.instructions import population, replay
from inspo_cli.instructions.providers.call_record import RECORD_NAME
from inspo_cli.jsonio import COUNT, atomic_write_json, atomic_write_jsonl, atomic_write_text, iter_rows, read_json
from inspo_cli.policy.model_files import model_files_problem
from inspo_cli.progress import err_console
from inspo_cli.runs.environment import git_state, package_versions
from inspo_cli.runs.file_shapes import (
    DAMAGED,
    DISTILL_SHAPE,
    INFO_SHAPE,
    METRICS_ROW_SHAPE,
    STAGED,
    SUMMARY_SHAPE,
    check_tools,
)


def _unused_dir(output_dir: Path, name: str) -> Path:
    candidate, n = output_dir / name, 2
    while candidate.exists():
        candidate, n = output_dir / f"{name}-{n}", n + 1
    return candidate


class RunDir:
    """One run's directory: where each file is, which checkpoints are complete, and what the run says about itself."""

    RECIPE = "recipe.yaml"
    INFO = "run.json"
    METRICS = "metrics.jsonl"
    INSTRUCTIONS = "instructions.jsonl"
    EVOLUTIONS = "evolutions.json"
    ROLLOUT_TRAITS = "rollout_traits.jsonl"  # per step and instruction: what the rollouts looked like (audit)
    ROLLOUTS = "rollouts"  # run.save_rollouts: step-<step>.jsonl.gz, whole trajectories (training/rollout_log.py)
    COEVOLUTION = "coevolution.json"
    OPTIMIZER_CALLS = RECORD_NAME  # every optimizer call: prompt, answer, tokens, hash (call_record.py)
    BEST_INSTRUCTION = "best_instruction.txt"
    SUMMARY = "summary.json"
    TENSORBOARD = "tensorboard"
    PLOTS = "plots"
    EVALUATIONS = "evaluations"
    CHECKPOINTS = "checkpoints"
    CHECKPOINT_PREFIX = "checkpoint-"  # HF Trainer's checkpoint-<optimizer update>
    FINAL = "final"
    SAMPLING = "sampling"  # rejection sampling's phase 1 (inspo_cli.training.rejection_sampling)
    DISTILL = "distill"  # `inspo distill RUN`'s run directory, inside RUN by default (inspo_cli.training.distill)
    DISTILL_INFO = "distill.json"  # in a distilled run: what was distilled from where (teacher, student, form)
    CHECKPOINT_COMPLETE = "trainer_state.json"  # HF writes it last

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- making and opening ---------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        recipe: Recipe,
        recipe_path: str | Path | None = None,
        command: Sequence[str] = (),
        output_dir: str | Path | None = None,
    ) -> RunDir:
        """Make a fresh run directory and record the resolved recipe and the environment in it."""
        root = Path(output_dir if output_dir is not None else recipe.run.output_dir)
        stem = Path(recipe_path).stem if recipe_path else "run"
        name = recipe.run.name or f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            root.mkdir(parents=True, exist_ok=True)
            run = cls(_unused_dir(root, name))
            run.path.mkdir()
        except OSError as e:
            raise InspoError(
                f"cannot create the run directory under {root}: {e.strerror}; pass --output-dir DIR"
            ) from None
        atomic_write_text(run.recipe_file, dump_recipe(recipe))
        atomic_write_json(
            run.info_file,
            {
                "name": run.path.name,
                "seed": recipe.run.seed,
                "recipe_source": str(recipe_path) if recipe_path else None,
                "command": list(command),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "versions": package_versions(),
                "git": git_state(),
            },
        )
        return run

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run directory (it has run.json), else a one-line error."""
        run = cls(path)
        run._require_run()
        return run

    def _require_run(self) -> None:
        if (problem := not_a_directory(self.path, "run directory")) is not None:
            raise InspoError(problem)
        if not self.info_file.is_file():
            raise InspoError(f"{self.path} is not a run directory (no {self.INFO}); pass a directory under runs/")

    # -- where things are -----------------------------------------------------------------------------------

    recipe_file = property(lambda self: self.path / self.RECIPE)
    info_file = property(lambda self: self.path / self.INFO)
    metrics_file = property(lambda self: self.path / self.METRICS)
    instructions_file = property(lambda self: self.path / self.INSTRUCTIONS)
    evolutions_file = property(lambda self: self.path / self.EVOLUTIONS)
    rollout_traits_file = property(lambda self: self.path / self.ROLLOUT_TRAITS)
    rollouts_dir = property(lambda self: self.path / self.ROLLOUTS)
    coevolution_file = property(lambda self: self.path / self.COEVOLUTION)  # `inspo evolve`'s state
    optimizer_calls_file = property(lambda self: self.path / self.OPTIMIZER_CALLS)
    best_instruction_file = property(lambda self: self.path / self.BEST_INSTRUCTION)
    summary_file = property(lambda self: self.path / self.SUMMARY)
    tensorboard_dir = property(lambda self: self.path / self.TENSORBOARD)
    plots_dir = property(lambda self: self.path / self.PLOTS)
    evaluations_dir = property(lambda self: self.path / self.EVALUATIONS)
    checkpoints_dir = property(lambda self: self.path / self.CHECKPOINTS)
    final_dir = property(lambda self: self.checkpoints_dir / self.FINAL)
    sampling_dir = property(lambda self: self.path / self.SAMPLING)
    sampling_summary_file = property(lambda self: self.sampling_dir / self.SUMMARY)  # written last: phase 1 is done
    distill_dir = property(lambda self: self.path / self.DISTILL)  # where `inspo distill` puts this run's distillation
    distill_info_file = property(lambda self: self.path / self.DISTILL_INFO)

    def relative(self, path: Path) -> str:
        """`path` as the summary records it: relative to the run directory."""
        return str(Path(path).relative_to(self.path))

    def evaluation_dir(self, step: int) -> Path:
        return self.evaluations_dir / f"step-{step}"

    def evaluated_steps(self) -> list[int]:
        """Training steps with an evaluation directory (`evaluation_dir`), oldest first."""
        steps = [path.name.removeprefix("step-") for path in self.evaluations_dir.glob("step-*") if path.is_dir()]
        return sorted(int(step) for step in steps if step.isascii() and step.isdigit())

    def sampling_batch_file(self, index: int) -> Path:
        """Rejection sampling's phase 1: the trajectories of one batch of questions."""
        return self.sampling_dir / f"batch-{index:05d}.jsonl"

    # -- checkpoints ----------------------------------------------------------------------------------------

    @classmethod
    def checkpoint_name(cls, update: int) -> str:
        return f"{cls.CHECKPOINT_PREFIX}{update}"

    @classmethod
    def checkpoint_update(cls, checkpoint: Path) -> int:
        """The optimizer update a checkpoint-<update> directory was saved at."""
        return int(Path(checkpoint).name.removeprefix(cls.CHECKPOINT_PREFIX))

    @classmethod
    def checkpoint_coevolution(cls, checkpoint: Path) -> Path:
        """INSPO's state saved with a checkpoint."""
        return Path(checkpoint) / cls.COEVOLUTION

    def _checkpoint_dirs(self) -> dict[int, Path]:
        found = {}
        for path in self.checkpoints_dir.glob(f"{self.CHECKPOINT_PREFIX}*"):
            number = path.name.removeprefix(self.CHECKPOINT_PREFIX)
            if number.isascii() and number.isdigit() and path.is_dir():
                found[int(number)] = path
        return dict(sorted(found.items()))

    def checkpoints(self) -> dict[int, Path]:
        """Complete checkpoints by optimizer update, oldest first (a GRPO step is `batch_size x group_size /
        mini_batch_trajectories` updates); one that a kill cut short (`checkpoint_problem`) is left out."""
        return {update: path for update, path in self._checkpoint_dirs().items() if checkpoint_problem(path) is None}

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        return self.resume_point()[0]

    def resume_point(self) -> tuple[Path | None, list[tuple[Path, str]]]:
        """(the newest complete checkpoint or None, the newer ones that cannot be resumed from with the reason),
        newest first, each checkpoint checked once."""
        unusable: list[tuple[Path, str]] = []
        for path in reversed(self._checkpoint_dirs().values()):
            problem = checkpoint_problem(path)
            if problem is None:
                return path, unusable[::-1]
            unusable.append((path, problem))
        return None, unusable[::-1]

    def unusable_checkpoints(self) -> dict[int, tuple[Path, str]]:
        """Checkpoint directories that cannot be used, by optimizer update: (path, why)."""
        return {
            update: (path, problem)
            for update, path in self._checkpoint_dirs().items()
            if (problem := checkpoint_problem(path)) is not None
        }

    def has_final_model(self) -> bool:
        """Whether the run saved its final model; one whose config.json is damaged (even not a regular file) still
        did, and is refused when read (`weights_problem`), rather than passed over for an older checkpoint."""
        return os.path.lexists(self.final_dir / "config.json")

    # -- what the run says ----------------------------------------------------------------------------------

    def info(self) -> dict:
        self._require_run()
        return read_json(self.info_file, INFO_SHAPE, DAMAGED)

    def recipe(self) -> Recipe:
        return load_recipe(self.recipe_file, written_by_run=True)

    def distill_info(self) -> dict | None:
        """distill.json of a run `inspo distill` made (`file_shapes.DISTILL_SHAPE`); None for any other run."""
        if not self.distill_info_file.exists():
            return None
        return read_json(self.distill_info_file, DISTILL_SHAPE, DAMAGED)

    def summary(self) -> dict | None:
        """summary.json of a finished run; None while it has none."""
        if not self.summary_file.exists():  # a FIFO or a directory in its place is refused by read_json, not skipped
            return None
        summary = read_json(self.summary_file, SUMMARY_SHAPE, DAMAGED)
        if summary.get("stages"):  # a chain of stages: the files it points to must be there to be read
            for key in (*STAGED, "model"):
                value = summary.get(key)
                if value is None and key in STAGED:
                    raise InspoError(f"{self.summary_file}: a staged run's summary without {key!r}; {DAMAGED}")
                if isinstance(value, str) and (Path(value).is_absolute() or ".." in Path(value).parts):
                    raise InspoError(f"{self.summary_file}: {key!r} is {value!r}, not a path inside the run; {DAMAGED}")
        return summary

    def finished_summary(self) -> dict:
        """summary.json of a run that must have finished: its absence is one line naming the run, not a TypeError
        further on."""
        summary = self.summary()
        if summary is None:
            raise InspoError(
                f"{self.path}: no {self.summary_file.name}, so the run did not finish; resume it with "
                f"`inspo train --resume {self.path}` (or `inspo evolve --resume`)"
            )
        return summary

    def resumable_recipe(self) -> Recipe:
        """The recipe of a run to resume: it must be a run directory without summary.json (not finished yet). The
        files a resume reads back (run.json, metrics.jsonl, `inspo evolve`'s coevolution.json) are checked here,
        before anything loads or is rewritten."""
        self._require_run()
        if self.summary_file.is_file():
            raise InspoError(f"run {self.path} already finished (it has {self.SUMMARY}); start a new run instead")
        recipe = self.recipe()
        self.info()
        self.metrics()
        if self.coevolution_file.is_file():
            self.coevolution_state(self.coevolution_file)
        return recipe

    def metrics(self, file: Path | None = None) -> list[dict]:
        """The rows of metrics.jsonl (or of `file`, a stage's): a last line cut short (by a kill, or a copy of a live
        run) is left out with a warning; any other damage, a step logged twice or out of order included, is an
        `InspoError` naming the line."""
        file = file or self.metrics_file
        if not file.exists():
            return []
        last: list[int] = []

        def step_goes_on(row: dict) -> str | None:  # one row per step, in order: a repeat would count a step twice
            if last and row["step"] <= last[0]:
                return f"step {row['step']} after step {last[0]} (a step repeated or out of order)"
            last[:] = [row["step"]]
            return None

        def checked(row: dict) -> str | None:
            return check_tools(row) or step_goes_on(row)

        return list(iter_rows(file, METRICS_ROW_SHAPE, DAMAGED, on_cut_tail=_warn, check=checked))

    def instructions(self, file: Path | None = None) -> list[dict]:
        """The rows of instructions.jsonl (or of `file`, a stage's): every candidate ever; [] without a population."""
        file = file or self.instructions_file
        return list(iter_rows(file, population.CANDIDATE_SHAPE, DAMAGED)) if file.exists() else []

    @staticmethod
    def coevolution_state(file: Path) -> dict:
        """A coevolution.json (`training.coevolution`): population, replay buffer, evolutions, optimizer budget, and
        how many lines the optimizer's record had then."""
        return read_json(
            file,
            {
                "step?": int,
                "population": population.STATE_SHAPE,
                "replay": replay.STATE_SHAPE,
                "evolutions?": [dict],
                "optimizer?": (dict, None),
                "optimizer_record_lines?": (COUNT, None),
            },
            DAMAGED,
        )

    def logged_seconds(self) -> float:
        """The wall time of the steps logged so far (their `step_seconds`): what a resumed run adds its own time to,
        so that its summary's totals cover the whole run, not only the part after the resume."""
        return sum(float(row.get("step_seconds") or 0.0) for row in self.metrics())

    def append_metrics(self, row: dict) -> None:
        """One step's row, on disk (fsync) before the step is reported done."""
        try:
            with open(self.metrics_file, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:  # a failed write names no file: name it (a full disk must not read as stdout's)
            e.filename = e.filename or str(self.metrics_file)
            raise

    def truncate_metrics(self, last_update: int) -> None:
        """Keep only the rows logged at or before optimizer update `last_update` (the state being resumed)."""
        if self.metrics_file.is_file():
            atomic_write_jsonl(
                self.metrics_file, [row for row in self.metrics() if row.get("update", 0) <= last_update]
            )

    def write_outcome(self, summary: dict, best_instruction: str, evolutions: list[dict] | None) -> None:
        """The finished run's files; summary.json last, since its presence marks the run finished."""
        if evolutions is not None:
            atomic_write_json(self.evolutions_file, evolutions)
        atomic_write_text(self.best_instruction_file, best_instruction + "\n")
        atomic_write_json(self.summary_file, summary)


def _warn(message: str) -> None:
    err_console.print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)


def checkpoint_problem(path: Path) -> str | None:
    """Why a checkpoint directory cannot be resumed from, or None. What a kill while it was being written leaves:
    no trainer_state.json (HF writes it last), or it or INSPO's coevolution.json cut short (not valid JSON), a
    safetensors file shorter than its header says, or a torch file (optimizer, scheduler, RNG states; zip archives)
    without its end. Reads headers and file ends only, not the weights."""
    state_file = path / RunDir.CHECKPOINT_COMPLETE
    if not state_file.is_file():
        return f"no {RunDir.CHECKPOINT_COMPLETE} (cut off while being written)"
    for name in (RunDir.CHECKPOINT_COMPLETE, RunDir.COEVOLUTION):
        if (path / name).is_file():
            try:
                if name == RunDir.COEVOLUTION:
                    RunDir.coevolution_state(path / name)
                else:
                    read_json(path / name, {"global_step?": int, "log_history?": [dict]}, DAMAGED)
            except InspoError as error:
                return f"{name} is cut short or damaged ({str(error).removeprefix(f'{path / name}: ').split(';')[0]})"
    return weights_problem(path)


def weights_problem(path: Path) -> str | None:
    """Why the model files in `path` cannot be loaded (none, cut short, a damaged config.json or safetensors header,
    not regular files), or None; reads config.json and headers only (`model_files.model_files_problem`)."""

    return model_files_problem(path)

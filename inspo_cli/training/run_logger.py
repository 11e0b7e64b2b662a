"""Per-step output of a run: `metrics.jsonl`, TensorBoard, a rich progress line, and the PNG curves.

`StepLog` is the one writer of a step's row, for `inspo train` and `inspo evolve` alike: it appends the row to
metrics.jsonl (fsync'd), writes the same scalars to tensorboard/, rewrites instructions.jsonl when the
population is on, prints a one-line summary above a progress bar, and says once when the reward collapses.
Only the main process writes. `RunLogger` is the transformers `TrainerCallback` that turns TRL's per-step logs
(one per step, since `logging_steps` = optimizer updates per step) into rows for it. On resume, rows past the
resumed state are dropped first (`RunDir.truncate_metrics`), so the file always reads as one uninterrupted run.
"""

from __future__ import annotations

import math
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from rich.progress import Progress, TaskID
from transformers import TrainerCallback

from inspo_cli.collapse import detect_collapse
from inspo_cli.jsonio import atomic_write_jsonl
from inspo_cli.progress import err_console, progress_bar
from inspo_cli.runs import RunDir

_SKIP = {"epoch", "total_flos", "train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}


class StepLog:
    """Writes each step's row everywhere it goes; `open` before the first step, `close` after the last."""

    def __init__(
        self,
        run: RunDir,
        steps: int,
        instructions=None,
        collapse: tuple[int, float] = (10, 0.0),
        description: str = "training",
        on_row: Callable[[dict], None] | None = None,
    ):
        self.run, self.steps, self.description = run, steps, description
        self.on_row = on_row  # also given each row: inspo evolve's W&B logging (training's goes through TRL)
        self.instructions = instructions  # a population (has `records`) gets instructions.jsonl rewritten per step
        self.collapse_window, self.collapse_drop = collapse  # evaluation.collapse_window / collapse_drop
        self._collapse_reported = False
        self._rewards: list[dict] = []  # {"step", "reward"} of every step so far, for collapse detection
        self._writer = None
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def open(self, done: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(str(self.run.tensorboard_dir))
        if err_console.is_terminal:  # elsewhere (a CI log) the step lines are the progress
            self._progress = progress_bar()
            self._progress.start()
            self._task = self._progress.add_task(self.description, total=self.steps, completed=done)
        self._rewards = [{"step": r["step"], "reward": r.get("reward")} for r in self.run.metrics()]

    def write(self, row: dict) -> None:
        self.run.append_metrics(row)
        if hasattr(self.instructions, "records"):
            atomic_write_jsonl(self.run.instructions_file, self.instructions.records())
        if self._writer is not None:
            for key, value in row.items():
                if key not in ("step", "time") and value is not None:
                    self._writer.add_scalar(key, value, row["step"])
            self._writer.flush()
        if self.on_row is not None:
            self.on_row(row)
        self._print(step_line(row, self.steps))
        if self._progress is not None:
            self._progress.update(self._task, completed=row["step"])
        self._rewards.append({"step": row["step"], "reward": row.get("reward")})
        self._report_collapse()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._progress is not None:
            self._progress.stop()

    def _print(self, line: str) -> None:

        (self._progress.console if self._progress is not None else err_console).print(line, markup=False)

    def _report_collapse(self) -> None:
        """Say once, as soon as it happens, that the reward collapsed, and which checkpoint App. B would report."""

        if self._collapse_reported:
            return
        collapse = detect_collapse(self._rewards, self.collapse_window, self.collapse_drop)
        if collapse is not None:
            self._collapse_reported = True
            self._print(
                f"{collapse.describe()}; App. B reports the last checkpoint before it: "
                f"inspo evaluate --run {shlex.quote(str(self.run))} --checkpoint best"
            )


class RunLogger(TrainerCallback):
    """TRL's logs of each training step, as one `StepLog` row (main process only)."""

    def __init__(self, log: StepLog, updates_per_step: int):
        self.log, self.updates_per_step = log, updates_per_step
        self._last_time = time.perf_counter()  # again when training begins

    def on_train_begin(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.log.open(done=state.global_step // self.updates_per_step)
            self._last_time = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return  # the end-of-training summary log has no loss; it is not a step
        now = time.perf_counter()
        row = {
            "step": state.global_step // self.updates_per_step,
            "update": state.global_step,
            "time": round(time.time(), 3),
            "step_seconds": round(now - self._last_time, 3),
        }
        self._last_time = now
        for key, value in logs.items():
            if key not in _SKIP and isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = None if math.isnan(value) else value
        self.log.write(row)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            self.log.close()


def step_line(row: dict, steps: int) -> str:
    def fmt(key: str, spec: str = ".3f") -> str:
        value = row.get(key)
        return "-" if value is None else format(value, spec)

    if "reward" not in row and "loss" in row:  # supervised fine-tuning: no rollouts, no reward
        return (
            f"step {row['step']}/{steps}  loss {fmt('loss', '.4f')}  token accuracy {fmt('mean_token_accuracy')}  "
            f"lr {fmt('learning_rate', '.2e')}  "
            + (f"eval EM {fmt('eval/em')}  " if "eval/em" in row else "")
            + f"{row['step_seconds']:.1f}s"
        )
    return (
        f"step {row['step']}/{steps}  reward {fmt('reward')} ± {fmt('reward_std')}  EM {fmt('em')}  "
        f"searches {fmt('search/searches_per_trajectory', '.2f')}  valid {fmt('search/valid_action_rate', '.2f')}  "
        f"len {fmt('length/response', '.0f')}  kl {fmt('kl', '.4f')}  "
        + (f"pop {fmt('population/size', '.0f')}  " if "population/size" in row else "")
        + (f"eval EM {fmt('eval/em')}  " if "eval/em" in row else "")
        + f"{row['step_seconds']:.1f}s "
        f"(gen {fmt('time/generation', '.1f')} ret {fmt('time/retrieval', '.2f')} "
        f"score {fmt('time/scoring', '.1f')} upd {fmt('time/update', '.1f')})"
    )


def plot_curves(run: RunDir) -> list[Path]:
    """PNG curves of the run so far against the training step: reward and EM, search behaviour, loss (a figure
    whose series are all absent, such as rewards in SFT, is left out)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = run.metrics()
    if not rows:
        return []
    out = run.plots_dir
    out.mkdir(exist_ok=True)
    figures = {
        "reward.png": (("reward", "reward"), ("em", "EM"), ("eval/em", "EM, held-out (greedy, I*)")),
        "search.png": (
            ("search/searches_per_trajectory", "searches / trajectory"),
            ("search/valid_action_rate", "valid-action rate"),
            ("search/answered", "answered"),
        ),
        "loss.png": (("loss", "training loss"), ("mean_token_accuracy", "token accuracy (SFT)")),
    }
    written = []
    for name, series in figures.items():
        if not any(row.get(key) is not None for key, _ in series for row in rows):
            continue  # e.g. no rollouts in SFT: no reward and no search curves
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key, label in series:
            points = [(row["step"], row[key]) for row in rows if row.get(key) is not None]
            if points:  # the held-out EM exists only at evaluation steps: its points are joined across the gaps
                ax.plot(*zip(*points), marker="o", markersize=3, label=label)
        ax.set_xlabel("training step")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        tmp = out / f".{name}.tmp"
        fig.savefig(tmp, format="png", dpi=120)
        plt.close(fig)
        os.replace(tmp, out / name)
        written.append(out / name)
    return written

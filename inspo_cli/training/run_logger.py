"""Per-step training output: `metrics.jsonl`, TensorBoard, a rich progress line, and the PNG curves.

`RunLogger` is a transformers `TrainerCallback`. Every training step (one generation batch; TRL logs once per
step because `logging_steps` = optimizer updates per step) it appends one JSON row to `metrics.jsonl`, writes
the same scalars to `tensorboard/`, and prints a one-line summary above a progress bar. Only the main process
writes. On resume, rows past the checkpoint are dropped first (`truncate_metrics`), so the file always reads
as one uninterrupted run.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from transformers import TrainerCallback

from inspo_cli.errors import InspoError
from inspo_cli.jsonio import atomic_write_jsonl, iter_jsonl

METRICS_FILE = "metrics.jsonl"
INSTRUCTIONS_FILE = "instructions.jsonl"  # every candidate instruction ever, when the population is on
TENSORBOARD_DIR = "tensorboard"
PLOTS_DIR = "plots"
_SKIP = {"epoch", "total_flos", "train_runtime", "train_samples_per_second", "train_steps_per_second", "train_loss"}


def truncate_metrics(run_dir: Path, last_update: int) -> None:
    """Keep only the rows logged at or before optimizer update `last_update` (the checkpoint being resumed)."""
    path = run_dir / METRICS_FILE
    if path.is_file():
        atomic_write_jsonl(path, [row for row in _read_rows(path) if row.get("update", 0) <= last_update])


def _read_rows(path: Path) -> list[dict]:
    rows = []
    try:
        for row in iter_jsonl(path):
            rows.append(row)
    except InspoError:  # a line cut short by a kill: everything before it is intact and kept
        pass
    return rows


def read_metrics(run_dir: Path) -> list[dict]:
    path = run_dir / METRICS_FILE
    return _read_rows(path) if path.is_file() else []


class RunLogger(TrainerCallback):
    def __init__(self, run_dir: Path, steps: int, updates_per_step: int, instructions=None,
                 collapse: tuple[int, float] = (10, 0.0)):
        self.run_dir, self.steps, self.updates_per_step = run_dir, steps, updates_per_step
        self.instructions = instructions  # a population (has `records`) gets instructions.jsonl rewritten per step
        self.collapse_window, self.collapse_drop = collapse  # evaluation.collapse_window / collapse_drop
        self._collapse_reported = False
        self._rewards: list[dict] = []  # {"step", "reward"} of every step so far, for collapse detection
        self._writer = None
        self._progress = None
        self._task = None
        self._last_time = None

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        from torch.utils.tensorboard import SummaryWriter

        from inspo_cli.console import progress_bar

        self._writer = SummaryWriter(str(self.run_dir / TENSORBOARD_DIR))
        self._progress = progress_bar()
        self._progress.start()
        done = state.global_step // self.updates_per_step
        self._task = self._progress.add_task("training", total=self.steps, completed=done)
        self._rewards = [{"step": r["step"], "reward": r.get("reward")} for r in read_metrics(self.run_dir)]
        self._last_time = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return  # the end-of-training summary log has no loss; it is not a step
        step = state.global_step // self.updates_per_step
        now = time.perf_counter()
        row = {"step": step, "update": state.global_step, "time": round(time.time(), 3),
               "step_seconds": round(now - self._last_time, 3)}
        self._last_time = now
        for key, value in logs.items():
            if key not in _SKIP and isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = None if math.isnan(value) else value
        with open(self.run_dir / METRICS_FILE, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if hasattr(self.instructions, "records"):
            atomic_write_jsonl(self.run_dir / INSTRUCTIONS_FILE, self.instructions.records())
        for key, value in row.items():
            if key not in ("step", "time") and value is not None:
                self._writer.add_scalar(key, value, step)
        self._writer.flush()
        if self._progress is not None:
            self._progress.console.print(step_line(row, self.steps))
            self._progress.update(self._task, completed=step)
        self._rewards.append({"step": step, "reward": row.get("reward")})
        self._report_collapse()

    def _report_collapse(self) -> None:
        """Say once, as soon as it happens, that the reward collapsed, and which checkpoint App. B would report."""
        from inspo_cli.training.collapse import detect_collapse

        if self._collapse_reported:
            return
        collapse = detect_collapse(self._rewards, self.collapse_window, self.collapse_drop)
        if collapse is not None:
            self._collapse_reported = True
            message = (f"{collapse.describe()}; App. B reports the last checkpoint before it: "
                       f"inspo evaluate --run {self.run_dir} --checkpoint best")
            (self._progress.console.print if self._progress is not None else print)(message)

    def on_train_end(self, args, state, control, **kwargs):
        if self._writer is not None:
            self._writer.close()
        if self._progress is not None:
            self._progress.stop()


def step_line(row: dict, steps: int) -> str:
    def fmt(key: str, spec: str = ".3f") -> str:
        value = row.get(key)
        return "-" if value is None else format(value, spec)

    return (f"step {row['step']}/{steps}  reward {fmt('reward')} ± {fmt('reward_std')}  EM {fmt('em')}  "
            f"searches {fmt('search/searches_per_trajectory', '.2f')}  valid {fmt('search/valid_action_rate', '.2f')}  "
            f"len {fmt('length/response', '.0f')}  kl {fmt('kl', '.4f')}  "
            + (f"pop {fmt('population/size', '.0f')}  " if "population/size" in row else "")
            + (f"eval EM {fmt('eval/em')}  " if "eval/em" in row else "")
            + f"{row['step_seconds']:.1f}s "
            f"(gen {fmt('time/generation', '.1f')} ret {fmt('time/retrieval', '.2f')} "
            f"score {fmt('time/scoring', '.1f')} upd {fmt('time/update', '.1f')})")


def plot_curves(run_dir: Path) -> list[Path]:
    """PNG curves of the run so far: reward and EM, and search behaviour, against the training step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(run_dir)
    if not rows:
        return []
    out = run_dir / PLOTS_DIR
    out.mkdir(exist_ok=True)
    figures = {"reward.png": (("reward", "reward"), ("em", "EM"), ("eval/em", "EM, held-out (greedy, I*)")),
               "search.png": (("search/searches_per_trajectory", "searches / trajectory"),
                              ("search/valid_action_rate", "valid-action rate"),
                              ("search/answered", "answered"))}
    written = []
    for name, series in figures.items():
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

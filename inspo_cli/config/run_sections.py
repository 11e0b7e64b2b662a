"""The recipe sections around a run: what `inspo evaluate` scores, rejection sampling's first phase, and where a run
writes. Part of the typed recipe (`sections.py`, which re-exports them); same conventions."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inspo_cli.config.validation import (
    ConfigValueError,
    _one_of,
    _positive,
    _registered,
    _require,
    check_choices,
    choice_field,
)
from inspo_cli.registry import IMPORT_PATH_HINT, METHODS, is_import_path

MAX_RUN_NAME = 200  # a directory name (at most 255 bytes) with room for "-2" and atomic writes' temporary names
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # run.name, and an ablation's variant names
EVALUATION_METRICS = ("em", "f1", "subem", "judge")  # evaluation.metrics' names; the first three are always computed


@dataclass
class EvaluationConfig:
    """What `inspo evaluate` (and evaluation during training) runs."""

    benchmarks: list[str] = field(
        default_factory=lambda: ["world"],
        metadata={
            "help": "The benchmarks to score (`inspo data list` names them), e.g. [nq, hotpotqa]; world is the "
            "synthetic world."
        },
    )
    method: str = field(
        default="agent",
        metadata={
            "help": f"Inference methods, comma-separated, or all (every registered one): {METHODS.choices()}; or "
            f"{IMPORT_PATH_HINT}."
        },
    )
    split: str | None = field(
        default=None,
        metadata={
            "help": "The benchmark split; default: the split Search-R1 reports (test, or dev where there is no test)."
        },
    )
    limit: int | None = field(
        default=None, metadata={"help": "Score only the first N questions of each benchmark; null: all of them."}
    )
    metrics: list[str] = field(
        default_factory=lambda: list(EVALUATION_METRICS[:3]),
        metadata={
            "help": "The scores of each prediction: em (the paper's, always kept), f1, subem, and judge (the "
            "recipe's judge section: an LLM's verdict beside EM, with their agreement; not in the paper)."
        },
    )
    batch_size: int = field(default=32, metadata={"help": "Questions rolled out together in one batch."})
    temperature: float = field(
        default=0.0,
        metadata={
            "help": "Sampling temperature; 0 = greedy decoding, as Search-R1's validation (do_sample false); App. B's "
            'temperature 1.0 "for LLM inference" is the rollouts\' (rollout.temperature).'
        },
    )
    collapse_window: int = field(
        default=10,
        metadata={
            "help": 'Steps averaged to detect a reward collapse (App. B reports "the final checkpoint before any '
            'reward collapse"): the mean training reward over the last collapse_window steps falls below (1 - '
            "collapse_drop) x its best earlier value."
        },
    )
    collapse_drop: float = field(
        default=0.5,
        metadata={
            "help": "The fall that counts as a reward collapse, as a fraction of the best mean reward (see "
            "collapse_window); 0 disables collapse detection."
        },
    )

    def __post_init__(self) -> None:
        _require(
            bool(self.benchmarks), "benchmarks", "must name at least one benchmark, e.g. [world] or [nq, hotpotqa]"
        )
        names = [m.strip() for m in self.method.split(",")]
        if self.method.strip() != "all":
            _require(
                all(names),
                "method",
                f"must be one of {', '.join(METHODS)}, a comma-separated list of them, or all (got {self.method!r})",
            )
            for name in names:
                if name not in METHODS and not is_import_path(name):
                    raise ConfigValueError(
                        "method",
                        f"must be one of {', '.join(METHODS)}, a comma-separated list of "
                        f"them, or all (got {self.method!r}); or name your own as "
                        f"{IMPORT_PATH_HINT}",
                    )
                _registered(name, METHODS, "method")
        _require(
            isinstance(self.metrics, list) and all(isinstance(m, str) for m in self.metrics),
            "metrics",
            f"must be a list of metric names, e.g. [em, f1, subem, judge] (got {self.metrics!r})",
        )
        for name in self.metrics:
            _one_of(name, EVALUATION_METRICS, "metrics")
        _require(
            "em" in self.metrics,
            "metrics",
            f"must keep em, the paper's metric every table and comparison is made on (got {self.metrics}); "
            "add the others beside it, e.g. [em, judge]",
        )
        _require(len(set(self.metrics)) == len(self.metrics), "metrics", f"names a metric twice (got {self.metrics})")
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature}); 0 is greedy")
        _positive(self.limit, "limit", "500")
        _positive(self.batch_size, "batch_size", "32")
        _positive(self.collapse_window, "collapse_window", "10")
        _require(
            0 <= self.collapse_drop < 1,
            "collapse_drop",
            f"must be in [0, 1) (got {self.collapse_drop}); 0 disables collapse detection, 0.5 flags a halving",
        )
        if self.split is not None:
            _require(bool(self.split.strip()), "split", "must name a split (train, dev, test) or be left out")


@dataclass
class SamplingConfig:
    """Phase 1 of `training.algorithm: rejection-sampling` (Search-R1's rejection-sampling baseline, the paper's
    tool-integrated "SFT" row): `samples` trajectories per training question from `model`, with search, kept when
    their reward is 1. Search-R1 samples five per question with the instruct model."""

    model: str = field(
        default="",
        metadata={"help": "The sampler: a hub id, local directory or packaged model; empty: model.name_or_path."},
    )
    backend: str = choice_field(
        ("transformers", "vllm"),
        "transformers",
        "{choices} (the sampler only; SFT itself trains with transformers).",
    )
    samples: int = field(
        default=5,
        metadata={"help": 'Trajectories per question (Search-R1: "five candidate responses per training prompt").'},
    )
    batch_size: int = field(
        default=64,
        metadata={
            "help": "Questions rolled out and saved together: a killed phase 1 resumes at the first unsaved batch."
        },
    )
    generation_batch_size: int = field(
        default=32, metadata={"help": "Sequences per transformers generate() call (vLLM schedules its own)."}
    )

    def __post_init__(self) -> None:
        check_choices(self)
        for name, example in (("samples", "5"), ("batch_size", "64"), ("generation_batch_size", "32")):
            _positive(getattr(self, name), name, example)
        _require(  # each question's samples are listed at once, per batch of questions
            self.samples <= MAX_SAMPLES,
            "samples",
            f"must be at most {MAX_SAMPLES} trajectories per question (got {self.samples}); Search-R1 samples 5",
        )


MAX_SAMPLES = 1024  # sampling.samples: trajectories per question
REPORT_TO = ("wandb",)  # TRL's `report_to` names; the metrics file and TensorBoard are always written


@dataclass
class RunConfig:
    """Where a run writes and how it is seeded."""

    name: str | None = field(
        default=None,
        metadata={
            "help": "The run directory's name under output_dir; default: the recipe's file name plus a timestamp."
        },
    )
    output_dir: str = field(default="runs", metadata={"help": "Where run directories are created."})
    seed: int = field(
        default=42,
        metadata={
            "help": "The run's seed: training (TRL), rollouts, sampling and the instruction population derive theirs "
            "from it."
        },
    )
    report_to: list[str] = field(
        default_factory=list,
        metadata={"help": "Trackers beside the metrics file and TensorBoard, which are always written: wandb."},
    )
    save_rollouts: str = field(
        default="2",
        metadata={
            "help": "Training rollouts kept for reading (`inspo view`): the first N groups of every step (a group: "
            "one question's rollouts), all, or 0 for none; written per step to rollouts/step-<step>.jsonl.gz with "
            "token ids, loss mask, turn texts, searches, reward parts and the instruction. all keeps every trajectory "
            "(2,560 a step on a paper recipe); `inspo train` says what that comes to when it is over a GB."
        },
    )

    @property
    def rollout_groups(self) -> int | None:
        """The groups of a step `save_rollouts` keeps: None for all of them."""
        return None if self.save_rollouts == "all" else int(self.save_rollouts)

    def __post_init__(self) -> None:
        self.save_rollouts = self.save_rollouts.strip().lower()
        _require(
            self.save_rollouts == "all" or re.fullmatch("[0-9]{1,9}", self.save_rollouts) is not None,
            "save_rollouts",
            f"must be a number of groups per step (0 for none), or all (got {self.save_rollouts[:40]!r})",
        )
        self.save_rollouts = self.save_rollouts if self.save_rollouts == "all" else str(int(self.save_rollouts))
        for tracker in self.report_to:
            _require(
                tracker in REPORT_TO,
                "report_to",
                f"must list trackers from {', '.join(REPORT_TO)} (got "
                f"{tracker!r}); the metrics file and TensorBoard are always written",
            )
        if self.name is not None:
            _require(
                bool(RUN_NAME.match(self.name)) and len(self.name) <= MAX_RUN_NAME,
                "name",
                f"must be a plain directory name of at most {MAX_RUN_NAME} letters, digits, '.', '_' or "
                f"'-' (got {self.name[:80]!r}{'...' if len(self.name) > 80 else ''}, "
                f"{len(self.name):,} characters)",
            )
        _require(bool(self.output_dir.strip()), "output_dir", "must not be empty; the default is runs")
        _require(
            0 <= self.seed < 2**32, "seed", f"must be in [0, 2**32 - 1] (numpy's and torch's range; got {self.seed})"
        )

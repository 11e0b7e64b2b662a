"""The cells of an instruction x weights decomposition (`decompose`): which policy with which instruction, where its
evaluation is cached, and the key that tells it apart.

A cell's key hashes the model, the instruction and the evaluation settings, so an evaluation is reused exactly when
all three are the same; its directory is `<run>/decomposition/<cell>-<key>/`, in the run whose policy it is.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from inspo_cli.ablation.compare import RunScores
from inspo_cli.evaluation.checkpoints import run_policy
from inspo_cli.runs import RunDir

CELLS_DIR = "decomposition"  # in each run directory
CELL_FILE = "cell.json"
WEIGHTS = ("initial", "trained", "static")
INSTRUCTIONS = ("seed", "evolved")
CELL_TEXT = {
    ("initial", "seed"): "initial · S",
    ("initial", "evolved"): "initial · I*",
    ("trained", "seed"): "trained · S",
    ("trained", "evolved"): "trained · I*",
    ("static", "seed"): "static · S",
    ("static", "evolved"): "static · I*",
}
# `inspo distill`'s student (the trained policy's weights taught to answer without I*) with the instruction it was
# trained under: S unless the distillation chose another; a cell only for seeds whose run has a distilled run
DISTILLED = ("distilled", "seed")
DISTILLED_TEXT = "distilled · S"


@dataclass
class CellSpec:
    """One evaluation a decomposition needs: which policy with which instruction, for one seed."""

    weights: str
    instruction: str
    run: RunDir  # where it is evaluated and cached (the INSPO run; the static run for the static cells)
    model: str  # the recipe's model (initial), or the policy of `run` as "<run name>@<final or step>"
    # ("<source run name>/distill@final" for a distilled run)
    text: str  # the instruction
    key: str  # hash of model, instruction and evaluation settings
    scores: RunScores | None = None  # once evaluated and read
    settings: RunDir | None = None  # whose recipe sets the evaluation, when not `run`'s (a distilled run: its source)

    @property
    def name(self) -> str:
        return f"{self.weights}-{self.instruction}"

    @property
    def directory(self) -> Path:
        return self.run.path / CELLS_DIR / f"{self.name}-{self.key[:12]}"

    @property
    def cached(self) -> bool:
        return (self.directory / CELL_FILE).is_file()

    def loadable(self) -> str:
        """What transformers / vLLM load: the recipe's model, or the run's policy at the step (an adapter merged
        once, only now that it is evaluated)."""
        if self.weights == "initial":
            return self.model
        which = self.model.rsplit("@", 1)[1]
        run = self.run
        return run_policy(run, run.recipe(), None if which == "final" else which).path


@dataclass
class SeedCells:
    seed: int
    run: str  # the INSPO run's name
    step: int
    static_run: str | None
    cells: dict[tuple[str, str], CellSpec] = field(default_factory=dict)
    # the distilled cell's run and student instruction ({"run", "student_instruction", "student_is_seed"}), or why a
    # distillation this seed's run holds is not measured (`distilled.plan_distilled`)
    distilled: dict | None = None
    distilled_note: str | None = None


def cell_key(model: str, instruction: str, recipe, seed: int) -> str:
    e = recipe.evaluation
    settings = {
        "model": model,
        "instruction": instruction,
        "benchmarks": list(e.benchmarks),
        "split": e.split,
        "limit": e.limit,
        "temperature": e.temperature,
        "rollout": _fields(recipe.rollout),
        "retriever": _fields(recipe.retriever),
        "chat_template": recipe.model.chat_template,
        "dtype": recipe.model.dtype,
        "backend": recipe.model.backend,
        "seed": seed if e.temperature > 0 else None,
    }  # a greedy evaluation does not depend on the seed
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()


def _fields(section) -> dict:
    return {k: v for k, v in asdict(section).items() if k != "temperature"}  # rollout's temperature is training's


def model_identity(path: str) -> str:
    """A model path as the key knows it: a local directory by its absolute path, a hub id or packaged name as is."""
    local = Path(path).expanduser()
    return str(local.resolve()) if local.exists() else path

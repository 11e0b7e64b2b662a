"""Where the gain lives: is INSPO's EM in the evolved instruction or in the trained weights?

    cells = plan_cells(inspo_runs, static_runs)            # what each seed needs evaluated (cached ones marked)
    evaluate_cells(cells, device="cpu", on_cell=print)      # evaluates the missing ones into the run directories
    table = effects.effects(cells, "inspo", "search-r1")    # cells and effects with intervals and p (effects.py)

For each seed of an INSPO variant at the step the table reports (`results.choose_step`), the 2 x 2
{initial policy, trained policy} x {seed instruction S, evolved instruction I*}, and the static baseline's policy of
the same seed with S and with I*:

    initial · S    the recipe's model (before any RL) with the seed instruction (the recipe's first, the static
                   baseline's)
    initial · I*   the same model with the instruction the run reports (its checkpoint's best, argmax w)
    trained · S    the run's policy at that step with the seed instruction
    trained · I*   the run's policy at that step with I*: what Table 1 reports, evaluated again here
    static · S     the static run's policy at its step with S: Table 1's baseline, evaluated again here
    static · I*    the static run's policy with this seed's I*
    distilled · S  where the run holds `inspo distill`'s student of that policy and I* (`distilled`): its final policy
                   with the instruction it was taught to answer under (S by default), for the share of the
                   instruction effect that survives without I* (`survival`)

Every cell is evaluated by the decomposition itself, none is read from Table 1's evaluation: a difference of two
cells is then one of policy or instruction alone, never also of two evaluations (another backend, batch, limit or
sampling seed). "total vs static" is therefore Table 1's difference evaluated again, and may differ from it by
what the two evaluations differ in.

Effects, each a paired difference over seeds and questions (`compare.compare`: every cell answers the same test
questions, and the cells of one seed share the seed): the instruction effect at fixed weights (trained, and
initial), the weights effect at fixed instruction (S, and I*), their interaction ((trained·I* − trained·S) −
(initial·I* − initial·S)), I* on the static policy, and INSPO against the static baseline (Table 1's difference,
trained·I* − static·S) split into the instruction's and the weights' share (`effects.EFFECTS`: each the mean of its
part over the two orders the two changes can be made in, so the split does not depend on which is made first).
Plans are in seed order, whatever order the runs are given in.

Every evaluation is `inspo evaluate`'s (`evaluation.session.run_evaluation`) with the run's recipe (its benchmarks,
split, limit, temperature and limits; the distilled cell's with its source run's), written into
`<run>/decomposition/<cell>-<key>/` (`cells`; the distilled cell into the distilled run's) with a cell.json saying what
it is; the key is a hash of the model, the instruction and the evaluation settings, so a second report reads them and
costs nothing, and a cell that another run already evaluated (the initial policy with S is the same for every seed of
a greedy evaluation) is copied from it rather than evaluated again.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from inspo_cli.ablation.cells import CELL_FILE, CellSpec, SeedCells, cell_key, model_identity
from inspo_cli.ablation.compare import RunScores
from inspo_cli.ablation.distilled import plan_distilled
from inspo_cli.ablation.results import METHOD, RunResult, read_scores
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.checkpoints import checkpoint_steps
from inspo_cli.evaluation.report import read_results
from inspo_cli.evaluation.runner import evaluation_questions
from inspo_cli.evaluation.session import run_evaluation
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.runs import RunDir
from retriever.index import process_alive


def _instruction_of(result: RunResult) -> str:
    info = read_results(result.file, "evaluate the run again") if result.file else {}
    text = info.get("instruction")
    if not isinstance(text, str) or not text:
        raise InspoError(
            f"{result.file}: names no instruction, so I* is unknown; evaluate the run again with "
            "`inspo ablate` or `inspo evaluate --run`"
        )
    return text


def _policy(run: RunDir, result: RunResult, recipe) -> str:
    """The run's policy at the reported step, as the cache key knows it: the run's name and the checkpoint, so a
    moved directory keeps its cells (nothing is loaded or merged to tell it; `CellSpec.loadable` finds the weights
    when they are evaluated). Such a cell lives in its own run's directory and is never copied to another."""
    if result.step == result.last_step:
        if not run.has_final_model():
            raise InspoError(
                f"run {run} has no final model ({run.relative(run.final_dir)}), so its policy cannot be "
                "evaluated with another instruction; copy it back, or leave the run out of --decompose"
            )
        return f"{run.path.name}@final"
    if result.step not in checkpoint_steps(run, recipe):
        raise InspoError(
            f"run {run} kept no checkpoint at step {result.step}, the step Table 1 reports; copy it "
            "back, or report --checkpoint final"
        )
    return f"{run.path.name}@{result.step}"


def plan_cells(
    inspo: Sequence[tuple[RunDir, RunResult]], static: Sequence[tuple[RunDir, RunResult]] = ()
) -> list[SeedCells]:
    """Per seed of the INSPO variant (runs with a result), in seed order, the six cells, each to be evaluated; the
    static cells only for seeds the static variant ran too (paired by seed), the distilled cell only for seeds whose
    run holds a finished distillation of the policy and I* reported here (`distilled.plan_distilled`)."""
    by_seed = {result.seed: (run, result) for run, result in static}
    plans = []
    for run, result in sorted(inspo, key=lambda pair: pair[1].seed):
        recipe = run.recipe()  # read once per run: the key of each of its cells needs it
        seed_text = initial_instructions(recipe)[0]
        evolved = _instruction_of(result)
        plan = SeedCells(result.seed, run.path.name, result.step, None)

        def cell(weights, instruction, where, where_recipe, model, text):
            identity = model_identity(model) if weights == "initial" else model
            plan.cells[(weights, instruction)] = CellSpec(
                weights, instruction, where, model, text, cell_key(identity, text, where_recipe, result.seed)
            )

        initial, trained = recipe.model.name_or_path, _policy(run, result, recipe)
        cell("initial", "seed", run, recipe, initial, seed_text)
        cell("initial", "evolved", run, recipe, initial, evolved)
        cell("trained", "seed", run, recipe, trained, seed_text)
        cell("trained", "evolved", run, recipe, trained, evolved)
        if result.seed in by_seed:
            static_run, static_result = by_seed[result.seed]
            static_recipe = static_run.recipe()
            _check_same_questions(run, recipe, static_run, static_recipe)
            plan.static_run = static_run.path.name
            static_model = _policy(static_run, static_result, static_recipe)
            cell("static", "seed", static_run, static_recipe, static_model, seed_text)
            cell("static", "evolved", static_run, static_recipe, static_model, evolved)
        plan_distilled(plan, run, result, recipe, seed_text, evolved)
        plans.append(plan)
    return plans


EVALUATED_ON = ("benchmarks", "split", "limit", "temperature", "method")  # what makes two cells' questions and scoring


def _check_same_questions(run: RunDir, recipe, static_run: RunDir, static_recipe) -> None:
    """Each cell is evaluated with its own run's recipe; the effects are differences of cells on the same questions,
    so a static run evaluated otherwise (another benchmark, split, limit, temperature or method) would make the
    cells and the effects disagree (the effects keep only the benchmarks every cell has). One line naming both."""

    def settings(r) -> dict:
        values = {name: getattr(r.evaluation, name) for name in EVALUATED_ON}
        values["benchmarks"] = sorted(values["benchmarks"])
        return values

    mine, theirs = settings(recipe), settings(static_recipe)
    differ = [name for name in EVALUATED_ON if mine[name] != theirs[name]]
    if differ:
        shown = "; ".join(f"evaluation.{n} {mine[n]!r} against {theirs[n]!r}" for n in differ)
        raise InspoError(
            f"--decompose: {run.path.name} and the static run {static_run.path.name} are evaluated on different "
            f"questions or scoring ({shown}); the cells must share them: evaluate the static variant with the INSPO "
            "run's evaluation settings, or leave it out of the report"
        )


def missing(plans: Sequence[SeedCells]) -> list[CellSpec]:
    """The cells with no evaluation yet, one per key (the same evaluation needed twice is done once)."""
    found, seen = [], set()
    for plan in plans:
        for spec in plan.cells.values():
            shared = _shared(spec)
            if not spec.cached and (shared is None or shared not in seen):
                if shared is not None:
                    seen.add(shared)
                found.append(spec)
    return found


def _shared(spec: CellSpec) -> str | None:
    """What tells the same evaluation in another run: the initial policy's key (the recipe's model is the same
    model in every run); None for a run's own policy, evaluated in its own directory only."""
    return spec.key if spec.weights == "initial" else None


def evaluate_cells(
    plans: Sequence[SeedCells],
    device: str | None = None,
    on_cell: Callable[[CellSpec, str], None] = lambda spec, how: None,
    on_batch: Callable[[int], None] = lambda n: None,
) -> int:
    """Evaluate every cell not cached yet (copying one another run holds); the number evaluated. `on_cell(spec,
    how)` is told before each ("evaluating", "copying")."""
    done: dict[str, Path] = {}
    for plan in plans:
        for spec in plan.cells.values():
            if (shared := _shared(spec)) is not None and (spec.directory / CELL_FILE).is_file():
                done.setdefault(shared, spec.directory)
    evaluated = 0
    for plan in plans:
        for spec in plan.cells.values():
            if spec.cached:
                continue
            shared = _shared(spec)
            if shared is not None and shared in done:
                on_cell(spec, "copying")
                _copy(done[shared], spec.directory)
                continue
            on_cell(spec, "evaluating")
            _evaluate(spec, device, on_batch)
            if shared is not None:
                done[shared] = spec.directory
            evaluated += 1
    return evaluated


def _copy(source: Path, target: Path) -> None:
    building = _building(target)
    shutil.copytree(source, building)
    _publish(building, target)


def _building(target: Path) -> Path:
    """Where a cell is built before it is renamed into `target`: `.<cell>.tmp-<host>-<pid>` beside it, after the
    leftovers of cut-off builds are cleared."""
    _clear_leftovers(target)
    building = target.with_name(f".{target.name}.tmp-{socket.gethostname()}-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    return building


def _publish(building: Path, target: Path) -> None:
    """Rename a finished build into place; a cell another report, run at the same time, finished first is kept."""
    if (target / CELL_FILE).is_file():
        shutil.rmtree(building)
        return
    if target.exists():  # a cell.json-less leftover of an earlier cut-off evaluation
        shutil.rmtree(target)
    os.replace(building, target)


def _evaluate(spec: CellSpec, device: str | None, on_batch: Callable[[int], None]) -> None:
    """One cell with `inspo evaluate`'s machinery, built beside its directory and renamed into place with its
    cell.json, so an interrupted evaluation leaves nothing that reads as cached."""
    recipe = (spec.settings or spec.run).recipe()
    recipe.model.name_or_path = spec.loadable()
    e = recipe.evaluation
    questions = evaluation_questions(e.benchmarks, recipe.data, e.split, e.limit)
    building = _building(spec.directory)
    building.mkdir(parents=True)
    run_evaluation(
        recipe,
        [METHOD],
        questions,
        spec.text,
        building,
        {"decomposition_cell": spec.name, "key": spec.key},
        device=device,
        seed=recipe.run.seed,
        on_batch=on_batch,
    )
    atomic_write_json(
        building / CELL_FILE,
        {
            "cell": spec.name,
            "weights": spec.weights,
            "instruction": spec.instruction,
            "model": spec.model,
            "instruction_text": spec.text,
            "key": spec.key,
        },
    )
    _publish(building, spec.directory)


def _clear_leftovers(directory: Path) -> None:
    """Remove what builds of this cell cut off by Ctrl-C or a kill left beside it (`.<cell>.tmp-<host>-<pid>` of a
    process of this host that is gone); one still running, here or on another host, is left alone."""
    host = socket.gethostname()
    for leftover in directory.parent.glob(f".{directory.name}.tmp-*"):
        where, _, pid = leftover.name.rpartition("-")
        if where.endswith(f".tmp-{host}") and pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)


def read_cells(plans: Sequence[SeedCells]) -> None:
    """Fill each cached cell's scores (per question where its predictions were kept)."""
    for plan in plans:
        for spec in plan.cells.values():
            if spec.cached:
                fix = f"delete {spec.directory} and report again with --decompose to evaluate it again"
                em, _, questions = read_scores(spec.directory / "results.json", fix)
                spec.scores = RunScores(plan.seed, em, questions)


@dataclass
class Variant:
    """A variant as the decomposition sees it: its runs with their reported results."""

    name: str
    static: bool  # trains with one fixed instruction (no population)
    runs: list[tuple[RunDir, RunResult]]


def choose(
    variants: Sequence[Variant], which: Sequence[str] | None = None, static: str | None = None
) -> list[tuple[Variant, Variant | None]]:
    """(variant to decompose, the static variant it is set beside) pairs: `which` names variants with an instruction
    population (None: every one), `static` the static baseline (None: the first static variant)."""
    names = {v.name: v for v in variants}
    evolving = [v for v in variants if not v.static]
    fixed = [v for v in variants if v.static]
    if which is None:
        chosen = evolving
    else:
        chosen = []
        for name in which:
            if name not in names:
                raise InspoError(
                    f"--decompose {name!r}: no such variant; choose from "
                    f"{', '.join(v.name for v in evolving) or '(none with a population)'}"
                )
            if names[name].static:
                raise InspoError(
                    f"--decompose {name!r}: it trains with one fixed instruction, so it has no evolved "
                    f"instruction to take apart; choose from {', '.join(v.name for v in evolving)}"
                )
            chosen.append(names[name])
    if static is not None and static in names and not names[static].static:
        static = None  # a reference with a population is no static baseline: fall back to the first static one
    baseline = names[static] if static is not None and static in names else (fixed[0] if fixed else None)
    return [(v, baseline) for v in chosen]


def build(pairs: Sequence[tuple[Variant, Variant | None]]) -> list[tuple[str, str | None, list[SeedCells]]]:
    """The cells each chosen variant needs: (variant, static variant, per-seed cells)."""
    return [(v.name, s.name if s else None, plan_cells(v.runs, s.runs if s else ())) for v, s in pairs]


def has_cells(plans: Sequence[SeedCells]) -> bool:
    """Whether any cell was evaluated (a decomposition to show)."""
    return any(s.cached for p in plans for s in p.cells.values())

"""`inspo report --audit`: what each evolution rewarded, and whether the rollouts changed in ways a verifier
rewards without better answers.

For every accepted candidate of an INSPO run: its word-level diff to its parent, its verification against the
parent per question type (reward and EM on D_B), and the flags of `audit_flags` comparing the parent's rollouts in
the `population.evolve_every` steps up to the evolution with the candidate's in as many steps after it (and the
whole policy's, before and after). Each section says what could not be measured and why; runs made before the audit
existed are read from what they have (evolutions in a checkpoint, rollouts in the replay buffers).

    audits = [audit_run(run.run) for run in group.runs]      # a RunAudit per INSPO run
    write_audit(audits, Path("report"))                       # audit.md and audit.json (audit_markdown.py)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli.config import RewardConfig
from inspo_cli.errors import InspoError
from inspo_cli.instructions.replay import ReplayBuffer
from inspo_cli.jsonio import read_json, shape_problem
from inspo_cli.reporting.audit_flags import Flag, Thresholds, Traits, flags
from inspo_cli.runs import DAMAGED, RunDir
from inspo_cli.runs.file_shapes import EVOLUTIONS_SHAPE
from inspo_cli.training.rollout_traits import facts_from_experience, read_rows, trait_rows

NO_TYPES = (
    "verification per question type was not recorded (runs before `inspo report --audit` existed record only the "
    "overall scores, below)"
)


@dataclass
class CandidateAudit:
    """One accepted candidate: where it came from, how it verified, and its rollouts before and after."""

    step: int
    candidate_id: str | None
    parent_id: str
    text: str
    parent_text: str | None  # None: the parent is not in instructions.jsonl
    verification: dict  # verification_score, parent_score, difference, difference_se (None where not recorded)
    by_type: dict | None  # per question type (evolution_report.by_type), None in older runs
    before: dict  # the parent's rollouts before the evolution (`Traits.as_dict`)
    after: dict  # the candidate's after it
    flags: list[Flag]


@dataclass
class EvolutionAudit:
    step: int
    proposed: int
    candidates: list[CandidateAudit]
    before: dict  # the whole policy's rollouts
    after: dict
    flags: list[Flag]


@dataclass
class RunAudit:
    name: str
    path: str
    evolutions: list[EvolutionAudit] = field(default_factory=list)
    window: int = 1  # steps on each side of an evolution
    sources: dict[str, str] = field(default_factory=dict)  # what each section was read from
    notes: list[str] = field(default_factory=list)  # what could not be measured, and why

    def fired(self) -> list[str]:
        """'step 4 i5: longer_answers'-style entries for every flag that fired."""
        found = []
        for e in self.evolutions:
            found += [f"step {e.step} policy: {f.name}" for f in e.flags if f.state == "fired"]
            for c in e.candidates:
                found += [f"step {c.step} {c.candidate_id}: {f.name}" for f in c.flags if f.state == "fired"]
        return found


def is_inspo(run: RunDir) -> bool:
    """A run with an instruction population (its recipe says so); one whose recipe cannot be read is not audited."""
    try:
        return run.recipe().population.enabled
    except InspoError:
        return False


def audit_run(run: RunDir, name: str | None = None, limits: Thresholds | None = None) -> RunAudit:
    """The audit of one INSPO run (a staged run: its evolving stage), with the flags' thresholds `limits`."""
    limits = limits or Thresholds()
    audit = RunAudit(name or run.path.name, str(run.path))
    recipe = run.recipe()
    summary = run.summary()
    if summary is not None and summary.get("stages") and summary.get("instruction_source"):
        run = RunDir(run.path / summary["instruction_source"])
    audit.window = max(1, recipe.population.evolve_every)
    instructions = {row["id"]: row for row in run.instructions()}
    evolutions = _evolutions(run, audit)
    rows = _trait_rows(run, recipe.reward, audit)
    if not instructions:
        audit.notes.append(f"no {RunDir.INSTRUCTIONS}: the parents' texts are unknown, so no diffs")
    for evolution in evolutions:
        audit.evolutions.append(_evolution(evolution, instructions, rows, audit, recipe.reward, limits))
    return audit


def _evolutions(run: RunDir, audit: RunAudit) -> list[dict]:
    """evolutions.json of a finished run, else the evolutions in the newest checkpoint (or `inspo evolve`'s state)."""
    if run.evolutions_file.is_file():
        audit.sources["evolutions"] = RunDir.EVOLUTIONS
        return read_json(run.evolutions_file, EVOLUTIONS_SHAPE, DAMAGED)
    states = _saved_states(run, audit)
    if states:
        state_file, state = states[-1]
        audit.sources["evolutions"] = str(state_file.relative_to(run.path))
        audit.notes.append(f"no {RunDir.EVOLUTIONS} (the run has not finished): evolutions read from {state_file.name}")
        return _checked_evolutions(state.get("evolutions", []), state_file)
    audit.notes.append(f"no evolutions recorded: no {RunDir.EVOLUTIONS} and no checkpoint with {RunDir.COEVOLUTION}")
    return []


def _saved_states(run: RunDir, audit: RunAudit) -> list[tuple[Path, dict]]:
    """(file, state) of every coevolution.json the run saved, oldest first: each checkpoint's, whether or not its
    weights are complete (the audit reads no weights), then `inspo evolve`'s; a damaged one is left out, and said."""
    found = []
    folders = {**run.checkpoints(), **{u: path for u, (path, _) in run.unusable_checkpoints().items()}}
    files = [RunDir.checkpoint_coevolution(folders[u]) for u in sorted(folders)] + [run.coevolution_file]
    for file in files:
        if not file.is_file():
            continue
        try:
            found.append((file, RunDir.coevolution_state(file)))
        except InspoError as error:
            note = f"{file.relative_to(run.path)} left out: {error}"
            if note not in audit.notes:
                audit.notes.append(note)
    return found


def _checked_evolutions(value, file: Path) -> list[dict]:
    """The evolutions of a coevolution.json, checked as evolutions.json's are."""
    if (problem := shape_problem(value, EVOLUTIONS_SHAPE, '"evolutions"')) is not None:
        raise InspoError(f"{file}: {problem}; {DAMAGED}")
    return value


def _trait_rows(run: RunDir, reward: RewardConfig, audit: RunAudit) -> list[dict]:
    """rollout_traits.jsonl's rows, else the same rows computed from the replay buffers the run saved."""
    rows = read_rows(run)
    if rows:
        audit.sources["rollouts"] = RunDir.ROLLOUT_TRAITS
        return rows
    per_step: dict[int, list] = {}  # each step from the saved buffer that holds most of its rollouts
    states = _saved_states(run, audit)
    for _, state in states:
        buffer = ReplayBuffer.from_state_dict(state["replay"])
        steps: dict[int, list] = {}
        for experience in buffer:
            steps.setdefault(experience.step, []).append(experience)
        for step, experiences in steps.items():
            if len(experiences) > len(per_step.get(step, [])):
                per_step[step] = experiences
    if not per_step:
        audit.notes.append(
            f"no rollouts recorded: no {RunDir.ROLLOUT_TRAITS} (runs before `inspo report --audit` existed) and no "
            "saved replay buffer, so no flags"
        )
        return []
    audit.sources["rollouts"] = f"replay buffers of {len(states)} saved states"
    audit.notes.append(
        f"no {RunDir.ROLLOUT_TRAITS} (runs before `inspo report --audit` existed): rollouts read from the replay "
        f"buffers saved with the checkpoints, steps {min(per_step)}-{max(per_step)} only (the buffer holds the "
        "latest population.replay_capacity rollouts, and only while the run evolves); answers and searches read "
        "from the response text (Search-R1's tags)"
    )
    return trait_rows(facts_from_experience(e, reward) for step in sorted(per_step) for e in per_step[step])


def _evolution(
    evolution: dict,
    instructions: dict[str, dict],
    rows: Sequence[dict],
    audit: RunAudit,
    reward: RewardConfig,
    limits: Thresholds,
) -> EvolutionAudit:
    t, w = evolution["step"], audit.window
    before_rows = [r for r in rows if t - w < r["step"] <= t]
    after_rows = [r for r in rows if t < r["step"] <= t + w]
    policy_before, policy_after = Traits.of(before_rows), Traits.of(after_rows)
    candidates = []
    for c in evolution["candidates"]:
        if not c["accepted"]:
            continue
        parent = instructions.get(c["parent"])
        before = Traits.of(r for r in before_rows if r["instruction_id"] == c["parent"])
        after = Traits.of(r for r in after_rows if r["instruction_id"] == c.get("instruction_id"))
        candidates.append(
            CandidateAudit(
                step=t,
                candidate_id=c.get("instruction_id"),
                parent_id=c["parent"],
                text=c["text"],
                parent_text=parent["text"] if parent is not None else None,
                verification={
                    k: c.get(k) for k in ("verification_score", "parent_score", "difference", "difference_se")
                },
                by_type=c.get("by_type"),
                before=before.as_dict(),
                after=after.as_dict(),
                flags=flags(before, after, limits, reward.format_weight),
            )
        )
    return EvolutionAudit(
        step=t,
        proposed=len(evolution["candidates"]),
        candidates=candidates,
        before=policy_before.as_dict(),
        after=policy_after.as_dict(),
        flags=flags(policy_before, policy_after, limits, reward.format_weight),
    )

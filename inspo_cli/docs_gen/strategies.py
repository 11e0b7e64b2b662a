"""docs/reference/strategies.md: a guide to every menu a recipe chooses from, one section per registry of
`inspo_cli.registry` (each registry it finds there, in `REGISTRIES`' order): what that kind of strategy does and when
to pick which, then the table of its records (origin, summary, traits)."""

from __future__ import annotations

import dataclasses

from inspo_cli import registry
from inspo_cli.docs_gen.markdown import cell, generated_note

PAGE = "reference/strategies.md"

# What each kind is for and how to choose, by recipe key; the tables below each come from the records themselves.
GUIDES = {
    "population.proposer": (
        "A proposer writes the prompt that asks the optimizer LM for new instructions at each evolution (§3.3). "
        "`reflection` is INSPO's and the one to train with; `paraphrase` and `history` are the paper's ablations "
        "(Fig. 3), for measuring what the failure feedback adds; `merge` combines two parents, so it needs "
        "`population.n_parent` of at least 2."
    ),
    "population.selection": (
        "A selection rule picks the instruction each question group is rolled out with, from the population's "
        "weights and recent rewards. `softmax` is the paper's eq. 4 and the default; `ucb`, `thompson` and "
        "`epsilon-greedy` explore differently (beyond the paper): try them in an ablation when a population "
        "settles on one instruction too early."
    ),
    "population.parents": (
        "A parent rule picks which instructions the next generation is proposed from. `top` (the paper) takes the "
        "best by weight; `pareto` keeps instructions that are best on some question category, for data that mixes "
        "kinds of question (several benchmarks, or the world's question types)."
    ),
    "evaluation.method": (
        "An inference method answers questions for `inspo evaluate`: `agent` is the trained search agent (the "
        "Search-R1 protocol with an instruction); the others are Table 1's baselines, run without training to "
        "place a trained policy against them."
    ),
    "training.algorithm": (
        "The training algorithm builds the trainer. `grpo` is the paper's (and INSPO's) reinforcement learning; "
        "`sft` and `rejection-sampling` are Table 1's supervised baselines, the first on given trajectories "
        "(`data.trajectories`), the second on the policy's own correct ones."
    ),
    "retriever.kind": (
        "A retriever kind is how an index searches its corpus: `bm25` needs no model and suits the shipped world "
        "and tests; a dense kind (an encoder, the paper's E5) for the paper's Wikipedia runs. An index records its "
        "kind in index.json, so `retriever` opens it without inspo."
    ),
    "agent.tools": (
        "A tool is something the policy calls during a rollout: `search` is the paper's; further tools (such as "
        "`calculator`) go beside it in `agent.tools`. With the Search-R1 protocol the policy sees a new tool only "
        "when the instruction names its element (docs/tools.md)."
    ),
    "training.loss_type": (
        "A loss type is how TRL's GRPO turns per-token advantages into one loss: how tokens and trajectories are "
        "averaged and how the importance ratio is clipped. `grpo` is eq. 2 (the default); `bnpo` is what "
        "Search-R1's veRL computed; the others remove the length bias or change the clipping, for ablations "
        "beyond the paper (`inspo recipe check --trl` shows each one's parameters)."
    ),
    "agent.protocol": (
        "A call protocol is how the policy writes its tool calls and reads their results: `search-r1` (the "
        "paper's element per tool) for base models and the paper's runs; `function-calling` (the chat template's "
        "tool calls) for instruction-tuned models that were trained on it."
    ),
    "rollout.schedule": (
        "A rollout schedule is the order in which trajectories generate their turns: `turn-synchronous` (as "
        "Search-R1) works with every backend; `per-trajectory` lets each trajectory run ahead on vLLM, which "
        "keeps the GPU busier when tool calls take different times. The same rules and seeds either way."
    ),
}


def _name(entry: registry.Registry) -> str:
    """The module attribute a registry is bound to (`PROPOSERS`), for the reader who looks it up."""
    return next(name for name, value in vars(registry).items() if value is entry)


def traits(record: object) -> str:
    """A record's traits that differ from their defaults ("min_parents = 2"), whatever record class it is."""
    shown = []
    for field in dataclasses.fields(record):  # type: ignore[arg-type]
        if field.name in ("target", "summary", "origin"):
            continue
        value = getattr(record, field.name)
        if field.default is dataclasses.MISSING or value != field.default:
            shown.append(f"{field.name} = {value}")
    return ", ".join(shown)


def guide(entry: registry.Registry) -> str:
    """The registry's paragraph; a registry without one is said to lack it, so the page shows the gap."""
    return GUIDES.get(entry.key, f"(No guide yet for `{entry.key}`: add one to `inspo_cli/docs_gen/strategies.py`.)")


def markdown() -> str:
    """The whole page."""
    out = [
        "# Strategies",
        "",
        generated_note(),
        "",
        "Every menu a recipe chooses from, from `inspo_cli/registry.py`: for each kind, what it does and when to "
        "use which, then its names. A recipe may also name one by import path, "
        f"`{registry.IMPORT_PATH_HINT}` (docs/contributing.md), except where a section says otherwise.",
        "",
    ]
    for entry in registry.REGISTRIES:
        out += [f"## `{entry.key}`", "", cell(guide(entry)), ""]
        out.append(
            f"Registered in `inspo_cli.registry.{_name(entry)}`"
            + ("; a recipe may also name its own by import path." if entry.import_paths else "; by name only.")
        )
        out += ["", "| name | origin | what it does | traits |", "|---|---|---|---|"]
        for name, strategy in entry.items():
            out.append(
                f"| `{name}` | {registry.ORIGINS[strategy.origin]} | {cell(strategy.summary)} | "
                f"{cell(traits(strategy))} |"
            )
        out.append("")
    return "\n".join(out)

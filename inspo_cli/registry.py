"""Every strategy and every menu by name, as plain data: one record per name, one registry per recipe key.

    PROPOSERS["merge"].summary             # "two parents' instructions combined, GEPA's merge"
    PROPOSERS["merge"].min_parents         # 2: the config asks population.n_parent >= 2 of it
    PROPOSERS.load("reflection")           # the module's `prompt` function, imported now
    PROPOSERS.load("my_lab.opro:prompt")   # a strategy from outside the package, by import path
    ALGORITHMS.resolve("sft").sft          # True: trained by TRL's SFTTrainer on examples
    LOSS_TYPES["cispo"].needs_cap          # True: the config asks training.clip_epsilon_high >= 1
    PROTOCOLS["function-calling"].chat_template  # True: the config asks model.chat_template auto or on

Adding a strategy is one file plus one line here; a loss type, a protocol or a rollout schedule is a line here plus
the code that runs it (docs/contributing.md says which, and a test follows the strategy and tool walkthroughs).
Everything a user reads about them is generated from these records: the recipe fields' help (and so `inspo recipe
explain` and docs/reference/recipe.md), the commands' help (`inspo ablate --selection`, `inspo evaluate --method`,
`inspo train`), the config's checks and their errors, `inspo recipe check --trl`'s rows, the ablation axes and
docs/reference/strategies.md (`python -m inspo_cli.docs_gen` writes it; a test keeps it current).

A recipe may also name a strategy by import path, `package.module:object`: the object is what a registered module
provides under the registry's attribute (a proposer's `prompt` function, a selection's `build`, ...). The config
imports it when the recipe is loaded and refuses, in one line, a path that does not import, names no callable, or
names one that cannot be called as the registry calls it (`Registry.call`: `os:getcwd` is no proposer), so nothing
outside the package is found wrong after a model has loaded. What it returns is checked after every call
(`Registry.load(name, check)`), with one line naming the path, what came back and what was expected. Its summary
is the first line of its docstring, and its traits are the module's upper-case constants of the same names
(`MIN_PARENTS = 2`, `SFT = True`, ...), defaulting as a record's do. Loss types, protocols, rollout schedules and
retriever kinds take no import path: the package's own code runs each.

This module sits on the lowest floor and imports nothing of the project but `registry_types`, `retriever.kinds` and
`errors` (standard library only), so the config validates recipe names against it without importing the strategies
(or torch, or TRL); the packages that run a strategy load it through its registry, on first use. Retriever kinds are
registered in the standalone `retriever` package (`retriever.kinds.KINDS`, which `inspo index` and `retriever` use
without inspo); `RETRIEVER_KINDS` here reads that table live, so it is listed, documented and checked like the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from inspo_cli.registry_types import (
    DIVISORS,
    IMPORT_PATH_HINT,
    LEVELS,
    ORIGINS,
    TRAITS,
    LossType,
    Registry,
    Strategy,
    described,
    is_import_path,
)
from retriever.kinds import KINDS

__all__ = [
    "ALGORITHMS",
    "DIVISORS",
    "IMPORT_PATH_HINT",
    "LEVELS",
    "LOSS_TYPES",
    "METHODS",
    "ORIGINS",
    "PARENTS",
    "PROPOSERS",
    "PROTOCOLS",
    "REGISTRIES",
    "RETRIEVER_KINDS",
    "SCHEDULES",
    "SELECTIONS",
    "TOOLS",
    "TRAITS",
    "LossType",
    "Registry",
    "Strategy",
    "described",
    "is_import_path",
    "is_sft",
]


def _kinds() -> Mapping[str, Strategy]:

    class LiveKinds(Mapping[str, Strategy]):  # retriever.kinds.KINDS as records, read at each use
        def __getitem__(self, name: str) -> Strategy:
            kind = KINDS[name]
            return Strategy(kind.module, kind.summary, kind.origin)

        def __iter__(self) -> Iterator[str]:
            return iter(KINDS)

        def __len__(self) -> int:
            return len(KINDS)

    return LiveKinds()


PROPOSERS = Registry(
    "population.proposer",
    "proposer",
    "prompt",
    parameters=("parent", "population", "buffer", "config", "rng"),
    entries={
        "reflection": Strategy(
            "inspo_cli.instructions.proposers.reflection", "INSPO's: reflect on the parent's failed rollouts, App. E"
        ),
        "paraphrase": Strategy(
            "inspo_cli.instructions.proposers.paraphrase", "rewrite the parent without feedback, Fig. 3", "ablation"
        ),
        "history": Strategy(
            "inspo_cli.instructions.proposers.history", "OPRO's scored history of instructions, Fig. 3", "ablation"
        ),
        "merge": Strategy(
            "inspo_cli.instructions.proposers.merge",
            "two parents' instructions combined, GEPA's merge",
            "beyond",
            min_parents=2,
        ),
    },
)

SELECTIONS = Registry(
    "population.selection",
    "selection",
    "build",
    parameters=("arms", "config", "batch"),
    entries={
        "softmax": Strategy("inspo_cli.instructions.selection.softmax", "softmax(w / tau_s) over the weights, eq. 4"),
        "ucb": Strategy(
            "inspo_cli.instructions.selection.ucb",
            "batched UCB1 on the window's rewards, with ucb_exploration",
            "beyond",
        ),
        "thompson": Strategy(
            "inspo_cli.instructions.selection.thompson",
            "Beta posteriors of the window's rewards, one draw per group",
            "beyond",
        ),
        "epsilon-greedy": Strategy(
            "inspo_cli.instructions.selection.epsilon_greedy",
            "the best weight, or a uniform draw with chance epsilon",
            "beyond",
        ),
    },
)

PARENTS = Registry(
    "population.parents",
    "parent rule",
    "choose",
    parameters=("ranked", "config"),
    entries={
        "top": Strategy("inspo_cli.instructions.parents.top", "the top n_parent by weight"),
        "pareto": Strategy(
            "inspo_cli.instructions.parents.pareto",
            "GEPA's Pareto front over question categories, topped up to n_parent by weight",
            "beyond",
        ),
    },
)

METHODS = Registry(
    "evaluation.method",
    "inference method",
    "predict",
    parameters=("ctx", "questions"),
    entries={
        # Table 1's order, which reports keep
        "direct": Strategy("inspo_cli.evaluation.methods.direct", "FlashRAG's direct generation", "baseline"),
        "rag": Strategy("inspo_cli.evaluation.methods.rag", "FlashRAG's standard RAG", "baseline"),
        "ircot": Strategy("inspo_cli.evaluation.methods.ircot", "IRCoT, Trivedi et al. 2023", "baseline"),
        "search-o1": Strategy("inspo_cli.evaluation.methods.search_o1", "Search-o1, Li et al. 2025", "baseline"),
        "agent": Strategy("inspo_cli.evaluation.methods.agent", "the Search-R1 protocol with an instruction"),
    },
)

ALGORITHMS = Registry(
    "training.algorithm",
    "training algorithm",
    None,
    parameters=("ctx",),
    entries={
        "grpo": Strategy("inspo_cli.training.grpo:build_grpo", "GRPO, eq. 2, through TRL's GRPOTrainer"),
        "sft": Strategy(
            "inspo_cli.training.sft:build_sft",
            "SFT on data.trajectories through TRL's SFTTrainer",
            "baseline",
            sft=True,
        ),
        "rejection-sampling": Strategy(
            "inspo_cli.training.rejection_sampling:build_rejection_sampling",
            "Search-R1's: sample with search, SFT on the correct trajectories",
            "baseline",
            sft=True,
            progress_before_training=True,
        ),
        "distill": Strategy(  # made by `inspo distill RUN`, which writes the run's distill.json
            "inspo_cli.training.distill:build_distill",
            "context distillation of a run's I* into its weights: SFT on the teacher's trajectories (inspo distill)",
            "beyond",
            sft=True,
            progress_before_training=True,
        ),
    },
)

RETRIEVER_KINDS = Registry("retriever.kind", "retriever kind", None, _kinds(), import_paths=False)

TOOLS = Registry(
    "agent.tools",
    "tool",
    "build",
    parameters=("context",),
    entries={  # docs/tools.md: adding one
        "search": Strategy("inspo_cli.agent.tools.search", "the retriever's top k passages for a query"),
        "calculator": Strategy(
            "inspo_cli.agent.tools.calculator", "exact, bounded arithmetic on integers and decimals", "beyond"
        ),
    },
)

PROTOCOLS = Registry(
    "agent.protocol",
    "protocol",
    None,
    import_paths=False,
    parameters=("tools", "tokenizer", "chat"),
    entries={  # docs/tools.md
        "search-r1": Strategy(
            "inspo_cli.agent.call_formats:SearchR1Format",
            "an element per tool, <search> query </search>, results in an information block",
        ),
        "function-calling": Strategy(
            "inspo_cli.agent.call_formats:FunctionCallingFormat",
            "the chat template's tool calls, Qwen2.5's tool_call JSON, results in the tool role",
            "beyond",
            chat_template=True,
        ),
    },
)

SCHEDULES = Registry(
    "rollout.schedule",
    "rollout schedule",
    None,
    import_paths=False,
    entries={  # docs/rollout-schedules.md; inspo_cli.agent.rollout runs both
        "turn-synchronous": Strategy(
            "inspo_cli.agent.rollout",
            "every live trajectory generates turn k, then the turn's tool calls are made, then turn k+1",
            "search-r1",
        ),
        "per-trajectory": Strategy(
            "inspo_cli.agent.per_trajectory",
            "each trajectory advances on its own: its next turn joins vLLM's running batch the moment its tool "
            "call is answered",
            "beyond",
            vllm_engine=True,
        ),
    },
)

# every loss_type TRL 1.16's GRPOTrainer computes (tests/training/test_loss_menu.py checks the names against TRL's
# help); TRL runs them, so a record says what each does to the gradient, and the config's checks and warnings read that
LOSS_TYPES = Registry(
    "training.loss_type",
    "loss type",
    None,
    import_paths=False,
    entries={  # docs/rl-switches.md: one section per loss, with its formula
        "grpo": LossType(
            "each trajectory's tokens averaged, then the trajectories (eq. 2)", "DeepSeekMath's GRPO", "paper"
        ),
        "bnpo": LossType(
            "one token mean over each micro-batch",
            "veRL's token-mean",
            "search-r1",
            divides_by="micro-batch tokens",
        ),
        "dr_grpo": LossType(
            "token sums divided by a constant, rollout.max_total_tokens, removing the length bias",
            "Dr. GRPO",
            divides_by="max_total_tokens",
        ),
        "dapo": LossType(
            "one token mean over the whole batch, removing the length bias (TRL's own default)",
            "DAPO",
            divides_by="batch tokens",
        ),
        "cispo": LossType(
            "clips the importance weight itself (at clip_epsilon_high), not the update",
            "MiniMax-M1",
            clips=False,
            needs_cap=True,
            divides_by="batch tokens",
        ),
        "sapo": LossType("gates the importance ratio softly instead of clipping it", "SAPO", clips=False),
        "luspo": LossType(
            "GSPO scaled by length: each trajectory's token sum", "LUSPO", level="sequence", divides_by="nothing"
        ),
        "vespo": LossType(
            "weighs each trajectory by a Gamma function of its ratio",
            "VESPO",
            level="token",
            clips=False,
            divides_by="batch tokens",
        ),
    },
)

REGISTRIES = (
    PROPOSERS,
    SELECTIONS,
    PARENTS,
    METHODS,
    ALGORITHMS,
    RETRIEVER_KINDS,
    TOOLS,
    PROTOCOLS,
    SCHEDULES,
    LOSS_TYPES,
)


def is_sft(algorithm: str) -> bool:
    """Whether `training.algorithm` trains on examples with SFTTrainer (False for a name that does not resolve)."""
    try:
        return ALGORITHMS.resolve(algorithm).sft
    except ValueError:
        return False

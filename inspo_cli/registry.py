"""Every strategy by name, as plain data: the proposers, the selections, the inference methods and the training
algorithms.

    registry.PROPOSERS["reflection"]      # -> "inspo_cli.instructions.proposers.reflection"
    registry.SELECTIONS["ucb"]            # -> "inspo_cli.instructions.selection.ucb"
    registry.ALGORITHMS["sft"].sft        # -> True: trained by TRL's SFTTrainer on examples

Adding a strategy is one file plus one line here (docs/contributing.md shows each). This module sits on the lowest
floor and imports nothing of the project, so the config validates recipe names against it without importing the
strategies (or torch, or TRL), and no arrow has to point up: the packages that run a strategy import its module by
the name given here, on first use. Retriever kinds live in the standalone `retriever` package (`retriever.kinds`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

PROPOSERS: dict[str, str] = {  # population.proposer -> a module with prompt(parent, population, buffer, config, rng)
    "reflection": "inspo_cli.instructions.proposers.reflection",  # INSPO: reflect on failed rollouts
    "paraphrase": "inspo_cli.instructions.proposers.paraphrase",  # ablation: rewrite without feedback
    "history": "inspo_cli.instructions.proposers.history",  # ablation: OPRO's scored history
    "merge": "inspo_cli.instructions.proposers.merge",  # beyond the paper: two parents combined (GEPA's merge)
}

SELECTIONS: dict[str, str] = {  # population.selection -> a module with build(arms, config, batch) -> Selector
    "softmax": "inspo_cli.instructions.selection.softmax",  # INSPO (eq. 4): softmax(w / tau_s)
    "ucb": "inspo_cli.instructions.selection.ucb",  # beyond the paper: batched UCB1 on the window's rewards
    "thompson": "inspo_cli.instructions.selection.thompson",  # beyond the paper: Beta posteriors, one draw per group
    "epsilon-greedy": "inspo_cli.instructions.selection.epsilon_greedy",  # beyond the paper
}

METHODS: dict[str, str] = {  # evaluation.method -> a module with predict(ctx, questions); Table 1's order
    "direct": "inspo_cli.evaluation.methods.direct",  # FlashRAG's direct generation
    "rag": "inspo_cli.evaluation.methods.rag",  # FlashRAG's standard RAG
    "ircot": "inspo_cli.evaluation.methods.ircot",  # IRCoT (Trivedi et al., 2023)
    "search-o1": "inspo_cli.evaluation.methods.search_o1",  # Search-o1 (Li et al., 2025)
    "agent": "inspo_cli.evaluation.methods.agent",  # the Search-R1 protocol with an instruction
}


@dataclass(frozen=True)
class Algorithm:
    """A training algorithm: its builder ("module:function", given a `training.run.TrainingContext`, returns a
    transformers Trainer) and the traits the run and the config act on."""

    builder: str
    sft: bool = False  # trained by TRL's SFTTrainer on examples (not question groups): one update per step
    progress_before_training: bool = False  # a first phase that saves its own progress, resumable before a checkpoint


ALGORITHMS: dict[str, Algorithm] = {  # training.algorithm
    "grpo": Algorithm("inspo_cli.training.grpo:build_grpo"),  # the paper's (eq. 2) through TRL's GRPOTrainer
    "sft": Algorithm("inspo_cli.training.sft:build_sft", sft=True),  # the SFT baseline on data.trajectories
    # Search-R1's rejection sampling: sample with search, keep the correct trajectories, then SFTTrainer on them
    "rejection-sampling": Algorithm("inspo_cli.training.rejection_sampling:build_rejection_sampling", sft=True,
                                    progress_before_training=True),
}


def is_sft(algorithm: str) -> bool:
    """Whether `training.algorithm` trains on examples with SFTTrainer (False for an unknown name)."""
    return algorithm in ALGORITHMS and ALGORITHMS[algorithm].sft


def load(table: str, name: str, what: str, attribute: str) -> Any:
    """`attribute` of the module registered as `name` in this module's `table` ("PROPOSERS", "SELECTIONS",
    "METHODS"), imported now; an unknown name is a ValueError listing the registered ones."""
    entries = globals()[table]
    if name not in entries:
        raise ValueError(f"unknown {what} {name!r}; registered: {', '.join(entries)} (inspo_cli.registry.{table})")
    return getattr(importlib.import_module(entries[name]), attribute)

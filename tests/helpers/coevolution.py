"""INSPO's step without a model: a fake accelerator, a scripted optimizer and a rule-based rollout engine at the
seams of `CoEvolution` and the frozen-policy loop of `inspo evolve`."""

from __future__ import annotations

import json
from types import SimpleNamespace

from inspo_cli.agent.rollout import Trajectory
from inspo_cli.benchmarks import Question
from inspo_cli.config import load_recipe
from inspo_cli.instructions.population import InstructionPopulation
from inspo_cli.runs import RunDir
from inspo_cli.training.coevolution import CoEvolution, PolicyVerifier
from inspo_cli.training.evolve import FrozenPolicyEvolution
from inspo_cli.training.run_logger import StepLog

GOOD, BAD = "Search first, then answer. {question}", "Answer at once. {question}"


class RuleEngine:
    """A policy that answers right exactly when its instruction says "Search" (and counts what it was asked)."""

    retrieval_seconds = 0.0
    tools: list = []  # the engine's tools: none called

    def __init__(self):
        self.calls: list[tuple[list[str], list[str]]] = []

    def run(self, instructions, questions):
        self.calls.append((list(instructions), list(questions)))
        return [
            Trajectory(
                prompt_ids=[1],
                completion_ids=[2, 3],
                completion_mask=[1, 1],
                turns=1,
                answer="Paris" if "Search" in text else "Rome",
                stop_reason="answer",
                response="<answer> ... </answer>",
            )
            for text in instructions
        ]


def fake_accelerator(rank=0, world=1):
    return SimpleNamespace(
        process_index=rank,
        num_processes=world,
        is_main_process=rank == 0,
        device="cpu",
        reduce=lambda tensor, reduction: tensor * world,
    )  # every rank saw the same sums


class Optimizer:
    def __init__(self, answer):
        self.answer, self.prompts = answer, []

    def complete(self, prompt):
        self.prompts.append(prompt)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def evolve_recipe(**population):
    settings = {
        "enabled": "true",
        "instructions": f"[{json.dumps(BAD)}, {json.dumps(GOOD)}]",
        "size": 3,
        "prune_every": 100,
        "evolve_every": 2,
        "evolve_until": 3,
        "candidates_per_call": 1,
        "failures_per_call": 1,
        "verify_size": 2,
        "accept_top_n": 1,
        "max_verify_rounds": 1,
        **population,
    }
    return load_recipe(
        None,
        [f"population.{k}={v}" for k, v in settings.items()]
        + [
            "training.steps=3",
            "training.batch_size=2",
            "training.mini_batch_trajectories=4",
            "training.micro_batch_size=2",
            "training.group_size=2",
        ],
        check_paths=False,
    )


def make_loop(tmp_path, recipe, optimizer, warn=None):
    population = InstructionPopulation(
        recipe.population, seed=recipe.run.seed, initial_texts=recipe.population.instructions
    )
    engine = RuleEngine()
    coevolution = CoEvolution(
        population, recipe.population, optimizer, PolicyVerifier(engine, recipe.reward), recipe.run.seed, warn=warn
    )
    questions = [Question(f"q{i}", f"capital {i}?", ("Paris",), "world") for i in range(4)]
    tmp_path.mkdir(exist_ok=True)
    run = RunDir(tmp_path)
    log = StepLog(run, recipe.training.steps, instructions=population)  # not opened: no TensorBoard, no bar
    return FrozenPolicyEvolution(recipe, questions, engine, coevolution, log, run), run

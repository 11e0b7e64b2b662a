"""`inspo evolve`: INSPO's population / prune / evolve / verify loop with a frozen policy (no gradient updates).

Prompt optimisation before or after RL, the paper's pre-policy and post-policy ablations. Each step samples
`training.batch_size` questions, gives each question group one instruction drawn from the population (or
`population.instructions_per_question` of them, one per block of its rollouts), rolls out
`training.group_size` trajectories per question with the fixed policy, and hands the rewards to the same INSPO
step the trainer uses (`inspo_cli.training.coevolution`), with the same step rows (`StepLog`) and the same
summary (`inspo_cli.training.summary`). The run directory gets the files of `inspo train` except checkpoints:
the policy does not change, and `coevolution.json` in the run directory, rewritten atomically after every step,
is what `--resume` continues from exactly.

    run_evolve(recipe, run)                 # fresh
    run_evolve(recipe, run, resume=True)    # from the last completed step
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from statistics import mean, pstdev

from inspo_cli.agent import RolloutEngine
from inspo_cli.agent.rollout import summarize
from inspo_cli.agent.tools import recipe_tools
from inspo_cli.config import Recipe
from inspo_cli.errors import InspoError
from inspo_cli.instructions.replay import experiences_from
from inspo_cli.instructions.sampling import block_rows, stable_random
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.metrics import exact_match
from inspo_cli.policy import backends  # load_backend looked up per call: tests replace it at its module
from inspo_cli.policy.models import default_device, uses_chat_template
from inspo_cli.retrieval import open_from_config
from inspo_cli.runs import RunDir
from inspo_cli.training.coevolution import PolicyVerifier, instruction_source
from inspo_cli.training.preflight import check_run
from inspo_cli.training.reward import rollout_and_score
from inspo_cli.training.rollout_traits import StepTraits, facts_from_trajectory
from inspo_cli.training.summary import finish_run
from inspo_cli.training.trackers import log_step_row, uses_wandb, wandb_run
from inspo_cli.training.trainer_inputs import train_questions


def run_evolve(recipe: Recipe, run: RunDir, resume: bool = False, device: str | None = None) -> dict:
    from accelerate import PartialState

    from inspo_cli.training.run_logger import StepLog  # imports transformers and torch

    state = PartialState()
    check_run("evolve", recipe, state.num_processes, device)
    start = 0
    if resume:
        if not run.coevolution_file.is_file():
            raise InspoError(f"{run} has no {RunDir.COEVOLUTION} to resume from; start a new run instead")
        start = RunDir.coevolution_state(run.coevolution_file).get("step", 0)
        run.truncate_metrics(start)  # rows are keyed by "update", which is the step here
    population, make_coevolution = instruction_source(
        recipe, run.coevolution_file if resume else None, state, record=run.optimizer_calls_file
    )
    if make_coevolution is None:  # the recipe check refuses such a recipe first
        raise InspoError("inspo evolve evolves the instruction population: set population.enabled: true")
    t = recipe.training
    # request seeds: each step's torch seeding (below) decides vLLM's samples too, so a resumed run repeats its steps
    backend, tokenizer = backends.load_backend(
        recipe.model,
        recipe.rollout,
        batch_size=t.batch_size * t.group_size,
        device=device,
        seed=recipe.run.seed,
        request_seeds=True,
    )
    retriever = open_from_config(recipe.retriever)
    engine = RolloutEngine(
        backend,
        retriever,
        tokenizer,
        recipe.rollout,
        topk=recipe.retriever.topk,
        chat=uses_chat_template(tokenizer, recipe.model.chat_template),
        tools=recipe_tools(recipe, retriever),
        protocol=recipe.agent.protocol,
    )
    coevolution = make_coevolution(PolicyVerifier(engine, recipe.reward))
    log = StepLog(
        run,
        t.steps,
        instructions=population,
        description="evolving",
        collapse=(recipe.evaluation.collapse_window, recipe.evaluation.collapse_drop),
    )
    loop = FrozenPolicyEvolution(recipe, train_questions(recipe), engine, coevolution, log, run)
    before = run.logged_seconds() if resume else 0.0  # the steps kept from before the resume
    started = time.time()
    with wandb_run(recipe, run.path):  # W&B (run.report_to): the run's name, directory and id; finished after
        log.on_row = log_step_row if uses_wandb(recipe) else None
        log.open(done=start)
        try:
            loop.run_steps(start + 1, t.steps)
        finally:
            log.close()
    return finish_run(
        run,
        recipe,
        population,
        coevolution,
        before + time.time() - started,
        f"step {start}" if resume else None,
        frozen_policy=True,
        processes=state.num_processes,
        device=device or default_device(),
    )


class FrozenPolicyEvolution:
    """The steps themselves, on a rollout engine over the frozen policy; each step's state is saved when it ends."""

    def __init__(self, recipe: Recipe, questions: Sequence, engine, coevolution, log, run: RunDir):
        self.recipe, self.questions, self.engine, self.coevolution, self.log, self.run = (
            recipe,
            list(questions),
            engine,
            coevolution,
            log,
            run,
        )
        self.traits = StepTraits(run, recipe.reward)  # rollout_traits.jsonl, for `inspo report --audit`

    def run_steps(self, first: int, last: int) -> None:
        for step in range(first, last + 1):
            row = self.step(step)
            self.log.write(row)
            atomic_write_json(self.run.coevolution_file, {"step": step, **self.coevolution.state_dict()})

    def step(self, step: int) -> dict:
        """One step: sample questions and their instructions, roll out, score, and let INSPO fold it in; the row."""
        import torch

        started = time.perf_counter()
        seed, g, population = self.recipe.run.seed, self.recipe.training.group_size, self.coevolution.population
        torch.manual_seed(seed * 100_003 + step)  # sampling is reproducible step by step
        picked = stable_random(seed, step, "questions").sample(
            range(len(self.questions)), min(self.recipe.training.batch_size, len(self.questions))
        )
        batch = [self.questions[i] for i in picked]
        rows = [q for q in batch for _ in range(g)]  # each question's group of g rollouts in a row, as TRL's
        picks = population.sample([q.key for q in rows], step - 1, group_size=g)  # k instructions: blocks of rows
        grouped = list(zip(picks, rows))
        block = block_rows(picks, g)
        retrieval_before = self.engine.retrieval_seconds
        trajectories, rewards = rollout_and_score(
            self.engine, [p.text for p, _ in grouped], [q for _, q in grouped], self.recipe.reward
        )
        rollout_seconds = time.perf_counter() - started
        retrieval_seconds = self.engine.retrieval_seconds - retrieval_before
        population.observe(  # eq. 6: each block's mean reward to its own instruction (k = 1: a block is a group)
            picks[::block],
            [mean(rewards[i : i + block]) for i in range(0, len(rewards), block)],
            [q.category for q in rows[::block]],
        )
        golden = [q.golden_answers for _, q in grouped]
        self.traits.write(
            step,
            [
                facts_from_trajectory(x, p.instruction_id, step, q.question, q.golden_answers, self.recipe.reward)
                for x, (p, q) in zip(trajectories, grouped)
            ],
        )
        self.coevolution.remember(
            experiences_from(
                [p.instruction_id for p, _ in grouped],
                [q.key for _, q in grouped],
                [q.question for _, q in grouped],
                golden,
                [x.response for x in trajectories],
                rewards,
                step,
            )
        )
        row = {
            "step": step,
            "update": step,
            "time": round(time.time(), 3),
            "reward": mean(rewards),
            "reward_std": pstdev(rewards),
            "em": mean(exact_match(x.answer, gold) for x, gold in zip(trajectories, golden)),
            **summarize(trajectories, [t.name for t in self.engine.tools]),
            **self.coevolution.end_step(step),
            "time/generation": rollout_seconds - retrieval_seconds,
            "time/retrieval": retrieval_seconds,
        }
        row["step_seconds"] = round(time.perf_counter() - started, 3)
        return row

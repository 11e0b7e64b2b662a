"""Evaluation during training (App. B: "evaluated every 100 steps"): the policy with its current best instruction.

Every `training.eval_every` steps, and after the last step, the trainer rolls the current policy out greedily
(`evaluation.temperature`) with the instruction the run would hand to inference at that moment (I* = argmax w;
the static instruction for Search-R1) on the held-out questions of `evaluation.benchmarks` (`evaluation.split`,
first `evaluation.limit` of each). Questions are split over processes and the predictions gathered, so every
process returns the same metrics. The main process writes the usual evaluation files to
`evaluations/step-<N>/` (results.json/.csv/.md, predictions.jsonl); the metrics go into that step's row of
metrics.jsonl and TensorBoard as `eval/<benchmark>/em` and `eval/em` (the average over benchmarks).

    evaluation = PeriodicEvaluation(questions, recipe.evaluation, every=100, last_step=300, run=run)
    metrics = evaluation.after_step(step, engine, generation_context, instructions, accelerator)  # {} when not due
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager

from inspo_cli.config import EvaluationConfig
from inspo_cli.evaluation.methods.base import MethodContext
from inspo_cli.evaluation.report import write_results
from inspo_cli.evaluation.runner import averages, evaluate_methods, scores_from_rows
from inspo_cli.jsonio import atomic_write_jsonl
from inspo_cli.runs import RunDir


class PeriodicEvaluation:
    def __init__(self, questions: dict, config: EvaluationConfig, every: int, last_step: int, run: RunDir):
        self.questions, self.config, self.every, self.last_step, self.run_dir = questions, config, every, last_step, run

    def due(self, step: int) -> bool:
        return self.every > 0 and (step % self.every == 0 or step == self.last_step)

    def after_step(
        self, step: int, engine, generation: Callable[[], AbstractContextManager], instructions, accelerator=None
    ) -> dict[str, float]:
        """When due: `run` with the instruction source's best instruction now, its metrics plus
        `time/evaluation`; {} otherwise. What both trainers call at the end of a step."""
        if not self.due(step):
            return {}
        started, best = time.perf_counter(), instructions.best_pick()
        metrics = self.run(step, engine, generation, best.text, best.instruction_id, accelerator)
        return {**metrics, "time/evaluation": time.perf_counter() - started}

    def run(
        self,
        step: int,
        engine,
        generation: Callable[[], AbstractContextManager],
        instruction: str,
        instruction_id: str,
        accelerator=None,
    ) -> dict[str, float]:

        rank, world = (accelerator.process_index, accelerator.num_processes) if accelerator else (0, 1)
        mine = {name: questions[rank::world] for name, questions in self.questions.items()}
        rows: list[dict] = []
        with generation():  # every process enters: under ZeRO-3 it gathers the weights collectively
            ctx = MethodContext(
                engine.backend.with_sampling(self.config.temperature, 1.0),
                engine.tokenizer,
                engine.retriever,
                engine.config,
                topk=engine.topk,
                chat=engine.chat,
                instruction=instruction,
                tools=engine.tools,
                protocol=engine.protocol,
            )
            evaluate_methods(["agent"], mine, ctx, self.config.batch_size, on_prediction=rows.append)
        if world > 1:
            from accelerate.utils import gather_object

            rows = gather_object(rows)
        scores = scores_from_rows(rows, benchmarks=list(self.questions))
        if accelerator is None or accelerator.is_main_process:
            out = self.run_dir.evaluation_dir(step)
            atomic_write_jsonl(out / "predictions.jsonl", rows)
            write_results(
                out,
                scores,
                {
                    "model": f"training step {step}",
                    "step": step,
                    "methods": ["agent"],
                    "benchmarks": list(self.questions),
                    "split": self.config.split,
                    "limit": self.config.limit,
                    "temperature": self.config.temperature,
                    "instruction": instruction,
                    "instruction_id": instruction_id,
                },
            )
        metrics = {f"eval/{name}/em": score["em"] for name, score in scores["agent"].items()}
        metrics["eval/em"] = averages(scores)["agent"]["em"]
        return metrics

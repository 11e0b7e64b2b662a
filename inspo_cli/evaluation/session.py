"""One evaluation into a directory: load the recipe's model and retriever, run the methods, write the files.

    scores = run_evaluation(recipe, ["agent"], questions, instruction, out_dir, {"checkpoint": "final"})

What `inspo evaluate` runs (with a progress bar around it), and what `inspo ablate` and the pre-/post-RL stages
use to evaluate a finished run's policy. Writes predictions.jsonl and results.json/.csv/.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from inspo_cli.agent.tools import recipe_tools
from inspo_cli.benchmarks import Question
from inspo_cli.evaluation.methods.base import MethodContext
from inspo_cli.evaluation.report import write_results
from inspo_cli.evaluation.runner import evaluate_methods
from inspo_cli.jsonio import atomic_write_jsonl
from inspo_cli.policy import backends  # load_backend looked up per call: tests replace it at its module
from inspo_cli.policy.models import uses_chat_template
from inspo_cli.retrieval import open_from_config
from retriever import open_retriever


def load_policy(config, device: str | None = None, seed: int = 0) -> tuple:
    """(backend, tokenizer) of the recipe's model, decoding at evaluation.temperature."""
    rollout = config.rollout
    rollout.temperature = config.evaluation.temperature
    return backends.load_backend(config.model, rollout, config.evaluation.batch_size, device, seed=seed)


def run_evaluation(
    config,
    methods: Sequence[str],
    questions: dict[str, list[Question]],
    instruction: str,
    out_dir,
    provenance: dict,
    retriever_spec: str | None = None,
    device: str | None = None,
    seed: int = 0,
    on_batch: Callable[[int], None] = lambda n: None,
    loaded: tuple | None = None,
    on_judged: Callable[[int], None] = lambda n: None,
) -> dict[str, dict[str, dict]]:
    """Load the recipe's model and retriever, run `methods` over `questions`, and write predictions.jsonl and
    results.json/.csv/.md into `out_dir` (what `inspo evaluate` and `inspo ablate` do); returns the scores.
    `config` is a Recipe whose evaluation section sets temperature and batch size. `loaded`: (backend, tokenizer)
    from `load_policy` with the same model, rollout and evaluation settings (a retriever sweep loads it once).
    `on_judged(n)`: n more predictions have their verdict, when evaluation.metrics names the judge."""
    import random
    from pathlib import Path

    import torch

    judge = None
    if "judge" in config.evaluation.metrics:  # before the model: a missing key or a damaged cache fails at once
        from inspo_cli.evaluation.judge import open_judge

        judge = open_judge(config.judge)
    random.seed(seed)
    torch.manual_seed(seed)
    rollout = config.rollout
    rollout.temperature = config.evaluation.temperature
    backend, tokenizer = loaded if loaded is not None else load_policy(config, device, seed)
    search = open_retriever(retriever_spec) if retriever_spec else open_from_config(config.retriever)
    ctx = MethodContext(
        backend,
        tokenizer,
        search,
        rollout,
        topk=config.retriever.topk,
        chat=uses_chat_template(tokenizer, config.model.chat_template),
        instruction=instruction,
        tools=recipe_tools(config, search),
        protocol=config.agent.protocol,
    )
    rows: list[dict] = []
    scores = evaluate_methods(
        methods, questions, ctx, config.evaluation.batch_size, on_batch=on_batch, on_prediction=rows.append
    )
    info = {
        "model": config.model.name_or_path,
        "methods": list(methods),
        "benchmarks": list(questions),
        "retriever": retriever_spec or (config.retriever.url or config.retriever.index or config.retriever.corpus),
        "split": config.evaluation.split,
        "limit": config.evaluation.limit,
        "temperature": config.evaluation.temperature,
        "topk": config.retriever.topk,
        "chat_template": ctx.chat,
        "instruction": instruction,
        **provenance,
    }
    out_dir = Path(out_dir)
    extra: list[str] = []
    if judge is not None:
        from inspo_cli.evaluation.judging import judge_evaluation, judge_section, write_judge_files

        atomic_write_jsonl(out_dir / "predictions.jsonl", rows)  # the predictions first: judging may be stopped
        try:
            info["judge"] = judge_evaluation(judge, rows, scores, on_judged)
        finally:
            if judge.cache is not None:
                judge.cache.close()
        write_judge_files(out_dir, rows)
        extra = judge_section(rows, info["judge"])
    atomic_write_jsonl(out_dir / "predictions.jsonl", rows)
    write_results(out_dir, scores, info, extra)
    return scores

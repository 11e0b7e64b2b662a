"""Running methods over benchmarks and scoring them: EM (the paper's metric), F1 and SubEM, searches per question.

    scores, predictions = evaluate_methods(["rag", "agent"], {"world": questions}, ctx, batch_size=32)

Questions go to a method in batches of `batch_size` (each batch is one batched generation per turn and one
retriever call per turn). Progress is reported per batch through `on_batch(n_questions)`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from inspo_cli.benchmarks import (
    Question,
    is_benchmark_file,
    load_benchmark,
    load_questions,
    parse_benchmark_names,
    resolve_benchmark_name,
)
from inspo_cli.config import DataConfig
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.methods import get_method
from inspo_cli.evaluation.methods.base import MethodContext, Prediction
from inspo_cli.metrics import METRICS

SCORE_FIELDS = ("em", "f1", "subem", "searches")
CALLS = "calls/"  # "calls/calculator": a tool's calls per question, in the scores of an agent with several tools


@dataclass
class Score:
    n: int = 0
    sums: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SCORE_FIELDS, 0.0))
    seconds: float = 0.0
    retrieval_seconds: float = 0.0
    tool_calls: dict[str, float] = field(default_factory=dict)  # summed calls per tool of an agent with tools

    def add(self, row: dict) -> None:
        self.n += 1
        for name in SCORE_FIELDS:
            self.sums[name] += row[name]
        for tool, calls in row.get("tool_calls", {}).items():
            self.tool_calls[tool] = self.tool_calls.get(tool, 0) + calls

    def as_dict(self) -> dict:
        means = {name: (self.sums[name] / self.n if self.n else 0.0) for name in SCORE_FIELDS}
        per_tool = {f"{CALLS}{tool}": calls / self.n for tool, calls in sorted(self.tool_calls.items())}
        return {
            **means,
            "n": self.n,
            "seconds": round(self.seconds, 2),
            "retrieval_seconds": round(self.retrieval_seconds, 2),
            **per_tool,
        }


TABLE_WORDS = {"method", "avg", "avg.", "average"}  # column names of the results tables beside the benchmarks


def _taken(label: str) -> bool:
    """Whether a table could show `label` as something else: a built-in benchmark, its display name or an alias
    in any case ("NQ", "Hotpot_QA"), or a column of the tables ("Avg.")."""
    try:
        resolve_benchmark_name(label)
        return True
    except InspoError:
        return label.lower() in TABLE_WORDS


def benchmark_file_labels(paths: Sequence[str]) -> dict[str, str]:
    """The names users' QA files go by in tables: each file's stem, or as many of its folders before it as tell it
    apart from the other files and from the built-in benchmarks (qa/x/a/q.jsonl and qa/y/a/q.jsonl are x/a/q and
    y/a/q, never both a/q; qa/NQ.jsonl is qa/NQ); the path itself when nothing shorter does, and the absolute path
    when even that is another file's name."""
    parts = {path: Path(path).with_suffix("").parts for path in paths}
    labels = {}
    for path, mine in parts.items():
        for length in range(1, len(mine) + 1):
            label = "/".join(mine[-length:])
            others = {"/".join(p[-length:]) for other, p in parts.items() if other != path}
            if label not in others and not _taken(label):
                labels[path] = label
                break
        else:
            labels[path] = str(path)
    chosen = list(labels.values())
    for path, label in labels.items():
        if chosen.count(label) > 1 or _taken(label):
            labels[path] = str(Path(path).resolve())
    return labels


def evaluation_questions(
    names: str | Sequence[str], data: DataConfig, split: str | None, limit: int | None
) -> dict[str, list[Question]]:
    """{benchmark: its first `limit` questions of `split` (default: the split the paper reports)}; a path to a QA
    file (FlashRAG fields) is a benchmark too, named by its stem (`benchmark_file_labels`)."""
    found: dict[str, list[Question]] = {}
    parsed = parse_benchmark_names(names)
    files: dict[Path, str] = {}
    for name in filter(is_benchmark_file, parsed):
        same = files.get(Path(name).resolve())
        if same is not None:
            raise InspoError(f"--benchmarks names the QA file {name} twice (also as {same}); give each file once")
        files[Path(name).resolve()] = name
    labels = benchmark_file_labels(list(files.values()))
    for name in parsed:
        if is_benchmark_file(name):
            label = labels[name]
            found[label] = load_questions(name, source=label, limit=limit)
        else:
            found[name] = load_benchmark(
                name, split, data_dir=data.benchmarks_dir, world_dir=data.world_dir, limit=limit
            )
    return found


def score_prediction(question: Question, prediction: Prediction) -> dict:
    row: dict = {name: METRICS[name](prediction.answer, question.golden_answers) for name in ("em", "f1", "subem")}
    row["searches"] = prediction.searches
    if set(prediction.tool_calls) - {"search"}:  # an agent with more tools than the paper's
        row["tool_calls"] = dict(prediction.tool_calls)
    return row


def prediction_row(method: str, question: Question, prediction: Prediction, scores: dict) -> dict:
    return {
        "method": method,
        "benchmark": question.source,
        "id": question.id,
        "question": question.question,
        "golden_answers": list(question.golden_answers),
        "prediction": prediction.answer,
        **scores,
        "stop_reason": prediction.stop_reason,
        "turns": prediction.turns,
        "invalid_actions": prediction.invalid_actions,
        "queries": prediction.queries,
        "retrieved": prediction.retrieved,
        "response": prediction.response,
        **({"segments": prediction.segments} if prediction.segments is not None else {}),
    }


def evaluate_methods(
    methods: Sequence[str],
    benchmarks: dict[str, list[Question]],
    ctx: MethodContext,
    batch_size: int,
    on_batch: Callable[[int], None] = lambda n: None,
    on_prediction: Callable[[dict], None] = lambda row: None,
) -> dict[str, dict[str, dict]]:
    """{method: {benchmark: score dict}}; every prediction row also goes to `on_prediction` as it is made."""
    scores: dict[str, dict[str, dict]] = {}
    for method in methods:
        run = get_method(method)
        scores[method] = {}
        for benchmark, questions in benchmarks.items():
            score = Score()
            for first in range(0, len(questions), batch_size):
                batch = questions[first : first + batch_size]
                retrieval_before, started = ctx.retrieval_seconds, time.perf_counter()
                predictions = run(ctx, [q.question for q in batch])
                score.seconds += time.perf_counter() - started
                score.retrieval_seconds += ctx.retrieval_seconds - retrieval_before
                for question, prediction in zip(batch, predictions, strict=True):
                    row = score_prediction(question, prediction)
                    score.add(row)
                    on_prediction(prediction_row(method, question, prediction, row))
                on_batch(len(batch))
            scores[method][benchmark] = score.as_dict()
    return scores


def scores_from_rows(rows: Sequence[dict], benchmarks: Sequence[str]) -> dict[str, dict[str, dict]]:
    """{method: {benchmark: score dict}} from prediction rows (e.g. gathered from several processes)."""
    scores: dict[str, dict[str, Score]] = {}
    for row in rows:
        if row["method"] not in scores:
            scores[row["method"]] = {name: Score() for name in benchmarks}
        scores[row["method"]].setdefault(row["benchmark"], Score()).add(row)
    return {method: {name: score.as_dict() for name, score in per.items()} for method, per in scores.items()}


def averages(scores: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """Per method, the unweighted mean over the benchmarks with questions (the paper's "Avg." column)."""
    out = {}
    for method, per_benchmark in scores.items():
        values = [v for v in per_benchmark.values() if v["n"] > 0]  # a column without questions has no score
        out[method] = {name: sum(v[name] for v in values) / len(values) for name in SCORE_FIELDS} if values else {}
    return out

"""Tool use per method, for runs whose agent had tools beyond search (agent.tools, docs/tools.md).

    lines = tool_section(groups, out, written, rule_text)   # tools.md, tools.csv and index.md's section, or []

Evaluation: a run's calls per question by tool are those of the evaluation its Table 1 result is from, the policy's
`calls/<tool>` scores in results.json, which `inspo evaluate` writes only for an agent with tools beyond search. An
evaluation without them is of an agent with search alone, whose searches per question are its search calls; unless
its recipe names other tools (an evaluation from before calls were counted): then its calls are unknown, and the run
is named, not guessed. Training: a run's calls and error observations per trajectory by tool at its last step that
logged `tools/<tool>/calls` (`agent.rollout.summarize`); runs from before those were logged are named.

A cell is the mean over the method's runs (n) of each run's value; "-" where the method's agent did not have the
tool. Runs of one method with different tools are never averaged together: each set of tools gets its own row,
which names its runs. Nothing is written unless some run had a tool other than search, in its evaluation or its
training: a report of search-only runs is byte for byte what it was before.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from inspo_cli.ablation.results import METHOD
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.report import read_results
from inspo_cli.evaluation.runner import CALLS
from inspo_cli.jsonio import atomic_write_text
from inspo_cli.reporting.sources import Group, SeedRun

SEARCH = "search"
TRAINING = "tools/"  # tools/<tool>/calls, tools/<tool>/errors: per trajectory, in metrics.jsonl


def evaluation_calls(run: SeedRun, file: Path) -> tuple[dict[str, dict[str, float]] | None, str | None]:
    """({benchmark: {tool: calls per question}}, None) of the policy in the run's Table 1 evaluation (`file`, its
    results.json), or (None, why they are unknown)."""
    scores = read_results(file, f"evaluate {run.run.path} again")["scores"][METHOD]
    counted = {
        b: {k.removeprefix(CALLS): float(v) for k, v in s.items() if k.startswith(CALLS) and v is not None}
        for b, s in scores.items()
    }  # a null count (results.json allows one) is not known: left out, "-"
    if any(counted.values()):
        return {b: calls for b, calls in counted.items() if calls}, None
    tools = recipe_tools(run)
    if tools is not None and tools != [SEARCH]:
        return None, (
            f"its recipe's agent.tools are {', '.join(tools)}, but {file} counted no calls by tool "
            "(evaluated before inspo evaluate counted them); evaluate it again"
        )
    if any(s.get("searches") is None for s in scores.values()):
        return None, f"{file} has no searches per question"
    return {b: {SEARCH: float(s["searches"])} for b, s in scores.items()}, None


def recipe_tools(run: SeedRun) -> list[str] | None:
    """The run's agent.tools; None where its recipe cannot be read."""
    try:
        return list(run.run.recipe().agent.tools)
    except (InspoError, OSError):
        return None


def training_calls(run: SeedRun) -> tuple[int, dict[str, tuple[float, float | None]]] | None:
    """(step, {tool: (calls, errors) per trajectory}) at the run's last step that logged tool calls; None if none."""
    logged = [row for row in run.metrics if any(_tool_of(key, value) for key, value in row.items())]
    if not logged:
        return None
    step = max(int(row["step"]) for row in logged)
    last = [row for row in logged if int(row["step"]) == step][-1]  # of two rows of one step, the one logged last
    return step, {
        tool: (float(value), _number(last.get(f"{TRAINING}{tool}/errors")))
        for key, value in last.items()
        if (tool := _tool_of(key, value))
    }


def _tool_of(key: str, value=0.0) -> str | None:
    """ "calculator" for "tools/calculator/calls" with a count, else None (a null count, which metrics.jsonl allows,
    was not logged)."""
    if key.startswith(TRAINING) and key.endswith("/calls") and value is not None:
        return key[len(TRAINING) : -len("/calls")] or None
    return None


def _number(value) -> float | None:
    return None if value is None else float(value)


def has_other_tools(groups: Sequence[Group]) -> bool:
    """Whether some run had a tool besides search: calls by tool in its evaluation, or in its training metrics."""
    for run in (r for g in groups for r in g.runs):
        if run.result is not None and run.result.file is not None:
            scores = read_results(run.result.file, f"evaluate {run.run.path} again")["scores"].get(METHOD, {})
            if any(key.startswith(CALLS) and value is not None for s in scores.values() for key, value in s.items()):
                return True
        if any(tool != SEARCH for row in run.metrics for key, value in row.items() if (tool := _tool_of(key, value))):
            return True
    return False


def ordered(tools: Iterable[str]) -> list[str]:
    """Search first (the paper's tool), then the others by name."""
    return sorted(set(tools), key=lambda tool: (tool != SEARCH, tool))


def _by_tools(members: list[tuple[SeedRun, dict]]) -> list[tuple[list[str], list[tuple[SeedRun, dict]]]]:
    """Members (run, {tool: what it measured}) in buckets by their set of tools, in the order the sets first appear."""
    buckets: dict[tuple[str, ...], list[tuple[SeedRun, dict]]] = {}
    for run, values in members:
        buckets.setdefault(tuple(ordered(values)), []).append((run, values))
    return [(list(tools), bucket) for tools, bucket in buckets.items()]


def _label(group: Group, members: list[tuple[SeedRun, dict]], split: bool) -> str:
    return f"{group.label} ({', '.join(run.name for run, _ in members)})" if split else group.label


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def evaluation_rows(groups: Sequence[Group]) -> tuple[list[dict], list[str]]:
    """Rows {method, benchmark, n, runs, calls: {tool: mean}} and the runs whose calls are unknown, with why."""
    rows, unknown = [], []
    for group in groups:
        counted = []
        for run in group.runs:
            if run.result is None or run.result.file is None:
                continue
            calls, why = evaluation_calls(run, run.result.file)
            if calls is None:
                unknown.append(f"{run.name} ({why})")
            else:
                counted.append((run, calls))
        benchmarks = list(dict.fromkeys(b for _, calls in counted for b in calls))
        for benchmark in benchmarks:
            buckets = _by_tools([(run, calls[benchmark]) for run, calls in counted if benchmark in calls])
            for tools, members in buckets:
                rows.append(
                    {
                        "method": _label(group, members, len(buckets) > 1),
                        "benchmark": benchmark,
                        "n": len(members),
                        "runs": [run.name for run, _ in members],
                        "calls": {t: _mean([values[t] for _, values in members]) for t in tools},
                    }
                )
    return rows, unknown


def training_rows(groups: Sequence[Group]) -> tuple[list[dict], list[str]]:
    """Rows {method, n, runs, steps, calls: {tool: mean}, errors: {tool: mean, or None where a run logged none}}
    and the runs that logged no tool calls."""
    rows, unlogged = [], []
    for group in groups:
        logged, steps = [], {}
        for run in group.runs:
            found = training_calls(run)
            if found is None:
                unlogged.append(run.name)
            else:
                steps[run.name] = found[0]
                logged.append((run, found[1]))
        buckets = _by_tools(logged)
        for tools, members in buckets:
            errors = {t: [values[t][1] for _, values in members] for t in tools}
            rows.append(
                {
                    "method": _label(group, members, len(buckets) > 1),
                    "n": len(members),
                    "runs": [run.name for run, _ in members],
                    "steps": [steps[run.name] for run, _ in members],
                    "calls": {t: _mean([values[t][0] for _, values in members]) for t in tools},
                    "errors": {t: None if None in e else _mean(e) for t, e in errors.items()},
                }
            )
    return rows, unlogged


def _number_cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(
        ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(row) + " |" for row in rows]
    )


def evaluation_table(rows: list[dict]) -> str:
    tools = ordered(t for row in rows for t in row["calls"])
    return _table(
        ["method", "benchmark", "n", *tools],
        [
            [row["method"], row["benchmark"], str(row["n"]), *(_number_cell(row["calls"].get(t)) for t in tools)]
            for row in rows
        ],
    )


def training_table(rows: list[dict]) -> str:
    tools = ordered(t for row in rows for t in row["calls"])
    header = ["method", "n", "steps", *(f"{t} {what}" for t in tools for what in ("calls", "errors"))]
    return _table(
        header,
        [
            [
                row["method"],
                str(row["n"]),
                ", ".join(map(str, row["steps"])),
                *(_number_cell(row[what].get(t)) for t in tools for what in ("calls", "errors")),
            ]
            for row in rows
        ],
    )


def csv_text(evaluation: list[dict], training: list[dict]) -> str:
    """One line per method, tool and where (evaluation per benchmark, training): the mean, its n and runs."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["where", "method", "benchmark", "n", "runs", "steps", "tool", "calls", "errors"])
    for row in evaluation:
        for tool in ordered(row["calls"]):
            writer.writerow(
                [
                    "evaluation",
                    row["method"],
                    row["benchmark"],
                    row["n"],
                    " ".join(row["runs"]),
                    "",
                    tool,
                    f"{row['calls'][tool]:.4f}",
                    "",
                ]
            )
    for row in training:
        for tool in ordered(row["calls"]):
            errors = row["errors"][tool]
            writer.writerow(
                [
                    "training",
                    row["method"],
                    "",
                    row["n"],
                    " ".join(row["runs"]),
                    " ".join(map(str, row["steps"])),
                    tool,
                    f"{row['calls'][tool]:.4f}",
                    "" if errors is None else f"{errors:.4f}",
                ]
            )
    return buffer.getvalue()


def markdown(
    evaluation: tuple[list[dict], list[str]], training: tuple[list[dict], list[str]], rule_text: str
) -> list[str]:
    """The section: calls per question in the evaluation, then calls and errors per trajectory in training."""
    (rows, unknown), (trained, unlogged) = evaluation, training
    lines = [
        "## Tool calls per question",
        "",
        f"Calls per question of each tool in the evaluation Table 1 uses ({rule_text}), the mean over the "
        "method's runs (n); \"-\": the method's agent did not have the tool. An evaluation that counted no "
        "calls by tool is of an agent with search alone: its searches per question are its search calls. Runs "
        "of one method with different tools are never averaged together: each set of tools has its own row, "
        "which names its runs.",
        "",
    ]
    lines += [evaluation_table(rows), ""] if rows else ["No evaluation to count calls in.", ""]
    if unknown:
        lines += ["Calls not known: " + "; ".join(unknown), ""]
    if trained:
        lines += [
            "### Tool calls per trajectory in training",
            "",
            "Calls and error observations per trajectory of each tool at each run's last step that logged them "
            "(`tools/<tool>/calls`, `tools/<tool>/errors`), the mean over the method's runs (n); those steps "
            'in seed order; "-" and rows by set of tools as above.',
            "",
            training_table(trained),
            "",
        ]
        if unlogged:
            lines += ["No tool metrics in training (runs from before they were logged): " + ", ".join(unlogged), ""]
    return lines


def tool_section(groups: Sequence[Group], out: Path, written: list[Path], rule_text: str) -> list[str]:
    """Write tools.md and tools.csv into `out` (added to `written`) and return index.md's section; nothing, and [],
    unless some run had a tool besides search."""
    if not has_other_tools(groups):
        return []
    evaluation, training = evaluation_rows(groups), training_rows(groups)
    lines = markdown(evaluation, training, rule_text)
    atomic_write_text(out / "tools.md", "\n".join(line[1:] if line.startswith("##") else line for line in lines))
    atomic_write_text(out / "tools.csv", csv_text(evaluation[0], training[0]))
    written += [out / "tools.md", out / "tools.csv"]
    return lines

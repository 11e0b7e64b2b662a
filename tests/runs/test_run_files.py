"""Issue 29, class 1: the files a run, an ablation or `data world` wrote are read back through one checked reader
per kind. A generated matrix damages each file kind (cut short at several points, a field removed, a wrong type)
and runs `report`, `ablate --collect`, `evaluate --run` and `train/evolve --resume` over it: each says
`error: <file>: <what is wrong>; <fix>` on one line, exits 2 and writes nothing half-way. A metrics.jsonl whose last
line is cut short (a copy of a live run) is the one expected partial file: its last line is left out with a warning.
Issue 37, class 8: values of the right type but out of range (EM 1.5 or NaN, n = 0, empty score maps, repeated
steps, seeds on different benchmarks, a staged summary that points nowhere) are refused the same way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.cli_helpers import invoke
from helpers.damaged_files import CUTS, assert_refused, cut, edit
from helpers.run_dirs import make_run


def damages(file: str, key: str, wrong) -> list:
    """(id, file, damage) for each way `file` is damaged: cut at CUTS, `key` removed, `key` set to `wrong`."""
    out = [(f"{file}-cut{keep}", file, lambda p, keep=keep: cut(p, keep)) for keep in CUTS]
    out.append((f"{file}-no-{key}", file, lambda p: edit(p, lambda d: d.pop(key))))
    out.append((f"{file}-{key}-wrong-type", file, lambda p: edit(p, lambda d: d.__setitem__(key, wrong))))
    return out


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- report and ablate --collect over an ablation directory ----------------------------------------------------------

RUN = "runs/demo-s0"
STEP = f"{RUN}/evaluations/step-3"
TABLE_FILES = [
    *damages("plan.json", "variants", "x"),
    *damages(f"{RUN}/summary.json", "steps", "three"),
    *[d for d in damages(f"{RUN}/metrics.jsonl", "step", "one") if "-cut" not in d[0]],  # a cut: below
    *damages(f"{STEP}/results.json", "scores", []),
    *damages(f"{STEP}/predictions.jsonl", "em", "yes"),
    *[(f"{RUN}/recipe.yaml-cut{keep}", f"{RUN}/recipe.yaml", lambda p, keep=keep: cut(p, keep)) for keep in CUTS],
    (
        f"{STEP}/results.json-em-wrong-type",
        f"{STEP}/results.json",
        lambda p: edit(p, lambda d: d["scores"]["agent"]["world"].__setitem__("em", "x")),
    ),
    (
        f"{RUN}/metrics.jsonl-bad-middle-line",
        f"{RUN}/metrics.jsonl",
        lambda p: p.write_text(p.read_text().replace("\n", '\n{"step": 2, "rew\n', 1)),
    ),
]
# replaced by something that is not a regular file: refused, never taken for "not evaluated" or "no predictions"
TABLE_FILES += [
    (f"{file}-{kind}", file, lambda p, make=make: (p.unlink(), make(p)))
    for file in (f"{STEP}/results.json", f"{STEP}/predictions.jsonl")
    for kind, make in (
        ("fifo", os.mkfifo),
        ("directory", Path.mkdir),
        ("link-to-dev-zero", lambda p: p.symlink_to("/dev/zero")),
    )
]
REPORT_ONLY = damages(f"{RUN}/instructions.jsonl", "text", 5)
COLLECT_ONLY = [
    ("failures.json-wrong-type", "failures.json", lambda p: p.write_text("[1, 2]")),
    ("failures.json-cut", "failures.json", lambda p: cut(p, 0.5)),
]


@pytest.fixture
def ablation(tmp_path, repo_root, monkeypatch) -> Path:
    """A finished 2-variant x 2-seed ablation as `inspo ablate` leaves it, with per-question predictions."""
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.plan import plan_axes

    monkeypatch.chdir(repo_root)
    plan = plan_axes("recipes/demo.yaml", [("n-parent", ["2"])], seeds=[0, 1])
    directory = AblationDir.start(tmp_path / "abl", plan)
    for i, run in enumerate(plan.runs()):
        path = make_run(directory.runs_dir, run.name, run.seed, [0.1, 0.3, 0.5], 0.2 + 0.1 * i)
        (path / "evaluations/step-3/predictions.jsonl").write_text(
            "".join(
                json.dumps({"method": "agent", "benchmark": "world", "id": f"q{q}", "em": float((q + i) % 3 == 0)})
                + "\n"
                for q in range(20)
            )
        )
    directory.failures_file.write_text(json.dumps({"demo-s1": "an earlier attempt ran out of memory"}))
    return directory.path


def test_the_undamaged_ablation_reports_and_collects(ablation, tmp_path):
    result = invoke("report", ablation, "--out", tmp_path / "report")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report" / "index.md").is_file() and "warning" not in result.stderr
    result = invoke("ablate", "--collect", ablation)
    assert result.exit_code == 0, result.output
    assert (ablation / "ablation.md").is_file()


@pytest.mark.parametrize("file, damage", [pytest.param(f, d, id=i) for i, f, d in TABLE_FILES + REPORT_ONLY])
def test_report_refuses_a_damaged_file_in_one_line_and_writes_no_report(ablation, tmp_path, file, damage):
    out = tmp_path / "reports" / "r"
    damage(ablation / file)
    assert_refused(invoke("report", ablation, "--out", out), file)
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").iterdir())


@pytest.mark.parametrize("file, damage", [pytest.param(f, d, id=i) for i, f, d in TABLE_FILES + COLLECT_ONLY])
def test_ablate_collect_refuses_a_damaged_file_in_one_line_and_writes_no_table(ablation, file, damage):
    damage(ablation / file)
    before = snapshot(ablation)
    assert_refused(invoke("ablate", "--collect", ablation), file)
    assert set(snapshot(ablation)) == set(before)  # no ablation.md/.csv/.json, nothing else


@pytest.mark.parametrize("keep", CUTS)
def test_a_metrics_file_cut_in_its_last_line_is_used_without_that_line_and_says_so(ablation, tmp_path, keep):
    metrics = ablation / RUN / "metrics.jsonl"
    cut(metrics, keep)
    result = invoke("report", ablation, "--out", tmp_path / "report")
    assert result.exit_code == 0, result.output
    whole = metrics.read_text().count("\n")
    assert f"metrics.jsonl:{whole + 1}: left out its last line, which is cut short" in " ".join(result.stderr.split())
    result = invoke("ablate", "--collect", ablation)
    assert result.exit_code == 0 and "left out its last line" in result.stderr


def test_a_report_that_fails_leaves_the_earlier_report_whole(ablation, tmp_path):
    out = tmp_path / "report"
    assert invoke("report", ablation, "--out", out).exit_code == 0
    before = snapshot(out)
    cut(ablation / STEP / "results.json", 0.5)
    assert_refused(invoke("report", ablation, "--out", out), "results.json")
    assert snapshot(out) == before and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize(
    "where, why",
    [
        (lambda abl, repo: repo / "data" / "report", "inside the checkout's data/"),
        (lambda abl, repo: abl / RUN / "report", "is inside the input"),
        (lambda abl, repo: abl / "runs", "is inside the input"),
        (lambda abl, repo: abl, "holds the input"),
        (lambda abl, repo: abl.parent, "holds the input"),
        (lambda abl, repo: abl / RUN / "evaluations", "is inside the input"),
    ],
    ids=["data", "run-dir", "ablation-runs", "the-input", "above-the-input", "inside-a-run"],
)
def test_report_refuses_an_out_it_would_damage(ablation, repo_root, where, why):
    out = where(ablation, repo_root)
    before = snapshot(ablation)
    assert_refused(invoke("report", ablation, "--out", out), "--out")
    assert why in invoke("report", ablation, "--out", out).stderr and snapshot(ablation) == before
    assert not (repo_root / "data" / "report").exists()


def test_report_refuses_an_out_holding_other_files_and_replaces_an_earlier_report_whole(ablation, tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    assert "holds files but no report" in invoke("report", ablation, "--out", tmp_path / "notes").stderr
    out = tmp_path / "report"
    gone = make_run(tmp_path / "elsewhere", "gone-s9", 9, [0.1, 0.2], 0.1)
    assert invoke("report", gone, "--out", out).exit_code == 0 and (out / "lineage" / "gone-s9.md").is_file()
    assert invoke("report", ablation, "--out", out).exit_code == 0
    assert not (out / "lineage" / "gone-s9.md").exists() and (out / "index.md").is_file()
    assert invoke("report", ablation).exit_code == 0 and (ablation / "report" / "index.md").is_file()  # the default


# -- evaluate --run and --resume over a run directory ----------------------------------------------------------------

EVALUATED = [
    *[(i, f, d, ()) for i, f, d in damages("summary.json", "best_instruction", 7)],
    *[
        (i, f, d, ("--checkpoint", "4"))
        for i, f, d in damages("checkpoints/checkpoint-4/coevolution.json", "population", [])
    ],
    *[
        (f"final-{name}-cut", f"checkpoints/final/{name}", lambda p: cut(p, 0.5), ())
        for name in ("config.json", "model.safetensors")
    ],
    (
        "metrics-bad-middle-line",
        "metrics.jsonl",
        lambda p: p.write_text(p.read_text().replace("\n", "\nnot json\n", 1)),
        ("--checkpoint", "best"),
    ),
    ("recipe-cut", "recipe.yaml", lambda p: cut(p, 0.6), ()),
]


@pytest.mark.parametrize("file, damage, extra", [pytest.param(f, d, e, id=i) for i, f, d, e in EVALUATED])
def test_evaluate_run_refuses_a_damaged_run_file_in_one_line_and_creates_no_output(
    trained, tmp_path, file, damage, extra
):
    damage(trained / file)
    out = tmp_path / "evals" / "e"
    assert_refused(invoke("evaluate", "--run", trained, "--limit", 1, "--out", out, *extra), file)
    assert not (tmp_path / "evals").exists()


RESUMED = [
    *[("train", *d) for d in damages("run.json", "seed", "zero")],
    (
        "train",
        "metrics-bad-middle-line",
        "metrics.jsonl",
        lambda p: p.write_text(p.read_text().replace("\n", '\n{"step": \n', 1)),
    ),
    ("train", "metrics-row-without-step", "metrics.jsonl", lambda p: edit(p, lambda d: d.pop("step"))),
    ("train", "recipe-cut", "recipe.yaml", lambda p: cut(p, 0.5)),
    *[("evolve", *d) for d in damages("coevolution.json", "replay", "none")],
]


@pytest.mark.parametrize("command, file, damage", [pytest.param(c, f, d, id=f"{c}-{i}") for c, i, f, d in RESUMED])
def test_resume_refuses_a_damaged_run_file_before_it_rewrites_anything(trained, command, file, damage):
    (trained / "summary.json").unlink()  # unfinished
    damage(trained / file)
    before = snapshot(trained)
    assert_refused(invoke(command, "--resume", trained), file)
    assert snapshot(trained) == before


# -- data world over a damaged world.json ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [lambda p: cut(p, 0.5), lambda p: p.write_text("[]"), lambda p: edit(p, lambda d: d.__setitem__("seed", "0"))],
    ids=["cut", "not-an-object", "seed-wrong-type"],
)
def test_data_world_refuses_a_damaged_world_json_in_one_line(tmp_path, damage):
    out = tmp_path / "world"
    assert invoke("data", "world", "--out", out, "--size", "tiny").exit_code == 0
    damage(out / "world.json")
    before = snapshot(out)
    result = invoke("data", "world", "--out", out, "--size", "tiny")
    assert_refused(result, "world.json")
    assert "--force" in result.stderr and snapshot(out) == before


# -- issue 37, class 8: values of the right type that no run writes ---------------------------------------------------
#
# A shape check lets EM 1.5, NaN, a score over n = 0 questions, an empty score map, steps logged twice, seeds of one
# variant evaluated on different benchmarks or a staged summary that points nowhere into a table's mean. Each is
# refused in one line naming the file, by both commands that build tables.

RESULTS = f"{STEP}/results.json"


def _world(data: dict) -> dict:
    return data["scores"]["agent"]["world"]


def _staged(data: dict, **paths) -> None:
    data.update(
        stages=[{"kind": "train", "dir": "stages/1-train"}, {"kind": "evolve", "dir": "stages/2-evolve"}],
        stage="post-rl",
        **paths,
    )


OUT_OF_RANGE = [
    ("results-em-above-1", RESULTS, lambda p: edit(p, lambda d: _world(d).__setitem__("em", 1.5))),
    ("results-em-nan", RESULTS, lambda p: edit(p, lambda d: _world(d).__setitem__("em", float("nan")))),
    ("results-f1-negative", RESULTS, lambda p: edit(p, lambda d: _world(d).__setitem__("f1", -0.1))),
    ("results-n-0-with-a-score", RESULTS, lambda p: edit(p, lambda d: _world(d).__setitem__("n", 0))),
    ("results-no-scores", RESULTS, lambda p: edit(p, lambda d: d.__setitem__("scores", {}))),
    ("results-empty-score-map", RESULTS, lambda p: edit(p, lambda d: d["scores"].__setitem__("agent", {}))),
    (
        "results-a-seed-on-another-benchmark",
        RESULTS,
        lambda p: edit(p, lambda d: d["scores"].__setitem__("agent", {"nq": _world(d)})),
    ),
    ("predictions-em-2", f"{STEP}/predictions.jsonl", lambda p: edit(p, lambda d: d.__setitem__("em", 2.0))),
    (
        "predictions-em-infinite",
        f"{STEP}/predictions.jsonl",
        lambda p: edit(p, lambda d: d.__setitem__("em", float("inf"))),
    ),
    (
        "metrics-a-step-repeated",
        f"{RUN}/metrics.jsonl",
        lambda p: p.write_text(p.read_text() + p.read_text().splitlines()[-1] + "\n"),
    ),
    (
        "metrics-steps-out-of-order",
        f"{RUN}/metrics.jsonl",
        lambda p: p.write_text("\n".join(reversed(p.read_text().splitlines())) + "\n"),
    ),
    ("metrics-step-negative", f"{RUN}/metrics.jsonl", lambda p: edit(p, lambda d: d.__setitem__("step", -1))),
    ("summary-steps-negative", f"{RUN}/summary.json", lambda p: edit(p, lambda d: d.__setitem__("steps", -3))),
    (
        "summary-evaluation-em-nan",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d.__setitem__("evaluations", [{"step": 3, "em": float("nan")}])),
    ),
    # issue 51, class 6: what a cost or tool column would average in, or show as "nan"
    (
        "summary-wall-seconds-negative",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d.__setitem__("wall_seconds", -3600.0)),
    ),
    (
        "summary-wall-seconds-nan",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d.__setitem__("wall_seconds", float("nan"))),
    ),
    (
        "summary-no-processes",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d.__setitem__("compute", {"processes": 0, "device": "cuda"})),
    ),
    (
        "summary-optimizer-calls-negative",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d["overhead"]["optimizer"].__setitem__("calls", -2)),
    ),
    (
        "summary-optimizer-tokens-negative",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d["overhead"]["optimizer"].__setitem__("total_tokens", -900)),
    ),
    (
        "summary-verification-rollouts-negative",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d["overhead"].__setitem__("verification_rollouts", -24)),
    ),
    (
        "summary-evolution-share-infinite",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: d["overhead"].__setitem__("share_of_wall_time", float("inf"))),
    ),
    ("results-searches-negative", RESULTS, lambda p: edit(p, lambda d: _world(d).__setitem__("searches", -1.0))),
    (
        "results-tool-calls-nan",
        RESULTS,
        lambda p: edit(p, lambda d: _world(d).__setitem__("calls/calculator", float("nan"))),
    ),
    (
        "metrics-tool-calls-negative",
        f"{RUN}/metrics.jsonl",
        lambda p: edit(p, lambda d: d.__setitem__("tools/calculator/calls", -1.0)),
    ),
    (
        "metrics-tool-errors-nan",
        f"{RUN}/metrics.jsonl",
        lambda p: edit(p, lambda d: d.__setitem__("tools/calculator/errors", float("nan"))),
    ),
    (
        "summary-staged-without-metrics",
        f"{RUN}/summary.json",
        lambda p: edit(p, lambda d: _staged(d, instruction_source="stages/2-evolve")),
    ),
    (
        "summary-staged-metrics-outside-the-run",
        f"{RUN}/summary.json",
        lambda p: edit(
            p, lambda d: _staged(d, metrics="../../../elsewhere/metrics.jsonl", instruction_source="stages/2-evolve")
        ),
    ),
]


@pytest.mark.parametrize("file, damage", [pytest.param(f, d, id=i) for i, f, d in OUT_OF_RANGE])
def test_a_value_no_run_writes_is_refused_by_report_and_collect_and_never_averaged(ablation, tmp_path, file, damage):
    damage(ablation / file)
    before = snapshot(ablation)
    assert_refused(invoke("report", ablation, "--out", tmp_path / "report"), file)
    assert_refused(invoke("ablate", "--collect", ablation), file)
    assert snapshot(ablation) == before and not (tmp_path / "report").exists()

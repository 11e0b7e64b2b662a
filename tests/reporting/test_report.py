"""`inspo report`: grouping runs into variants by seed, the CI bands, Table 1 in three formats, the lineage as text
and picture, App. C's overhead, index.md. Run directories are written here as training leaves them (no model)."""

from __future__ import annotations

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.run_dirs import LINEAGE, make_run

from inspo_cli.reporting.figures import band
from inspo_cli.reporting.lineage import lineage_text, tree_order
from inspo_cli.reporting.report import table1
from inspo_cli.reporting.sources import load_groups


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    root = tmp_path / "runs"
    return [
        make_run(root, "inspo-s0", 0, [0.1, 0.3, 0.5], 0.30, eval_em={3: 0.30}),
        make_run(root, "inspo-s1", 1, [0.3, 0.5, 0.5], 0.40, eval_em={3: 0.40}),
        make_run(root, "inspo-s2", 2, [0.2, 0.4, 0.8], 0.50, eval_em={3: 0.50}),
        make_run(root, "static-s0", 0, [0.2, 0.2, 0.2], 0.20, population=False),
        make_run(root, "static-s1", 1, [0.4, 0.4], None, population=False),
    ]  # unfinished evaluation


def test_fig2_d_is_the_papers_response_length_with_passages_and_says_so_when_a_run_predates_it(runs):
    from inspo_cli.reporting.figures import fig2_panels

    groups = load_groups(runs)  # these runs logged the policy's tokens only
    assert fig2_panels(groups)[3] == ("length/response", "(d) response length, policy tokens only (tokens)")
    for run in groups[0].runs:
        for row in run.metrics:
            row["length/response_with_observations"] = row["length/response"] + 300
    key, title = fig2_panels(groups)[3]
    assert key == "length/response_with_observations" and "passages included" in title
    assert band(groups[0], key)[0][1] == pytest.approx(21.0 + 300)


def test_loose_runs_are_grouped_by_recipe_with_their_seeds(runs):
    groups = load_groups(runs)
    assert [(g.label, [r.seed for r in g.runs]) for g in groups] == [("inspo", [0, 1, 2]), ("static", [0, 1])]
    inspo, static = groups
    # reward at step 1 over seeds 0, 1, 2: 0.1, 0.3, 0.2 -> mean 0.2 and a bootstrap band within the seeds' range
    step, mean, low, high = band(inspo, "reward")[0]
    assert (step, mean) == (1, pytest.approx(0.2))
    assert 0.1 - 1e-9 <= low < 0.2 < high <= 0.3 + 1e-9
    # step 3 of static: only seed 0 logged it -> a mean, no band
    assert band(static, "reward")[2] == (3, pytest.approx(0.2), None, None)
    # Table 1: each variant's own seeds
    table = table1(groups)
    rows = {row["variant"]: row for row in table["rows"]}
    assert rows["inspo"]["n"] == 3 and rows["inspo"]["average"]["mean"] == pytest.approx(0.4)
    assert rows["inspo"]["average"]["ci95"] == pytest.approx(0.248414, abs=1e-6)
    assert (rows["static"]["n"], rows["static"]["average"]["ci95"]) == (1, None)
    assert rows["static"]["missing"][0]["run"] == "static-s1"
    assert "no evaluation after its last step" in rows["static"]["missing"][0]["why"]
    # the static-instruction variant is the reference; one seed of it: a difference without an interval
    assert table["reference"] == "static" and table["comparisons"][0]["average"]["diff"] == pytest.approx(0.2)
    assert table["comparisons"][0]["average"]["p"] is None


def test_two_runs_with_the_same_recipe_and_seed_are_refused(runs, tmp_path):
    twin = make_run(tmp_path / "elsewhere", "inspo-again", 0, [0.1], 0.1)
    assert_one_line_error(invoke("report", runs[0], twin, "--out", tmp_path / "r"), "the same recipe and seed 0")
    assert_one_line_error(invoke("report", tmp_path / "nothing"), "input", "nothing: does not exist")
    (tmp_path / "empty").mkdir()
    assert_one_line_error(invoke("report", tmp_path / "empty"), "neither a run directory")


def test_the_lineage_is_a_tree_in_depth_first_order_with_each_candidates_fate():
    assert [(depth, row["id"]) for depth, row in tree_order(LINEAGE)] == [
        (0, "i0"),
        (1, "i1"),
        (2, "i4"),
        (1, "i3"),
        (0, "i2"),
    ]
    lines = lineage_text(LINEAGE).splitlines()
    assert lines[0].startswith("i0 [initial] born at step 0, alive at the end, weight 0.100 -> 0.400")
    assert lines[1].startswith("    └─ i1 [reflection] born at step 2, alive at the end, verified 0.500")
    assert lines[2].startswith(
        "        └─ i4 [reflection] born at step 4, alive at the end, verified 0.750, never weighted"
    )
    assert lines[3].startswith("    └─ i3 [reflection] born at step 2, pruned at step 4, verified 0.250")
    assert lines[4].startswith("i2 [initial] born at step 0, pruned at step 2") and lines[4].endswith('"Guess."')


def test_the_report_directory_holds_figures_tables_lineages_overhead_and_an_index(runs, tmp_path):
    out = tmp_path / "report"
    result = invoke("report", *runs, "--out", out)
    assert result.exit_code == 0, result.output
    assert "2 variants, 5 runs" in result.output
    for name in (
        "fig2_training.png",
        "fig5_test_em.png",
        "bars.png",
        "table1.md",
        "table1.csv",
        "table1.tex",
        "overhead.md",
        "overhead.csv",
        "lineage/inspo-s0.md",
        "lineage/inspo-s0.png",
        "index.md",
    ):
        assert (out / name).is_file(), name
    assert (out / "fig2_training.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (out / "lineage/static-s0.md").exists()  # no population, no lineage
    table = (out / "table1.md").read_text()
    assert "| inspo | 3 | 3, 3, 3 | 0.400 ± 0.248 | **0.400 ± 0.248** | +0.200 |" in table
    assert "| static | 1 | 3 | 0.200 | **0.200** | (reference) |" in table
    assert "- inspo − static on world: +0.200; no interval or p-value: one seed" in table
    assert r"inspo & 0.400 $\pm$ 0.248 & 0.400 $\pm$ 0.248 & $+0.200$ \\" in (out / "table1.tex").read_text()
    assert (out / "table1.csv").read_text().splitlines()[1].startswith("inspo,3,3 3 3,0.4000,0.2484,0.4000,0.2484,")
    overhead = (out / "overhead.csv").read_text().splitlines()
    # the last column: leaked candidates, "-" for a run summarised before the leak check
    assert overhead[1] == "inspo,inspo-s0,1,2,900,24,128,0.188,0.100,-" and len(overhead) == 4
    index = (out / "index.md").read_text()
    for fragment in (
        "![Training metrics (Fig. 2)](fig2_training.png)",
        "![Final EM per variant](bars.png)",
        "## What evolving cost (App. C)",
        "![lineage of inspo-s2](lineage/inspo-s2.png)",
        "Without a result: static-s1 (finished, no evaluation after its last step",
    ):
        assert fragment in index


def test_an_ablation_directory_reports_its_variants_into_its_own_report_folder(runs, tmp_path, repo_root):
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.sweep import plan_sweep

    plan = plan_sweep(
        {
            "recipe": "recipes/demo.yaml",
            "seeds": [0, 1],
            "variants": {"inspo": [], "static": ["population.enabled=false"]},
        },
        "abl.yaml",
    )
    ablation = AblationDir.start(tmp_path / "abl", plan)
    for name in ("inspo-s0", "inspo-s1", "static-s0"):
        (ablation.runs_dir).mkdir(exist_ok=True)
        (tmp_path / "runs" / name).rename(ablation.runs_dir / name)
    result = invoke("report", tmp_path / "abl")
    assert result.exit_code == 0, result.output
    groups = load_groups([tmp_path / "abl"])
    assert [(g.label, [r.seed for r in g.runs]) for g in groups] == [("inspo", [0, 1]), ("static", [0])]
    assert (
        "| inspo | 2 | 3, 3 | 0.350 [0.000, 0.985] | **0.350 [0.000, 0.985]** | +0.150 |"
        in (tmp_path / "abl/report/table1.md").read_text()
    )

"""`inspo view` in a real headless Chromium (Debian's package, driven by Playwright): every page of a fabricated run
and ablation opens, the filters, the lineage tree and the metric checkboxes do what they say against the run's own
files, and no markup a policy wrote runs. Screenshots at 1280 px go to $INSPO_VIEW_SCREENSHOTS when it is set
(docs/view/'s are `bench/view_screenshots.py`'s, of a real run). The demo's end-to-end test opens the export of a
real run in the same browser (tests/commands/test_demo_and_frozen_policy_evolve.py).

Skipped where no Chromium or Playwright is installed, unless INSPO_REQUIRE_BROWSER=1 (CI sets it)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from helpers.browser import chromium, visible
from helpers.view_runs import MARKUP, make_view_run

from inspo_cli.viewer.server import make_app
from inspo_cli.viewer.site import Site
from inspo_cli.viewer.sources import discover
from retriever.serving import serve_in_background

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("browser")]


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    dialogs, errors = [], []
    opened.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.dialogs, opened.errors = dialogs, errors
    yield opened
    assert opened.errors == [], opened.errors  # the vendored script never throws
    context.close()


def shoot(page, name: str) -> None:
    folder = os.environ.get("INSPO_VIEW_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=False)


def rows_of(run: Path, step: int) -> list[dict]:
    return [
        json.loads(line)
        for line in gzip.decompress((run / f"rollouts/step-{step:06d}.jsonl.gz").read_bytes()).decode().splitlines()
    ]


@pytest.fixture
def served(tmp_path: Path):
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.plan import Plan, Variant

    run = make_view_run(tmp_path / "runs", rows_per_step=40)
    plan = Plan("toy", [Variant("inspo", "recipes/demo.yaml"), Variant("search-r1", "recipes/demo.yaml")], [0, 1])
    ablation = AblationDir.start(tmp_path / "abl", plan)
    for name, seed in (("inspo-s0", 0), ("search-r1-s0", 0), ("inspo-s1", 1), ("search-r1-s1", 1)):
        make_view_run(ablation.runs_dir, name, seed, population=name.startswith("inspo"))
    with serve_in_background(make_app(Site(discover([run, tmp_path / "abl"])))) as base:
        yield base, run


def test_the_trajectory_filters_show_what_the_files_hold(page, served):
    base, run = served
    page.goto(f"{base}/")
    page.click("text=demo")
    page.click("nav.tabs >> text=trajectories")
    page.click("text=step 3")
    rows = rows_of(run, 3)
    assert len(visible(page, "article.traj")) == len(rows) == 40
    assert page.locator(".shown").inner_text() == "40 of 40 on this page shown"
    shoot(page, "trajectories")
    page.check("input[name=wrong]")
    assert len(visible(page, "article.traj")) == sum(r["em"] < 1 for r in rows)
    page.select_option("select[name=instruction]", "i1")
    shown = visible(page, "article.traj")
    assert len(shown) == sum(r["em"] < 1 and r["instruction_id"] == "i1" for r in rows) > 0
    assert all(d["instruction"] == "i1" and d["wrong"] == "1" for d in shown)
    assert "instruction=i1" in page.url and "wrong=1" in page.url
    page.reload()  # the filters live in the address: a link or a reload keeps them
    assert len(visible(page, "article.traj")) == len(shown) and page.is_checked("input[name=wrong]")
    page.uncheck("input[name=wrong]")
    page.select_option("select[name=instruction]", "")
    page.check("input[name=truncated]")
    assert len(visible(page, "article.traj")) == sum(r["truncated"] for r in rows)
    page.uncheck("input[name=truncated]")
    page.select_option("select[name=type]", "bridge")
    assert len(visible(page, "article.traj")) == sum(r["type"] == "bridge" for r in rows)
    policy = page.locator("article.traj >> nth=0 >> span.policy").first
    inserted = page.locator("article.traj >> nth=0 >> span.inserted").first
    colors = [s.evaluate("e => getComputedStyle(e).backgroundColor") for s in (policy, inserted)]
    assert colors[0] != colors[1]  # the policy's tokens and the inserted ones look different


def test_markup_a_policy_wrote_is_text_and_never_runs(page, served):
    base, _ = served
    for path in (
        "run/demo/trajectories/step-1-1.html",
        "run/demo/evals/step-2-1.html",
        "run/demo/instructions.html",
    ):
        page.goto(f"{base}/{path}")
        assert page.evaluate("window.__pwned") is None, path
        assert page.locator("img[src=x]").count() == 0, path
    page.goto(f"{base}/run/demo/trajectories/step-1-1.html")
    assert MARKUP + "\ufffd" in page.locator("article.traj >> nth=0 >> h3").inner_text()
    assert page.dialogs == []


def test_the_lineage_tree_leads_to_each_instruction_and_its_trajectories(page, served):
    base, run = served
    page.goto(f"{base}/run/demo/instructions.html")
    shoot(page, "instructions")
    page.click("ul.tree >> text=i4")
    assert page.url.endswith("#i4") and page.evaluate("document.querySelector(':target').id") == "i4"
    assert "Search twice." in page.locator("section#i4 pre.instruction").inner_text()
    assert page.locator("section#i4 pre.diff ins").inner_text() == "twice."
    page.click("section#i1 a:has-text('step 2 (')")
    page.wait_for_url("**/trajectories/step-2-1.html#instruction=i1")
    page.wait_for_selector(".shown:not(:empty)")
    shown = visible(page, "article.traj")
    assert shown and all(d["instruction"] == "i1" for d in shown)
    assert len(shown) == sum(r["instruction_id"] == "i1" for r in rows_of(run, 2))


def test_the_overview_draws_the_chosen_curves_with_the_evolutions(page, served):
    base, _ = served
    page.goto(f"{base}/run/demo/index.html")
    charts = page.locator("svg.chart")
    assert charts.count() == 2  # the default curves this run logs: reward, searches per trajectory
    assert page.locator("svg.chart >> nth=0 >> line.evolution").count() == 2  # steps 2 and 4
    assert page.locator("svg.chart >> nth=0 >> circle").count() == 4
    assert page.locator("svg.chart >> nth=0 >> circle >> nth=2 >> title").text_content() == "step 3: 0.4"
    page.click("summary:has-text('metrics')")
    page.uncheck("input[value='search/searches_per_trajectory']")
    assert charts.count() == 1
    page.check("input[value='length/response']")
    assert charts.count() == 2
    assert {page.locator(".chart-title").nth(i).text_content() for i in range(2)} == {"reward", "length/response"}
    shoot(page, "overview")


def test_evaluations_side_by_side_and_the_ablation_links(page, served):
    base, _ = served
    page.goto(f"{base}/run/demo/evals.html")
    shoot(page, "evaluations")
    page.click("text=step 4")
    page.check("input[name=wrong]")
    assert len(visible(page, "article.pred")) == 2  # step 4 EM: 1, 1, 0, 0, 1
    page.goto(f"{base}/compare/demo~2~demo~4.html")
    assert page.locator("h2:has-text('Wrong → right (2)')").count() == 1
    page.goto(f"{base}/")
    page.click("text=toy")
    shoot(page, "ablation")
    page.click("table.grid >> text=EM 0.600 (step 4) >> nth=0")
    assert "/run/toy-inspo-s0/index.html" in page.url
    assert page.locator("h1").inner_text() == "toy/inspo-s0"

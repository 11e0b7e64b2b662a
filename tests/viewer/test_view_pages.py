"""`inspo view`'s pages, rendered from a fabricated run and ablation: what a researcher reads there must be what the
run's files say (trajectories with the policy's and the inserted tokens apart, the lineage, the evaluations and
their flips), and nothing a policy wrote can become markup."""

from __future__ import annotations

import gzip
import json
import os
import posixpath
import re
from pathlib import Path

import pytest
from helpers.view_runs import MARKUP, make_view_run, write_rollouts

from inspo_cli.errors import InspoError
from inspo_cli.viewer.site import Site
from inspo_cli.viewer.sources import discover

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return make_view_run(tmp_path / "runs")


def site_of(*paths: Path) -> Site:
    return Site(discover(list(paths)))


def html(site: Site, path: str) -> str:
    response = site.get(path)
    assert response is not None, path
    assert response.content_type.startswith("text/html")
    return response.body.decode()


def test_every_page_of_a_run_renders_and_links_only_to_pages_that_exist(run: Path):
    site = site_of(run)
    paths = list(site.paths())
    assert "run/demo/trajectories/step-4-1.html" in paths and "run/demo/evals/step-2-1.html" in paths
    for path in paths:
        response = site.get(path)
        assert response is not None, path
        if not path.endswith(".html"):
            continue
        for href in re.findall(r'(?:href|src)="([^"#]+)', response.body.decode()):
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), href))
            assert not target.startswith(".."), f"{path} links above the site: {href}"
            assert site.get(target) is not None, f"{path} links to a missing {href}"


def test_a_trajectory_shows_who_wrote_each_part_its_reward_parts_and_its_filters(run: Path):
    page = html(site_of(run), "run/demo/trajectories/step-1-1.html")
    articles = page.split('<article class="traj"')[1:]
    assert len(articles) == 8
    first = articles[0]
    assert '<span class="policy"' in first and '<span class="inserted"' in first
    assert first.index("founder of Hokin Works 0") < first.index("Hokin Works was founded by Ada Vell")
    assert (
        "reward <b>1.200</b>" in first and "format bonus 0.200" in first and 'href="../instructions.html#i0"' in first
    )
    assert 'data-wrong="0"' in first and 'data-type="single_hop"' in first and 'data-instruction="i0"' in first
    fifth = articles[4]  # index 4: an invalid action, group 1 (instruction i1)
    assert 'data-invalid="1"' in fifth and 'data-instruction="i1"' in fifth and 'data-wrong="1"' in fifth
    assert 'data-truncated="1"' in articles[6] and "stop: length" in articles[6]


def test_nothing_a_policy_or_an_optimizer_writes_becomes_markup(run: Path):
    site = site_of(run)
    for path in (
        "run/demo/trajectories/step-1-1.html",
        "run/demo/evals/step-2-1.html",
        "run/demo/instructions.html",
    ):
        page = html(site, path)
        assert "<script>window" not in page and "<img src=x" not in page, path
        assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page, path
        assert "\ufffd" in page  # the lone surrogate is shown replaced, and the page still renders
    page = html(site, "run/demo/index.html")
    assert '<meta http-equiv="Content-Security-Policy"' in page and "script-src &#39;self&#39;" in page


def test_a_json_block_cannot_be_closed_by_a_metric_name(tmp_path: Path):
    run = make_view_run(tmp_path / "runs")
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        row["</script><script>alert(1)</script>"] = 1.0
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = html(site_of(run), "run/demo/index.html")
    block = page.split('id="curves-data">')[1].split("</script>")[0]
    assert "<" not in block and json.loads(block)["series"]["</script><script>alert(1)</script>"][0] == [1, 1.0]


def test_pages_of_a_hundred_and_the_pages_that_do_not_exist(tmp_path: Path):
    run = make_view_run(tmp_path / "runs", rows_per_step=250)
    site = site_of(run)
    assert html(site, "run/demo/trajectories/step-2-3.html").count('<article class="traj"') == 50
    page = html(site, "run/demo/trajectories/step-2-2.html")
    assert "trajectories 101–200 of 250" in page and "world:q25:" in page  # row 100 is group 25's first
    for missing in (
        "run/demo/trajectories/step-2-4.html",
        "run/demo/trajectories/step-2-0.html",
        "run/demo/trajectories/step-9-1.html",
        "run/nope/index.html",
        "run/demo/evals/step-3-1.html",
    ):
        assert site.get(missing) is None, missing
    index = html(site, "run/demo/trajectories.html")
    step_2 = index.split('href="trajectories/step-2-1.html">step 2</a>')[1].split("</tr>")[0]
    wrong = sum(i % 3 != 0 for i in range(250))  # the fabricated rows: every third is right
    cells = re.findall(r"<td>([^<]*)</td>", step_2)
    assert cells[:2] == ["250", "63"] and cells[4] == str(wrong)  # rows, groups (of 4), ..., wrong
    assert "i0 (84), i1 (84), i4 (82)" in step_2


def test_the_lineage_tree_the_diffs_and_the_trajectories_each_instruction_had(run: Path):
    page = html(site_of(run), "run/demo/instructions.html")
    tree = page.split('<ul class="tree">')[1].split("</ul>")[0]
    order = re.findall(r'href="#(i\d)"', tree)
    assert order == ["i0", "i1", "i4", "i3", "i2"]  # depth first: each child after its parent
    assert 'style="margin-left:4em"' in tree.split('href="#i4"')[0].rsplit("<li", 1)[1]  # i4 is a grandchild
    i1 = page.split('id="i1"')[1].split("</section>")[0]
    assert "<del>Answer</del><ins>Search</ins> <del>it. {question}</del><ins>first.</ins>" in i1
    i4 = page.split('id="i4"')[1].split("</section>")[0]
    assert "Search <ins>twice.</ins>" not in i4 and "Search <del>first.</del><ins>twice.</ins>" in i4
    assert 'href="trajectories/step-1-1.html#instruction=i1"' in i1  # group 1 of every step used i1
    assert "below its parent" in page  # a rejected candidate is listed with its reason


def test_evaluations_and_the_questions_that_flipped(run: Path):
    site = site_of(run)
    index = html(site, "run/demo/evals.html")
    assert "step 2" in index and "step 4" in index and "0.400" in index and "0.600" in index
    page = html(site, "compare/demo~2~demo~4.html")
    # step 2 EM [1,0,0,1,0], step 4 [1,1,0,0,1]: q1 and q4 gained, q3 lost, q0 right in both
    gained = page.split("Wrong → right (2)")[1].split("Right → wrong")[0]
    lost = page.split("Right → wrong (1)")[1]
    assert "q1" in gained and "q4" in gained and "q3" not in gained and "q3" in lost
    assert "<td>1</td><td>2</td><td>1</td>" in page  # right in both, gained, lost
    rows = (run / "evaluations/step-4/predictions.jsonl").read_text().splitlines()
    (run / "evaluations/step-4/predictions.jsonl").write_text("\n".join(rows[1:]) + "\n")  # q0 not evaluated
    page = html(site, "compare/demo~2~demo~4.html")
    assert "1 questions only in the first, 0 only in the second" in page and "<td>4</td><td>0.250</td>" in page
    (run / "evaluations/step-4/predictions.jsonl").write_text("\n".join(rows) + "\n")
    predictions = html(site, "run/demo/evals/step-4-1.html")
    assert predictions.count('<article class="pred"') == 5 and "Who founded firm 3?" in predictions


def test_the_overview_shows_the_recipe_against_the_paper_and_the_evolutions(run: Path):
    (run / "plots").mkdir()
    (run / "plots/reward.png").write_bytes(PNG)
    site = site_of(run)
    page = html(site, "run/demo/index.html")
    assert "<code>training.steps</code>" in page  # the demo trains 8 steps; the paper 1005
    data = json.loads(page.split('id="curves-data">')[1].split("</script>")[0])
    assert data["evolutions"] == [2, 4] and data["series"]["reward"] == [[1, 0.2], [2, 0.3], [3, 0.4], [4, 0.5]]
    assert site.get("run/demo/files/plots/reward.png").body == PNG


def test_only_the_runs_own_figures_are_served(tmp_path: Path, run: Path):
    (run / "plots").mkdir()
    outside = tmp_path / "secret.png"
    outside.write_bytes(PNG)
    (run / "plots/link.png").symlink_to(outside)
    (run / "plots/reward.png").write_bytes(PNG)
    (run / "plots/alias.png").symlink_to(run / "plots/reward.png")  # inside, but a link: refused all the same
    (run / "plots/notes.txt").write_text("x")
    with open(run / "plots/huge.png", "wb") as huge:  # sparse: 65 MiB that take no disk
        huge.truncate(65 << 20)
    site = site_of(run)
    assert site.get("run/demo/files/plots/reward.png").body == PNG
    for path in (
        "run/demo/files/plots/link.png",
        "run/demo/files/plots/alias.png",
        "run/demo/files/plots/huge.png",
        "run/demo/files/plots/../../../secret.png",
        "run/demo/files/plots/notes.txt",
        "run/demo/files/plots/%2e%2e/secret.png",
        "run/demo/recipe.yaml",
        "run/demo/files/../summary.json",
        "static/../site.py",
        "ablation/x/files/a.png",
    ):
        assert site.get(path) is None, path


def test_a_damaged_file_is_one_line_on_its_page_and_the_rest_still_shows(run: Path):
    data = gzip.decompress((run / "rollouts/step-000002.jsonl.gz").read_bytes())
    (run / "rollouts/step-000002.jsonl.gz").write_bytes(gzip.compress(data)[:-30])  # cut short
    (run / "instructions.jsonl").write_text("{not json\n")
    site = site_of(run)
    assert "cut short" in html(site, "run/demo/trajectories/step-2-1.html")
    assert "cut short" in html(site, "run/demo/trajectories.html")
    assert "step-1-1.html" in html(site, "run/demo/trajectories.html")
    assert "instructions.jsonl:1: not valid JSON" in html(site, "run/demo/instructions.html")
    rows = [json.loads(line) for line in (run / "evaluations/step-4/predictions.jsonl").read_text().splitlines()]
    rows[2]["em"] = 7
    (run / "evaluations/step-4/predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "expected a finite number in [0, 1], got int 7" in html(site, "run/demo/evals/step-4-1.html")
    assert site.get("compare/demo~2~demo~4.html") is not None


def test_a_run_that_kept_no_rollouts_says_so(tmp_path: Path):
    run = make_view_run(tmp_path / "runs")
    for file in (run / "rollouts").iterdir():
        file.unlink()
    assert "kept no rollouts" in html(site_of(run), "run/demo/trajectories.html")


def test_an_ablation_links_every_cell_to_its_run(tmp_path: Path):
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.plan import Plan, Variant

    plan = Plan(
        "toy",
        [
            Variant("inspo", "recipes/demo.yaml"),
            Variant("search-r1", "recipes/demo.yaml", ["population.enabled=false"]),
        ],
        [0, 1],
    )
    ablation = AblationDir.start(tmp_path / "abl", plan)
    make_view_run(ablation.runs_dir, "inspo-s0", 0)
    make_view_run(ablation.runs_dir, "search-r1-s0", 0, population=False)
    s1 = make_view_run(ablation.runs_dir, "inspo-s1", 1)
    scores = {
        b: {"em": em, "f1": em, "subem": em, "searches": 1.0, "n": 5} for b, em in (("nq", 0.6), ("hotpotqa", 0.2))
    }
    (s1 / "evaluations/step-4/results.json").write_text(json.dumps({"scores": {"agent": scores}}))
    (tmp_path / "abl/report").mkdir()
    (tmp_path / "abl/report/bars.png").write_bytes(PNG)
    (tmp_path / "abl/report/index.md").write_text(
        "# Report\n\n| variant | EM |\n|---|---|\n| inspo | 0.5 |\n| search-r1-s0 | 0.4 |\n\n"
        f"![bars](bars.png) ![x](../../etc/passwd.png) {MARKUP}\n"
    )
    site = site_of(tmp_path / "abl")
    page = html(site, "ablation/ablation-toy/index.html")
    grid = page.split('class="grid"')[1].split("</table>")[0]
    assert grid.count('href="../../run/toy-inspo-s0/index.html"') == 1 and "EM 0.600 (step 4)" in grid
    assert "not started" in grid  # search-r1-s1
    assert 'href="../../run/toy-inspo-s1/index.html">EM 0.400 (step 4)' in grid  # the mean over benchmarks
    assert 'href="../../run/toy-search-r1-s0/index.html">search-r1-s0</a>' in page
    assert '<img src="files/report/bars.png"' in page and "passwd" not in page.split("<main>")[1].split("bars.png")[1]
    assert "&lt;script&gt;" in page and site.get("ablation/ablation-toy/files/report/bars.png").body == PNG


def test_what_inspo_view_is_given(tmp_path: Path):
    make_view_run(tmp_path / "runs", "a")
    make_view_run(tmp_path / "runs", "b")
    (tmp_path / "runs/not-a-run").mkdir()
    assert set(discover([tmp_path / "runs"]).runs) == {"runs-a", "runs-b"}
    assert len(discover([tmp_path / "runs", tmp_path / "runs/a"]).runs) == 2  # a run given twice is shown once
    with pytest.raises(InspoError, match="neither a run"):
        discover([tmp_path / "runs/not-a-run"])
    with pytest.raises(InspoError, match="does not exist"):
        discover([tmp_path / "nowhere"])


def test_each_file_is_counted_once_and_again_when_it_changes(tmp_path: Path, monkeypatch):
    import inspo_cli.viewer.data as data

    run = make_view_run(tmp_path / "runs", rows_per_step=8)
    site = site_of(run)
    reads = []
    original = data.iter_rows
    monkeypatch.setattr(data, "iter_rows", lambda path, *a, **k: (reads.append(path), original(path, *a, **k))[1])
    assert "of 8 (" in html(site, "run/demo/trajectories/step-1-1.html")
    html(site, "run/demo/trajectories.html")
    counted = len(reads)
    html(site, "run/demo/trajectories.html")
    html(site, "run/demo/instructions.html")
    assert len(reads) == counted  # counts come from the cache
    file = run / "rollouts/step-000001.jsonl.gz"
    stat = file.stat()
    write_rollouts(run, 1, 120)
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the same time (a copy keeping it): the size differs
    assert "of 120 (" in html(site, "run/demo/trajectories/step-1-1.html")

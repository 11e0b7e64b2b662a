"""Nothing of the user's is deleted or replaced: `inspo report --out` replaces only a report it wrote and marked
(`reporting.marker`), and every other command that replaces or clears a directory (`inspo index --force`,
`inspo data world --force`, an ablation starting a run over, a merged LoRA adapter's folder) refuses a folder it
did not write, in one line, with every file as it was. Each test compares a full listing, contents included."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.run_dirs import make_run

from inspo_cli.errors import InspoError
from inspo_cli.files import replaced_dir
from inspo_cli.reporting.marker import MARKER, check_replaceable, seal

REPO_ROOT = Path(__file__).resolve().parents[1]


def listing(root: Path) -> dict[str, object]:
    """Every entry under `root`, hidden ones and links included (never followed): a file's bytes, a link's target,
    "dir", or "special" (a FIFO is never opened)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for path in map(Path(folder).joinpath, dirs + files):
            found[str(path.relative_to(root))] = (
                f"-> {os.readlink(path)}"
                if path.is_symlink()
                else "dir"
                if path.is_dir()
                else path.read_bytes()
                if path.is_file()
                else "special"
            )
    return found


def user_folder(root: Path) -> Path:
    """A MkDocs docs/ folder: index.md like a report's, and much else."""
    docs = root / "docs"
    (docs / "img").mkdir(parents=True)
    (docs / "index.md").write_text("# My project\n")
    (docs / "usage.md").write_text("How to use it.\n")
    (docs / "img" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    (root / "mkdocs.yml").write_text("site_name: mine\n")
    return docs


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[list[Path], Path]:
    """Two runs and a report inspo wrote of them, made once (a report takes seconds)."""
    root = tmp_path_factory.mktemp("built")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO_ROOT)
        runs = [
            make_run(root / "runs", "inspo-s0", 0, [0.1, 0.3], 0.30),
            make_run(root / "runs", "static-s0", 0, [0.2, 0.2], 0.20, population=False),
        ]
        assert invoke("report", *runs, "--out", root / "report").exit_code == 0
    return runs, root / "report"


@pytest.fixture
def runs(built, repo_root, monkeypatch) -> list[Path]:
    monkeypatch.chdir(repo_root)
    return built[0]


@pytest.fixture
def report(built, tmp_path) -> Path:
    """A copy of the report inspo wrote (its marker and all), under work/ with nothing else there."""
    out = tmp_path / "work" / "report"
    shutil.copytree(built[1], out, symlinks=True)
    return out


# -- inspo report --out --------------------------------------------------------------------------------------------


def test_report_refuses_a_folder_of_the_users_with_an_index_md_and_touches_nothing(runs, tmp_path):
    docs = user_folder(tmp_path / "work")
    before = listing(tmp_path / "work")
    assert_one_line_error(
        invoke("report", *runs, "--out", docs),
        f"--out {docs} holds files but no report",
        MARKER,
        "choose a new or empty directory",
    )
    assert listing(tmp_path / "work") == before  # no file changed, none added (no hidden build folder left)


def test_a_report_inspo_wrote_is_replaced_whole_and_its_marker_lists_every_file(runs, report, tmp_path):
    marker = json.loads((report / MARKER).read_text())
    assert (marker["kind"], marker["version"]) == ("inspo-report", 1)
    files = {str(p.relative_to(report)) for p in report.rglob("*") if p.is_file()} - {MARKER}
    assert set(marker["files"]) == files and {"index.md", "table1.md", "lineage/inspo-s0.md"} <= files
    result = invoke("report", runs[1], "--out", report)  # one variant now: no lineage
    assert result.exit_code == 0, result.output
    assert not (report / "lineage").exists() and "static" in (report / "index.md").read_text()
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["report"]  # no .old or .partial left


def test_an_earlier_inspos_report_without_a_marker_is_refused_with_the_fix(runs, report, tmp_path):
    (report / MARKER).unlink()
    before = listing(tmp_path / "work")
    assert_one_line_error(
        invoke("report", *runs, "--out", report),
        "no report of this inspo",
        "an earlier inspo's report there: delete it yourself",
    )
    assert listing(tmp_path / "work") == before


def _set_marker(report: Path, text: str) -> None:
    (report / MARKER).write_text(text)


@pytest.mark.parametrize(
    "tamper, why",
    [
        (lambda r: (r / "notes.md").write_text("my notes"), "holds notes.md, which the report there did not write"),
        (lambda r: (r / "drafts").mkdir(), "holds drafts, which the report there did not write"),
        (lambda r: (r / "lineage" / "mine.txt").write_text("x"), "holds lineage/mine.txt"),
        (lambda r: (r / "table1.md").write_text("| my edited table |"), "table1.md changed since the report"),
        (lambda r: (r / "bars.png").write_bytes((r / "bars.png").read_bytes()[:-1] + b"!"), "bars.png changed"),
        (lambda r: (r / "data").symlink_to(Path.home()), "holds data, which the report there did not write"),
        (lambda r: os.mkfifo(r / "pipe"), "holds pipe"),
        (lambda r: _set_marker(r, "{not json"), "not a report's marker (not valid JSON)"),
        (lambda r: _set_marker(r, '{"kind": "mkdocs", "version": 1, "files": {}}'), "kind 'mkdocs'"),
        (lambda r: _set_marker(r, '{"kind": "inspo-report", "version": true, "files": {}}'), "not a report's marker"),
        (
            lambda r: _set_marker(r, '{"kind": "inspo-report", "version": 1, "files": {"a": 1}}'),
            "not a report's marker",
        ),
        (lambda r: _set_marker(r, "[]"), "not a report's marker"),
        (lambda r: _set_marker(r, '{"kind": "inspo-report", "version": 9, "files": {}}'), "a newer inspo"),
        (lambda r: ((r / MARKER).unlink(), (r / MARKER).mkdir()), "not a regular file"),
    ],
    ids=[
        "file",
        "folder",
        "file-in-lineage",
        "edited-table",
        "edited-png",
        "link",
        "fifo",
        "marker-not-json",
        "marker-kind",
        "marker-version",
        "marker-files",
        "marker-list",
        "marker-newer",
        "marker-folder",
    ],
)
def test_a_report_holding_anything_it_did_not_write_is_refused_and_kept(runs, report, tmp_path, tamper, why):
    tamper(report)
    before = listing(tmp_path / "work")
    assert_one_line_error(invoke("report", *runs, "--out", report), f"--out {report}", why)
    assert listing(tmp_path / "work") == before


def test_out_a_link_or_a_file_is_refused_and_an_empty_folder_is_used(runs, tmp_path):
    docs = user_folder(tmp_path / "work")
    link = tmp_path / "work" / "link"
    link.symlink_to(docs)
    (tmp_path / "work" / "plain").write_text("mine")
    before = listing(tmp_path / "work")
    assert_one_line_error(invoke("report", *runs, "--out", link), "is a symbolic link")
    assert_one_line_error(invoke("report", *runs, "--out", tmp_path / "work" / "plain"), "is a file")
    assert listing(tmp_path / "work") == before
    empty = tmp_path / "work" / "empty"
    empty.mkdir()
    assert invoke("report", *runs, "--out", empty).exit_code == 0 and (empty / MARKER).is_file()


def test_a_folder_put_at_out_while_the_report_is_built_is_put_back_untouched(tmp_path):
    out = tmp_path / "work" / "report"
    out.parent.mkdir()
    with pytest.raises(InspoError, match="holds files but no report"):
        with replaced_dir(out, "--out", check=check_replaceable) as building:
            (building / "index.md").write_text("# report\n")
            seal(building)
            out.mkdir()  # the user makes the folder, or copies theirs there, while the report is being built
            (out / "paper.tex").write_text("mine")
    assert listing(tmp_path / "work") == {"report": "dir", "report/paper.tex": b"mine"}


def test_two_reports_written_into_one_out_at_once_both_succeed_and_one_stays_whole(tmp_path):
    out, errors = tmp_path / "work" / "report", []
    out.parent.mkdir()

    def write(name: str) -> None:
        try:
            for i in range(25):
                with replaced_dir(out, "--out", check=check_replaceable) as building:
                    for n in range(5):
                        (building / f"{name}-{n}.md").write_text(f"{name} {i}")
                    seal(building)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [p.name for p in out.parent.iterdir()] == ["report"]  # no .old or .partial folders left
    check_replaceable(out)  # whole: exactly what its marker lists
    assert len({p.name.split("-")[0] for p in out.iterdir() if p.name != MARKER}) == 1


# -- every other command that replaces or clears a directory -------------------------------------------------------


def test_index_force_refuses_a_folder_with_an_index_json_of_another_program(tmp_path, repo_root):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.json").write_text('{"name": "my web app", "version": "1.0.0"}')
    (site / "app.js").write_text("console.log('mine')")
    before = listing(tmp_path)
    result = invoke("index", "--corpus", repo_root / "data/world/corpus.jsonl", "--out", site, "--force")
    assert_one_line_error(result, f"--out {site}", "not an inspo index", "even with --force")
    assert listing(tmp_path) == before


def test_index_force_refuses_an_index_holding_files_no_build_writes(tmp_path, repo_root):
    """An index directory the user added to (notes, an index built inside it) was replaced whole by --force."""
    corpus = repo_root / "data/world/corpus.jsonl"
    index = tmp_path / "indexes"
    assert invoke("index", "--corpus", corpus, "--out", index).exit_code == 0
    (index / "NOTES.md").write_text("which corpus version this is")
    assert invoke("index", "--corpus", corpus, "--out", index / "world-nested").exit_code == 0
    before = listing(tmp_path)
    result = invoke("index", "--corpus", corpus, "--out", index, "--force")
    assert_one_line_error(result, f"--out {index} holds NOTES.md", "no index build writes")
    assert listing(tmp_path) == before
    (index / "NOTES.md").unlink()  # the nested index is no file of this one's either
    assert_one_line_error(invoke("index", "--corpus", corpus, "--out", index, "--force"), "holds world-nested")
    shutil.rmtree(index / "world-nested")
    assert invoke("index", "--corpus", corpus, "--out", index, "--force").exit_code == 0  # the index alone: replaced


def test_data_world_force_never_writes_over_files_of_a_worlds_names_that_are_no_world(tmp_path):
    data = tmp_path / "mydata"
    data.mkdir()
    (data / "train.jsonl").write_text('{"question": "mine", "golden_answers": ["x"]}\n')
    (data / "world.json").write_text('{"seed": 0, "size": "tiny", "note": "not inspo\'s"}')
    before = listing(tmp_path)
    for force in ([], ["--force"]):
        assert_one_line_error(
            invoke("data", "world", "--size", "tiny", "--seed", "0", "--out", data, *force),
            f"--out {data} holds train.jsonl, world.json but no world",
            "delete them yourself",
        )
    assert listing(tmp_path) == before
    notes = tmp_path / "notes"  # a folder without world files: --force adds the world beside them, deletes nothing
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    assert invoke("data", "world", "--size", "tiny", "--out", notes, "--force").exit_code == 0
    assert (notes / "todo.txt").read_text() == "mine" and (notes / "world.json").is_file()


def test_ablate_never_takes_a_recipes_folder_of_the_users_for_a_planning_cut_short(tmp_path, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    project = tmp_path / "project"
    (project / "recipes").mkdir(parents=True)
    (project / "recipes" / "mine.yaml").write_text("extends: demo\n")
    before = listing(tmp_path)
    result = invoke(
        "ablate",
        "--recipe",
        "recipes/demo.yaml",
        "--proposer",
        "paraphrase",
        "--seeds",
        "0",
        "--out",
        project,
        "--print-commands",
    )
    assert_one_line_error(result, f"{project} already holds files but no plan.json")
    assert listing(tmp_path) == before
    cut = tmp_path / "cut"  # a planning cut short (its lock beside its recipes/) is still cleared and planned anew
    (cut / "recipes").mkdir(parents=True)
    (cut / "recipes" / "stale.yaml").write_text("from the planning cut short")
    (cut / ".lock").touch()
    result = invoke(
        "ablate",
        "--recipe",
        "recipes/demo.yaml",
        "--proposer",
        "paraphrase",
        "--seeds",
        "0",
        "--out",
        cut,
        "--print-commands",
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (cut / "recipes").iterdir()) == ["demo.yaml", "proposer-paraphrase.yaml"]


def test_an_ablation_never_deletes_a_run_folder_it_did_not_start(tmp_path, repo_root, monkeypatch):
    """A run copied in part from a cluster (checkpoints first, run.json not yet) sits where the plan's run goes:
    the run fails in one line and the copy is kept, instead of being deleted to start the run again."""
    from inspo_cli import experiment
    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.ablation.runner import run_one
    from inspo_cli.ablation.sweep import plan_sweep

    monkeypatch.chdir(repo_root)
    started = []
    monkeypatch.setattr(experiment, "run", lambda *a, **k: started.append(a))  # the training itself is not tested
    plan = plan_sweep({"recipe": "recipes/demo.yaml", "seeds": [0], "variants": {"inspo": []}}, "abl.yaml")
    ablation = AblationDir.start(tmp_path / "abl", plan)
    (run,) = plan.runs()
    copied = ablation.run_dir(run).path / "checkpoints" / "checkpoint-100"
    copied.mkdir(parents=True)
    (copied / "model.safetensors").write_bytes(b"weights copied for hours")
    before = listing(ablation.runs_dir)
    assert run_one(ablation, run) == "failed" and started == []
    assert listing(ablation.runs_dir) == before
    assert "holds files but no run.json" in ablation.failures()[run.name]

    shutil.rmtree(ablation.run_dir(run).path)  # what creating a run leaves before its run.json is cleared as before
    ablation.run_dir(run).path.mkdir()
    (ablation.run_dir(run).path / "recipe.yaml").write_text("run: {}\n")
    run_one(ablation, run)  # (fails later: the stand-in trains nothing)
    assert len(started) == 1 and not ablation.run_dir(run).path.exists()


def test_a_merged_adapter_never_replaces_a_folder_it_did_not_write(tmp_path, tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from inspo_cli.policy.models import merged_adapter_dir

    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    adapter = tmp_path / "checkpoint-2"
    get_peft_model(base, LoraConfig(r=4, target_modules="all-linear")).save_pretrained(adapter)
    (adapter / "merged").mkdir()
    (adapter / "merged" / "notes.md").write_text("my notes on this checkpoint")
    before = listing(tmp_path)
    with pytest.raises(InspoError, match="merged exists and holds no model .* move it away"):
        merged_adapter_dir(adapter)
    assert listing(tmp_path) == before
    (adapter / "merged" / "notes.md").unlink()  # an empty folder is used
    assert (merged_adapter_dir(adapter) / "config.json").is_file()


def test_an_out_replaced_while_it_is_checked_is_read_again(tmp_path, monkeypatch):
    """The race CI met once: `out` absent, another report's directory put in place and taken away again while the
    early check read it. The read fails with FileNotFoundError; the check reads again instead of failing."""
    from inspo_cli.reporting import marker

    real, calls = marker._check, []

    def vanishing(out, location):
        calls.append(out)
        if len(calls) == 1:
            raise FileNotFoundError(2, "No such file or directory", str(out / "b-0.md"))
        return real(out, location)

    monkeypatch.setattr(marker, "_check", vanishing)
    marker.check_replaceable(tmp_path / "report")
    assert len(calls) == 2

"""`inspo report --decompose`: instruction x weights on fabricated runs whose every cell's per-question outcomes are
known, so each cell, each effect and the pairing are checked exactly; then the cells evaluated for real (the tiny
model) once, and read from the run directories by the next report and by `ablate --collect`."""

from __future__ import annotations

import json
import shutil
import socket

import numpy as np
import pytest
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.decomposition import CELLS, SEEDS, Q, fabricate_cells, make_runs, variants
from helpers.run_dirs import make_run, write_evaluation

from inspo_cli.ablation.decompose import Variant, build, choose, has_cells, missing
from inspo_cli.ablation.effects import EFFECTS, effects, holm
from inspo_cli.ablation.results import read_result
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.runs import RunDir


@pytest.fixture
def runs(tmp_path, repo_root, monkeypatch, tiny_model_dir):
    """Three seeds of an INSPO variant and of a static one, each with a final model (the tiny one) and its reported
    evaluation per question; I* differs per seed."""
    monkeypatch.chdir(repo_root)
    return make_runs(tmp_path / "runs", tiny_model_dir)


def test_every_cell_and_effect_is_the_known_per_question_outcome(runs):
    ((name, static, plans),) = build(choose(variants(runs)))
    assert (name, static) == ("inspo", "static")
    assert {s.name for s in missing(plans)} == {
        "initial-seed",
        "initial-evolved",
        "trained-seed",
        "trained-evolved",
        "static-seed",
        "static-evolved",
    }  # every cell: none read
    assert len([s for s in missing(plans) if s.name == "initial-seed"]) == 1  # one policy, one instruction: once
    fabricate_cells(plans)
    d = effects(plans, name, static)

    def mean(key) -> float:
        return float(np.mean([np.mean(CELLS[key](s)) for s in SEEDS]))

    for key in CELLS:
        assert d["cells"]["·".join(key)]["mean"] == pytest.approx(mean(key)), key
    found = {e["effect"]: e for e in d["effects"]}
    expected = {
        "instruction | trained": mean(("trained", "evolved")) - mean(("trained", "seed")),
        "instruction | initial": mean(("initial", "evolved")) - mean(("initial", "seed")),
        "weights | S": mean(("trained", "seed")) - mean(("initial", "seed")),
        "weights | I*": mean(("trained", "evolved")) - mean(("initial", "evolved")),
        "I* on static": mean(("static", "evolved")) - mean(("static", "seed")),
        "weights vs static | S": mean(("trained", "seed")) - mean(("static", "seed")),
        "total vs static": mean(("trained", "evolved")) - mean(("static", "seed")),
        "instruction share": (
            mean(("trained", "evolved"))
            - mean(("trained", "seed"))
            + mean(("static", "evolved"))
            - mean(("static", "seed"))
        )
        / 2,
        "weights share": (
            mean(("trained", "seed"))
            - mean(("static", "seed"))
            + mean(("trained", "evolved"))
            - mean(("static", "evolved"))
        )
        / 2,
    }
    for effect, value in expected.items():
        assert found[effect]["diff"] == pytest.approx(value), effect
    assert found["interaction"]["diff"] == pytest.approx(
        expected["instruction | trained"] - expected["instruction | initial"]
    )
    assert found["total vs static"]["diff"] == pytest.approx(
        expected["instruction | trained"] + expected["weights vs static | S"]
    )
    # the shares add up to the total, and are the mean of the two orders' splits
    assert found["instruction share"]["diff"] + found["weights share"]["diff"] == pytest.approx(
        found["total vs static"]["diff"]
    )
    assert found["instruction share"]["diff"] == pytest.approx(
        (found["instruction | trained"]["diff"] + found["I* on static"]["diff"]) / 2
    )
    # Holm over the family of ten: the smallest p times 10, each next one times one fewer, never decreasing
    ps = sorted((e["p"], e["p_holm"]) for e in found.values())
    assert len(ps) == len(EFFECTS) == 10
    running = 0.0
    for rank, (p, adjusted) in enumerate(ps):
        running = max(running, min(1.0, (10 - rank) * p))
        assert adjusted == pytest.approx(running) and adjusted >= p
    from inspo_cli.ablation.effects import markdown
    from inspo_cli.ablation.formatting import p_text

    text = "\n".join(markdown(d, "the final step"))
    assert "Holm-adjusted p |" in text and "Holm-adjusted over the 10 effects" in text
    total = next(line for line in text.splitlines() if line.startswith("| total vs static |"))
    assert total.endswith(f"] {p_text(found['total vs static']['p_holm'])} | 3 |")
    for e in found.values():  # every cell of a seed answered the same questions: paired by seed and question
        assert e["n"] == 3 and e["paired_seeds"] and e["paired_questions"] and e["questions"] == Q
        assert e["low"] < e["diff"] < e["high"] and 0 <= e["p"] <= 1
    # the interval of an effect is that of the per-seed, per-question differences (a paired test), computed here
    # independently: seeds x questions table of trained·I* − trained·S
    table = np.array([np.subtract(CELLS[("trained", "evolved")](s), CELLS[("trained", "seed")](s)) for s in SEEDS])
    from inspo_cli.ablation.compare import RunScores, compare

    direct = compare(
        [
            RunScores(s, {"world": float(row.mean())}, {"world": {f"q{q}": float(row[q]) for q in range(Q)}})
            for row, s in zip(table, SEEDS)
        ],
        [RunScores(s, {"world": 0.0}, {"world": {f"q{q}": 0.0 for q in range(Q)}}) for s in SEEDS],
    )
    assert found["instruction | trained"]["se"] == pytest.approx(direct.se)
    assert [p["cells"]["trained·evolved"] for p in d["per_seed"]] == [
        np.mean(CELLS[("trained", "evolved")](s)) for s in SEEDS
    ]


def test_the_static_cells_pair_by_seed_and_a_seed_without_a_static_run_has_none(runs):
    static = variants(runs)[1]
    static.runs = static.runs[:2]  # seed 2 of the static variant never finished
    ((_, _, plans),) = build(choose([variants(runs)[0], static]))
    assert [("static", "seed") in p.cells for p in plans] == [True, True, False]
    fabricate_cells(plans)
    d = effects(plans, "inspo", "static")
    found = {e["effect"]: e for e in d["effects"]}
    assert found["I* on static"]["n"] == 2 and found["instruction | trained"]["n"] == 3


def test_which_run_each_decomposition_cell_evaluates(runs):
    """Every cell is an evaluation of its own (policy, instruction) with the decomposition's settings, kept in the run
    whose policy it is; none is read from Table 1's evaluation (issue 51, class 9)."""
    ((_, _, plans),) = build(choose(variants(runs)))
    seed_text = initial_instructions(RunDir(runs[("inspo", 0)]).recipe())[0]
    for plan, seed in zip(plans, SEEDS):
        evolved = f"Evolved instruction of seed {seed}: search, then answer. {{question}}"
        inspo, static = RunDir(runs[("inspo", seed)]).recipe().model.name_or_path, f"static-s{seed}@final"
        assert {key: (spec.run.path.name, spec.model, spec.text, spec.cached) for key, spec in plan.cells.items()} == {
            ("initial", "seed"): (f"inspo-s{seed}", inspo, seed_text, False),
            ("initial", "evolved"): (f"inspo-s{seed}", inspo, evolved, False),
            ("trained", "seed"): (f"inspo-s{seed}", f"inspo-s{seed}@final", seed_text, False),
            ("trained", "evolved"): (f"inspo-s{seed}", f"inspo-s{seed}@final", evolved, False),
            ("static", "seed"): (f"static-s{seed}", static, seed_text, False),
            ("static", "evolved"): (f"static-s{seed}", static, evolved, False),
        }
        assert all(spec.directory.parent == spec.run.path / "decomposition" for spec in plan.cells.values())
    assert not has_cells(plans)  # Table 1's evaluations are there, but no cell reads them


def test_the_decomposition_does_not_depend_on_the_order_the_runs_are_given_in(runs):
    inspo, static = variants(runs)
    ((_, _, plans),) = build(choose([inspo, static]))
    fabricate_cells(plans)
    forward = effects(plans, "inspo", "static")
    inspo.runs.reverse()
    static.runs = [static.runs[1], static.runs[2], static.runs[0]]
    ((_, _, shuffled),) = build(choose([static, inspo]))
    assert [p.seed for p in shuffled] == list(SEEDS)
    assert effects(shuffled, "inspo", "static") == forward


def test_report_decompose_evaluates_the_missing_cells_once_and_reads_them_next_time(runs, tmp_path):
    roots = [str(runs[(v, s)]) for v in ("inspo", "static") for s in SEEDS]
    result = invoke("report", *roots, "--out", str(tmp_path / "report"), "--decompose", "inspo", "--device", "cpu")
    assert result.exit_code == 0, result.output
    # initial·S once (copied to the other seeds); every other cell per seed, Table 1's two included (a run's own policy
    # is evaluated in its own directory, even where, as here, it holds the same weights as another's)
    cells = sorted(p.parent.name.rsplit("-", 1)[0] for p in (tmp_path / "runs").glob("*/decomposition/*/cell.json"))
    assert all(cells.count(name) == 3 for name in ("initial-seed", "trained-evolved", "static-seed", "static-evolved"))
    stamps = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*/decomposition/*/results.json")}
    text = (tmp_path / "report" / "decomposition.md").read_text()
    assert "| initial policy (the recipe's model) |" in text and "| interaction |" in text
    effect_rows = [line for line in text.splitlines() if line.startswith("| instruction \\| trained |")]
    assert len(effect_rows) == 1 and effect_rows[0].replace("\\|", "").count("|") == 5  # four cells, pipes escaped
    assert (tmp_path / "report" / "decomposition-inspo.png").stat().st_size > 5000
    index = (tmp_path / "report" / "index.md").read_text()
    assert "Where the gain lives: inspo" in index and "decomposition-inspo.png" in index

    first = json.loads((tmp_path / "report" / "decomposition.json").read_text())
    assert {e["effect"]: e["n"] for e in first[0]["effects"]}["interaction"] == 3

    again = invoke("report", *roots, "--out", str(tmp_path / "report"), "--decompose", "inspo")
    assert again.exit_code == 0, again.output
    assert "evaluations to run" not in again.output
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # nothing evaluated again
    assert json.loads((tmp_path / "report" / "decomposition.json").read_text()) == first


def test_holm_adjusts_a_family_of_p_values_as_worked_out_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.5 (m = 4): 0.04, 0.06, 0.06 (kept at least the one before), 0.5
    assert holm([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert holm([0.4, 0.3]) == pytest.approx([0.6, 0.6]) and holm([0.9, 0.8]) == [1.0, 1.0] and holm([]) == []


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--decompose", "nosuch"], ["--decompose 'nosuch'", "no such variant", "inspo"]),
        (["--decompose", "static"], ["--decompose 'static'", "fixed instruction"]),
        (["--decompose", " , "], ["--decompose is empty"]),
        (["--device", "cpu"], ["--device", "add --decompose"]),
        (["--decompose", "inspo", "--device", "tpu"], ["tpu"]),
        (["--decompose", "inspo", "--reference", "nosuch"], ["--reference 'nosuch'", "choose from"]),
    ],
)
def test_decompose_refuses_bad_options_in_one_line(runs, tmp_path, args, fragments):
    roots = [str(runs[(v, s)]) for v in ("inspo", "static") for s in SEEDS]
    result = invoke("report", *roots, "--out", str(tmp_path / "report"), *args)
    assert_one_line_error(result, *fragments)
    assert not list((tmp_path / "runs").glob("*/decomposition"))


def test_a_damaged_cached_cell_is_refused_naming_it_and_the_fix(runs, tmp_path):
    ((_, _, plans),) = build(choose(variants(runs)))
    fabricate_cells(plans)
    damaged = plans[1].cells[("trained", "seed")].directory / "results.json"
    damaged.write_text("{not json")
    roots = [str(runs[(v, s)]) for v in ("inspo", "static") for s in SEEDS]
    result = invoke("report", *roots, "--out", str(tmp_path / "report"), "--decompose", "all")
    assert_one_line_error(result, str(damaged), "report again with --decompose")


def test_ablate_collect_shows_the_decomposition_an_earlier_report_evaluated(
    repo_root, monkeypatch, tmp_path, tiny_model_dir
):
    import yaml

    from inspo_cli.ablation.directory import AblationDir
    from inspo_cli.config import load_recipe

    monkeypatch.chdir(repo_root)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "recipe": "recipes/demo.yaml",
                "seeds": [0, 1],
                "variants": {"inspo": [], "search-r1": ["population.enabled=false"]},
            }
        )
    )
    out = tmp_path / "abl"
    assert invoke("ablate", "--sweep", sweep, "--out", out, "--print-commands").exit_code == 0
    ablation = AblationDir.open(out)
    runs = {}
    seed_text = initial_instructions(load_recipe(ablation.recipe_file("inspo"), written_by_run=True))[0]
    for seed in (0, 1):
        for variant, population in (("inspo", True), ("search-r1", False)):
            run = make_run(
                ablation.runs_dir,
                f"{variant}-s{seed}",
                seed,
                [0.1, 0.2, 0.3],
                None,
                population=population,
                overrides=(f"model.name_or_path={tiny_model_dir}",),
            )
            shutil.copytree(tiny_model_dir, run / "checkpoints" / "final")
            runs[(variant, seed)] = run
        write_evaluation(
            runs[("inspo", seed)] / "evaluations/step-3",
            CELLS[("trained", "evolved")](seed),
            f"Evolved {seed}. {{question}}",
        )
        write_evaluation(runs[("search-r1", seed)] / "evaluations/step-3", CELLS[("static", "seed")](seed), seed_text)
    result = invoke("ablate", "--collect", out)
    assert result.exit_code == 0, result.output
    assert "Where the gain lives" not in (out / "ablation.md").read_text()  # no cell evaluated: no section

    variants = [
        Variant(v, v == "search-r1", [(RunDir(runs[(v, s)]), read_result(RunDir(runs[(v, s)]), s)[0]) for s in (0, 1)])
        for v in ("inspo", "search-r1")
    ]
    ((_, _, plans),) = build(choose(variants))
    fabricate_cells(plans)
    result = invoke("ablate", "--collect", out)
    assert result.exit_code == 0, result.output
    md = (out / "ablation.md").read_text()
    assert "## Where the gain lives: inspo, instruction × weights, beside search-r1" in md
    trained_seed = np.mean([np.mean(CELLS[("trained", "seed")](s)) for s in (0, 1)])
    assert f"| trained: inspo | {trained_seed:.3f}" in md
    assert json.loads((out / "ablation.json").read_text())["decompositions"][0]["variant"] == "inspo"


def test_a_run_whose_policy_is_gone_is_refused_in_one_line_naming_it(runs, tmp_path):
    shutil.rmtree(runs[("inspo", 1)] / "checkpoints" / "final")
    roots = [str(runs[(v, s)]) for v in ("inspo", "static") for s in SEEDS]
    result = invoke("report", *roots, "--out", str(tmp_path / "report"), "--decompose", "inspo")
    assert_one_line_error(result, "inspo-s1", "no final model", "copy it back")


def test_an_evaluation_cut_off_leaves_nothing_that_reads_as_cached_and_its_leftover_goes(runs):
    from inspo_cli.ablation.decompose import _clear_leftovers

    ((_, _, plans),) = build(choose(variants(runs)))
    spec = plans[0].cells[("trained", "seed")]
    host = socket.gethostname()
    dead = spec.directory.with_name(f".{spec.directory.name}.tmp-{host}-999999999")  # no such process
    alive = spec.directory.with_name(f".{spec.directory.name}.tmp-{host}-1")  # pid 1: another report still at work
    for leftover in (dead, alive):
        write_evaluation(leftover, CELLS[("trained", "seed")](0), spec.text)
    elsewhere = spec.directory.with_name(f".{spec.directory.name}.tmp-another-host-999999999")  # not ours to judge
    write_evaluation(elsewhere, CELLS[("trained", "seed")](0), spec.text)
    assert not spec.cached
    _clear_leftovers(spec.directory)
    assert not dead.exists() and alive.exists() and elsewhere.exists()


def test_a_static_run_evaluated_on_other_questions_is_refused_naming_both(runs, tmp_path):
    """Each cell is evaluated with its own run's recipe: a static baseline that evaluates another benchmark (or
    limit) gave cells averaged over other questions than the effects, which keep only the shared benchmarks."""
    from inspo_cli.config import dump_recipe, load_recipe

    for seed in SEEDS:  # the whole static variant: its seeds are one recipe
        recipe_file = runs[("static", seed)] / "recipe.yaml"
        changed = load_recipe(recipe_file, ["evaluation.limit=7"], written_by_run=True)
        recipe_file.write_text(dump_recipe(changed))
    roots = [str(runs[(v, s)]) for v in ("inspo", "static") for s in SEEDS]
    result = invoke("report", *roots, "--out", str(tmp_path / "report"), "--decompose", "inspo")
    assert_one_line_error(result, "inspo-s0 and the static run static-s0", "evaluation.limit 4 against 7")
    assert not (tmp_path / "report").exists()
    for seed in SEEDS:  # the same limit, one more benchmark
        recipe_file = runs[("static", seed)] / "recipe.yaml"
        more = ["evaluation.limit=4", "evaluation.benchmarks=[world,nq]"]
        changed = load_recipe(recipe_file, more, written_by_run=True)
        recipe_file.write_text(dump_recipe(changed))
    result = invoke("report", *roots, "--out", str(tmp_path / "report"), "--decompose", "inspo")
    assert_one_line_error(result, "evaluation.benchmarks ['world'] against ['nq', 'world']")


def test_cells_evaluated_on_different_benchmarks_make_no_decomposition(runs):
    """The effects keep only the benchmarks every cell has and the cells' means were over all of each cell's: the
    total was +0.200 beside cells whose difference is -0.017. Now it is refused, naming the seed and each cell's."""
    from inspo_cli.errors import InspoError

    ((_, _, plans),) = build(choose(variants(runs)))
    fabricate_cells(plans)
    static_seed = plans[0].cells[("static", "seed")]
    results = json.loads((static_seed.directory / "results.json").read_text())
    results["scores"]["agent"]["nq"] = {"em": 0.9, "f1": 0.9, "subem": 0.9, "searches": 1.0, "n": 1}
    (static_seed.directory / "results.json").write_text(json.dumps(results))
    with (static_seed.directory / "predictions.jsonl").open("a") as f:
        f.write(json.dumps({"method": "agent", "benchmark": "nq", "id": "n0", "em": 0.9}) + "\n")
    with pytest.raises(InspoError, match="cells of inspo-s0 were evaluated on different benchmarks") as error:
        effects(plans, "inspo", "static")
    assert "static·seed on nq, world" in str(error.value) and "trained·seed on world" in str(error.value)

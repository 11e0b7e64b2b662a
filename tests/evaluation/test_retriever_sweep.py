"""`inspo evaluate --sweep`: one policy under each retriever setting, compared question by question.

The policy is faked at the `PolicyBackend` seam by a reader that searches once with the question and answers the
gold only when the passages it was shown hold it, so its EM depends on the real BM25 retriever's top k exactly as
a retrieval-bound agent's does; the retriever, the agent method and the statistics are the real ones."""

from __future__ import annotations

import json

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.benchmarks import WORLD, load_benchmark
from inspo_cli.errors import InspoError
from inspo_cli.evaluation.sweep import Setting, paired, parse_sweeps, reference_setting, settings


class Reader:
    """Searches the question, then answers the gold answer if a passage shown holds it, else "unknown"."""

    def __init__(self, tokenizer, questions):
        self.tokenizer, self.questions = tokenizer, questions

    def generate(self, contexts, max_new_tokens, stop=()):
        from inspo_cli.policy.generation import Generation

        out = []
        for context in contexts:
            text = self.tokenizer.decode(context)
            q = next(q for q in self.questions if f"Question: {q.question}" in text or q.question in text)
            shown = text.split(q.question)[-1]
            if "<information>" not in shown:
                reply = f"<search> {q.question} </search>"
            else:
                found = next((a for a in q.golden_answers if a in shown.split("<information>")[-1]), None)
                reply = f"<answer> {found or 'unknown'} </answer>"
            out.append(Generation(self.tokenizer(reply, add_special_tokens=False)["input_ids"], "stop"))
        return out


@pytest.fixture
def reader(monkeypatch, tiny_model_dir, repo_root):
    import inspo_cli.policy.backends as backends
    from inspo_cli.config import ModelConfig
    from inspo_cli.policy.models import load_tokenizer

    questions = load_benchmark(WORLD, "test", world_dir=repo_root / "data/world", limit=30)
    loads = []

    def load_backend(model, rollout, batch_size=32, device=None, seed=0, **kw):
        tokenizer = load_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
        loads.append(model.name_or_path)
        return Reader(tokenizer, questions), tokenizer

    monkeypatch.setattr(backends, "load_backend", load_backend)
    return loads


def sweep(tiny_model_dir, out, *args):
    return invoke(
        "evaluate", "--benchmarks", "world", "--model", tiny_model_dir, "--method", "agent", "--limit", 30,
        "--batch-size", 10, "--device", "cpu", "--out", out, "--set", "rollout.max_turns=2", *args,
    )  # fmt: skip


def test_a_top_k_sweep_evaluates_one_policy_under_each_setting(reader, tiny_model_dir, tmp_path):
    out = tmp_path / "sweep"
    result = sweep(tiny_model_dir, out, "--sweep", "retriever.topk=1,3,5")
    assert result.exit_code == 0, result.output
    assert len(reader) == 1  # the model loaded once for the three settings
    table = json.loads((out / "sweep.json").read_text())
    assert table["reference"] == "topk=3"  # the recipe's own (the paper's top 3)
    rows = {row["setting"]: row for row in table["rows"]}
    assert set(rows) == {"topk=1", "topk=3", "topk=5"} and rows["topk=3"]["reference"]
    em = {name: row["average"] for name, row in rows.items()}
    assert em["topk=1"] <= em["topk=3"] <= em["topk=5"] and em["topk=1"] < em["topk=5"]  # more passages, more found
    for name in rows:  # each setting's own evaluation, and the table's EM is its EM
        results = json.loads((out / f"topk-{name[5:]}" / "results.json").read_text())
        assert results["topk"] == int(name[5:]) and results["sweep"] == {"retriever.topk": name[5:]}
        assert results["scores"]["agent"]["world"]["em"] == pytest.approx(em[name])
    low = rows["topk=1"]["average_difference"]
    assert low["n"] == 30 and low["diff"] == pytest.approx(em["topk=1"] - em["topk=3"])
    assert low["low"] < low["diff"] < low["high"]
    assert rows["topk=3"]["average_difference"]["diff"] == 0.0
    markdown = (out / "sweep.md").read_text()
    assert "| topk=3 | agent |" in markdown and "| reference | 30 |" in markdown
    assert json.loads((out / "sweep.json").read_text())["command"].startswith("inspo ")  # as the run was started
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_paired_interval_is_students_t_over_question_differences():
    from scipy import stats

    reference = {str(i): float(i % 2) for i in range(40)}
    other = {str(i): float(i % 3 == 0) for i in range(40)}
    got = paired(reference, other)
    diffs = [other[k] - reference[k] for k in reference]
    test = stats.ttest_1samp(diffs, 0.0)
    low, high = test.confidence_interval(0.95)
    assert got["diff"] == pytest.approx(sum(diffs) / 40) and got["n"] == 40
    assert (got["low"], got["high"]) == (pytest.approx(low), pytest.approx(high))
    assert paired({"a": 1.0}, {"b": 1.0})["n"] == 0  # no question in common: no difference
    assert paired({"a": 1.0, "b": 0.0}, {"a": 1.0})["low"] is None  # one question: no interval


def test_sweeps_combine_and_the_reference_is_the_recipes_own_setting():
    sweeps = parse_sweeps(["retriever.topk=1,3", "retriever.index=idx/a,idx/b"])
    combos = settings(sweeps)
    assert [s.label for s in combos] == ["topk=1 index=idx/a", "topk=1 index=idx/b", "topk=3 index=idx/a",
                                         "topk=3 index=idx/b"]  # fmt: skip
    assert reference_setting(combos, {"retriever.topk": "3", "retriever.index": "idx/b"}).label == "topk=3 index=idx/b"
    assert reference_setting(combos, {"retriever.topk": "7"}) == combos[0]
    assert reference_setting(combos, {"retriever.topk": "3", "retriever.index": "None"}).label == "topk=3 index=idx/a"
    assert Setting((("retriever.index", "../x/y z"),)).folder == "index-..-x-y-z"


@pytest.mark.parametrize(
    "specs, fragment",
    [
        (["topk=1,3"], "give a retriever field"),
        (["model.name_or_path=a,b"], "only retriever fields"),
        (["retriever.topk=1,,3"], "an empty value"),
        (["retriever.topk=1,1"], "'1' and '1' are one value"),
        (["retriever.topk=3,1,03"], "'3' and '03' are one value as the recipe reads it"),  # both the integer 3
        (["retriever.index=a,'a'"], "are one value"),
        (["retriever.topk=1", "retriever.topk=3"], "names retriever.topk twice"),
        (["retriever.topk=" + ",".join(map(str, range(1, 66)))], "more than 64"),
    ],
)
def test_bad_sweeps_are_refused(specs, fragment):
    with pytest.raises(InspoError, match=fragment):
        parse_sweeps(specs)


def test_a_bad_setting_fails_before_the_model_loads(reader, tiny_model_dir, tmp_path, repo_root):
    result = sweep(tiny_model_dir, tmp_path / "a", "--sweep", "retriever.topk=3,0")
    assert_one_line_error(result, "--sweep setting topk=0", "retriever.topk: must be between 1 and 100")
    corpus = repo_root / "data/world/corpus.jsonl"
    result = sweep(tiny_model_dir, tmp_path / "b", "--sweep", "retriever.topk=3", "--retriever", corpus)
    assert_one_line_error(result, "--retriever and --sweep")
    (tmp_path / "no-index").mkdir()
    result = sweep(tiny_model_dir, tmp_path / "c", "--sweep", f"retriever.index={tmp_path / 'no-index'}")
    assert_one_line_error(result, "--sweep setting index=", "a directory without index.json")
    assert reader == [] and not (tmp_path / "a").exists() and not (tmp_path / "c").exists()


def test_settings_whose_folder_names_meet_get_their_own_folders():
    from inspo_cli.commands.evaluate_sweep import unique_folders

    combos = settings(parse_sweeps(["retriever.index=idx/a b,idx/a-b,idx/a?b"]))
    assert list(unique_folders(combos).values()) == ["index-idx-a-b", "index-idx-a-b-2", "index-idx-a-b-3"]


def test_the_average_over_benchmarks_adds_their_variances_over_k_squared():
    from inspo_cli.evaluation.sweep import _average

    a = {"diff": 0.10, "se": 0.03, "df": 99, "n": 100, "low": 0, "high": 0}
    b = {"diff": 0.20, "se": 0.04, "df": 49, "n": 50, "low": 0, "high": 0}
    got = _average([a, b])
    assert got["diff"] == pytest.approx(0.15) and got["se"] == pytest.approx(0.025) and got["df"] == 49
    assert got["n"] == 150 and got["high"] - got["diff"] == pytest.approx(0.025 * 2.009575, rel=1e-4)


def test_with_the_judge_the_sweep_tables_it_beside_em(reader, tiny_model_dir, tmp_path, serve, monkeypatch):
    from helpers.fake_providers import KEY, KEY_ENV, Reply, success_body

    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai", Reply(body=success_body("openai", "Verdict: incorrect")))
    judge = [f"judge.base_url={server.base_url}", f"judge.api_key_env={KEY_ENV}", f"judge.cache={tmp_path / 'c.db'}"]
    args = [a for s in ["evaluation.metrics=[em,judge]", "judge.provider=openai", *judge] for a in ("--set", s)]
    out = tmp_path / "sweep"
    result = sweep(tiny_model_dir, out, "--sweep", "retriever.topk=1,3", *args)
    assert result.exit_code == 0, result.output
    table = json.loads((out / "sweep.json").read_text())
    judged = {row["setting"]: row for row in table["judge"]["rows"]}
    assert {name: row["average"] for name, row in judged.items()} == {"topk=1": 0.0, "topk=3": 0.0}
    assert judged["topk=1"]["average_difference"]["n"] == 30  # every prediction judged, paired by question
    text = (out / "sweep.md").read_text()
    assert "## Retriever sweep (LLM judge" in text and text.count("`inspo ") == 1


# -- several runs: the seeds of one recipe ------------------------------------------------------------------------


class RememberingReader(Reader):
    """A reader that, being another seed's policy, also knows the answer to every `every`-th question without
    reading it anywhere."""

    def __init__(self, tokenizer, questions, every):
        super().__init__(tokenizer, questions)
        self.known = {q.question: q.golden_answers[0] for i, q in enumerate(questions) if i % every == 0}

    def generate(self, contexts, max_new_tokens, stop=()):
        out = super().generate(contexts, max_new_tokens, stop)
        for i, context in enumerate(contexts):
            text = self.tokenizer.decode(context)
            known = next((a for q, a in self.known.items() if q in text), None)
            if known is not None and "<information>" in text:
                answer = self.tokenizer(f"<answer> {known} </answer>", add_special_tokens=False)["input_ids"]
                out[i] = type(out[i])(answer, "stop")
        return out


def seed_run(path, repo_root, tiny_model_dir, seed, sets=()):
    """A finished run of the default recipe and `seed` (static instruction, flat rewards) with its final model."""
    import shutil

    from inspo_cli.config import dump_recipe, load_recipe

    recipe = load_recipe(None, ["population.enabled=false", f"run.seed={seed}", *sets])
    path.mkdir(parents=True)
    (path / "recipe.yaml").write_text(dump_recipe(recipe))
    (path / "run.json").write_text("{}")
    (path / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "reward": 0.5}) + "\n" for i in (1, 2)))
    shutil.copytree(tiny_model_dir, path / "checkpoints/final")
    (path / "summary.json").write_text(json.dumps({"steps": 2, "best_instruction": "Answer."}))
    return path


@pytest.fixture
def seeds(monkeypatch, tiny_model_dir, repo_root, tmp_path):
    """Three runs of one recipe; run s<k>'s policy also knows every (k + 2)-th answer."""
    import inspo_cli.policy.backends as backends
    from inspo_cli.config import ModelConfig
    from inspo_cli.policy.models import load_tokenizer

    questions = load_benchmark(WORLD, "test", world_dir=repo_root / "data/world", limit=30)
    loads = []

    def load_backend(model, rollout, batch_size=32, device=None, seed=0, **kw):
        tokenizer = load_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))
        loads.append(model.name_or_path)
        k = int(model.name_or_path.split("-s")[-1][0])
        return RememberingReader(tokenizer, questions, k + 2), tokenizer

    monkeypatch.setattr(backends, "load_backend", load_backend)
    runs = [seed_run(tmp_path / f"demo-s{k}", repo_root, tiny_model_dir, k) for k in range(3)]
    return runs, loads


def sweep_runs(runs, out, *args):
    run_args = [a for run in runs for a in ("--run", run)]
    return invoke(
        "evaluate", *run_args, "--benchmarks", "world", "--method", "agent", "--limit", 30, "--batch-size", 10,
        "--device", "cpu", "--out", out, "--set", "rollout.max_turns=2", *args,
    )  # fmt: skip


def test_a_sweep_over_the_seeds_of_a_recipe_pairs_by_run_and_question(seeds, tmp_path):
    from inspo_cli.ablation.compare import RunScores, compare, estimate

    runs, loads = seeds
    out = tmp_path / "sweep"
    result = sweep_runs(runs, out, "--sweep", "retriever.topk=1,3")
    assert result.exit_code == 0, result.output
    assert len(loads) == 3  # each run's model loaded once for both settings
    table = json.loads((out / "sweep.json").read_text())
    assert table["runs"] == 3 and table["reference"] == "topk=3"

    def scores(setting):  # each run's own evaluation under the setting, as written in its folder
        found = []
        for index, run in enumerate(runs):
            rows = [json.loads(line) for line in (out / run.name / setting / "predictions.jsonl").open()]
            found.append(
                RunScores(
                    index, {"world": sum(r["em"] for r in rows) / 30}, {"world": {r["id"]: r["em"] for r in rows}}
                )
            )
        return found

    one, three = scores("topk-1"), scores("topk-3")
    assert len({s.em["world"] for s in one}) == 3  # the three seeds' policies differ
    rows = {row["setting"]: row for row in table["rows"]}
    assert rows["topk=3"]["average"] == pytest.approx(estimate(three).mean)
    assert rows["topk=3"]["interval"]["low"] == pytest.approx(estimate(three).low)
    expected = compare(one, three)
    difference = rows["topk=1"]["average_difference"]
    assert difference["diff"] == pytest.approx(expected.diff) and difference["diff"] < 0  # fewer passages, less found
    assert (difference["low"], difference["high"], difference["p"]) == (
        pytest.approx(expected.low), pytest.approx(expected.high), pytest.approx(expected.p),
    )  # fmt: skip
    assert difference["pairing"] == "seed, question"
    text = (out / "sweep.md").read_text()
    assert "# Retriever sweep over 3 runs (EM, %)" in text and "| topk=3 | agent |" in text
    assert "| run, question |" in text
    for run in runs:
        results = json.loads((out / run.name / "topk-1" / "results.json").read_text())
        assert results["run"] == str(run) and results["checkpoint"] == "final"


def test_several_runs_are_checked_before_any_model_loads(seeds, tmp_path, repo_root, tiny_model_dir):
    runs, loads = seeds
    other = seed_run(tmp_path / "other-s0", repo_root, tiny_model_dir, 0, ["training.learning_rate=0.5"])
    sweep = ("--sweep", "retriever.topk=1,3")
    assert_one_line_error(sweep_runs([runs[0], other], tmp_path / "a", *sweep), "differ in more than their seed")
    assert_one_line_error(sweep_runs([runs[0], runs[0]], tmp_path / "b", *sweep), "is given twice")
    assert_one_line_error(sweep_runs(runs[:2], tmp_path / "c"), "only with --sweep")
    assert_one_line_error(sweep_runs(runs[:2], tmp_path / "d", "--model", tiny_model_dir, *sweep), "drop --recipe")
    assert_one_line_error(sweep_runs(runs[:2], tmp_path / "e", "--sweep", "retriever.topk=1,0"), "--sweep setting")
    assert loads == [] and not any((tmp_path / name).exists() for name in "abcde")


def test_a_sweep_over_runs_tables_the_judge_beside_em(seeds, tmp_path, serve, monkeypatch):
    from helpers.fake_providers import KEY, KEY_ENV, Reply, success_body

    runs, _ = seeds
    monkeypatch.setenv(KEY_ENV, KEY)
    server = serve("openai", Reply(body=success_body("openai", "Verdict: incorrect")))
    judge = [f"judge.base_url={server.base_url}", f"judge.api_key_env={KEY_ENV}", f"judge.cache={tmp_path / 'c.db'}"]
    args = [a for s in ["evaluation.metrics=[em,judge]", "judge.provider=openai", *judge] for a in ("--set", s)]
    out = tmp_path / "sweep"
    result = sweep_runs(runs[:2], out, "--sweep", "retriever.topk=1,3", *args)
    assert result.exit_code == 0, result.output
    table = json.loads((out / "sweep.json").read_text())
    assert table["judge"]["metric"] == "judge" and table["judge"]["runs"] == 2
    assert [row["average"] for row in table["judge"]["rows"]] == [0.0, 0.0]
    assert [row["average"] for row in table["rows"]] != [0.0, 0.0]  # EM's own table, not the judge's
    assert "## Retriever sweep over 2 runs (LLM judge" in (out / "sweep.md").read_text()


def test_a_judge_sweep_shows_how_many_predictions_each_average_and_each_difference_is_over():
    """Each setting's judge mean is over its own judged predictions, its difference over the questions judged under
    both: 100 beside 50 with a difference of +0 must show why (2 judged, 2 paired), and say so."""
    from inspo_cli.evaluation.sweep import compare_settings, markdown

    def rows(verdicts):
        return [{"method": "agent", "benchmark": "world", "id": f"q{i}", "em": 0.0, "judge": v} for i, v in
                enumerate(verdicts)]  # fmt: skip

    reference, other = Setting((("retriever.topk", "3"),)), Setting((("retriever.topk", "1"),))
    table = compare_settings([(reference, rows([1.0, 1.0, 0.0, 0.0])), (other, rows([1.0, 1.0, None, None]))],
                             reference, "judge")  # fmt: skip
    text = markdown(table, None)
    assert "| Questions | Judged |" in text and "over the questions judged under both" in text
    assert "| topk=3 | agent | 50.0 | 50.0 | reference | 4 | 4 |" in text
    assert "| topk=1 | agent | 100.0 | 100.0 | +0.0 [+0.0, +0.0] | 2 | 2 |" in text
    em = markdown(compare_settings([(reference, rows([1.0] * 4)), (other, rows([0.0] * 4))], reference), None)
    assert "Judged" not in em and "judged under both" not in em

"""Benchmark loading as a user relies on it: fixtures in FlashRAG's format, offline errors, the hub seam."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from inspo_cli.benchmark_fetch import benchmark_status, fetch_benchmarks
from inspo_cli.benchmarks import (
    BENCHMARKS,
    HUB_REPO,
    TEST_BENCHMARKS,
    TRAIN_MIXTURE,
    Question,
    load_benchmark,
    load_questions,
    load_train_mixture,
    local_path,
    parse_benchmark_names,
)
from inspo_cli.errors import InspoError

FIXTURES = Path(__file__).parent / "fixtures" / "benchmarks"
SEARCH_R1_TEST_SPLITS = {
    "nq": "test",
    "triviaqa": "test",
    "popqa": "test",
    "hotpotqa": "dev",
    "2wikimultihopqa": "dev",
    "musique": "dev",
    "bamboogle": "test",
}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr("inspo_cli.hub.hub_unreachable", lambda: None)  # the hub's seam is its probe and load_dataset


@pytest.fixture
def fake_hub(monkeypatch):
    """Replace only the hub: `datasets.load_dataset` serves fixture rows and records its calls."""
    import datasets

    calls = []

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        rows = [json.loads(line) for line in (FIXTURES / name / f"{split}.jsonl").read_text().splitlines()]
        return datasets.Dataset.from_list(rows)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _single_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


# -- fixtures load with the split Search-R1 reports ------------------------------------------------------------


def test_table1_benchmarks_and_search_r1_splits():
    assert set(TEST_BENCHMARKS) == set(SEARCH_R1_TEST_SPLITS)
    assert TEST_BENCHMARKS[:4] == ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")  # paper's Table 1 order
    assert {name: BENCHMARKS[name].test_split for name in TEST_BENCHMARKS} == SEARCH_R1_TEST_SPLITS
    assert [n for n in TEST_BENCHMARKS if BENCHMARKS[n].multi_hop] == [
        "hotpotqa",
        "2wikimultihopqa",
        "musique",
        "bamboogle",
    ]
    assert BENCHMARKS["2wikimultihopqa"].display_name == "2WikiMQA"
    assert TRAIN_MIXTURE == ("nq", "hotpotqa") and HUB_REPO == "RUC-NLPIR/FlashRAG_datasets"


@pytest.mark.parametrize("name", list(SEARCH_R1_TEST_SPLITS))
def test_every_fixture_loads_with_its_default_split(name):
    questions = load_benchmark(name, data_dir=FIXTURES)
    expected_rows = len((FIXTURES / name / f"{SEARCH_R1_TEST_SPLITS[name]}.jsonl").read_text().splitlines())
    assert len(questions) == expected_rows >= 4
    for q in questions:
        assert q.source == name
        assert isinstance(q.id, str) and q.id and isinstance(q.question, str) and q.question == q.question.strip()
        assert isinstance(q.golden_answers, tuple) and q.golden_answers
        assert all(isinstance(a, str) and a for a in q.golden_answers)
    assert len({q.id for q in questions}) == len(questions)


def test_question_fields_aliases_and_metadata():
    nq = load_benchmark("nq", data_dir=FIXTURES)
    assert nq[0] == Question("test_0", "who got the first nobel prize in physics", ("Wilhelm Conrad Röntgen",), "nq")
    assert nq[2].golden_answers == ("50", "fifty")
    hotpot = load_benchmark("hotpot", data_dir=FIXTURES)  # alias
    assert hotpot[0].golden_answers == ("yes",)
    assert hotpot[0].metadata["type"] == "comparison"
    assert hotpot[0].metadata["supporting_facts"]["title"] == ["Scott Derrickson", "Ed Wood"]
    assert load_benchmark("2WIKI", data_dir=FIXTURES)[0].source == "2wikimultihopqa"
    hash(nq[0])  # usable as a dict key / in sets, metadata excluded


def test_question_key_names_the_question_across_benchmarks():
    nq, hotpot = load_benchmark("nq", data_dir=FIXTURES)[0], load_benchmark("hotpotqa", data_dir=FIXTURES)[0]
    assert nq.key == "nq:test_0" and hotpot.key == f"hotpotqa:{hotpot.id}"
    assert len({q.key for q in load_train_mixture(FIXTURES)}) == len(load_train_mixture(FIXTURES))


def test_limit_takes_the_first_n_and_rejects_nonsense():
    assert [q.id for q in load_benchmark("nq", data_dir=FIXTURES, limit=2)] == ["test_0", "test_1"]
    assert len(load_benchmark("nq", data_dir=FIXTURES, limit=100)) == 5
    with pytest.raises(InspoError, match="limit must be a positive integer"):
        load_benchmark("nq", data_dir=FIXTURES, limit=0)


def test_explicit_split_and_extra_top_level_fields(tmp_path):
    assert [q.id for q in load_benchmark("nq", "train", data_dir=FIXTURES)][0] == "train_0"
    # the synthetic world's rows carry extra top-level fields: they land in metadata
    _write(
        tmp_path / "world" / "dev.jsonl",
        json.dumps(
            {
                "id": "w1",
                "question": "Where was Ilsa Varn born?",
                "golden_answers": ["Corvane"],
                "type": "bridge",
                "hops": 2,
                "supporting_ids": ["p3", "p9"],
            }
        )
        + "\n",
    )
    (q,) = load_benchmark("world", "dev", world_dir=tmp_path / "world")
    assert q.source == "world" and q.metadata == {"type": "bridge", "hops": 2, "supporting_ids": ["p3", "p9"]}
    with pytest.raises(InspoError, match="inspo data world"):
        load_benchmark("world", "test", world_dir=tmp_path / "world")


# -- other file formats -----------------------------------------------------------------------------------------


def test_parquet_and_json_array_load_like_jsonl(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [json.loads(line) for line in (FIXTURES / "hotpotqa" / "dev.jsonl").read_text().splitlines()]
    (tmp_path / "hotpotqa").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "hotpotqa" / "dev.parquet")
    musique = [json.loads(line) for line in (FIXTURES / "musique" / "dev.jsonl").read_text().splitlines()]
    _write(tmp_path / "musique" / "dev.json", json.dumps(musique, indent=2))  # a JSON array, not lines

    assert local_path("hotpotqa", "dev", tmp_path) == tmp_path / "hotpotqa" / "dev.parquet"
    from_parquet = load_benchmark("hotpotqa", data_dir=tmp_path)
    from_jsonl = load_benchmark("hotpotqa", data_dir=FIXTURES)
    assert from_parquet == from_jsonl
    assert [q.metadata["type"] for q in from_parquet] == [q.metadata["type"] for q in from_jsonl]
    assert load_benchmark("musique", data_dir=tmp_path) == load_benchmark("musique", data_dir=FIXTURES)


def test_jsonl_wins_over_parquet_and_missing_ids_are_generated(tmp_path):
    path = _write(
        tmp_path / "nq" / "test.jsonl",
        '{"question": "q one", "golden_answers": "a"}\n\n{"question": "q two", "golden_answers": ["b", 1999]}\n',
    )
    _write(tmp_path / "nq" / "test.parquet", "not read")
    assert local_path("nq", "test", tmp_path) == path
    questions = load_questions(path)
    # ids default to FlashRAG's own style, <split>_<row>; a bare string answer becomes a one-item tuple
    assert [(q.id, q.golden_answers, q.source) for q in questions] == [
        ("test_0", ("a",), "nq"),
        ("test_1", ("b", "1999"), "nq"),
    ]


# -- errors a user can fix ----------------------------------------------------------------------------------------


def test_offline_and_missing_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(InspoError) as error:
        load_benchmark("nq", data_dir=tmp_path / "benchmarks")
    message = _single_line(error)
    assert str(tmp_path / "benchmarks" / "nq" / "test.jsonl") in message
    assert "inspo data fetch nq" in message and "HF_HUB_OFFLINE" in message
    with pytest.raises(InspoError, match="inspo data fetch nq_hotpotqa"):
        load_train_mixture(tmp_path)
    with pytest.raises(InspoError, match="FlashRAG has no such split"):
        load_benchmark("popqa", "train", data_dir=tmp_path)


@pytest.mark.parametrize(
    "line, expected",
    [
        ('{"id": "x", "golden_answers": ["a"]}', "field 'question' must be a non-empty string"),
        ('{"id": "x", "question": "  ", "golden_answers": ["a"]}', "field 'question' must be a non-empty string"),
        ('{"id": "x", "question": "q", "golden_answers": {"a": 1}}', "field 'golden_answers' must be a non-empty list"),
        ('{"id": "x", "question": "q", "golden_answers": []}', "field 'golden_answers' must be a non-empty list"),
        (
            '{"id": "x", "question": "q", "golden_answers": ["a", null]}',
            "'golden_answers' item 1 must be a non-empty string",
        ),
        ('{"id": "x", "question": "q", "answer": "a"}', "rename field 'answer' to 'golden_answers'"),
        ('{"id": "x", "question": "q", "golden_answers": ["a"]', "not valid JSON"),
        ('["q", "a"]', "expected an object"),
        ('{"id": "test_0", "question": "q", "golden_answers": ["a"]}', "id 'test_0' already used"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, line, expected):
    good = '{"id": "test_0", "question": "fine", "golden_answers": ["ok"]}'
    path = _write(tmp_path / "nq" / "test.jsonl", good + "\n" + line + "\n")
    with pytest.raises(InspoError) as error:
        load_benchmark("nq", data_dir=tmp_path)
    message = _single_line(error)
    assert f"{path}:2:" in message and expected in message


def test_unreadable_parquet_is_a_clear_error(tmp_path):
    _write(tmp_path / "nq" / "test.parquet", "this is not parquet")
    with pytest.raises(InspoError, match="not a readable parquet file"):
        load_benchmark("nq", data_dir=tmp_path)


# -- names ----------------------------------------------------------------------------------------------------------


def test_parse_benchmark_names():
    assert parse_benchmark_names("nq,2wiki") == ["nq", "2wikimultihopqa"]
    assert parse_benchmark_names(" TQA , hotpot,nq,nq ") == ["triviaqa", "hotpotqa", "nq"]
    assert parse_benchmark_names("all") == list(TEST_BENCHMARKS)
    assert parse_benchmark_names("world,all")[0] == "world" and len(parse_benchmark_names("world,all")) == 8
    assert parse_benchmark_names(["nq", "musique"]) == ["nq", "musique"]
    assert parse_benchmark_names("nq_hotpotqa_train") == ["nq_hotpotqa"]
    with pytest.raises(InspoError) as error:
        parse_benchmark_names("nq,hotpotq")
    message = _single_line(error)
    assert "'hotpotq'" in message and "did you mean 'hotpotqa'" in message and "bamboogle" in message
    with pytest.raises(InspoError, match="no benchmark named"):
        parse_benchmark_names(" , ")


# -- the training mixture ---------------------------------------------------------------------------------------


def test_train_mixture_is_nq_then_hotpotqa():
    mixture = load_train_mixture(FIXTURES)
    expected = load_benchmark("nq", "train", data_dir=FIXTURES) + load_benchmark("hotpotqa", "train", data_dir=FIXTURES)
    assert mixture == expected
    assert [q.source for q in mixture] == ["nq"] * 5 + ["hotpotqa"] * 5
    assert load_benchmark("nq_hotpotqa", data_dir=FIXTURES) == mixture
    small = load_train_mixture(FIXTURES, limit=3)  # shared evenly so both sets are represented
    assert [(q.source, q.id) for q in small] == [("nq", "train_0"), ("nq", "train_1"), ("hotpotqa", "train_0")]


# -- the hub, replaced at its seam --------------------------------------------------------------------------------


def test_fetch_offline_is_a_clear_error(tmp_path, fake_hub):
    with pytest.raises(InspoError) as error:
        fetch_benchmarks(["nq"], data_dir=tmp_path)
    message = _single_line(error)
    assert "HF_HUB_OFFLINE=1" in message and HUB_REPO in message
    assert fake_hub == [] and not (tmp_path / "nq").exists()


def test_fetch_writes_files_that_load_benchmark_reads(tmp_path, fake_hub, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    ticks = []
    written = fetch_benchmarks(["hotpotqa", "nq_hotpotqa"], data_dir=tmp_path, progress=lambda *t: ticks.append(t))
    assert written == [
        tmp_path / "hotpotqa" / "dev.jsonl",
        tmp_path / "nq" / "train.jsonl",
        tmp_path / "hotpotqa" / "train.jsonl",
    ]
    assert fake_hub == [(HUB_REPO, "hotpotqa", "dev"), (HUB_REPO, "nq", "train"), (HUB_REPO, "hotpotqa", "train")]
    assert load_benchmark("hotpotqa", data_dir=tmp_path, allow_hub=False) == load_benchmark(
        "hotpotqa", data_dir=FIXTURES
    )
    assert load_train_mixture(tmp_path, allow_hub=False) == load_train_mixture(FIXTURES)
    assert ticks == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert not list(tmp_path.rglob("*.tmp"))


def test_fetch_failure_and_bad_requests(tmp_path, monkeypatch):
    import datasets

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")

    def unreachable(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'RUC-NLPIR/FlashRAG_datasets' on the Hub (LocalEntryNotFoundError)\nmore")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    with pytest.raises(InspoError) as error:
        fetch_benchmarks(["bamboogle"], data_dir=tmp_path)
    message = _single_line(error)
    assert "Couldn't reach" in message and str(tmp_path / "bamboogle" / "test.jsonl") in message
    with pytest.raises(InspoError, match="no 'test' split for 'hotpotqa'"):
        fetch_benchmarks(["hotpotqa"], splits=["test"], data_dir=tmp_path)
    with pytest.raises(InspoError, match="nothing to download"):
        fetch_benchmarks(["world"], data_dir=tmp_path)
    # load_benchmark falls back to the hub only when allowed, and reports its failure with the fix
    with pytest.raises(InspoError, match="inspo data fetch bamboogle"):
        load_benchmark("bamboogle", data_dir=tmp_path)


def test_fetch_writes_nothing_when_a_hub_row_is_malformed(tmp_path, monkeypatch):
    import datasets

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("HF_DATASETS_OFFLINE")
    rows = [
        {"id": "0", "question": "q?", "golden_answers": ["a"]},
        {"id": "1", "question": "", "golden_answers": ["a"]},
    ]
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: datasets.Dataset.from_list(rows))
    with pytest.raises(InspoError) as error:
        fetch_benchmarks(["bamboogle"], data_dir=tmp_path)
    assert _single_line(error).startswith(f"{HUB_REPO}/bamboogle/test.jsonl:2: field 'question'")
    assert not (tmp_path / "bamboogle").exists()


def test_load_benchmark_reads_the_hub_when_the_file_is_absent(tmp_path, fake_hub):
    questions = load_benchmark("musique", data_dir=tmp_path, limit=2, allow_hub=True)
    assert fake_hub == [(HUB_REPO, "musique", "dev")]
    assert questions == load_benchmark("musique", data_dir=FIXTURES, limit=2)
    assert not (tmp_path / "musique").exists()  # the hub path caches in datasets' cache, not in data_dir


# -- status for `inspo data list` ----------------------------------------------------------------------------------


def test_benchmark_status_reports_present_and_missing(tmp_path):
    shutil.copytree(FIXTURES / "nq", tmp_path / "benchmarks" / "nq")
    _write(tmp_path / "world" / "test.jsonl", '{"id": "w0", "question": "q", "golden_answers": ["a"]}\n')
    status = benchmark_status(tmp_path / "benchmarks", tmp_path / "world")
    by_key = {(row["name"], row["split"]): row for row in status}
    assert len(status) == len(TEST_BENCHMARKS) + len(TRAIN_MIXTURE) + 3
    assert [row["name"] for row in status[:7]] == list(TEST_BENCHMARKS)
    nq_test = by_key[("nq", "test")]
    assert nq_test["path"] == str(tmp_path / "benchmarks" / "nq" / "test.jsonl") and nq_test["rows"] == 5
    assert nq_test["expected_rows"] == 3610 and nq_test["display_name"] == "NQ" and nq_test["role"] == "test"
    assert by_key[("nq", "train")]["rows"] == 5
    hotpot = by_key[("hotpotqa", "dev")]
    assert hotpot["path"] is None and hotpot["rows"] is None
    assert hotpot["expected_path"] == str(tmp_path / "benchmarks" / "hotpotqa" / "dev.jsonl")
    assert by_key[("world", "test")]["rows"] == 1 and by_key[("world", "train")]["path"] is None


def test_status_counts_parquet_rows(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "popqa").mkdir()
    pq.write_table(
        pa.Table.from_pylist([{"id": str(i), "question": "q", "golden_answers": ["a"]} for i in range(7)]),
        tmp_path / "popqa" / "test.parquet",
    )
    by_key = {(r["name"], r["split"]): r for r in benchmark_status(tmp_path, tmp_path / "world")}
    assert by_key[("popqa", "test")]["rows"] == 7


def test_a_rows_own_fields_win_over_its_nested_metadata_and_a_boolean_id_is_refused(tmp_path):
    row = {
        "id": "a",
        "question": "q",
        "golden_answers": ["x"],
        "metadata": {"type": "nested", "hops": 2},
        "type": "top",
    }
    _write(tmp_path / "qa" / "test.jsonl", json.dumps(row) + "\n")
    (question,) = load_questions(tmp_path / "qa" / "test.jsonl")
    assert question.metadata == {"type": "top", "hops": 2} and question.category == "top"
    _write(tmp_path / "qa" / "bad.jsonl", json.dumps({**row, "id": True}) + "\n")
    with pytest.raises(InspoError, match=r"bad.jsonl:1: field 'id' must be a string or an integer, got True"):
        load_questions(tmp_path / "qa" / "bad.jsonl")

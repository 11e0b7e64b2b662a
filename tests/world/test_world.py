"""The synthetic world is only useful if it is reproducible, answerable from its corpus, and not guessable.

Most tests use the "tiny" preset (generated in a few hundredths of a second); the committed default world
in data/world is checked too, because it is what `inspo train` and `inspo evaluate` read by default.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path

import pytest

from inspo_cli.errors import InspoError
from inspo_cli.jsonio import read_jsonl
from inspo_cli.metrics import exact_match, normalize_answer
from inspo_cli.world import WORLD_FILES, WORLD_SIZES, World, WorldSize, generate_world, write_world
from inspo_cli.world.entities import Organisation, Person
from inspo_cli.world.names import BLOCKLIST, NameRegistry, twin_variants
from retriever.corpus import Passage

SPLITS = ("train", "dev", "test")
TYPES = {"single_hop": 1, "bridge": 2, "comparison": 2, "temporal": 2}
COMMITTED_WORLD = Path(__file__).resolve().parents[2] / "data" / "world"


@pytest.fixture(scope="module")
def tiny() -> World:
    return generate_world(seed=0, size="tiny")


@pytest.fixture(scope="module")
def committed() -> tuple[dict[str, Passage], dict[str, list[dict]]]:
    if not (COMMITTED_WORLD / "world.json").is_file():
        pytest.fail(f"{COMMITTED_WORLD} is missing; regenerate it with `inspo data world --out data/world`")
    passages = {row["id"]: Passage.from_row(row) for row in read_jsonl(COMMITTED_WORLD / "corpus.jsonl")}
    return passages, {split: read_jsonl(COMMITTED_WORLD / f"{split}.jsonl") for split in SPLITS}


def _rows(splits: dict[str, list[dict]]) -> list[dict]:
    return [row for split in SPLITS for row in splits[split]]


def _contains(haystack: str, needle: str) -> bool:
    """Token-aligned containment after SQuAD normalisation (how EM sees text)."""
    return f" {normalize_answer(needle)} " in f" {haystack} "


def _question(row: dict) -> str:
    """The normalised question with possessives dropped ("Vask's employer" names "Vask")."""
    return normalize_answer(re.sub(r"'s\b", "", row["question"]))


def _base_title(title: str) -> str:
    return re.sub(r" \([^)]*\)$", "", title)


def _check_evidence(passages: dict[str, Passage], rows: list[dict]) -> None:
    """Every answer is stated in a supporting passage, and the question's named entities lead to that evidence."""
    normalised = {pid: normalize_answer(p.text) for pid, p in passages.items()}
    titles = {normalize_answer(_base_title(p.title)) for p in passages.values()}
    for row in rows:
        support = row["supporting_ids"]
        assert len(support) == row["hops"], row
        assert all(pid in passages for pid in support), row
        texts = [normalised[pid] for pid in support]
        assert any(_contains(text, answer) for text in texts for answer in row["golden_answers"]), row
        tokens = _question(row).split()
        named = {" ".join(tokens[i:j]) for i in range(len(tokens)) for j in range(i + 1, min(i + 7, len(tokens) + 1))}
        named &= titles
        assert named, f"no entity of the world is named in {row['question']!r}"
        evidence = [f"{normalize_answer(passages[pid].title)} {normalised[pid]}" for pid in support]
        assert any(_contains(text, name) for text in evidence for name in named), row
        if row["type"] == "comparison":  # both compared entities must have their year in the evidence
            assert len({passages[pid].title for pid in support}) == 2, row
            assert all(re.search(r"(?<![\d,])\d{3,4}(?!\d|,\d)", passages[pid].text) for pid in support), row


# -- determinism ------------------------------------------------------------------------------------------------------


def test_same_seed_writes_identical_bytes_and_another_seed_another_world(tmp_path, tiny):
    first = write_world(tiny, tmp_path / "a")
    second = write_world(generate_world(seed=0, size="tiny"), tmp_path / "b")
    assert first == second == json.loads((tmp_path / "a" / "world.json").read_text())
    for name in WORLD_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    write_world(generate_world(seed=1, size="tiny"), tmp_path / "c")
    assert (tmp_path / "a" / "corpus.jsonl").read_bytes() != (tmp_path / "c" / "corpus.jsonl").read_bytes()


def test_committed_world_is_what_the_generator_makes(committed, tmp_path):
    meta = json.loads((COMMITTED_WORLD / "world.json").read_text())
    assert (meta["generator"], meta["seed"], meta["size"]) == ("inspo-world", 0, "default")
    write_world(generate_world(seed=0, size="default"), tmp_path)
    for name in WORLD_FILES:
        assert (tmp_path / name).read_bytes() == (COMMITTED_WORLD / name).read_bytes(), (
            f"data/world/{name} is stale; regenerate it with `inspo data world --out data/world --force`"
        )


def test_the_committed_tools_world_is_the_bundled_world_with_arithmetic_questions(tmp_path):
    """data/world-tools (recipes/world-tools/) is the generator's seed-0 world with 30% arithmetic questions, over the
    very corpus of data/world, which its recipes search."""
    tools_world = COMMITTED_WORLD.parent / "world-tools"
    write_world(generate_world(seed=0, size="default", arithmetic_share=0.3), tmp_path)
    for name in WORLD_FILES:
        assert (tmp_path / name).read_bytes() == (tools_world / name).read_bytes(), (
            f"data/world-tools/{name} is stale; regenerate it with `inspo data world --out data/world-tools "
            "--arithmetic-share 0.3 --force`"
        )
    assert (tools_world / "corpus.jsonl").read_bytes() == (COMMITTED_WORLD / "corpus.jsonl").read_bytes()


# -- file formats -----------------------------------------------------------------------------------------------------


def test_corpus_rows_are_search_r1_rows_with_unique_ids(tmp_path, tiny):
    write_world(tiny, tmp_path)
    rows = read_jsonl(tmp_path / "corpus.jsonl")
    assert [list(row) for row in rows] == [["id", "contents"]] * len(rows)
    assert len({row["id"] for row in rows}) == len(rows) == len(tiny.passages)
    for row in rows:
        title, _, text = row["contents"].partition("\n")
        assert title.startswith('"') and title.endswith('"') and len(title) > 2 and text, row
        assert 40 <= len(text.split()) <= 120, row


def test_question_rows_have_the_flashrag_fields_types_and_hops(tmp_path, tiny):
    write_world(tiny, tmp_path)
    rows = {split: read_jsonl(tmp_path / f"{split}.jsonl") for split in SPLITS}
    assert {split: len(r) for split, r in rows.items()} == WORLD_SIZES["tiny"].questions
    for split, split_rows in rows.items():
        for row in split_rows:
            assert list(row) == ["id", "question", "golden_answers", "type", "hops", "supporting_ids", "searches"]
            assert len(row["searches"]) == row["hops"] == len(row["supporting_ids"])
            assert row["id"].startswith(f"world-{split}-") and row["golden_answers"]
            assert row["hops"] == TYPES[row["type"]]
    assert {row["type"] for row in _rows(rows)} == set(TYPES)
    texts = [row["question"] for row in _rows(rows)]
    assert len(set(texts)) == len(texts)
    assert len({row["id"] for row in _rows(rows)}) == len(texts)


def test_manifest_counts_match_the_files(tmp_path, tiny):
    meta = write_world(tiny, tmp_path)
    assert list(meta) == ["generator", "version", "seed", "size", "passages", "entities", "questions", "question_types"]
    assert meta["passages"] == len(tiny.passages)
    assert meta["questions"] == {split: len(tiny.splits[split]) for split in SPLITS}
    assert sum(meta["question_types"].values()) == sum(meta["questions"].values())


# -- answerable from the corpus ---------------------------------------------------------------------------------------


def test_every_answer_is_stated_in_its_supporting_passages(tiny):
    _check_evidence({p.id: p for p in tiny.passages}, _rows(tiny.splits))


def test_committed_world_answers_are_stated_in_its_supporting_passages(committed):
    passages, splits = committed
    _check_evidence(passages, _rows(splits))


def test_temporal_answers_led_the_named_country_in_the_named_year(tiny):
    leaders = {p.name: p for p in tiny.entities.people if p.term}
    dated = [(o.ref, o.founded_year) for o in tiny.entities.organisations]
    dated += [(p.name, p.birth_year) for p in tiny.entities.people]
    dated += [(c.name, c.founded_year) for c in tiny.entities.cities]
    for row in _rows(tiny.splits):
        if row["type"] != "temporal":
            continue
        term = leaders[row["golden_answers"][0]].term
        assert _contains(_question(row), term.country.name), row
        years = [year for name, year in dated if _contains(_question(row), name)]
        assert years and all(term.start < year < term.end for year in years), row


def test_comparison_questions_have_two_different_years_and_the_right_winner(tiny):
    dated = {o.ref: o.founded_year for o in tiny.entities.organisations}
    dated |= {p.name: p.birth_year for p in tiny.entities.people}
    dated |= {c.name: c.founded_year for c in tiny.entities.cities}
    for row in _rows(tiny.splits):
        if row["type"] != "comparison":
            continue
        named = [(name, year) for name, year in dated.items() if _contains(_question(row), name)]
        assert len(named) == 2 and named[0][1] != named[1][1], row
        later = "later" in row["question"] or "recently" in row["question"] or "younger" in row["question"]
        winner = (max if later else min)(named, key=lambda item: item[1])[0]
        assert exact_match(winner, row["golden_answers"]), row


# -- not guessable ----------------------------------------------------------------------------------------------------


def _assert_no_answer_in_question(rows: list[dict]) -> None:
    for row in rows:
        if row["type"] != "comparison":
            question = _question(row)
            assert not any(_contains(question, answer) for answer in row["golden_answers"]), row


def test_answers_never_appear_in_their_question(tiny, committed):
    _assert_no_answer_in_question(_rows(tiny.splits))
    _assert_no_answer_in_question(_rows(committed[1]))


def test_a_constant_guess_per_type_is_hopeless(committed):
    splits = committed[1]
    for qtype in ("single_hop", "bridge", "temporal"):
        train = Counter(normalize_answer(row["golden_answers"][0]) for row in splits["train"] if row["type"] == qtype)
        guess = train.most_common(1)[0][0]
        test = [row for row in splits["test"] if row["type"] == qtype]
        assert test
        accuracy = sum(exact_match(guess, row["golden_answers"]) for row in test) / len(test)
        assert accuracy < 0.05, (qtype, guess, accuracy)


# -- distractors and names --------------------------------------------------------------------------------------------


def test_distractor_twins_have_near_identical_names_but_different_facts(tiny):
    twins = tiny.entities.twins
    assert twins
    titles = {p.title for p in tiny.passages}
    for original, twin in twins:
        assert original.name != twin.name and normalize_answer(original.name) != normalize_answer(twin.name)
        assert _base_title(original.title) in {_base_title(t) for t in titles}
        assert _base_title(twin.title) in {_base_title(t) for t in titles}
        if isinstance(original, Person):
            assert (original.birth_year, original.birth_city) != (twin.birth_year, twin.birth_city)
            assert original.employer is not twin.employer
        elif isinstance(original, Organisation):
            assert original.founded_year != twin.founded_year and original.founder is not twin.founder
            assert original.hq is not twin.hq
        else:
            assert original.founded_year != twin.founded_year and original.country is not twin.country


def test_all_entity_names_are_unique_and_fictional(tiny):
    ents = tiny.entities
    names = [e.name for e in (*ents.countries, *ents.cities, *ents.organisations, *ents.people)]
    assert len({normalize_answer(name) for name in names}) == len(names)
    for name in names:
        assert not any(word in BLOCKLIST for word in normalize_answer(name).split()), name


def test_twin_variants_are_one_edit_away():
    assert "Aldrik" in twin_variants("Aldric")
    assert all(variant[:2] == "Velmora"[:2] for variant in twin_variants("Velmora"))
    registry = NameRegistry(random.Random(0))
    assert registry.claim_word("Velmora") and not registry.claim_word("velmora") and not registry.claim_word("Paris")


# -- sizes and progress -----------------------------------------------------------------------------------------------


def test_unknown_size_is_a_user_error_listing_the_presets():
    with pytest.raises(InspoError) as info:
        generate_world(seed=0, size="huge")
    message = str(info.value)
    assert "'huge'" in message and all(name in message for name in ("tiny", "small", "default", "large"))


def test_world_sizes_validate_themselves():
    assert list(WORLD_SIZES) == ["tiny", "small", "default", "large"]
    with pytest.raises(InspoError, match="cities=3"):
        WorldSize(
            "custom",
            countries=2,
            cities=3,
            organisations=10,
            people=10,
            distractor_share=0.1,
            first_year=1900,
            train_questions=10,
            dev_questions=2,
            test_questions=2,
        )


def test_a_custom_size_works_and_progress_reaches_the_total():
    calls = []
    size = WorldSize(
        "custom",
        countries=2,
        cities=6,
        organisations=6,
        people=8,
        distractor_share=0.0,
        first_year=1950,
        train_questions=20,
        dev_questions=5,
        test_questions=5,
    )
    world = generate_world(seed=3, size=size, progress=lambda done, total: calls.append((done, total)))
    assert world.metadata()["size"] == "custom" and not world.entities.twins
    assert calls[0][0] == 0 and calls[-1][0] == calls[-1][1]
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


# -- arithmetic (issue 40): a world option ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def arithmetic() -> World:
    return generate_world(seed=0, size="small", arithmetic_share=0.2)


def test_an_arithmetic_world_asks_its_share_of_subtractions_of_two_searched_years(arithmetic):
    from inspo_cli.agent.tools.arithmetic import evaluate

    rows = _rows(arithmetic.splits)
    counts = Counter(row["type"] for row in rows)
    assert counts["arithmetic"] == round(0.2 * len(rows)) and arithmetic.metadata()["arithmetic_share"] == 0.2
    assert arithmetic.metadata()["question_types"]["arithmetic"] == counts["arithmetic"]
    passages = {p.id: p for p in arithmetic.passages}
    for row in (r for r in rows if r["type"] == "arithmetic"):
        later, earlier = (int(year) for year in row["calculation"].split(" - "))
        # the calculator gives the answer; each year is stated in its supporting passage, in hop order
        assert evaluate(row["calculation"]) == row["golden_answers"][0] == str(later - earlier) and later > earlier
        years = [re.findall(r"\b\d{4}\b", passages[pid].text) for pid in row["supporting_ids"]]
        assert {str(later), str(earlier)} <= set(years[0]) | set(years[1]), row
        assert len(row["searches"]) == row["hops"] == 2 and row["golden_answers"][1] == f"{later - earlier} years"
    _assert_no_answer_in_question([r for r in rows if r["type"] == "arithmetic"])
    # other rows carry no calculation: a world without the option is byte for byte what it was
    assert all("calculation" not in r for r in rows if r["type"] != "arithmetic")


def test_the_arithmetic_share_is_checked_and_recorded(tmp_path):
    for bad in (-0.1, 0.6, float("nan")):
        with pytest.raises(InspoError, match="arithmetic share"):
            generate_world(seed=0, size="tiny", arithmetic_share=bad)
    from helpers.cli_helpers import assert_one_line_error, invoke

    assert (
        invoke("data", "world", "--out", tmp_path / "w", "--size", "tiny", "--arithmetic-share", "0.25").exit_code == 0
    )
    meta = json.loads((tmp_path / "w/world.json").read_text())
    assert meta["arithmetic_share"] == 0.25 and meta["question_types"]["arithmetic"] == 30
    again = invoke("data", "world", "--out", tmp_path / "w", "--size", "tiny")  # another world: refused
    assert_one_line_error(again, "holds another world (seed 0, size tiny, arithmetic share 0.25)")
    assert_one_line_error(
        invoke("data", "world", "--out", tmp_path / "x", "--arithmetic-share", "0.9"),
        "--arithmetic-share 0.9: use a value from 0 to 0.5",
    )

"""The leakage guards (`population.leak_check`, instructions/leakage.py): a candidate holding an answer the
optimizer was shown, or a long verbatim span of a known question, is not admitted (refuse) or is marked (flag); D_B
leaves out the questions the prompt showed; no dev/test question ever reaches an optimizer prompt."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from helpers.evolution import SCORES, DictVerifier, ScriptedLM, make_buffer, make_config, make_population

from inspo_cli.config import load_recipe
from inspo_cli.instructions.evolution import ACCEPTED, LEAKED, NO_QUESTIONS, evolve
from inspo_cli.instructions.leakage import HeldOutInPrompt, LeakGuard
from inspo_cli.instructions.replay import Experience, ReplayBuffer
from inspo_cli.training.coevolution import held_out_questions

ROOT = Path(__file__).resolve().parents[2]
# make_buffer's failures are q2 ("Capital q2?", answer Oslo) and q1 ("Capital q1?", answer Paris)
LEAKY = "Beta: plan first, and when asked about capitals answer Oslo."
ANSWER = f"<ins_1>Alpha: search twice.</ins_1><ins_2>{LEAKY}</ins_2><ins_3>Gamma: verify facts.</ins_3>"
SCORES_WITH_LEAK = {**SCORES, LEAKY: 0.95}


def evolve_once(leak_check: str, **overrides):
    config = make_config(
        leak_check=leak_check, accept="top_n", accept_top_n=3, size=6, max_verify_rounds=1, **overrides
    )
    lm, verifier = ScriptedLM(ANSWER), DictVerifier(SCORES_WITH_LEAK)
    report = evolve(make_population(config), make_buffer(), lm, verifier, config, 15, random.Random(0))
    return report, lm, verifier


def test_a_candidate_holding_a_shown_answer_is_not_admitted_and_the_reason_is_recorded():
    report, lm, _ = evolve_once("refuse")
    assert "Capital q2?" in lm.prompts[0] and "Oslo" in lm.prompts[0]  # App. E shows the correct answer
    rows = {c.text: c for c in report.candidates}
    assert rows[LEAKY].reason == LEAKED and not rows[LEAKY].accepted and rows[LEAKY].verification_score is None
    assert rows[LEAKY].leak == "contains the answer 'Oslo' of a question shown to the optimizer (q2)"
    assert {rows[t].reason for t in ("Alpha: search twice.", "Gamma: verify facts.")} == {ACCEPTED}
    saved = json.loads(json.dumps(report.as_dict()))  # as evolutions.json keeps it
    assert [c["leak"] for c in saved["candidates"] if c["reason"] == LEAKED] == [rows[LEAKY].leak]


def test_flag_admits_and_marks_and_off_checks_nothing():
    flagged, _, _ = evolve_once("flag")
    row = next(c for c in flagged.candidates if c.text == LEAKY)
    assert row.accepted and row.leak is not None and row.verification_score == pytest.approx(0.95)
    off, _, _ = evolve_once("off")
    assert all(c.leak is None for c in off.candidates) and next(c for c in off.candidates if c.text == LEAKY).accepted


def test_d_b_leaves_out_the_questions_the_prompt_showed():
    _, _, verifier = evolve_once("refuse", verify_size=200)
    asked = {q.key for _, questions in verifier.calls for q in questions}
    assert asked == {"q3", "q4", "q5"}  # q1 and q2 were the failures shown
    _, _, verifier = evolve_once("off", verify_size=200)
    assert {q.key for _, questions in verifier.calls for q in questions} == {"q1", "q2", "q3", "q4", "q5"}


def test_candidates_are_recorded_when_every_question_was_shown():
    config = make_config(leak_check="refuse", max_verify_rounds=1, failures_per_call=5)
    buffer = ReplayBuffer(100)
    buffer.extend(Experience("i0", f"q{i}", f"Capital q{i}?", ("Lima",), "wrong", 0.0, 1) for i in range(3))
    verifier = DictVerifier(SCORES)
    report = evolve(make_population(config), buffer, ScriptedLM(ANSWER), verifier, config, 15, random.Random(0))
    assert verifier.calls == [] and {c.reason for c in report.candidates} == {NO_QUESTIONS}


@pytest.mark.parametrize(
    "candidate, reason",
    [
        (
            "Answer in the form: how many years after the founding of the Hokin Works was Ada born",
            "contains 8 words of training question q9: 'after founding of hokin works was ada born'",
        ),
        ("Say PARIS when unsure.", None),  # Paris answered q1, which this prompt did not show
        ("If the answer is yes, write yes.", None),  # yes/no answers are everywhere in instructions
    ],
)
def test_spans_of_known_questions_and_what_the_guard_lets_through(candidate, reason):
    buffer = make_buffer()
    buffer.add(
        Experience(
            "i0", "q9", "How many years after the founding of the Hokin Works was Ada born?", ("12",), "wrong", 0.0, 2
        )
    )
    shown = [q for q in buffer.questions() if q.key in ("q2", "q9")]
    found = LeakGuard().leak(candidate, shown, buffer)
    assert found == reason if reason is None else found.startswith(reason[:40])


def test_no_test_question_reaches_an_optimizer_prompt_and_one_that_would_is_an_error():
    recipe = load_recipe(ROOT / "recipes/demo.yaml")
    held_out = held_out_questions(recipe)
    assert len(held_out) > 20  # every question of the world's test split, not only evaluation.limit's
    guard = LeakGuard(held_out)
    train = [json.loads(line) for line in (ROOT / "data/world/train.jsonl").read_text().splitlines()[:40]]
    buffer = ReplayBuffer(100)
    buffer.extend(
        Experience("i0", row["id"], row["question"], tuple(row["golden_answers"]), "wrong", 0.0, 1) for row in train
    )
    config = make_config(leak_check="refuse", max_verify_rounds=2, failures_per_call=4)
    lm = ScriptedLM(ANSWER, ANSWER)
    evolve(make_population(config), buffer, lm, DictVerifier(SCORES_WITH_LEAK), config, 15, random.Random(0), guard)
    assert lm.prompts and not any(text in prompt for prompt in lm.prompts for text in held_out)
    # a bug that let an evaluation rollout into the replay buffer: its question would reach the optimizer
    buffer.add(Experience("i0", "test-1", held_out[0], ("x",), "wrong", 0.0, 2))
    with pytest.raises(HeldOutInPrompt, match="a held-out \\(dev/test\\) question reached an optimizer prompt"):
        evolve(
            make_population(config),
            buffer,
            ScriptedLM(ANSWER),
            DictVerifier(SCORES_WITH_LEAK),
            config,
            15,
            random.Random(0),
            guard,
        )


def test_a_held_out_question_that_is_also_a_training_question_is_left_out(monkeypatch):
    import inspo_cli.training.trainer_inputs as trainer_inputs
    from inspo_cli.benchmarks import Question

    recipe = load_recipe(ROOT / "recipes/demo.yaml")
    held_out = held_out_questions(recipe)
    training_question = Question("t", held_out[0].upper() + " ", ("x",), "w")
    monkeypatch.setattr(trainer_inputs, "train_questions", lambda r: [training_question])
    said: list[str] = []
    assert held_out_questions(recipe, said.append) == held_out[1:]
    assert said == [
        f"warning: 1 of the {len(held_out)} evaluation questions are also training questions; the leak "
        "check cannot hold those out of optimizer prompts"
    ]


def test_leak_check_is_validated():
    from inspo_cli.errors import InspoError

    with pytest.raises(InspoError, match=r"population.leak_check: must be one of refuse, flag, off \(got 'strict'\)"):
        load_recipe(ROOT / "recipes/demo.yaml", ["population.leak_check=strict"])


def test_the_run_summary_counts_leaked_candidates_and_the_report_shows_them():
    from types import SimpleNamespace

    from inspo_cli.training.summary import overhead_account

    refused, _, _ = evolve_once("refuse")
    flagged, _, _ = evolve_once("flag")
    coevolution = SimpleNamespace(reports=[refused.as_dict(), flagged.as_dict()], optimizer_accounting=lambda: None)
    recipe = load_recipe(ROOT / "recipes/demo.yaml")
    account = overhead_account(coevolution, recipe, steps=8, wall=100.0)
    assert account["leaked_candidates"] == 2  # one refused, one flagged and admitted


# -- what stops a run: an evaluation question shown whole, never a substring of the prompt (issue 51) --------------

SHORT_HELD_OUT = "Who wrote Hamlet?"  # NQ-like: short enough to turn up inside much else a prompt holds


def buffer_with_a_policy_that_quotes(held_out: str) -> ReplayBuffer:
    """make_buffer's, plus the newest failure: a longer training question holding `held_out`, and a policy response
    that writes it as its reasoning, its query (on a line of its own), a passage and a made-up next question."""
    buffer = make_buffer()
    text = held_out.lower().rstrip("?")
    response = (
        f"<think>{text}</think>\n<search>\n{text}\n</search>\n<information>Doc 1(Title: Hamlet) Scholars "
        f"ask {text}; most say Shakespeare.</information>\n<answer>Marlowe</answer>\nQuestion: {held_out}"
    )
    buffer.add(
        Experience(
            "i0",
            "q7",
            f"{held_out.rstrip('?')} and in which year was Macbeth first performed?",
            ("Shakespeare, 1606",),
            response,
            0.0,
            3,
        )
    )
    return buffer


def test_a_short_evaluation_question_inside_training_text_or_policy_text_does_not_stop_the_run():
    config = make_config(leak_check="refuse", max_verify_rounds=1)
    lm = ScriptedLM(ANSWER)
    report = evolve(
        make_population(config),
        buffer_with_a_policy_that_quotes(SHORT_HELD_OUT),
        lm,
        DictVerifier(SCORES_WITH_LEAK),
        config,
        15,
        random.Random(0),
        LeakGuard([SHORT_HELD_OUT]),
    )
    assert (
        "who wrote hamlet and in which year" in lm.prompts[0].lower()
        and "<search>\nwho wrote hamlet\n" in lm.prompts[0]
    )  # the old substring rule raised on this prompt
    assert report.optimizer_calls == 1 and any(c.accepted for c in report.candidates)


@pytest.mark.parametrize("as_stored", ["Who wrote Hamlet?", "  WHO wrote   Hamlet ?! ", "who wrote the hamlet"])
def test_an_evaluation_question_shown_whole_stops_the_run_however_it_is_written(as_stored):
    buffer = make_buffer()
    buffer.add(Experience("i0", "test-7", as_stored, ("Shakespeare",), "wrong", 0.0, 3))  # an evaluation rollout
    config = make_config(leak_check="flag", max_verify_rounds=1)
    with pytest.raises(HeldOutInPrompt, match=r"'Who wrote Hamlet\?' \(replay question test-7\)"):
        evolve(
            make_population(config),
            buffer,
            ScriptedLM(ANSWER),
            DictVerifier(SCORES_WITH_LEAK),
            config,
            15,
            random.Random(0),
            LeakGuard(["What is the capital of Norway?", SHORT_HELD_OUT, "Who painted X?"]),
        )


def test_off_checks_nothing_not_even_the_evaluation_questions():
    buffer = make_buffer()
    buffer.add(Experience("i0", "test-7", SHORT_HELD_OUT, ("Shakespeare",), "wrong", 0.0, 3))
    config = make_config(leak_check="off", max_verify_rounds=1)
    report = evolve(
        make_population(config),
        buffer,
        ScriptedLM(ANSWER),
        DictVerifier(SCORES_WITH_LEAK),
        config,
        15,
        random.Random(0),
        LeakGuard([SHORT_HELD_OUT]),
    )
    assert report.optimizer_calls == 1 and all(c.leak is None for c in report.candidates)
    assert held_out_questions(load_recipe(ROOT / "recipes/demo.yaml", ["population.leak_check=off"])) == []


def test_spans_of_every_held_out_question_are_checked_not_only_the_last():
    first = "How many years after the founding of the Hokin Works was Ada born?"
    guard = LeakGuard([first, "Which river flows through the capital of the country where Tove was born?"])
    found = guard.leak("Answer questions like: after the founding of the Hokin Works was Ada born", [], ReplayBuffer(4))
    assert found == "contains 8 words of a held-out (dev/test) question: 'after founding of hokin works was ada born'"


# -- the setting: off is the paper's loop, written bare or quoted; the paper recipes keep it and say so ------------


@pytest.mark.parametrize(
    "value, expected", [("off", "off"), ("false", "off"), ("'off'", "off"), ("refuse", "refuse"), ("flag", "flag")]
)
def test_leak_check_accepts_a_bare_off(value, expected):
    # YAML 1.1 reads a bare off as false; the recipe means the string (--set values are read as YAML too)
    assert load_recipe(None, [f"population.leak_check={value}"]).population.leak_check == expected


@pytest.mark.parametrize("value", ["on", "true", "'on'"])
def test_leak_check_refuses_on_and_names_the_choices(value):
    from inspo_cli.errors import InspoError

    with pytest.raises(
        InspoError,
        match=r"population.leak_check: on \(or true\) does not say what to do with a "
        r"leaking candidate: set refuse \(not admitted\), flag \(admitted and "
        r"marked\) or off",
    ):
        load_recipe(None, [f"population.leak_check={value}"])


@pytest.mark.parametrize("size", ["3b", "7b"])
def test_the_paper_recipes_run_the_papers_loop_and_recipe_check_says_whether_a_recipe_differs(size):
    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.training.grpo import grpo_kwargs
    from inspo_cli.training.trl_report import appendix_b_rows

    path = ROOT / f"recipes/qwen2.5-{size}/inspo.yaml"
    assert "  leak_check: off " in path.read_text(encoding="utf-8")  # written bare in the file
    assert load_recipe(ROOT / "recipes/demo.yaml").population.leak_check == "refuse"  # the laptop demo keeps it on

    def leak_row(*overrides):
        recipe = load_recipe(path, list(overrides), check_paths=False)
        plan = batch_plan(recipe, 8)
        rows = appendix_b_rows(recipe, grpo_kwargs(recipe, plan, ROOT / "runs/x", device="cuda"), plan)
        return next(row for row in rows if row["target"] == "inspo: population.leak_check")

    assert {k: leak_row()[k] for k in ("setting", "paper", "recipe", "matches")} == {
        "setting": "leak guard (beyond the paper)",
        "paper": "off",
        "recipe": "off",
        "matches": True,
    }
    assert {k: leak_row("population.leak_check=refuse")[k] for k in ("recipe", "matches")} == {
        "recipe": "refuse",
        "matches": False,
    }

"""An optimizer answer cut off at optimizer.max_output_tokens (issue 27), or stopped by the provider's own filter
(issue 37): every provider says so, evolution keeps the blocks closed before the cut and records the unfinished one
as "cut off", the run warns once; and optimizer.thinking_budget reaches Gemini and Claude as their SDKs send it.

Providers run against the fake servers of `helpers/fake_providers.py` with the real SDKs; the local provider on
the tiny random model; evolution and CoEvolution with the scripted fakes of helpers/evolution.py and
helpers/coevolution.py.
"""

from __future__ import annotations

import json
import logging
import random

import pytest
from helpers.coevolution import GOOD, evolve_recipe, fake_accelerator, make_loop
from helpers.evolution import PARENT, SCORES, DictVerifier, ScriptedLM, make_buffer, make_config, make_population
from helpers.fake_providers import KEY, KEY_ENV, Reply, gemini_thinking_budget, optimizer, success_body

from inspo_cli.config import OptimizerConfig, load_recipe
from inspo_cli.config.loader import RecipeError
from inspo_cli.errors import InspoError
from inspo_cli.instructions.evolution import ACCEPTED, CUT_OFF, evolve
from inspo_cli.instructions.proposers.base import parse_candidates
from inspo_cli.instructions.proposing import initial_rewrites, propose
from inspo_cli.instructions.providers.language_model import Answer, ask
from inspo_cli.instructions.providers.opening import open_optimizer
from inspo_cli.training.coevolution import MainProcessLM

# One closed block, then the cut: the second block ends mid-word, as an answer stopped by the limit does.
CUT_ANSWER = "Two candidates follow.\n<ins_1>Alpha: search twice.</ins_1>\n<ins_2>Beta: plan fi"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)


class AnsweringLM(ScriptedLM):
    """A scripted optimizer that also says whether each answer was truncated, as `OptimizerLM.answer` does."""

    def answer(self, prompt: str) -> Answer:
        answer = self.complete(prompt)
        return answer if isinstance(answer, Answer) else Answer(answer)


# -- providers ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["gemini", "anthropic", "openai"])
def test_a_truncated_answer_gives_only_its_closed_candidate_and_is_counted(serve, provider):
    body = success_body(provider, CUT_ANSWER, truncated=True)
    if provider == "anthropic":  # extended thinking answers a thinking block first: not part of the answer
        body["content"].insert(0, {"type": "thinking", "thinking": "<ins_9>not this</ins_9>", "signature": "s"})
    server = serve(provider, Reply(200, body), Reply(200, success_body(provider, CUT_ANSWER)))
    lm = optimizer(provider, server.base_url)
    config = make_config(proposer="paraphrase")
    population = make_population(config)
    assert propose("paraphrase", population["i0"], population, make_buffer(), lm, config, random.Random(0)) == [
        "Alpha: search twice."
    ]
    assert lm.accounting()["truncated_answers"] == 1
    # the same text ended normally (STOP / end_turn / stop): its last block is the model's, unclosed but whole
    assert ask(lm, "p") == Answer(CUT_ANSWER, truncated=False)
    assert lm.accounting()["truncated_answers"] == 1 and lm.accounting()["calls"] == 2


# Stops that are neither the model's own end nor the output limit, in each API's words
PROVIDER_STOPS = {
    "gemini": ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "OTHER"],
    "anthropic": ["refusal", "pause_turn"],
    "openai": ["content_filter", "abort"],
}


def stopped_body(provider: str, text: str, reason: str) -> dict:
    body = success_body(provider, text)
    if provider == "gemini":
        body["candidates"][0]["finishReason"] = reason
    elif provider == "anthropic":
        body["stop_reason"] = reason
    else:
        body["choices"][0]["finish_reason"] = reason
    return body


@pytest.mark.parametrize("provider", ["gemini", "anthropic", "openai"])
def test_an_answer_the_provider_stopped_is_treated_like_one_cut_at_the_limit(serve, provider):
    reasons = PROVIDER_STOPS[provider]
    server = serve(provider, *[Reply(200, stopped_body(provider, CUT_ANSWER, reason)) for reason in reasons])
    lm = optimizer(provider, server.base_url)
    for reason in reasons:
        answer = ask(lm, "p")
        assert answer == Answer(CUT_ANSWER, truncated=True, stop_reason=reason)
        assert parse_candidates(answer.text, truncated=answer.truncated) == ["Alpha: search twice."]
    assert lm.accounting()["truncated_answers"] == len(reasons)
    assert lm.accounting()["stop_reasons"] == dict.fromkeys(reasons, 1)
    restored = optimizer(provider, server.base_url)
    restored.restore(json.loads(json.dumps(lm.accounting())))  # a resumed run goes on counting
    assert restored.accounting()["stop_reasons"] == lm.accounting()["stop_reasons"]


@pytest.mark.parametrize("provider", ["gemini", "anthropic", "openai"])
def test_an_answer_the_provider_withheld_is_a_failed_call_that_says_why(serve, provider):
    reason = PROVIDER_STOPS[provider][0]
    body = stopped_body(provider, "", reason)
    server = serve(provider, Reply(200, body))
    with pytest.raises(InspoError) as caught:
        optimizer(provider, server.base_url).complete("p")
    message = str(caught.value)
    assert f"returned no text (finish reason {reason})" in message and "withheld the answer" in message
    assert "malformed" not in message and len(server.requests) == 1  # not retried


def test_the_gemini_thinking_budget_is_sent_and_leaves_room_for_the_answer(serve):
    server = serve("gemini")
    optimizer("gemini", server.base_url, max_output_tokens=4096, thinking_budget=1024).complete("p")
    optimizer("gemini", server.base_url, max_output_tokens=None).complete("p")  # the defaults
    optimizer("gemini", server.base_url, thinking_budget=-1).complete("p")  # the model decides: nothing sent
    sent = [request.body["generationConfig"] for request in server.requests]
    assert [gemini_thinking_budget(config["thinkingConfig"]) for config in sent[:2]] == [1024, 8192]
    assert [config["maxOutputTokens"] for config in sent] == [4096, 16384, 64] and "thinkingConfig" not in sent[2]


def test_the_claude_thinking_budget_is_extended_thinking(serve):
    server = serve("anthropic")
    optimizer("anthropic", server.base_url, max_output_tokens=4096, thinking_budget=2048, temperature=1.0).complete("p")
    optimizer("anthropic", server.base_url).complete("p")
    with_thinking, without = (request.body for request in server.requests)
    assert with_thinking["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert with_thinking["max_tokens"] == 4096 and "temperature" not in with_thinking  # thinking needs the default 1
    assert "thinking" not in without and without["temperature"] == 0.3


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (
            ["optimizer.thinking_budget=16384"],
            "must be less than optimizer.max_output_tokens, which counts the thinking",
        ),
        (["optimizer.thinking_budget=-2"], "must be -1 (the model decides), 0 (off) or a token count (got -2)"),
        (["optimizer.provider=anthropic", "optimizer.thinking_budget=512"], "must be >= 1024 for Claude's extended"),
        (
            ["optimizer.provider=anthropic", "optimizer.thinking_budget=2048", "optimizer.temperature=0.3"],
            "needs optimizer.temperature 1.0 with Claude's extended thinking (got temperature 0.3)",
        ),
        (["optimizer.provider=openai", "optimizer.thinking_budget=2048"], "is not sent to OpenAI-compatible servers"),
    ],
)
def test_a_bad_thinking_budget_is_one_line_naming_the_field_and_the_fix(overrides, words):
    with pytest.raises(RecipeError) as caught:
        load_recipe(None, overrides, check_paths=False)
    message = str(caught.value)
    assert "\n" not in message and "optimizer.thinking_budget" in message and words in message


def test_thinking_budget_defaults_per_provider():
    # Gemini 2.5 Pro: 8,192 thinking + 8,192 for six candidates of the paper's length (~3k tokens) and their analysis
    assert (OptimizerConfig().max_output_tokens, OptimizerConfig().thinking_budget) == (16384, 8192)
    assert OptimizerConfig(max_output_tokens=6000).thinking_budget == 3000  # a recipe's small limit keeps room
    for provider in ("anthropic", "openai", "local"):
        config = OptimizerConfig(provider=provider, model="m")
        assert (config.max_output_tokens, config.thinking_budget) == (8192, None)
    assert OptimizerConfig(provider="local", model="m", thinking_budget=99999).thinking_budget == 99999  # ignored


def test_the_local_model_reports_running_out_of_tokens(tiny_model_dir):
    lm = open_optimizer(
        OptimizerConfig(provider="local", model=str(tiny_model_dir), temperature=0.0, max_output_tokens=6)
    )
    cut = lm.complete_with_usage("Improve the instruction.")
    assert cut.output_tokens == 6 and cut.truncated  # the tiny model writes newlines, never its EOS
    model, _ = lm._client._load()
    model.generation_config.eos_token_id = list(range(model.config.vocab_size))  # any token ends the answer
    ended = lm.complete_with_usage("Improve the instruction.")
    assert ended.output_tokens == 1 and not ended.truncated
    assert lm.accounting()["truncated_answers"] == 1
    lm._client._max_new_tokens = 1  # the EOS is the last token the limit allows: ended, not cut
    assert not lm.complete_with_usage("Improve the instruction.").truncated


# -- evolution ------------------------------------------------------------------------------------------------------


def test_evolve_records_the_truncated_answer_and_never_verifies_its_cut_off_block():
    config = make_config(size=7, max_verify_rounds=1, accept_top_n=3)
    answer = "<ins_1>Alpha: search twice.</ins_1>\n<ins_2>Beta: plan first.</ins_2>\n<ins_3>Gamma: verify fa"
    verifier = DictVerifier(SCORES)
    report = evolve(
        make_population(config),
        make_buffer(),
        AnsweringLM(Answer(answer, truncated=True)),
        verifier,
        config,
        15,
        random.Random(0),
    )
    assert verifier.calls[0][0] == [PARENT, "Alpha: search twice.", "Beta: plan first."]
    row = json.loads(json.dumps(report.as_dict()))  # as evolutions.json holds it
    assert (row["optimizer_calls"], row["truncated_answers"]) == (1, 1)
    assert [(c["text"], c["reason"]) for c in row["candidates"]][0] == ("Gamma: verify fa", CUT_OFF)
    assert len(row["candidates"]) == 3 and row["candidates"][0]["verification_score"] is None

    # Unverified (the prune + expand ablation) it does not join either
    config = make_config(size=7, max_verify_rounds=1, accept_top_n=3, verify=False)
    population = make_population(config)
    report = evolve(
        population,
        make_buffer(),
        AnsweringLM(Answer(answer, truncated=True)),
        DictVerifier(SCORES),
        config,
        15,
        random.Random(0),
    )
    assert [c.text for c in population.alive()] == [PARENT, "Alpha: search twice.", "Beta: plan first."]
    assert [c.reason for c in report.candidates] == [CUT_OFF, ACCEPTED, ACCEPTED]

    # An answer that ended on its own keeps its unclosed last block: the model finished it (a plain `complete` fake)
    population = make_population(config)
    report = evolve(
        population,
        make_buffer(),
        ScriptedLM(answer.replace("verify fa", "verify facts.")),
        DictVerifier(SCORES),
        config,
        15,
        random.Random(0),
    )
    assert population.alive()[-1].text == "Gamma: verify facts." and report.truncated_answers == 0


def test_initial_rewrites_drop_a_cut_off_rewrite_and_say_so(caplog):
    answer = Answer("<ins_1>R1: search.</ins_1><ins_2>R2: thi", truncated=True)
    with caplog.at_level(logging.WARNING):
        assert initial_rewrites(PARENT, AnsweringLM(answer), 2) == ["R1: search."]
    assert "cut off at optimizer.max_output_tokens" in caplog.text and "optimizer.thinking_budget" in caplog.text
    caplog.clear()
    answer = Answer("<ins_1>R1: search.</ins_1><ins_2>R2: thi", truncated=True, stop_reason="RECITATION")
    with caplog.at_level(logging.WARNING):
        assert initial_rewrites(PARENT, AnsweringLM(answer), 2) == ["R1: search."]
    assert "stopped by the provider (finish reason RECITATION" in caplog.text
    assert "max_output_tokens" not in caplog.text


def test_main_process_lm_broadcasts_whether_the_answer_was_truncated():
    sent = []

    def broadcast(payload):
        if payload != [None]:
            sent.append(payload)
        return sent[-1]

    cut = Answer(CUT_ANSWER, truncated=True)
    main = MainProcessLM(AnsweringLM(cut), fake_accelerator(0, 2), broadcast)
    other = MainProcessLM(None, fake_accelerator(1, 2), broadcast)
    assert ask(main, "p") == cut and ask(other, "p") == cut  # every rank drops the same cut-off block
    assert ask(MainProcessLM(AnsweringLM(cut), fake_accelerator()), "p") == cut  # one process
    assert ask(MainProcessLM(ScriptedLM("<ins_1>x"), fake_accelerator()), "p") == Answer("<ins_1>x")  # plain fake


def test_truncated_answers_are_warned_once_per_run_and_recorded_in_every_evolution(tmp_path):
    # evolutions at steps 1 and 2; unverified, so only the optimizer's answers matter here
    recipe = evolve_recipe(evolve_every=1, evolve_until=3, prune_every=100, size=4, verify="false")
    cut = Answer(f"<ins_1>{GOOD.replace('Search', 'Search twice')}</ins_1>\n<ins_2>Search th", truncated=True)
    warnings = []
    loop, run = make_loop(tmp_path, recipe, AnsweringLM(cut, cut), warn=warnings.append)
    loop.run_steps(1, 2)
    evolutions = json.loads(run.coevolution_file.read_text())["evolutions"]
    assert [e["truncated_answers"] for e in evolutions] == [1, 1]
    assert all(any(c["reason"] == CUT_OFF and c["text"] == "Search th" for c in e["candidates"]) for e in evolutions)
    assert len(warnings) == 1 and "\n" not in warnings[0] and warnings[0].startswith("warning: 1 of 1 optimizer answ")
    assert "at step 1" in warnings[0] and "raise optimizer.max_output_tokens" in warnings[0]

"""What the optimizer's calls cost (issue 39): each line of optimizer_calls.jsonl says `cost_usd`, from its tokens at
the recipe's price or the shipped, dated table (instructions/providers/prices.yaml); an API model nobody priced costs
null (unknown, said once at run start), never a guess; `summarize_record` totals a record for report tables."""

from __future__ import annotations

import json
import logging
import math
import re

import pytest
import yaml

from inspo_cli.config import OptimizerConfig, load_recipe
from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.call_record import CallRecord, ReplayClient, summarize_record
from inspo_cli.instructions.providers.lm_errors import AttemptFailed, Completion
from inspo_cli.instructions.providers.optimizer_lm import OptimizerLM
from inspo_cli.instructions.providers.prices import FREE, TABLE, Price, price_for, table_price

PARAMETERS = {"temperature": 1.0, "max_output_tokens": 8192, "thinking_budget": None}
PRO = Price(1.25, 10.0)


class Client:
    provider, model, endpoint = "gemini", "gemini-2.5-pro", "http://127.0.0.1:9"

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def attempt(self, prompt: str) -> Completion:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- prices -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "provider, model, price",
    [
        ("gemini", "gemini-2.5-pro", (1.25, 10.0)),
        ("gemini", "gemini-2.5-flash", (0.30, 2.50)),
        ("anthropic", "claude-sonnet-4-20250514", (3.0, 15.0)),  # a dated snapshot of a listed model
        ("anthropic", "claude-sonnet-4-5", (3.0, 15.0)),
        ("anthropic", "claude-opus-4-1-20250805", (15.0, 75.0)),
        ("anthropic", "claude-opus-4-5", None),  # a newer family member is priced differently: never guessed
        ("anthropic", "claude-opus-4-20250514-extra", None),
        ("gemini", "gemini-2.5-pro-preview-05-06", None),
        ("openai", "gemini-2.5-pro", None),  # through someone else's endpoint: their price, not Google's
        ("openai", "gpt-4o", None),
    ],
)
def test_the_table_prices_exact_names_and_dated_snapshots_only(provider, model, price):
    found = table_price(provider, model)
    assert (found.input_per_mtok, found.output_per_mtok) == price if price else found is None


def test_recipe_prices_override_the_table_and_a_local_model_is_free():
    assert price_for(OptimizerConfig(provider="local", model="smollm2-135m-instruct")) == FREE
    assert price_for(OptimizerConfig(model="gemini-2.5-pro", input_price_per_mtok=2, output_price_per_mtok=3)) == Price(
        2, 3
    )
    assert price_for(OptimizerConfig(provider="openai", model="mine")) is None
    assert (
        price_for(OptimizerConfig(provider="openai", model="mine", input_price_per_mtok=0, output_price_per_mtok=0))
        == FREE
    )


def test_costs_follow_the_tokens_and_gemini_pros_long_prompt_rate():
    pro = table_price("gemini", "gemini-2.5-pro")
    assert pro.cost_usd(200_000, 1_000_000) == pytest.approx(0.25 + 10.0)  # prompts up to 200k: $1.25 / $10
    assert pro.cost_usd(10_000, 8_000) == pytest.approx(0.0125 + 0.08)  # thinking tokens are output tokens
    assert pro.cost_usd(300_000, 1_000) == pytest.approx(0.75 + 0.015)  # over 200k: $2.50 / $15 for the whole call
    assert FREE.cost_usd(10**9, 10**9) == 0.0


def test_the_table_is_dated_sourced_and_prices_every_shipped_api_recipe(repo_root):
    table = yaml.safe_load(TABLE.read_text())
    assert str(table["read"]).startswith("20") and all(url.startswith("https://") for url in table["sources"].values())
    for provider in table["models"].values():
        for entry in provider.values():
            assert 0 < entry["input"] < entry["output"]
    recipes = [
        path
        for path in sorted((repo_root / "recipes").rglob("*.yaml"))
        if "optimizer" in (yaml.safe_load(path.read_text()) or {})
    ]
    assert recipes
    for path in recipes:
        config = load_recipe(path, check_paths=False).optimizer
        assert price_for(config) is not None, path


@pytest.mark.parametrize(
    "setting, message",
    [
        ("optimizer.input_price_per_mtok=abc", "expected a finite number, got 'abc'"),
        ("optimizer.input_price_per_mtok=.nan", "expected a finite number"),
        ("optimizer.output_price_per_mtok=.inf", "expected a finite number"),
        ("optimizer.input_price_per_mtok=true", "expected a finite number"),
        (
            "optimizer.input_price_per_mtok=-1",
            "must be a finite number of US dollars per million tokens, from 0 to 10,000 (got -1.0)",
        ),
        ("optimizer.output_price_per_mtok=1e300", "(got 1e+300)"),
    ],
)
def test_a_bad_price_is_one_line_naming_the_field(repo_root, setting, message):
    field = setting.split("=")[0]
    other = "optimizer.output_price_per_mtok=1" if "input" in field else "optimizer.input_price_per_mtok=1"
    with pytest.raises(InspoError) as info:
        load_recipe(repo_root / "recipes/demo.yaml", [setting, other])
    text = str(info.value)
    assert field.split(".")[1] in text and message in text and "\n" not in text


def test_one_price_without_the_other_is_refused(repo_root):
    with pytest.raises(InspoError, match="output_price_per_mtok: is null while input_price_per_mtok is 1.0: set both"):
        load_recipe(repo_root / "recipes/demo.yaml", ["optimizer.input_price_per_mtok=1"])


@pytest.mark.parametrize("value", ["3", math.nan, -0.5, math.inf, True, 1e6])
def test_prices_given_in_code_are_checked_too(value):
    with pytest.raises(ValueError, match="input_price_per_mtok|finite number"):
        OptimizerConfig(input_price_per_mtok=value, output_price_per_mtok=1.0)


# -- the record ---------------------------------------------------------------------------------------------------


def test_every_line_says_its_cost_and_the_accounting_totals_it(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    lm = OptimizerLM(
        Client(Completion("a", 120_000, 30_000), AttemptFailed("down", retryable=False), Completion("b", 1_000, 2_000)),
        max_retries=0,
        record=CallRecord(path),
        parameters=PARAMETERS,
        price=PRO,
    )
    lm.complete("first")
    with pytest.raises(InspoError):
        lm.complete("second")
    lm.complete("third")
    first, failed, third = rows(path)
    assert first["cost_usd"] == pytest.approx(0.15 + 0.3) and third["cost_usd"] == pytest.approx(0.00125 + 0.02)
    assert failed["cost_usd"] == 0.0 and "replayed" not in first
    assert lm.accounting()["cost_usd"] == pytest.approx(0.47125)
    assert summarize_record(path) == {
        "calls": 3,
        "answered_calls": 2,
        "failed_calls": 1,
        "replayed_calls": 0,
        "input_tokens": 121_000,
        "output_tokens": 32_000,
        "total_tokens": 153_000,
        "unpriced_calls": 0,
        "cost_usd": pytest.approx(0.47125),
    }


def test_an_unpriced_model_costs_null_never_a_guess(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    lm = OptimizerLM(Client(Completion("a", 10, 10)), record=CallRecord(path), parameters=PARAMETERS)
    lm.complete("p")
    assert rows(path)[0]["cost_usd"] is None and lm.accounting()["cost_usd"] is None
    totals = summarize_record(path)
    assert totals["cost_usd"] is None and totals["unpriced_calls"] == 1 and totals["input_tokens"] == 10


def test_an_unpriced_api_model_is_said_once_at_the_start_naming_the_fields(serve, caplog, monkeypatch):
    from helpers.fake_providers import optimizer

    server = serve("openai")
    monkeypatch.setenv("INSPO_TEST_KEY", "sk-test")
    with caplog.at_level(logging.WARNING):
        lm = optimizer("openai", server.base_url, api_key_env="INSPO_TEST_KEY")
        lm.complete("p")
        lm.complete("q")
    said = [r.getMessage() for r in caplog.records if "no price" in r.getMessage()]
    assert len(said) == 1 and "optimizer.input_price_per_mtok and optimizer.output_price_per_mtok" in said[0]
    assert "served-model" in said[0] and "\n" not in said[0] and lm.accounting()["cost_usd"] is None
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        priced = optimizer(
            "openai", server.base_url, api_key_env="INSPO_TEST_KEY", input_price_per_mtok=1.0, output_price_per_mtok=2.0
        )
        priced.complete("p")
    assert not [r for r in caplog.records if "no price" in r.getMessage()]
    assert priced.accounting()["cost_usd"] is not None


def test_a_replayed_line_costs_its_original_and_totals_count_it_once(tmp_path):
    recorded, replayed = tmp_path / "recorded.jsonl", tmp_path / "replayed" / "optimizer_calls.jsonl"
    replayed.parent.mkdir()
    lm = OptimizerLM(
        Client(Completion("a", 4_000, 1_000), AttemptFailed("down", retryable=False)),
        max_retries=0,
        record=CallRecord(recorded),
        parameters=PARAMETERS,
        price=PRO,
    )
    lm.complete("p")
    with pytest.raises(InspoError):
        lm.complete("q")
    # replayed at another price (a recipe's fields changed): each answer keeps the cost it had when it was asked
    replay = OptimizerLM(
        ReplayClient(recorded, "gemini", "gemini-2.5-pro", PARAMETERS, Price(100.0, 100.0)),
        max_retries=0,
        record=CallRecord(replayed),
        parameters=PARAMETERS,
        price=Price(100.0, 100.0),
    )
    assert replay.complete("p") == "a"
    with pytest.raises(InspoError, match="failed as recorded"):
        replay.complete("q")
    answered, failed = rows(replayed)
    assert answered["replayed"] is True and failed["replayed"] is True
    assert answered["cost_usd"] == rows(recorded)[0]["cost_usd"] == pytest.approx(0.005 + 0.01)
    assert replay.accounting()["cost_usd"] == lm.accounting()["cost_usd"]
    original, again = summarize_record(recorded), summarize_record(replayed)
    assert again["replayed_calls"] == 1 and original["replayed_calls"] == 0
    assert {k: v for k, v in again.items() if k != "replayed_calls"} == {
        k: v for k, v in original.items() if k != "replayed_calls"
    }


def test_a_record_from_before_costs_replays_at_the_recipes_price(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    OptimizerLM(Client(Completion("a", 1_000_000, 0)), record=CallRecord(path), parameters=PARAMETERS).complete("p")
    old = rows(path)[0]
    del old["cost_usd"]
    path.write_text(json.dumps(old) + "\n")
    assert summarize_record(path)["cost_usd"] is None  # the record itself says no cost
    replay = OptimizerLM(ReplayClient(path, "gemini", "gemini-2.5-pro", PARAMETERS, PRO), parameters=PARAMETERS)
    replay.complete("p")
    assert replay.accounting()["cost_usd"] == pytest.approx(1.25)


def test_the_totals_leave_out_a_cut_off_last_line_and_name_a_damaged_one(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    OptimizerLM(
        Client(Completion("a", 10, 10), Completion("b", 10, 10)),
        record=CallRecord(path),
        parameters=PARAMETERS,
        price=PRO,
    ).complete("p")
    whole = path.read_text()
    path.write_text(whole + whole[:40])
    assert summarize_record(path)["calls"] == 1
    path.write_text(whole[:40] + "\n" + whole)
    with pytest.raises(InspoError, match=r"optimizer_calls.jsonl:1: not valid JSON") as info:
        summarize_record(path)
    assert "\n" not in str(info.value)
    path.write_text(re.sub(r'"cost_usd": [^,]+', '"cost_usd": -1', whole))
    with pytest.raises(InspoError, match=r":1: \"cost_usd\": expected a finite number >= 0"):
        summarize_record(path)


def test_restored_accounting_keeps_its_cost_and_an_old_one_is_priced():
    lm = OptimizerLM(Client(), price=PRO)
    base = {
        "calls": 2,
        "failed_calls": 0,
        "retries": 0,
        "wall_s": 1.0,
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "estimated_usage_calls": 0,
    }
    lm.restore({**base, "cost_usd": 7.0})
    assert lm.accounting()["cost_usd"] == 7.0
    lm.restore({**base, "cost_usd": None})
    assert lm.accounting()["cost_usd"] is None
    lm.restore(base)  # saved before costs were kept: its tokens at the run's price
    assert lm.accounting()["cost_usd"] == pytest.approx(1.25)


def test_an_unpriced_judge_is_warned_of_in_its_own_sections_words():
    from inspo_cli.instructions.providers.prices import unpriced_warning

    config = OptimizerConfig(provider="openai", model="mine")
    optimizer, judge = unpriced_warning(config), unpriced_warning(config, "judge")
    assert optimizer.startswith("warning: optimizer openai model 'mine'") and "optimizer_calls.jsonl" in optimizer
    assert "set optimizer.input_price_per_mtok and optimizer.output_price_per_mtok" in optimizer
    assert judge.startswith("warning: judge openai model 'mine'") and "in results.json" in judge
    assert "set judge.input_price_per_mtok and judge.output_price_per_mtok" in judge and "optimizer" not in judge

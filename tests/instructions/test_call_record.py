"""Every optimizer call a run makes is a line of its optimizer_calls.jsonl (instructions/providers/call_record.py): the
prompt, the parameters, the answer or the error, tokens, latency and a content hash; never the key."""

from __future__ import annotations

import json

import pytest

from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.call_record import CallRecord, prompt_hash
from inspo_cli.instructions.providers.lm_errors import AttemptFailed, Completion
from inspo_cli.instructions.providers.optimizer_lm import OptimizerLM

KEY = "sk-record-test-0123456789abcdef"


class Client:
    provider, model, endpoint = "openai", "scripted", "http://127.0.0.1:9/v1"

    def __init__(self, *outcomes):
        self.outcomes = list(outcomes)

    def attempt(self, prompt: str) -> Completion:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_answered_and_failed_calls_are_recorded_without_the_key(tmp_path):
    path = tmp_path / "optimizer_calls.jsonl"
    parameters = {"temperature": 1.0, "max_output_tokens": 8192, "thinking_budget": None}
    lm = OptimizerLM(
        Client(
            Completion("<ins_1>a</ins_1>", 120, 30, truncated=True, stop_reason="length"),
            AttemptFailed("refused the key", retryable=False, status=401, detail=f"bad key {KEY}"),
        ),
        max_retries=0,
        secret=KEY,
        record=CallRecord(path),
        parameters=parameters,
    )
    assert lm.complete("first prompt") == "<ins_1>a</ins_1>"
    with pytest.raises(InspoError):
        lm.complete("second prompt")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["prompt"] for r in rows] == ["first prompt", "second prompt"]
    first, second = rows
    assert (
        first["answer"],
        first["truncated"],
        first["stop_reason"],
        first["input_tokens"],
        first["output_tokens"],
        first["error"],
    ) == ("<ins_1>a</ins_1>", True, "length", 120, 30, None)
    assert first["parameters"] == parameters and first["provider"] == "openai" and first["model"] == "scripted"
    assert first["hash"] == prompt_hash("openai", "scripted", parameters, "first prompt") != second["hash"]
    assert second["answer"] is None and "refused the key" in second["error"] and first["latency_s"] >= 0
    assert KEY not in path.read_text()


def test_the_hash_depends_on_everything_that_shapes_the_answer():
    base = prompt_hash("gemini", "gemini-2.5-pro", {"temperature": 1.0}, "p")
    assert base == prompt_hash("gemini", "gemini-2.5-pro", {"temperature": 1.0}, "p")
    assert (
        len(
            {
                base,
                prompt_hash("gemini", "gemini-2.5-pro", {"temperature": 0.5}, "p"),
                prompt_hash("gemini", "gemini-2.5-flash", {"temperature": 1.0}, "p"),
                prompt_hash("anthropic", "gemini-2.5-pro", {"temperature": 1.0}, "p"),
                prompt_hash("gemini", "gemini-2.5-pro", {"temperature": 1.0}, "p "),
            }
        )
        == 5
    )


def test_a_budget_refusal_is_not_a_call_and_is_not_recorded(tmp_path):
    from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted

    path = tmp_path / "calls.jsonl"
    lm = OptimizerLM(Client(Completion("x", 1, 1)), max_calls=1, record=CallRecord(path))
    lm.complete("p")
    with pytest.raises(OptimizerBudgetExhausted):
        lm.complete("q")
    assert len(path.read_text().splitlines()) == 1

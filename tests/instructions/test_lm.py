"""The optimizer LM against fake provider servers on loopback (`helpers/fake_providers.py`): the real SDKs
(google-genai, anthropic) and httpx talk HTTP to a `ThreadingHTTPServer` that records what they sent and answers
what a test scripts.

Each provider is checked for the path and key header it really uses, success with token accounting, a 429
then success (one retry honouring Retry-After), 500 until max_retries, no retry on 400, a timeout, an
unreachable server and malformed bodies; then the budget, the missing key, that the key never leaks, and
the local transformers client on a tiny random model. Backoff sleeps are recorded, not slept. Answers cut off at
the output limit, and optimizer.thinking_budget: test_optimizer_truncation.py.
"""

from __future__ import annotations

import base64
import logging
import subprocess
import sys
import traceback

import pytest
from helpers.api_keys import ODD_KEY, key_forms, leaks
from helpers.fake_providers import (
    ANSWER,
    EMPTY_BODIES,
    KEY,
    KEY_ENV,
    MODELS,
    PATHS,
    PROVIDERS,
    Reply,
    closed_port,
    gemini_thinking_budget,
    key_header_ok,
    optimizer,
    prompt_sent,
    success_body,
)

from inspo_cli.config import OptimizerConfig
from inspo_cli.errors import InspoError
from inspo_cli.instructions.providers.api_keys import redact
from inspo_cli.instructions.providers.lm_errors import RETRY_AFTER_CAP_S, parse_retry_after, retry_after_from_headers
from inspo_cli.instructions.providers.opening import open_optimizer
from inspo_cli.instructions.providers.optimizer_lm import OptimizerBudgetExhausted


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_success_sends_the_real_request_and_counts_tokens(serve, provider):
    server = serve(provider)
    lm = optimizer(provider, server.base_url)
    assert lm.complete("Improve <ins_0> this </ins_0>") == ANSWER
    [request] = server.requests
    assert request.path == PATHS[provider]
    assert key_header_ok(provider, request.headers)
    assert prompt_sent(provider, request.body) == "Improve <ins_0> this </ins_0>"
    if provider == "gemini":  # thinking gets at most half of max_output_tokens unless the recipe says otherwise
        config = dict(request.body["generationConfig"])
        assert gemini_thinking_budget(config.pop("thinkingConfig")) == 32
        assert config == {"temperature": 0.3, "maxOutputTokens": 64}
    else:
        body = request.body
        assert (body["model"], body["max_tokens"], body["temperature"]) == (MODELS[provider], 64, 0.3)
    if provider == "anthropic":
        assert request.headers.get("anthropic-version")
    counts = lm.accounting()
    expected = {"calls": 1, "retries": 0, "failed_calls": 0, "input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
    assert {name: counts[name] for name in expected} == expected
    assert counts["wall_s"] >= 0 and counts["provider"] == provider


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_is_retried_after_the_servers_retry_after(serve, provider):
    server = serve(provider, Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}), Reply())
    sleeps = []
    lm = optimizer(provider, server.base_url, sleeps)
    assert lm.complete("p") == ANSWER
    assert sleeps == [3.0] and len(server.requests) == 2
    assert (lm.accounting()["retries"], lm.accounting()["calls"], lm.accounting()["input_tokens"]) == (1, 1, 11)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_500_is_retried_with_backoff_then_fails_on_one_line(serve, provider):
    server = serve(provider, Reply(500, {"error": {"message": "internal\nerror"}}))
    sleeps = []
    lm = optimizer(provider, server.base_url, sleeps, max_retries=3)
    with pytest.raises(InspoError) as caught:
        lm.complete("p")
    message = str(caught.value)
    assert len(server.requests) == 4 and len(sleeps) == 3
    for retry, delay in enumerate(sleeps):  # exponential, jittered within [0.5, 1] x 2^retry seconds
        assert 0.5 * 2**retry <= delay <= 2**retry
    assert "\n" not in message and "HTTP 500" in message and "after 4 attempts" in message
    assert f"{provider} model '{MODELS[provider]}' at {server.root}{PATHS[provider]} answered HTTP 500" in message
    assert lm.accounting()["failed_calls"] == 1 and lm.accounting()["retries"] == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_other_4xx_fail_at_once_with_the_servers_reason(serve, provider):
    server = serve(provider, Reply(400, {"error": {"message": "max_tokens is too large"}}))
    sleeps = []
    with pytest.raises(InspoError, match=r"HTTP 400 \(max_tokens is too large\)") as caught:
        optimizer(provider, server.base_url, sleeps).complete("p")
    assert len(server.requests) == 1 and sleeps == [] and "attempts" not in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_is_retried_then_reported(serve, provider):
    server = serve(provider, Reply(delay_s=10))
    sleeps = []
    with pytest.raises(InspoError, match=r"timed out after 0.25 s after 2 attempts") as caught:
        optimizer(provider, server.base_url, sleeps, timeout_s=0.25, max_retries=1).complete("p")
    assert len(server.requests) == 2 and len(sleeps) == 1 and provider in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_unreachable_server_is_retried_then_reported(provider):
    base_url = f"http://127.0.0.1:{closed_port()}"
    sleeps = []
    with pytest.raises(InspoError, match=r"could not be reached .* after 2 attempts; check optimizer.base_url"):
        optimizer(provider, base_url, sleeps, max_retries=1).complete("p")
    assert len(sleeps) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("body", ["not json", "missing fields", "empty"])
def test_malformed_bodies_raise_a_clear_error(serve, provider, body):
    reply = {"not json": "<html>502 bad gateway</html>", "missing fields": {}, "empty": EMPTY_BODIES[provider]}[body]
    server = serve(provider, Reply(200, reply))
    with pytest.raises(InspoError) as caught:
        optimizer(provider, server.base_url).complete("p")
    message = str(caught.value)
    assert f"{provider} model" in message and "malformed response" in message and "\n" not in message
    assert type(caught.value) is InspoError and len(server.requests) == 1  # not retried, not a KeyError


def test_call_budget_is_checked_before_calling(serve):
    server = serve("openai")
    lm = optimizer("openai", server.base_url, max_calls=2)
    lm.complete("a"), lm.complete("b")
    with pytest.raises(
        OptimizerBudgetExhausted, match=r"optimizer budget exhausted: 2 calls \(optimizer.max_calls\); raise it"
    ):
        lm.complete("c")
    assert len(server.requests) == 2 and isinstance(OptimizerBudgetExhausted("x"), InspoError)


def test_token_budget_counts_input_and_output(serve):
    server = serve("anthropic")
    lm = optimizer("anthropic", server.base_url, max_total_tokens=30)
    lm.complete("a"), lm.complete("b")  # 18 tokens each: the second starts under budget, ends over it
    with pytest.raises(OptimizerBudgetExhausted, match=r"36 of 30 tokens \(optimizer.max_total_tokens\)"):
        lm.complete("c")
    assert len(server.requests) == 2 and lm.accounting()["total_tokens"] == 36


def test_missing_usage_is_estimated_and_flagged(serve):
    body = success_body("openai")
    del body["usage"]
    lm = optimizer("openai", serve("openai", Reply(200, body)).base_url)
    completion = lm.complete_with_usage("x" * 40)
    assert completion.usage_estimated and completion.input_tokens == 10
    assert lm.accounting()["estimated_usage_calls"] == 1


def test_anthropic_temperature_is_left_out_at_the_api_default(serve):
    server = serve("anthropic")
    optimizer("anthropic", server.base_url, temperature=1.0).complete("p")
    assert "temperature" not in server.requests[0].body  # newer Claude models reject it


@pytest.mark.parametrize("provider", PROVIDERS)
def test_missing_key_names_the_variable(monkeypatch, provider):
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(InspoError, match=f"environment variable {KEY_ENV} is not set"):
        optimizer(provider, "http://127.0.0.1:9")
    default_env = {"gemini": "GEMINI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}[provider]
    monkeypatch.setenv(default_env, "  ")
    with pytest.raises(InspoError, match=default_env):
        open_optimizer(OptimizerConfig(provider=provider, model=MODELS[provider]))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_key_never_leaks(serve, provider, caplog):
    caplog.set_level(logging.DEBUG)  # SDK and httpx debug logs included
    echo = {"error": {"message": f"invalid api key {KEY}"}}  # some servers quote what they were sent
    server = serve(
        provider,
        Reply(401, echo),
        Reply(500, echo),
        Reply(200, f"<html>{KEY}</html>"),
        Reply(429, echo),
        Reply(200, echo),
    )
    lm = optimizer(provider, server.base_url, max_retries=1)
    errors = []
    for _ in range(3):  # 401; 500 then a non-JSON body; 429 then a malformed JSON body
        with pytest.raises(InspoError) as caught:
            lm.complete("p")
        errors.append(caught.value)
    assert len(server.requests) == 5 and "[redacted]" in str(errors[0])  # the server did echo it
    texts = [repr(lm), str(lm.accounting()), caplog.text]
    for error in errors:
        texts += [str(error), repr(error), "".join(traceback.format_exception(error))]
    assert all(KEY not in text for text in texts)


def test_redact_replaces_whole_forms_of_a_secret_only():
    assert len(set(key_forms(ODD_KEY))) == 5  # the forms differ, so each is really tested
    for form in key_forms(ODD_KEY):
        assert redact(f"invalid key '{form}' (got {form}).", ODD_KEY) == "invalid key '[redacted]' (got [redacted])."
        assert redact(f"invalid key {form[:12]}...", ODD_KEY) == f"invalid key {form[:12]}..."  # not the key
    key = "0123456789abcdefg"  # base64 with padding, quoted without it
    assert base64.b64encode(key.encode()).decode().endswith("=")
    assert redact(f"got {base64.b64encode(key.encode()).decode().rstrip('=')}.", key) == "got [redacted]."
    for placeholder in ("x", "EMPTY", "token-abc123"):  # keyless servers' placeholders are no secrets
        assert redact(f"Example: {placeholder}, x and EMPTY.", placeholder) == f"Example: {placeholder}, x and EMPTY."
    assert redact("no key here", ODD_KEY) == "no key here" and redact("x", None) == "x"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_key_echoed_in_errors_is_redacted_and_in_an_answer_refused(serve, provider, monkeypatch, caplog):
    """A server that quotes the key, encoded or not: every error and log line has it redacted, also where the
    message is shortened (the key is removed before the cut, which would leave a piece of it); an answer that quotes
    it is not rewritten but refused, so nothing of it reaches a run; 401 and 403 are not retried."""
    monkeypatch.setenv(KEY_ENV, ODD_KEY)
    caplog.set_level(logging.DEBUG)
    encoded = " ".join(key_forms(ODD_KEY))
    straddling = "x" * 170 + f" forbidden for {ODD_KEY}"  # the key crosses the 200-character cut
    server = serve(
        provider,
        Reply(401, {"error": {"message": f"invalid api key {encoded}"}}),
        Reply(403, {"error": {"message": straddling}}),
        Reply(500, {"error": {"message": f"oops {encoded}"}}),
        Reply(200, success_body(provider, f"<ins_1>Use {ODD_KEY}.</ins_1>")),
    )
    sleeps = []
    lm = optimizer(provider, server.base_url, sleeps, max_retries=1)
    texts = []
    for status in (401, 403):
        with pytest.raises(InspoError, match=f"HTTP {status}") as caught:
            lm.complete("p")
        texts += [str(caught.value), "".join(traceback.format_exception(caught.value))]
    assert len(server.requests) == 2 and sleeps == []  # one attempt each
    assert ODD_KEY[:12] not in texts[2] and "forbidden for [redac" in texts[2]
    with pytest.raises(InspoError, match="answered with a text that quotes the API key") as caught:
        lm.complete("p")  # 500 (retried, its warning logged), then an answer that quotes the key: refused
    assert len(sleeps) == 1 and lm.accounting()["failed_calls"] == 3 and "base_url" in str(caught.value)
    texts += [str(caught.value), caplog.text, repr(lm), str(lm.accounting())]
    assert "[redacted]" in texts[0] and "oops [redacted]" in caplog.text
    assert all(leaks(text, ODD_KEY) == [] for text in texts)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_is_returned_exactly_as_the_model_wrote_it(serve, provider, monkeypatch):
    """`OPENAI_API_KEY=x` for a keyless local server: an answer full of x's, and one quoting a long key's first
    characters, come back unchanged, and so does a server's error text."""
    text = f"<ins_1>Example: explain the context, then answer exactly ({ODD_KEY[:13]}).</ins_1>"
    for key in ("x", "EMPTY", ODD_KEY):
        monkeypatch.setenv(KEY_ENV, key)
        server = serve(
            provider,
            Reply(400, {"error": {"message": "max_tokens exceeds the context"}}),
            Reply(200, success_body(provider, text)),
        )
        lm = optimizer(provider, server.base_url)
        with pytest.raises(InspoError, match=r"HTTP 400 \(max_tokens exceeds the context\)"):
            lm.complete("p")
        assert lm.complete("p") == text


def test_default_retries_bound_a_hung_endpoint():
    """The defaults (stated in the README): a hung endpoint costs one evolution at most (retries + 1) timeouts plus
    the backoff: under 10 minutes, not the 30 that 300 s x 6 attempts took."""
    config = OptimizerConfig(provider="openai", model="m", base_url="http://127.0.0.1:9")
    assert (config.timeout_s, config.max_retries) == (120.0, 3)
    worst_s = (config.max_retries + 1) * config.timeout_s + sum(min(30.0, 2.0**r) for r in range(config.max_retries))
    assert worst_s < 600
    # Gemini's default answer (16,384 tokens with its thinking) takes ~110-160 s: one attempt must be able to finish
    gemini = OptimizerConfig()
    assert (
        gemini.timeout_s >= gemini.max_output_tokens / 100 + 60
        and (gemini.max_retries + 1) * gemini.timeout_s + sum(min(30.0, 2.0**r) for r in range(gemini.max_retries))
        < 25 * 60
    )


def test_retry_after_parsing():
    assert parse_retry_after("2.5") == 2.5 and parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("100000") == RETRY_AFTER_CAP_S and parse_retry_after("-3") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: go now
    assert retry_after_from_headers({"retry-after-ms": "1500", "retry-after": "9"}) == "1.5"


def test_local_model_loads_lazily_answers_and_counts_tokens(tiny_model_dir, tiny_tokenizer):
    lm = open_optimizer(
        OptimizerConfig(provider="local", model=str(tiny_model_dir), temperature=0.0, max_output_tokens=6)
    )
    assert "loaded=False" in repr(lm._client)  # opening costs nothing until the first proposal
    first = lm.complete_with_usage("Improve the instruction.")
    assert "loaded=True" in repr(lm._client)
    chat = tiny_tokenizer.apply_chat_template(
        [{"role": "user", "content": "Improve the instruction."}], tokenize=False, add_generation_prompt=True
    )
    # the answer is opened with "<ins_1>" for the model, so even a tiny model writes a parseable candidate
    assert first.input_tokens == len(tiny_tokenizer(chat + "<ins_1>\n", add_special_tokens=False)["input_ids"])
    assert first.text.startswith("<ins_1>\n") and 1 <= first.output_tokens <= 6
    assert lm.complete_with_usage("Improve the instruction.") == first  # temperature 0 is greedy
    assert lm.accounting()["calls"] == 2 and lm.accounting()["output_tokens"] == 2 * first.output_tokens


def test_importing_the_layer_loads_no_sdk():
    heavy = ("anthropic", "google.genai", "torch", "transformers", "httpx")
    code = (
        "import sys, inspo_cli.instructions.providers.optimizer_lm, inspo_cli.instructions.providers.language_model, "
        "inspo_cli.instructions.providers.lm_clients, inspo_cli.instructions.providers.lm_errors; "
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"


def test_the_local_model_writes_without_cudnn_attention_on_a_gpu(tiny_model_dir, monkeypatch):
    """On CUDA, cuDNN attention builds a graph for each key length it meets: every decode step of every answer."""
    import torch

    from inspo_cli.policy import generation

    real, devices = generation.decoding_attention, []

    def as_on_a_gpu(device):
        devices.append(device)
        return real("cuda")

    monkeypatch.setattr(generation, "decoding_attention", as_on_a_gpu)
    lm = open_optimizer(
        OptimizerConfig(provider="local", model=str(tiny_model_dir), temperature=0.0, max_output_tokens=4)
    )
    lm.complete_with_usage("Improve the instruction.")  # loads the model
    seen = []
    model = lm._client._loaded[0]
    hook = model.register_forward_pre_hook(lambda module, args: seen.append(torch.backends.cuda.cudnn_sdp_enabled()))
    try:
        answer = lm.complete_with_usage("Improve the instruction.")
    finally:
        hook.remove()
    assert len(seen) == answer.output_tokens >= 1 and not any(seen)
    assert devices == [model.device, model.device]  # one block per answer, on the model's own device
    assert torch.backends.cuda.cudnn_sdp_enabled()

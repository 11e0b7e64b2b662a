"""The four optimizer-LM providers, each a `ProviderClient` (lm_errors.py) that makes exactly one attempt per call.

    client = build_client(config, api_key)   # config: OptimizerConfig; api_key from api_keys.read_api_key
    completion = client.attempt(prompt)      # Completion, or raises AttemptFailed

- gemini: the `google-genai` SDK, POST {base_url}/v1beta/models/{model}:generateContent, key in x-goog-api-key.
- anthropic: the `anthropic` SDK, POST {base_url}/v1/messages (anthropic >= 2 sends the key as a Bearer token).
- openai: any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, ...) through plain httpx,
  POST {base_url}/chat/completions with `Authorization: Bearer <key>`; no openai package needed.
- local: a transformers model loaded with `inspo_cli.policy.models.load_model` on first use (the offline default),
  in `local_lm.py`, which imports torch and the model loader only inside its functions.

The SDKs' own retries are switched off so `OptimizerLM` retries every provider the same way. Every SDK error is
translated into `AttemptFailed` here, so nothing above this file imports an SDK or sees its exception types. Each
client marks an answer that did not end naturally (`NATURAL_FINISH`, in the provider's own words) as `truncated`,
with the provider's reason: stopped at optimizer.max_output_tokens (`TRUNCATED_FINISH`) or by a safety, recitation
or content filter alike, its last candidate may be cut off mid-sentence, and evolution must not take it as written.
A reason the provider does not give (None, Gemini's FINISH_REASON_UNSPECIFIED) is taken as a natural end.
optimizer.thinking_budget goes to Gemini as ThinkingConfig.thinking_budget and to Claude as extended thinking.
SDKs are imported inside the constructors: importing this module stays cheap.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

from inspo_cli.instructions.providers.lm_errors import (
    AttemptFailed,
    Completion,
    ProviderClient,
    connection_failure,
    http_failure,
    malformed_response,
    retry_after_from_headers,
    timeout_failure,
)

if TYPE_CHECKING:
    from inspo_cli.config import OptimizerConfig

# How each API says "the model ended its answer" (no stop sequences are sent). Every other reason it gives is a stop
# imposed on the model: the output limit, Gemini's SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII, OTHER...,
# Claude's refusal or pause_turn, OpenAI's content_filter, a server's abort.
NATURAL_FINISH = {"gemini": ("STOP",), "anthropic": ("end_turn", "stop_sequence"), "openai": ("stop",)}
UNSAID_FINISH = (None, "", "FINISH_REASON_UNSPECIFIED")
# How each API says "stopped at the output limit". Claude's model_context_window_exceeded is the same cut, at the
# context window instead of max_tokens.
TRUNCATED_FINISH = {
    "gemini": ("MAX_TOKENS",),
    "anthropic": ("max_tokens", "model_context_window_exceeded"),
    "openai": ("length",),
}  # tuples: a malformed body's reason may be unhashable


def stop_reason(provider: str, finish: Any) -> str | None:
    """The provider's reason when it stopped the answer before the model ended it; None for a natural end."""
    if finish in UNSAID_FINISH or finish in NATURAL_FINISH[provider]:
        return None
    return " ".join(str(finish).split())[:80] or "unknown"  # a malformed body's reason may be any JSON value


def no_text(provider: str, finish: Any, what: str) -> AttemptFailed:
    """The failure for an answer without text: cut at the limit, withheld by the provider, or malformed."""
    reason = stop_reason(provider, finish)
    if finish in TRUNCATED_FINISH[provider]:
        hint = "raise optimizer.max_output_tokens" + (
            " or lower optimizer.thinking_budget (thinking counts against it)" if provider != "openai" else ""
        )
        return AttemptFailed(f"returned no text (finish reason {reason})", retryable=False, hint=hint)
    if reason is not None:
        return AttemptFailed(
            f"returned no text (finish reason {reason})",
            retryable=False,
            hint="the provider withheld the answer (a safety, recitation or content filter, or "
            "another stop of its own); try another optimizer.model if it keeps doing so",
        )
    return malformed_response(provider, f"{what}, finish reason {finish}")


def build_client(config: OptimizerConfig, api_key: str | None) -> ProviderClient:
    """The client for `config.provider`; `api_key` is None only for local models."""
    if config.provider == "local":
        from inspo_cli.instructions.providers.local_lm import (
            LocalTransformersClient,  # torch: imported only when asked for
        )

        return LocalTransformersClient(config)
    assert api_key, "read_api_key refuses a missing key before this point"
    clients = {"gemini": GeminiClient, "anthropic": AnthropicClient, "openai": OpenAICompatibleClient}
    return clients[config.provider](config, api_key)


class GeminiClient:
    """Google's Gemini API through `google-genai`."""

    provider = "gemini"
    DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
    # Pinned so the endpoint in error messages is the one actually called; google-genai 3.x defaults to v1,
    # older releases to v1beta, and Google's REST reference documents generateContent under v1beta.
    API_VERSION = "v1beta"

    def __init__(self, config: OptimizerConfig, api_key: str):
        from google import genai
        from google.genai import types

        self.model = config.model
        self._timeout_s = config.timeout_s
        base_url = (config.base_url or self.DEFAULT_BASE_URL).rstrip("/")
        self.endpoint = f"{base_url}/{self.API_VERSION}/models/{config.model}:generateContent"
        options = types.HttpOptions(
            base_url=base_url,
            api_version=self.API_VERSION,
            timeout=max(1, round(config.timeout_s * 1000)),  # milliseconds
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        self._sdk = genai.Client(api_key=api_key, vertexai=False, http_options=options)
        # Gemini 2.5 counts thinking against max_output_tokens and, unbudgeted (dynamic thinking), decides itself how
        # much to think: a fixed budget keeps room for the answer. -1 sends none: the model decides (and a model
        # without thinking gets none).
        thinking = (
            types.ThinkingConfig(thinking_budget=config.thinking_budget)
            if config.thinking_budget is not None and config.thinking_budget != -1
            else None
        )
        # No tools are passed, so automatic function calling has nothing to do but log a line per call.
        self._generation = types.GenerateContentConfig(
            temperature=config.temperature,
            max_output_tokens=config.max_output_tokens,
            thinking_config=thinking,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )

    def __repr__(self) -> str:
        return f"GeminiClient(model={self.model!r}, endpoint={self.endpoint!r})"

    def attempt(self, prompt: str) -> Completion:
        from google.genai import errors
        from pydantic import ValidationError

        try:
            response = self._sdk.models.generate_content(model=self.model, contents=prompt, config=self._generation)
        except errors.APIError as e:
            headers = getattr(e.response, "headers", None)
            raise http_failure(e.code or 500, e.message or e.status or "", retry_after_from_headers(headers)) from None
        except _httpx_errors("TimeoutException"):
            raise timeout_failure(self._timeout_s) from None
        except _httpx_errors("TransportError") as e:
            raise connection_failure(e) from None
        except (json.JSONDecodeError, ValidationError, errors.UnknownApiResponseError) as e:
            raise malformed_response(self.provider, f"not a generateContent response: {type(e).__name__}") from None
        return self._completion(response, prompt)

    def _completion(self, response: Any, prompt: str) -> Completion:
        candidates = response.candidates or []
        if not candidates:
            blocked = getattr(response.prompt_feedback, "block_reason", None)
            if blocked:
                raise AttemptFailed(
                    f"returned no candidates (prompt blocked: {_enum_name(blocked)})",
                    retryable=False,
                    hint="the provider's safety filter refused the prompt",
                )
            raise malformed_response(self.provider, "no candidates")
        candidate = candidates[0]
        parts = (candidate.content.parts if candidate.content else None) or []
        texts = [part.text for part in parts if part.text and not part.thought]  # thought summaries are not answers
        finish = _enum_name(candidate.finish_reason) if candidate.finish_reason is not None else None
        if not texts:
            raise no_text(self.provider, finish, "no text in the first candidate")
        usage = response.usage_metadata
        output_tokens = None
        if usage is not None and usage.candidates_token_count is not None:
            output_tokens = usage.candidates_token_count + (usage.thoughts_token_count or 0)  # thoughts are billed
        return completion_with_usage(
            "".join(texts),
            prompt,
            usage and usage.prompt_token_count,
            output_tokens,
            stop_reason=stop_reason(self.provider, finish),
        )


class AnthropicClient:
    """Anthropic's Messages API through the `anthropic` SDK."""

    provider = "anthropic"
    DEFAULT_BASE_URL = "https://api.anthropic.com"

    def __init__(self, config: OptimizerConfig, api_key: str):
        import anthropic

        self.model = config.model
        self._timeout_s = config.timeout_s
        self._max_tokens = config.max_output_tokens
        base_url = (config.base_url or self.DEFAULT_BASE_URL).rstrip("/")
        self.endpoint = f"{base_url}/v1/messages"
        self._sdk = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=config.timeout_s, max_retries=0)
        # anthropic >= 1.0 dropped `temperature` from create()'s signature; the API still takes it (via extra_body)
        # on models that support sampling, while newer models reject it, so send it only when it is not the
        # API's default of 1.0 (which extended thinking requires; the config checks that).
        self._extra_body = {"temperature": config.temperature} if config.temperature != 1.0 else None
        # Extended thinking counts against max_tokens (budget_tokens < max_tokens, checked by the config); unset,
        # Claude answers without it.
        self._thinking = (
            {"thinking": {"type": "enabled", "budget_tokens": config.thinking_budget}}
            if config.thinking_budget is not None
            else {}
        )

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, endpoint={self.endpoint!r})"

    def attempt(self, prompt: str) -> Completion:
        import anthropic

        try:
            message = self._sdk.messages.create(
                model=self.model,
                max_tokens=self._max_tokens,
                messages=[{"role": "user", "content": prompt}],
                extra_body=self._extra_body,
                **self._thinking,
            )
        except anthropic.APIStatusError as e:
            retry_after = retry_after_from_headers(e.response.headers)
            raise http_failure(e.status_code, error_detail(e.body), retry_after) from None
        except anthropic.APITimeoutError:
            raise timeout_failure(self._timeout_s) from None
        except anthropic.APIConnectionError as e:
            raise connection_failure(e.__cause__ or e) from None
        except anthropic.APIResponseValidationError as e:
            raise malformed_response(self.provider, f"not a Messages response: {type(e).__name__}") from None
        return self._completion(message, prompt)

    def _completion(self, message: Any, prompt: str) -> Completion:
        # The SDK does not validate bodies strictly: a non-JSON body comes back as a str, missing fields as None.
        if isinstance(message, (str, bytes)):
            raise malformed_response(self.provider, "body is not JSON")
        content = _field(message, "content")
        if not isinstance(content, list):
            raise malformed_response(self.provider, "no content list")
        texts = [_field(block, "text") for block in content if _field(block, "type") == "text"]
        texts = [text for text in texts if isinstance(text, str) and text]  # thinking blocks are not answers
        stop = _field(message, "stop_reason")
        if not texts:
            raise no_text(self.provider, stop, "no text block")
        usage = _field(message, "usage")
        input_tokens = _field(usage, "input_tokens")
        if isinstance(input_tokens, int):  # cached prompt tokens are reported apart but are input all the same
            for cached in ("cache_creation_input_tokens", "cache_read_input_tokens"):
                input_tokens += _field(usage, cached) or 0
        return completion_with_usage(
            "".join(texts),
            prompt,
            input_tokens,
            _field(usage, "output_tokens"),
            stop_reason=stop_reason(self.provider, stop),
        )


class OpenAICompatibleClient:
    """Any server speaking OpenAI's chat-completions API (OpenAI, vLLM, llama.cpp, Ollama, ...), via httpx."""

    provider = "openai"
    DEFAULT_BASE_URL = "https://api.openai.com/v1"

    def __init__(self, config: OptimizerConfig, api_key: str):
        import httpx

        self.model = config.model
        self._timeout_s = config.timeout_s
        self.endpoint = f"{(config.base_url or self.DEFAULT_BASE_URL).rstrip('/')}/chat/completions"
        self._http = httpx.Client(timeout=config.timeout_s, headers={"Authorization": f"Bearer {api_key}"})
        # max_tokens, not max_completion_tokens: every OpenAI-compatible server accepts it.
        self._request = {
            "model": config.model,
            "temperature": config.temperature,
            "max_tokens": config.max_output_tokens,
        }

    def __repr__(self) -> str:
        return f"OpenAICompatibleClient(model={self.model!r}, endpoint={self.endpoint!r})"

    def attempt(self, prompt: str) -> Completion:
        import httpx

        try:
            response = self._http.post(
                self.endpoint, json={**self._request, "messages": [{"role": "user", "content": prompt}]}
            )
        except httpx.TimeoutException:
            raise timeout_failure(self._timeout_s) from None
        except httpx.TransportError as e:
            raise connection_failure(e) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.status_code >= 300:
            detail = error_detail(body if body is not None else response.text)
            raise http_failure(response.status_code, detail, retry_after_from_headers(response.headers))
        if not isinstance(body, dict):
            raise malformed_response(self.provider, "body is not a JSON object")
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices:
            raise malformed_response(self.provider, "no choices")
        text = _field(_field(choices[0], "message"), "content")
        finish = _field(choices[0], "finish_reason")
        if not isinstance(text, str) or not text:
            raise no_text(self.provider, finish, "no message content in the first choice")
        usage = body.get("usage")
        return completion_with_usage(
            text,
            prompt,
            _field(usage, "prompt_tokens"),
            _field(usage, "completion_tokens"),
            stop_reason=stop_reason(self.provider, finish),
        )


def completion_with_usage(
    text: str, prompt: str, input_tokens: Any, output_tokens: Any, *, stop_reason: str | None = None
) -> Completion:
    """A Completion with the provider's counts, or ~4 characters per token where it reported none; `stop_reason`
    (a stop that was not the model's own end) marks it truncated."""
    truncated = stop_reason is not None
    if isinstance(input_tokens, int) and isinstance(output_tokens, int):
        return Completion(text, input_tokens, output_tokens, truncated=truncated, stop_reason=stop_reason)
    return Completion(
        text,
        input_tokens if isinstance(input_tokens, int) else _estimate_tokens(prompt),
        output_tokens if isinstance(output_tokens, int) else _estimate_tokens(text),
        usage_estimated=True,
        truncated=truncated,
        stop_reason=stop_reason,
    )


def error_detail(body: Any) -> str:
    """The human part of an error body: {"error": {"message": ...}} (all three APIs), or the text itself (whole: it is
    shortened only after the key is removed from it)."""
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("type") or error.get("status") or "")
        return str(error)
    return "" if body is None else str(body)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _field(obj: Any, name: str) -> Any:
    """A field of an SDK object or a plain dict, None when absent (leniently parsed bodies can be either)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _enum_name(value: Any) -> str:
    return str(getattr(value, "value", value))


def _httpx_errors(name: str) -> tuple[type[BaseException], ...]:
    """`name` from httpx and from httpx2 (the fork newer SDKs use), whichever are installed."""
    found = []
    for module_name in ("httpx", "httpx2"):
        try:
            found.append(getattr(importlib.import_module(module_name), name))
        except (ImportError, AttributeError):
            continue
    return tuple(found)

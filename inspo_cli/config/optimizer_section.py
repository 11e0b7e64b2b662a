"""The recipe's optimizer section: the LLM that writes new instructions (§3.3), its provider, its budget and its
prices. Part of the typed recipe (`sections.py`, which re-exports it); same conventions."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from inspo_cli.config.validation import ConfigValueError, _positive, _require, check_choices, choice_field

MAX_PRICE_PER_MTOK = 10_000.0  # $ per million tokens: the dearest API models bill a few hundred; more is a unit slip


_PROVIDER_KEY_ENV = {
    "gemini": "GEMINI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "local": None,
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass
class OptimizerConfig:
    """The LLM that writes new instructions. API keys are read from the environment variable named here."""

    provider: str = choice_field(
        {
            "gemini": "",
            "anthropic": "",
            "openai": "any OpenAI-compatible endpoint",
            "local": "a transformers model, offline",
        },
        "gemini",
        "{choices}.",
    )
    model: str = field(
        default="gemini-2.5-pro",
        metadata={
            "help": "The optimizer's model name at the provider (the paper: Gemini 2.5 Pro); local: a hub id, local "
            "directory or packaged model."
        },
    )
    base_url: str | None = field(
        default=None,
        metadata={
            "help": "The provider's endpoint, e.g. an OpenAI-compatible server's; default: the provider's own API."
        },
    )
    api_key_env: str | None = field(
        default=None,
        metadata={
            "help": "The NAME of the environment variable holding the API key (never the key itself); default: "
            "GEMINI_API_KEY / ANTHROPIC_API_KEY / OPENAI_API_KEY."
        },
    )
    temperature: float = field(default=1.0, metadata={"help": "The optimizer's sampling temperature."})
    max_output_tokens: int | None = field(
        default=None,
        metadata={
            "help": "The optimizer's output limit in tokens, thinking included (Gemini and Claude count it here); an "
            "answer cut at this limit loses its unfinished last candidate. Default: 16384 for gemini "
            "(thinking_budget 8192 leaves >= 8192 for six candidates of ~1,550 characters, the paper's length "
            "(App. F), and their analysis: ~2.8k tokens; docs/faithfulness.md), 8192 for the others."
        },
    )
    thinking_budget: int | None = field(
        default=None,
        metadata={
            "help": "Tokens the model may think before it answers. gemini: thinking_budget (default 8192, ours: the "
            "paper gives none and Google's default for 2.5 Pro is dynamic thinking, settable from 128 to 32768; "
            "at most half of max_output_tokens; -1: not sent, the model decides; 0: off "
            "where the model allows it); anthropic: extended thinking's budget_tokens (>= 1024, needs "
            "temperature 1.0; default: off); openai: must stay unset (chat completions take no such budget; "
            "max_output_tokens caps a reasoning model's thinking and answer); local: ignored (the demo's small "
            "models do not think)."
        },
    )
    timeout_s: float | None = field(
        default=None,
        metadata={
            "help": "Seconds per attempt. Default: 300 s for gemini, whose 16,384 tokens take ~110-160 s at 100-150 "
            "tokens/s (a timeout is retried, so one shorter than a whole answer would fail the evolution), "
            "120 s for the others. With 3 retries a hung endpoint costs an evolution at most ~8 min (~20 min "
            "for gemini)."
        },
    )
    max_retries: int = field(
        default=3,
        metadata={
            "help": "Retries for 429, 5xx, timeouts and unreachable servers; 401/403 and other 4xx fail at once."
        },
    )
    max_calls: int | None = field(
        default=100,
        metadata={"help": "The run's budget of optimizer calls: once spent, evolution stops asking; null: no limit."},
    )
    max_total_tokens: int | None = field(
        default=None,
        metadata={
            "help": "The run's budget of optimizer tokens (input + output): once spent, evolution stops asking; null: "
            "no limit."
        },
    )
    input_price_per_mtok: float | None = field(
        default=None,
        metadata={
            "help": "US dollars per million input tokens, for each call's cost_usd in optimizer_calls.jsonl and the "
            "cost in the run's summary. null: inspo's dated table (inspo_cli/instructions/providers/prices.yaml: "
            "Gemini 2.5 Pro and Flash, Claude Sonnet/Opus 4), 0 for a local model, else unknown (null, said at run "
            "start). Set together with output_price_per_mtok (0 and 0 for a server of your own); both override the "
            "table."
        },
    )
    output_price_per_mtok: float | None = field(
        default=None,
        metadata={
            "help": "US dollars per million output tokens, thinking included (both providers bill it as output); see "
            "input_price_per_mtok."
        },
    )
    replay: str | None = field(
        default=None,
        metadata={
            "help": "Answer every optimizer call from a record instead of the provider: a run's optimizer_calls.jsonl, "
            "a run's directory, or an ablation's, where each run replays the run of its own name only "
            "(`--replay-optimizer`). Calls are looked up by a hash of provider, model, parameters and prompt, in "
            "the order they were made, so the same recipe and seed evolve exactly as recorded, with no key and no "
            "server; a call the record lacks stops the run, naming the step and the hash."
        },
    )

    def __post_init__(self) -> None:
        check_choices(self)
        if self.api_key_env is None:
            self.api_key_env = _PROVIDER_KEY_ENV[self.provider]
        elif not _ENV_NAME.match(self.api_key_env):
            # Never echo the value: it may be the secret itself pasted into the recipe.
            raise ConfigValueError(
                "api_key_env",
                "must be the NAME of an environment variable (e.g. GEMINI_API_KEY), "
                "not a key; put the key in the environment instead",
            )
        if self.base_url is not None:
            _require(
                bool(re.match(r"^https?://", self.base_url)),
                "base_url",
                f"must start with http:// or https:// (got {self.base_url!r})",
            )
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature})")
        if self.max_output_tokens is None:
            self.max_output_tokens = 16384 if self.provider == "gemini" else 8192
        if self.timeout_s is None:
            self.timeout_s = 300.0 if self.provider == "gemini" else 120.0
        if self.thinking_budget is None and self.provider == "gemini":  # half: a recipe's small limit keeps room
            self.thinking_budget = min(8192, self.max_output_tokens // 2)
        for name, example in (
            ("max_output_tokens", "8192"),
            ("timeout_s", "120"),
            ("max_calls", "100"),
            ("max_total_tokens", "2000000"),
        ):
            _positive(getattr(self, name), name, example)
        _require(self.max_retries >= 0, "max_retries", f"must be >= 0 (got {self.max_retries})")
        if self.replay is not None:
            _require(
                bool(self.replay.strip()) and "\0" not in self.replay,
                "replay",
                "must be a path: a run's optimizer_calls.jsonl, or a run or ablation directory (or null)",
            )
        self._check_thinking_budget()
        self._check_prices()

    def _check_prices(self) -> None:
        for name in ("input_price_per_mtok", "output_price_per_mtok"):
            value = getattr(self, name)
            if value is None:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            _require(
                number and math.isfinite(value) and 0 <= value <= MAX_PRICE_PER_MTOK,
                name,
                f"must be a finite number of US dollars per million tokens, from 0 to "
                f"{MAX_PRICE_PER_MTOK:,.0f} (got {repr(value)[:40]}); e.g. 1.25 for Gemini 2.5 Pro's input and "
                "10 for its output",
            )
        for name, other in (
            ("input_price_per_mtok", "output_price_per_mtok"),
            ("output_price_per_mtok", "input_price_per_mtok"),
        ):
            _require(
                getattr(self, name) is not None or getattr(self, other) is None,
                name,
                f"is null while {other} is {getattr(self, other)!r}: set both (US dollars per million tokens), "
                "or neither to use inspo's price table",
            )

    def _check_thinking_budget(self) -> None:
        budget, limit = self.thinking_budget, self.max_output_tokens
        if budget is None or limit is None or self.provider == "local":  # limit: filled in by __post_init__
            return
        _require(
            self.provider != "openai",
            "thinking_budget",
            f"is not sent to OpenAI-compatible servers (got {budget}); remove it, and cap a reasoning model's "
            "thinking and answer together with optimizer.max_output_tokens",
        )
        if self.provider == "gemini":
            _require(
                budget >= -1,
                "thinking_budget",
                f"must be -1 (the model decides), 0 (off) or a token count (got {budget}); use e.g. 8192",
            )
        else:
            _require(
                budget >= 1024,
                "thinking_budget",
                f"must be >= 1024 for Claude's extended thinking (got "
                f"{budget}); use e.g. 4096, or remove it to answer without extended thinking",
            )
            _require(
                self.temperature == 1.0,
                "thinking_budget",
                f"needs optimizer.temperature 1.0 with Claude's "
                f"extended thinking (got temperature {self.temperature}); set temperature to 1.0 or remove "
                "thinking_budget",
            )
        _require(
            budget < limit,
            "thinking_budget",
            f"must be less than optimizer.max_output_tokens, which counts the "
            f"thinking too (got {budget} >= {limit}); lower it or raise max_output_tokens",
        )

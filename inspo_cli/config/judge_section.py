"""The recipe's judge section: the LLM that grades answers beside exact match (`evaluation.metrics: [em, judge]`).

Not in the paper, whose evaluation is EM alone: the judge runs only when evaluation.metrics names it. It is any of
the optimizer's providers (`optimizer_section.py`), at temperature 0, with the optimizer's retries, budget and
prices; the packaged local model is the default so the laptop needs no key. Part of the typed recipe
(`sections.py`, which re-exports it); same conventions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from inspo_cli.config.optimizer_section import OptimizerConfig
from inspo_cli.config.validation import ConfigValueError, _positive, _require, check_choices, choice_field

JUDGE_CACHE_OFF = "off"
JUDGE_CACHE_DEFAULT = "auto"  # $INSPO_CACHE/judge.sqlite


@dataclass
class JudgeConfig:
    """The LLM judge: grades each prediction against the gold answers, beside EM, never instead of it."""

    provider: str = choice_field(
        {
            "local": "a transformers model, offline",
            "openai": "any OpenAI-compatible endpoint",
            "anthropic": "",
            "gemini": "",
        },
        "local",
        "{choices}.",
    )
    model: str = field(
        default="smollm2-135m-instruct",
        metadata={
            "help": "The judge's model at the provider; local: a hub id, local directory or packaged model (the "
            "default is the packaged SmolLM2-135M-Instruct, a weak judge: use an API model for evidence)."
        },
    )
    base_url: str | None = field(
        default=None, metadata={"help": "The provider's endpoint; default: the provider's own API."}
    )
    api_key_env: str | None = field(
        default=None,
        metadata={
            "help": "The NAME of the environment variable holding the API key (never the key itself); default: "
            "GEMINI_API_KEY / ANTHROPIC_API_KEY / OPENAI_API_KEY."
        },
    )
    max_output_tokens: int | None = field(
        default=None,
        metadata={
            "help": "The judge's output limit in tokens, thinking included; default 1024 for API models (Gemini 2.5 "
            "thinks), 8 for a local one (its verdict is one word)."
        },
    )
    timeout_s: float = field(default=60.0, metadata={"help": "Seconds per attempt."})
    max_retries: int = field(
        default=3,
        metadata={
            "help": "Retries for 429, 5xx, timeouts and unreachable servers; 401/403 and other 4xx fail at once."
        },
    )
    max_calls: int | None = field(
        default=None,
        metadata={
            "help": "The budget of judge calls per evaluation (cached verdicts are free); once spent, the remaining "
            "predictions are counted as not judged; null: no limit."
        },
    )
    concurrency: int = field(
        default=4, metadata={"help": "Judge calls in flight at once (a local model judges one at a time)."}
    )
    max_answer_words: int = field(
        default=20,
        metadata={
            "help": "A prediction of more words is judged incorrect without asking (a short-answer benchmark's answer "
            "is a few words; a long one lists candidates or argues with the judge)."
        },
    )
    cache: str = field(
        default=JUDGE_CACHE_DEFAULT,
        metadata={
            "yaml_bool": {True: JUDGE_CACHE_DEFAULT, False: JUDGE_CACHE_OFF},  # YAML 1.1 reads a bare on/off as a bool
            "help": "Where verdicts are kept, keyed by judge, prompt version, question, gold answers and "
            "prediction, so judging again costs nothing: auto ($INSPO_CACHE/judge.sqlite), a file path, or off.",
        },
    )
    input_price_per_mtok: float | None = field(
        default=None, metadata={"help": "US dollars per million input tokens; as optimizer.input_price_per_mtok."}
    )
    output_price_per_mtok: float | None = field(
        default=None, metadata={"help": "US dollars per million output tokens; as optimizer.output_price_per_mtok."}
    )

    def __post_init__(self) -> None:
        check_choices(self)
        if self.max_output_tokens is None:
            self.max_output_tokens = 8 if self.provider == "local" else 1024
        _positive(self.concurrency, "concurrency", "4")
        _positive(self.max_answer_words, "max_answer_words", "20")
        _require(
            isinstance(self.cache, str) and bool(self.cache.strip()) and "\0" not in self.cache,
            "cache",
            f"must be auto, off or a file path (got {self.cache!r})",
        )
        self.as_optimizer()  # the optimizer's checks of the fields the two share, named as this section's

    def as_optimizer(self) -> OptimizerConfig:
        """The judge as an optimizer section, for the optimizer's providers, retries, budget and prices: temperature
        0, its own output limit and timeout."""
        try:
            return OptimizerConfig(
                provider=self.provider,
                model=self.model,
                base_url=self.base_url,
                api_key_env=self.api_key_env,
                temperature=0.0,
                max_output_tokens=self.max_output_tokens,
                timeout_s=self.timeout_s,
                max_retries=self.max_retries,
                max_calls=self.max_calls,
                input_price_per_mtok=self.input_price_per_mtok,
                output_price_per_mtok=self.output_price_per_mtok,
            )
        except ConfigValueError as error:
            raise ConfigValueError(error.field_name, error.message.replace("optimizer.", "judge.")) from None

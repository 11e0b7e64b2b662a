"""The recipe sections of the agent's loop: the rollout's limits and schedule, the tools and their call protocol, and
the reward. Part of the typed recipe (`sections.py`, which re-exports them); same conventions."""

from __future__ import annotations

from dataclasses import dataclass, field

from inspo_cli.config.validation import _fraction, _positive, _registered, _require, check_choices, choice_field
from inspo_cli.registry import IMPORT_PATH_HINT, PROTOCOLS, SCHEDULES, TOOLS, Registry


def _needs(registry: Registry, trait: str) -> str:
    """ "per-trajectory needs" / "a and b need": the registered names with `trait`, for a help text."""
    names = [name for name, entry in registry.items() if getattr(entry, trait)]
    return f"{' and '.join(names)} need{'s' if len(names) == 1 else ''}"


@dataclass
class RolloutConfig:
    """The multi-turn Search-R1 protocol: limits per turn and per trajectory, and sampling (App. B)."""

    max_turns: int = field(
        default=4,
        metadata={
            "help": "Turns that may search; one more turn without search follows (0: answer without search). The "
            "paper: 4 for 3B, 6 for 7B."
        },
    )
    max_tokens_per_turn: int = field(
        default=500, metadata={"help": "Tokens the policy may generate in one turn (the paper: 500)."}
    )
    single_turn_stop: str = choice_field(
        {
            "eos": "Search-R1's, which the paper follows: no stop strings, to EOS or max_tokens_per_turn, answered "
            "when the text holds an <answer>, its last one read, as Search-R1 generates without search "
            "(do_search: false)",
            "tag": "the first </search> or </answer> ends it, as every turn of the search loop",
        },
        "eos",
        "With max_turns 0 (no search: the GRPO-without-search baseline), what ends the one turn: {choices}. "
        "Ignored when the policy may search.",
    )
    max_observation_tokens: int = field(
        default=500,
        metadata={
            "help": "Tokens of one <information> observation, tags included; the passages are cut to fit (the paper: "
            "500)."
        },
    )
    max_prompt_tokens: int = field(
        default=4096,
        metadata={
            "help": "The first prompt (instruction and question) is cut from the left to this many tokens (the paper: "
            "4,096)."
        },
    )
    max_total_tokens: int = field(
        default=8192,
        metadata={
            "help": "Tokens of prompt + completion; a trajectory that reaches it stops (Search-R1 cuts from the left "
            "instead)."
        },
    )
    max_response_tokens: int = field(
        default=4096,
        metadata={
            "help": "Tokens of the completion (turns and observations): a trajectory that reaches it stops, and "
            "nothing after is trained on or read for the answer. Search-R1 cuts every response to its "
            "max_prompt_length, 4,096, the same way (generation.py `_update_right_side`): the paper's value."
        },
    )
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rollouts (the paper: 1.0)."})
    top_p: float = field(
        default=1.0,
        metadata={"help": "Nucleus sampling of the rollouts (the paper: 1.0; Search-R1's veRL default: 0.95)."},
    )
    end_at_eos: bool = field(
        default=False,
        metadata={
            "help": "false, as Search-R1, which has no EOS branch: a turn that ends without a valid tag gets its "
            "corrective observation and the trajectory goes on (the EOS token is dropped, as Search-R1's "
            "re-tokenised text has none). true: EOS ends the trajectory (reward 0)."
        },
    )
    generation_batch_size: int = field(
        default=0,
        metadata={
            "help": "model.backend=transformers: the most trajectories one generate call takes during training. 0 "
            "(auto): "
            "the step's share of each process, and on a GPU only as many as the KV cache fits in free memory "
            "(decoding is launch-bound there: 64 rows cost about what 8 cost); on CPU the whole share. N: at "
            "most N. Trajectories follow the same distribution either way; the same ids only with the same "
            "grouping (vLLM batches by its own scheduler)."
        },
    )
    schedule: str = field(
        default="turn-synchronous",
        metadata={
            "help": f"How the turns of a batch advance: {SCHEDULES.choices()}. The same rules and seeds either way; "
            f"{_needs(SCHEDULES, 'vllm_engine')} model.backend=vllm, not server mode (docs/rollout-schedules.md)."
        },
    )

    def __post_init__(self) -> None:
        check_choices(self)
        _registered(self.schedule, SCHEDULES, "schedule")
        _require(
            self.generation_batch_size >= 0,
            "generation_batch_size",
            f"must be >= 0 (got {self.generation_batch_size}); 0 fits the batch to memory, N caps it at N",
        )
        _require(
            self.max_turns >= 0,
            "max_turns",
            f"must be >= 0 (got {self.max_turns}); 0 answers without search, the paper uses 4",
        )
        for name, example in (
            ("max_tokens_per_turn", "500"),
            ("max_observation_tokens", "500"),
            ("max_prompt_tokens", "4096"),
            ("max_total_tokens", "8192"),
            ("max_response_tokens", "4096"),
        ):
            _positive(getattr(self, name), name, example)
        _require(
            self.max_total_tokens > self.max_tokens_per_turn,
            "max_total_tokens",
            f"must exceed max_tokens_per_turn ({self.max_tokens_per_turn}); got {self.max_total_tokens}",
        )
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature})")
        _fraction(self.top_p, "top_p", closed=False)


def check_sft_turn(rollout: RolloutConfig, algorithm: str) -> None:
    """SFT's answer targets end at </answer> without an EOS: without search, its turn must end at the tag."""
    _require(
        not (algorithm == "sft" and rollout.max_turns == 0 and rollout.single_turn_stop == "eos"),
        "rollout.single_turn_stop",
        "is eos, but training.algorithm=sft with rollout.max_turns 0 trains on targets that end at </answer> "
        "without an EOS, so the model would write on past its answer and the last <answer> would be scored; "
        "set rollout.single_turn_stop=tag (as the bundled SFT recipes do)",
    )


@dataclass
class AgentConfig:
    """The tools the policy may call (docs/tools.md)."""

    tools: list[str] = field(
        default_factory=lambda: ["search"],
        metadata={
            "help": f"The tools, in the order the protocol lists them: {TOOLS.choices()}; or your own as "
            f"{IMPORT_PATH_HINT} (a module's `build`). The paper: [search]. In the Search-R1 protocol each tool "
            "is called by its own element (search, calculate) and answers in an information block "
            "(docs/tools.md)."
        },
    )
    protocol: str = field(
        default="search-r1",
        metadata={
            "help": f"How the policy calls its tools: {PROTOCOLS.choices()}. {_needs(PROTOCOLS, 'chat_template')} "
            "model.chat_template auto or on (docs/tools.md)."
        },
    )

    def __post_init__(self) -> None:
        _registered(self.protocol, PROTOCOLS, "protocol")
        _require(len(self.tools) >= 1, "tools", "must name at least one tool, e.g. [search]")
        for i, name in enumerate(self.tools):
            _registered(name, TOOLS, f"tools[{i}]")
        twice = next((name for i, name in enumerate(self.tools) if name in self.tools[:i]), None)
        _require(twice is None, "tools", f"names {twice!r:.100} twice; list each tool once")


@dataclass
class RewardConfig:
    """Outcome reward on the answer extracted from the generated response only."""

    metric: str = choice_field(
        {"em": "exact match", "subem": "a golden answer appears in it", "f1": "token F1"},
        "em",
        "The reward of the extracted answer against the golden answers: {choices}.",
    )
    format_weight: float = field(
        default=0.0,
        metadata={
            "help": "Optional shaping: the reward of a wrong answer in a well-formed trajectory (every action parsed, "
            "ends in an answer); 0: none."
        },
    )

    def __post_init__(self) -> None:
        check_choices(self)
        _fraction(self.format_weight, "format_weight")

"""The rollout engine: (instruction, question) pairs in, Search-R1 trajectories with loss masks out.

    engine = RolloutEngine(backend, retriever, tokenizer, recipe.rollout, topk=3, chat=True)
    trajectories = engine.run(instructions, questions)

Turn by turn, every unfinished trajectory generates until the end of a call (`</search>`, or another tool's element,
`agent.tools`; `</tool_call>` with `agent.protocol: function-calling`), `</answer>` or end of sequence; the
protocol (`call_formats`) reads the call. The calls of all of them go to each tool in *one* batch per turn (every
query to the retriever in one request); each gets its observation appended (`<information>…</information>`, or
the template's tool message; mask 0). A call a tool cannot carry out (the calculator's `1/0`) or the protocol
cannot read (function calling's malformed JSON) gets an error observation, counted as an invalid action. A turn
without a valid action (no call, or EOS before one) gets Search-R1's corrective observation instead and the
trajectory goes on (`rollout.end_at_eos: true` ends it at EOS instead). A trajectory ends at `<answer>`, when its
context is full, or when its completion reaches `rollout.max_response_tokens` (Search-R1 keeps 4,096 tokens of each
response); after `max_turns` turns with search, one last turn is generated without search. With `max_turns: 0` and
`rollout.single_turn_stop: eos` (Search-R1's generation without search) that one turn has no stop strings: it runs
to EOS or its budget, and it answers if it holds an `<answer>` anywhere, the last one read.

Token ids are never re-encoded: the completion is the exact concatenation of the ids the backend sampled (less an
EOS that the trajectory goes on past) and the ids of the inserted observations, and `completion_mask` marks which
is which.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from inspo_cli.agent.call_formats import Call, call_format
from inspo_cli.agent.per_trajectory import run_per_trajectory
from inspo_cli.agent.tools.base import Observation, Tool
from inspo_cli.agent.tools.search import SearchTool
from inspo_cli.config import RolloutConfig
from inspo_cli.metrics import extract_answer
from inspo_cli.policy.generation import PolicyBackend
from inspo_cli.policy.seeds import derived_seed, request_seeds
from retriever.search import Retriever

STOP_REASONS = ("answer", "eos", "max_turns", "context")


@dataclass
class Trajectory:
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    completion_mask: list[int] = field(default_factory=list)  # 1 = sampled by the policy, 0 = inserted observation
    # Per completion token (0.0 on observation tokens); None as soon as one generation came without them.
    logprobs: list[float] | None = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    retrieved: list[list[str]] = field(default_factory=list)  # passage ids per search
    # per tool by name: calls, error observations among them, and observation tokens inserted
    tool_calls: dict[str, int] = field(default_factory=dict)
    tool_errors: dict[str, int] = field(default_factory=dict)
    tool_observation_tokens: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    invalid_actions: int = 0
    prompt_truncated: bool = False
    answer: str | None = None
    stop_reason: str | None = None  # one of STOP_REASONS
    last_turn_cut: bool = False  # the latest turn ran out of tokens (max_tokens_per_turn, or the context's room)
    response: str = ""  # the decoded completion, observations included

    @property
    def num_searches(self) -> int:
        return len(self.queries)

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def truncated(self) -> bool:
        """Cut by a length limit rather than ended by the policy: its context filled, or its last turn ran out of
        tokens (`training.mask_truncated_completions` leaves these out of the loss)."""
        return self.stop_reason == "context" or (self.done and self.last_turn_cut)

    def append(self, ids: Sequence[int], mask_value: int, logprobs: Sequence[float] | None = None) -> None:
        self.completion_ids.extend(ids)
        self.completion_mask.extend([mask_value] * len(ids))
        if mask_value == 1 and logprobs is None:
            self.logprobs = None
        elif self.logprobs is not None:
            self.logprobs.extend(logprobs if mask_value == 1 else [0.0] * len(ids))


def summarize(trajectories: Sequence[Trajectory], tools: Sequence[str] = ()) -> dict[str, float]:
    """Means over a batch, under the metric names training logs: searches, valid actions, lengths, observations,
    and per tool of `tools` its calls, errors and observation tokens per trajectory (`tools/<name>/...`)."""
    n = max(len(trajectories), 1)
    per_tool = {
        f"tools/{name}/{what}": sum(getattr(t, f"tool_{field}").get(name, 0) for t in trajectories) / n
        for name in tools
        for what, field in (("calls", "calls"), ("errors", "errors"), ("observation_tokens", "observation_tokens"))
    }
    policy = sum(sum(t.completion_mask) for t in trajectories)
    total = sum(len(t.completion_ids) for t in trajectories)
    turns = sum(t.turns for t in trajectories)
    return {
        "search/searches_per_trajectory": sum(t.num_searches for t in trajectories) / n,
        "search/valid_action_rate": 1 - sum(t.invalid_actions for t in trajectories) / max(turns, 1),
        "search/answered": sum(t.stop_reason == "answer" for t in trajectories) / n,
        "search/turns": turns / n,
        "length/prompt": sum(len(t.prompt_ids) for t in trajectories) / n,
        "length/response": policy / n,  # the tokens the policy wrote, which the loss sees
        # veRL's response_length, which Search-R1 logs and Fig. 2(d) plots: everything after the prompt, passages too
        "length/response_with_observations": total / n,
        "length/observation_share": 1 - policy / max(total, 1),
        "length/truncated_share": sum(t.truncated for t in trajectories) / n,  # cut by a length limit
        **per_tool,
    }


class RolloutEngine:
    def __init__(
        self,
        backend: PolicyBackend,
        retriever: Retriever | None,
        tokenizer,
        config: RolloutConfig,
        topk: int = 3,
        chat: bool = True,
        tools: Sequence[Tool] | None = None,
        protocol: str = "search-r1",
    ):
        """`tools`: what the policy may call (`tools.build_tools(recipe.agent.tools, ...)`); None: search alone,
        over `retriever` with `topk`, the paper's agent. `protocol`: how it calls them (`agent.protocol`,
        `call_formats`)."""
        self.backend, self.retriever, self.tokenizer = backend, retriever, tokenizer
        self.config, self.topk, self.chat, self.protocol = config, topk, chat, protocol
        self.tools = list(tools) if tools is not None else [SearchTool(retriever, topk)]
        self.format = call_format(protocol, self.tools, tokenizer, chat)
        # without search, Search-R1 generates the one turn whole (`rollout.single_turn_stop: eos`): no stop strings
        self._whole_turn = config.max_turns == 0 and config.single_turn_stop == "eos"
        self.stop_strings = () if self._whole_turn else self.format.stop
        self._corrective = self._encode_parts(self.format.corrective)
        # what ends a turn at EOS: the tokenizer's special tokens, and the backend's EOS ids (a generation config's
        # several, which need not all be special tokens)
        backend_eos = getattr(backend, "eos_ids", None)
        self._special_ids = set(tokenizer.all_special_ids) | (
            set(backend_eos) if isinstance(backend_eos, (set, frozenset, list, tuple)) else set()
        )
        self._tools_by_name = {tool.name: tool for tool in self.tools}
        self.retriever_calls = 0  # batches of calls to tools that retrieve, and their wall time
        self.retrieval_seconds = 0.0
        # wall seconds in which no generation ran because the engine waited for tools (`rollout.schedule`'s gain)
        self.tool_wait_seconds = 0.0

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _encode_parts(self, parts: tuple[str, str, str]) -> tuple[list[int], list[int], list[int]]:
        """The ids of an observation's (opening, body, closing), each encoded alone."""
        return self._encode(parts[0]), self._encode(parts[1]), self._encode(parts[2])

    def prompt_ids(self, instruction: str, question: str) -> list[int]:
        return self.format.prompt_ids(instruction, question)

    def run(self, instructions: Sequence[str], questions: Sequence[str]) -> list[Trajectory]:
        if len(instructions) != len(questions):
            raise ValueError(f"run(): {len(instructions)} instructions for {len(questions)} questions")
        return self.run_prompts([self.prompt_ids(i, q) for i, q in zip(instructions, questions)])

    def run_prompts(self, prompts: Sequence[Sequence[int]]) -> list[Trajectory]:
        """Roll out from ready-made prompt ids (TRL hands prompts over this way)."""
        limit = self.config.max_prompt_tokens
        trajectories = []
        for ids in prompts:
            ids = list(ids)
            trajectory = Trajectory(prompt_ids=ids[-limit:], prompt_truncated=len(ids) > limit)  # keep the question
            trajectories.append(trajectory)
        seed_of = self._seed_of()
        if self.config.schedule == "per-trajectory":
            stream = self.backend.stream(self.stop_strings)  # type: ignore[attr-defined]  # VLLMBackend's (checked)
            stats = run_per_trajectory(self, trajectories, stream, seed_of)
            self.tool_wait_seconds += stats["tool_wait_seconds"]
            self.retrieval_seconds += stats["tool_wait_seconds"]  # the trainer's retrieval phase: time not generating
        else:
            for turn in range(self.config.max_turns + 1):
                rows = [row for row, t in enumerate(trajectories) if not t.done]
                if not rows:
                    break
                self._turn(trajectories, rows, turn < self.config.max_turns, seed_of)
        for trajectory in trajectories:
            trajectory.response = self.tokenizer.decode(trajectory.completion_ids, skip_special_tokens=True)
            trajectory.answer = (
                extract_answer(
                    self.tokenizer.decode(
                        [i for i, m in zip(trajectory.completion_ids, trajectory.completion_mask) if m],
                        skip_special_tokens=True,
                    )
                )
                if trajectory.stop_reason == "answer"
                else None
            )
        return trajectories

    def _room(self, trajectory: Trajectory) -> int:
        """Tokens the trajectory may still add: within `max_total_tokens` with its prompt, and within
        `max_response_tokens` (Search-R1's cut of every response to 4,096) on its own."""
        completion = len(trajectory.completion_ids)
        return min(
            self.config.max_total_tokens - len(trajectory.prompt_ids) - completion,
            self.config.max_response_tokens - completion,
        )

    def _seed_of(self):
        """Each request's seed by (row, turn) when the backend takes seeds (`request_seeds`): one draw from this
        process's torch generator per batch, then keyed, so that both schedules seed each turn alike."""
        if not getattr(self.backend, "request_seeds", False):
            return lambda row, turn: None

        (base,) = request_seeds(1)
        return lambda row, turn: derived_seed(base, row, turn)

    def _turn(self, trajectories: list[Trajectory], rows: list[int], search_allowed: bool, seed_of) -> None:
        """`rollout.schedule: turn-synchronous`: one generation for every live trajectory (`rows`), then each tool's
        calls of the turn in one batch, in the order the policy's calls came."""
        budgets = {row: self._budget(trajectories[row]) for row in rows}
        rows = [row for row in rows if budgets[row] > 0]
        if not rows:
            return
        active = [trajectories[row] for row in rows]
        seeds = [seed_of(row, trajectories[row].turns) for row in rows]
        extra = {} if all(seed is None for seed in seeds) else {"seeds": seeds}
        generations = self.backend.generate(
            [t.prompt_ids + t.completion_ids for t in active],
            [budgets[row] for row in rows],
            self.stop_strings,
            **extra,
        )
        calling: dict[str, list[tuple[Trajectory, Call]]] = {}
        for trajectory, generation in zip(active, generations):
            call = self._after_generation(trajectory, generation, search_allowed)
            if call is not None and call.tool is not None:
                calling.setdefault(call.tool.name, []).append((trajectory, call))
        for name, calls in calling.items():  # in the order the policy's calls came, one batch per tool
            self._call(self._tools_by_name[name], calls)

    def _budget(self, trajectory: Trajectory) -> int:
        """The tokens its next turn may generate; none left ends it ("context")."""
        budget = min(self.config.max_tokens_per_turn, self._room(trajectory))
        if budget <= 0:
            trajectory.stop_reason = "context"
        return budget

    def _after_generation(self, trajectory: Trajectory, generation, search_allowed: bool) -> Call | None:
        """Append a turn's generation and decide what follows: the end, an error or corrective observation (appended
        here), or a tool call, returned for the caller to carry out."""
        text = self.tokenizer.decode(generation.token_ids, skip_special_tokens=True)
        call = self.format.parse(text)
        # a whole turn (no search, `single_turn_stop: eos`) answers if it holds an answer anywhere, as Search-R1 reads
        # the last <answer> of its one generation; its EOS stays, as nothing follows it
        answered = call.kind == "answer" or (self._whole_turn and extract_answer(text) is not None)
        ids, logprobs = generation.token_ids, generation.logprobs
        eos = generation.finish == "eos"
        if eos and not answered and not self._whole_turn and not self.config.end_at_eos:
            ids, logprobs = self._without_final_eos(ids, logprobs)
        trajectory.append(ids, 1, logprobs)
        trajectory.turns += 1
        trajectory.last_turn_cut = generation.finish == "length"
        if answered:
            trajectory.stop_reason = "answer"
        elif eos and self.config.end_at_eos:
            trajectory.stop_reason = "eos"  # the policy ended its turn without an answer
        elif not search_allowed:
            trajectory.stop_reason = "max_turns"
        elif call.error is not None:  # a malformed call: the error observation, then the next turn
            self._malformed(trajectory, call)
        elif call.tool is not None:
            return call
        else:  # no valid call or answer (EOS included, as in Search-R1): the corrective observation, next turn
            trajectory.invalid_actions += 1
            self._observe(trajectory, *self._corrective)
        return None

    def _without_final_eos(self, ids: list[int], logprobs: list[float] | None):
        """Search-R1 re-tokenises each turn's decoded text, so an EOS the policy sampled never enters its context
        or its loss; the trajectory goes on after it here too, so the EOS id is dropped the same way."""
        if ids and ids[-1] in self._special_ids:
            return ids[:-1], (logprobs[:-1] if logprobs is not None else None)
        return ids, logprobs

    def _call(self, tool: Tool, calls: list[tuple[Trajectory, Call]]) -> None:
        """The turn-synchronous schedule's call: nothing generates meanwhile."""
        observations, seconds = self._invoke(tool, calls)
        self.tool_wait_seconds += seconds
        self._deliver(tool, calls, observations, seconds)

    @staticmethod
    def _invoke(tool: Tool, calls: list[tuple[Trajectory, Call]]) -> tuple[list, float]:
        """The tool's answers to `calls` and the wall seconds they took; touches no trajectory and no tokenizer
        (the per-trajectory schedule runs it in a thread)."""
        started = time.perf_counter()
        observations = tool.call([call.arguments for _, call in calls])
        return observations, time.perf_counter() - started

    def _deliver(self, tool: Tool, calls: list[tuple[Trajectory, Call]], observations, seconds: float) -> None:
        """Each call's observation into its trajectory (masked), and the call into its tool's counts. `seconds`: the
        wall time it adds to `retrieval_seconds` (the per-trajectory schedule passes 0 and adds the time it waited
        for tools with nothing generating, since calls that overlap generation cost no wall time)."""
        if (
            not isinstance(observations, list)
            or len(observations) != len(calls)
            or not all(isinstance(o, Observation) and isinstance(o.text, str) for o in observations)
        ):
            raise RuntimeError(
                f"tool {tool.name}: call() must answer a list of {len(calls)} Observation(text) for "
                f"{len(calls)} calls (docs/tools.md)"
            )
        if any(o.passage_ids is not None for o in observations):
            self.retrieval_seconds += seconds
            self.retriever_calls += 1
        for (trajectory, call), observation in zip(calls, observations):
            self._record(trajectory, tool, call.content, observation)
            self._observe_tool(trajectory, tool, self.format.observation_parts(tool, observation))

    def _malformed(self, trajectory: Trajectory, call: Call) -> None:
        """A call the protocol could not read (function calling's bad JSON, unknown tool, wrong arguments): an
        invalid action, counted among its tool's calls and errors when it named one, answered by an error
        observation."""
        parts = self.format.error_parts(f"error: {call.error}")
        if call.tool is None:
            trajectory.invalid_actions += 1
            self._observe(trajectory, *self._encode_parts(parts))
            return
        self._record(trajectory, call.tool, call.content, Observation(parts[1], error=True))
        self._observe_tool(trajectory, call.tool, parts)

    def _observe_tool(self, trajectory: Trajectory, tool: Tool, parts: tuple[str, str, str]) -> None:
        limit = tool.max_observation_tokens or self.config.max_observation_tokens
        opening, body, closing = self._encode_parts(parts)
        trajectory.tool_observation_tokens[tool.name] = trajectory.tool_observation_tokens.get(
            tool.name, 0
        ) + self._observe(trajectory, opening, body, closing, limit)

    @staticmethod
    def _record(trajectory: Trajectory, tool: Tool, content: str, observation: Observation) -> None:
        trajectory.tool_calls[tool.name] = trajectory.tool_calls.get(tool.name, 0) + 1
        if observation.error:
            trajectory.tool_errors[tool.name] = trajectory.tool_errors.get(tool.name, 0) + 1
            trajectory.invalid_actions += 1
        if observation.passage_ids is not None:  # a search: what `searches_per_trajectory` and the replay count
            trajectory.queries.append(content)
            trajectory.retrieved.append(list(observation.passage_ids))

    def _observe(
        self, trajectory: Trajectory, opening: list[int], body: list[int], closing: list[int], limit: int | None = None
    ) -> int:
        """Append an observation, cutting its body to the per-observation and whole-context limits; the tokens
        appended."""
        limit = self.config.max_observation_tokens if limit is None else limit
        room = min(limit, self._room(trajectory)) - len(opening) - len(closing)
        if room <= 0:
            trajectory.stop_reason = "context"
            return 0
        ids = opening + body[:room] + closing
        trajectory.append(ids, 0)
        return len(ids)

"""The rollout engine with a scripted policy at the `PolicyBackend` seam: each question is answered from its script,
one turn per call, and every call is recorded."""

from __future__ import annotations

from helpers.fake_retrievers import OverlapRetriever
from inspo_cli.agent import RolloutEngine
from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.config import RolloutConfig
from inspo_cli.policy.generation import Generation


class ScriptedPolicy:
    """Answers each trajectory with its script, one turn per call; records every call for the assertions."""

    def __init__(self, tokenizer, scripts: dict[str, list[str]]):
        self.tokenizer, self.scripts = tokenizer, scripts
        self.calls: list[dict] = []
        self.turns: dict[str, int] = {}

    def generate(self, contexts, max_new_tokens, stop=()):
        self.calls.append(
            {"contexts": [list(c) for c in contexts], "budgets": list(max_new_tokens), "stop": tuple(stop)}
        )
        out = []
        for context, budget in zip(contexts, max_new_tokens):
            text = self.tokenizer.decode(context)
            key = next(k for k in self.scripts if k in text)
            turn = self.turns.get(key, 0)
            self.turns[key] = turn + 1
            script = self.scripts[key]
            reply = script[min(turn, len(script) - 1)]
            eos = reply.endswith("<EOS>")
            ids = self.tokenizer(reply.removesuffix("<EOS>"), add_special_tokens=False)["input_ids"]
            ids = ids + [self.tokenizer.eos_token_id] if eos else ids
            finish = "eos" if eos else ("stop" if any(reply.endswith(s) for s in stop) else "length")
            if len(ids) > budget:
                ids, finish = ids[:budget], "length"
            out.append(Generation(ids, finish))
        return out


def engine_for(
    tokenizer, scripts, retriever=None, tools=None, protocol="search-r1", **limits
) -> tuple[RolloutEngine, ScriptedPolicy, OverlapRetriever]:
    """`tools`: agent.tools names (None: the paper's search alone), built over the retriever with top 2;
    `protocol`: agent.protocol."""
    policy = ScriptedPolicy(tokenizer, scripts)
    retriever = retriever or OverlapRetriever()
    config = RolloutConfig(
        **{
            "max_turns": 3,
            "max_tokens_per_turn": 64,
            "max_observation_tokens": 400,
            "max_prompt_tokens": 512,
            "max_total_tokens": 2048,
            **limits,
        }
    )
    built = None if tools is None else build_tools(tools, ToolContext(retriever, topk=2))
    return (
        RolloutEngine(policy, retriever, tokenizer, config, topk=2, chat=True, tools=built, protocol=protocol),
        policy,
        retriever,
    )


def tools(*names):
    """The registered tools `names`, built with no retriever (what a prompt or a call parser needs of them)."""
    from inspo_cli.agent.tools import ToolContext, build_tools

    return build_tools(list(names), ToolContext(None, 2))

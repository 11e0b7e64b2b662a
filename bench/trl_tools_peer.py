"""A peer comparison: TRL 1.16's own multi-turn path (`GRPOTrainer(tools=...)`) beside inspo's rollout engine.

    python bench/trl_tools_peer.py                   # vLLM's CPU build, SmolLM2-135M, the bundled world
    python bench/trl_tools_peer.py --questions 32 --reps 3

One colocated vLLM engine (TRL's, built by `GRPOTrainer` with `use_vllm=True, vllm_mode="colocate"` in this
process, the packaged SmolLM2-135M-Instruct in float32) serves both sides. The same prompts: the tools recipe's
function-calling instruction (recipes/world-tools/static-function-calling.yaml) as the user message, the search and
calculator tools' schemas rendered by Qwen2.5's chat template (TRL's copy, set on SmolLM2's tokenizer, which TRL
parses tool calls with), temperature 1. The same tools: inspo's search (in-process BM25 over the world, top 3) and
calculator, which TRL calls as Python functions.

- TRL: `trainer._generate(prompts)`, what its `_generate_and_score_completions` runs: a turn for every prompt,
  then its `_tool_call_loop` (every call of the turn executed one by one, then a turn for those that called),
  at most `--turns` tool rounds, `max_completion_length` tokens per trajectory; a turn ends at EOS (TRL has no stop
  strings of its own; `</tool_call>` and `</answer>` are passed as vLLM stop strings, as inspo's engine stops).
- inspo: `RolloutEngine` with `agent.protocol: function-calling` on the same engine (`VLLMBackend` over TRL's
  `LLM`), both schedules: turn-synchronous and per-trajectory; `--turns` tool turns, 64 tokens a turn, the same
  total token limit.

The sides differ in what a policy may do (TRL has no per-turn limit, no final turn without tools, no corrective
message), so the comparison is of policy tokens per second and wall time per trajectory, with the tool calls each
made. Repetitions alternate; medians.

Writes bench/results/trl_tools_peer.json and the "TRL's tools= path beside inspo's engine" section of
bench/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time

from _common import ROOT, machine, update_readme_section

from inspo_cli.agent import RolloutEngine  # noqa: E402
from inspo_cli.agent.protocol import user_message  # noqa: E402
from inspo_cli.agent.tools.calculator import Calculator  # noqa: E402
from inspo_cli.agent.tools.search import SearchTool  # noqa: E402
from inspo_cli.benchmarks import load_benchmark  # noqa: E402
from inspo_cli.config import ModelConfig, RetrieverConfig, RolloutConfig, load_recipe  # noqa: E402
from inspo_cli.jsonio import atomic_write_json  # noqa: E402
from inspo_cli.policy.models import load_tokenizer, resolve_model_path  # noqa: E402
from inspo_cli.policy.vllm_backend import VLLMBackend  # noqa: E402
from inspo_cli.policy.vllm_engine import colocated_engine_environment, engine_settings  # noqa: E402
from inspo_cli.retrieval import open_from_config  # noqa: E402

MODEL = ModelConfig(
    name_or_path="smollm2-135m-instruct", dtype="float32", chat_template="auto", backend="vllm", vllm_cpu_kv_cache_gib=2
)
TURN_TOKENS = 64
COMPLETION_TOKENS = 640  # per trajectory, observations included (TRL's max_completion_length)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--turns", type=int, default=3, help="tool rounds after the first turn")
    args = parser.parse_args()
    from datasets import Dataset
    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    instruction = load_recipe(ROOT / "recipes/world-tools/static-function-calling.yaml").population.instructions[0]
    questions = [
        q.question for q in load_benchmark("world", "test", world_dir=ROOT / "data/world", limit=args.questions)
    ]
    bm25 = open_from_config(RetrieverConfig(kind="bm25", corpus=str(ROOT / "data/world/corpus.jsonl")))
    search_tool, calculator_tool = SearchTool(bm25, 3), Calculator()
    calls = {"search": 0, "calculator": 0}

    def search(query: str) -> str:
        """Search the corpus (Wikipedia) and return the top passages for a query.

        Args:
            query: what to look up
        """
        calls["search"] += 1
        return search_tool.call([{"query": query}])[0].text

    def calculator(expression: str) -> str:
        """Exact arithmetic: numbers, + - * / // % **, parentheses, or one comparison, e.g. (2024 - 1987) * 12.

        Args:
            expression: the arithmetic to compute
        """
        calls["calculator"] += 1
        return calculator_tool.call([{"expression": expression}])[0].text

    tokenizer = load_tokenizer(MODEL)
    tokenizer.chat_template = qwen2_5_chat_template  # a template TRL knows how to parse tool calls from
    prompts = [[{"role": "user", "content": user_message(instruction, q)}] for q in questions]
    with tempfile.TemporaryDirectory() as out, colocated_engine_environment(engine_settings(MODEL, "cpu")):
        config = GRPOConfig(
            output_dir=out,
            use_cpu=True,
            bf16=False,
            report_to=[],
            use_vllm=True,
            vllm_mode="colocate",
            per_device_train_batch_size=len(prompts),
            num_generations=2,
            max_completion_length=COMPLETION_TOKENS,
            max_tool_calling_iterations=args.turns,
            temperature=1.0,
            top_p=1.0,
            vllm_max_model_length=2048,
            generation_kwargs={"stop": ["</tool_call>", "</answer>"], "include_stop_str_in_output": True},
        )
        trainer = GRPOTrainer(
            model=str(resolve_model_path(MODEL.name_or_path)),
            args=config,
            reward_funcs=lambda completions, **_: [0.0] * len(completions),
            train_dataset=Dataset.from_dict({"prompt": prompts}),
            processing_class=tokenizer,
            tools=[search, calculator],
        )
    trainer.model.train()
    llm = trainer.vllm_generation.llm
    rollout = RolloutConfig(
        max_turns=args.turns,
        max_tokens_per_turn=TURN_TOKENS,
        max_observation_tokens=256,
        max_prompt_tokens=1024,
        max_total_tokens=1024 + COMPLETION_TOKENS,
    )

    def trl_side(n: int) -> dict:
        before = dict(calls)
        tool_mask = trainer._generate(prompts[:n])[2]  # (prompt_ids, completion_ids, tool_mask, ...): with tools
        return {"tokens": sum(sum(m) for m in tool_mask), "tool_calls": sum(calls[k] - before[k] for k in calls)}

    def inspo_side(schedule: str, n: int) -> dict:
        engine = RolloutEngine(
            VLLMBackend(llm, 1.0, 1.0),
            bm25,
            tokenizer,
            dataclasses.replace(rollout, schedule=schedule),
            topk=3,
            tools=[search_tool, calculator_tool],
            protocol="function-calling",
        )
        trajectories = engine.run([instruction] * n, questions[:n])
        return {
            "tokens": sum(sum(t.completion_mask) for t in trajectories),
            "tool_calls": sum(sum(t.tool_calls.values()) for t in trajectories),
        }

    sides = {
        "TRL tools= (turn by turn)": trl_side,
        "inspo turn-synchronous": lambda n: inspo_side("turn-synchronous", n),
        "inspo per-trajectory": lambda n: inspo_side("per-trajectory", n),
    }
    for side in sides.values():  # warm-up, on a few questions
        side(4)
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    for rep in range(args.reps):
        names = list(sides) if rep % 2 == 0 else list(sides)[::-1]
        for name in names:
            set_seed(rep)
            started = time.perf_counter()
            row = sides[name](len(questions))
            row["seconds"] = time.perf_counter() - started
            row["tokens_per_s"] = row["tokens"] / row["seconds"]
            runs[name].append(row)
            print(name, rep, {k: round(v, 2) for k, v in row.items()}, flush=True)
    medians = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    command = "python bench/trl_tools_peer.py" + "".join(
        f" --{name} {value}"
        for name, value, default in (
            ("questions", args.questions, 32),
            ("reps", args.reps, 3),
            ("turns", args.turns, 3),
        )
        if value != default
    )
    result = {
        "command": command,
        "questions": len(questions),
        "reps": args.reps,
        "turns": args.turns,
        "machine": machine(("vllm-cpu", "torch", "transformers", "trl")),
        "sides": medians,
        "runs": runs,
    }
    atomic_write_json(ROOT / "bench/results/trl_tools_peer.json", result)
    update_readme_section("trl-tools-peer", section(result))
    print(section(result))


def section(result: dict) -> str:
    m = result["machine"]
    lines = [
        "## TRL's tools= path beside inspo's engine",
        "",
        f"`{result['command']}` on {m['cpu_cores']} CPU cores ({m['cpu']}), vLLM "
        f"{m['packages'].get('vllm-cpu', '?')} (CPU build, one colocated engine for all sides), TRL "
        f"{m['packages'].get('trl', '?')}, SmolLM2-135M-Instruct: {result['questions']} world questions under "
        f"the tools recipe's function-calling instruction, search and calculator, up to {result['turns']} tool "
        f"rounds, temperature 1; median of {result['reps']} alternating repetitions. The sides' limits differ "
        "(see the script), so compare tokens per second.",
        "",
        "| rollout | wall s | policy tokens | tokens/s | tool calls |",
        "|---|---|---|---|---|",
    ]
    for name, row in result["sides"].items():
        lines.append(
            f"| {name} | {row['seconds']:.1f} | {row['tokens']:.0f} | {row['tokens_per_s']:.0f} | "
            f"{row['tool_calls']:.0f} |"
        )
    if not any(row["tool_calls"] for row in result["sides"].values()):
        lines += [
            "",
            "SmolLM2-135M made no tool call that either side could parse (it was not trained on this "
            "protocol: the tools warm start speaks the Search-R1 tags), so this times the generation loops "
            "alone: TRL's one turn per trajectory up to its token limit, against inspo's turns of at most "
            f"{TURN_TOKENS} tokens, each malformed turn answered by the corrective message and a new turn. "
            "A policy that calls tools is needed to time the tool loops themselves.",
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

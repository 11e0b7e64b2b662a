"""The GPU checks a lent GPU machine runs first, in one run: generation speed, the paper's trainer step at its real
shape beside what `inspo recipe plan` predicts for it, precision, and FSDP2 under accelerate with one process.

    python bench/gpu_checklist.py --out OUT              # on a CUDA machine (at most 8 min: --budget)
    python bench/gpu_checklist.py --out OUT --quick      # the same code on CPU, tiny shapes, fsdp without FSDP
    python bench/gpu_checklist.py --out OUT --quick --recipe-lengths --checks step-qwen2.5-3b   # its lengths on CPU
    python bench/gpu_checklist.py --readme OUT/gpu_checklist_cuda.json   # here: results and README section

Before anything costly it imports every module the checks need (`NEEDED`) and, if one fails, names every wheel to
carry in one line and exits 2 (the machines have no package index; bench/README.md lists the wheels).

The GPU machines lent to this project have no hub, so the models are the real architectures (Qwen2.5-3B and -7B,
from their published configs, `inspo_cli.config.architecture`) with *random* weights, and SmolLM2's tokenizer (ids
it cannot decode are dropped; a random policy's text is noise either way). A random policy never writes a valid tag,
so every trajectory runs the recipe's full length: 4 turns of 500 tokens, each followed by the corrective message,
which is the longest trajectory the recipe allows, and so its peak memory.

0. sdpa: bench/sdpa_shapes.py: whether attention costs more at a shape it has not met, with torch's default
   backends (cuDNN first on sm90 under torch 2.11) and as the backend now decodes (`decoding_attention`, no cuDNN):
   attention alone at the 3B's decode shapes, plain `generate` of its width at 4 layers, and one layer's attention
   forward and backward at training shapes (which keep torch's defaults): first calls and repeats, and host memory.
   90 s at most (about 40 expected), before anything else: whether the rollouts' 87 ms per step was cuDNN's builds.
1. generation: bench/generation_speed.py on the 3B architecture in bf16 (mixed precision): ms per decode step of
   plain `generate`, the backend, a rollout in the trainer's context and the same context before issue 52's fix,
   and tokens/s of the backend at 8 to 128 rows per call.
2. step-<model>: `inspo train` (in this process, as the CLI runs it) on recipes/qwen2.5-<size>b/search-r1.yaml with
   the transformers backend and, since no index or hub data can be carried, BM25 over the bundled world's questions
   and corpus; the recipe's micro-batch (8 trajectories per pass), lengths, gradient checkpointing, bf16 autocast
   over float32 master weights, KL reference, learning rate 5e-7. One micro-batch instead of the paper's 2,560
   trajectories per step (2 questions x a group of 4 = 8 trajectories, one update of one pass: the transformers
   backend took about 4 minutes to generate 40 such trajectories on an H200 before issue 52, so 40 or 80 did not fit
   a lease), and no warm-up, so that the update runs at 5e-7 itself. An update's peak memory depends on the
   micro-batch and the lengths, not on how many micro-batches it accumulates. Measured: peak GPU memory (torch's
   allocator, also sampled every 10 s so that a check cut off by its time limit still reports), TRL's time split,
   policy tokens per second, and, from the saved float32 weights against the initial ones, the share of parameters
   the update changed in float32 and the share that still differ once rounded to bfloat16 (what pure-bf16 weights
   would have kept); beside them, `inspo recipe plan`'s prediction for the same recipe on this one device (GiB per
   phase, seconds). Before training, in the same process, plain `generate` of the same weights at 400 and 2,400
   tokens, rows of equal and of padded lengths (bench/gpu_timing.py), beside which the summary sets each of the
   step's `generate` calls (`calls_against_plain`); and 5 decode steps profiled, of plain `generate` and of the
   rollout's second call (bench/gpu_profile.py: the GPU's busy share, launches, synchronisations, top kernels).
3. compiled: bench/compiled_generation.py on the 3B's width cut to 2, 4 and 8 of its 36 layers: decode ms per step of
   eager and compiled `generate` (`model.compile_generation`: static cache, torch.compile, CUDA graphs), whether
   both gave the same greedy ids, the first compiled call's seconds, and both sides extrapolated to 36 layers by a
   least-squares line (loading the whole 3B and its first compiled call took over 140 s of a lease); then 140
   compiled calls in a row: CUDA graph recordings, and whether torch gave up on CUDA graphs past its re-record limit.
   Without Triton or a C compiler on the machine it records why and ends.
4. fsdp: `accelerate launch --config_file recipes/accelerate/8gpu-fsdp.yaml --num_processes 1 -m inspo_cli train`
   on a tiny random Llama in bfloat16: two steps with a checkpoint each; a copy cut back to its first checkpoint
   resumed (every metric but timings must equal the straight run's); and a learning rate of 1e39 that the
   non-finite guard must stop at update 1 (FSDP2's parameters are DTensors). With --quick it runs the plain
   `python -m inspo_cli` instead (accelerate has no FSDP on CPU): the resume and the guard, without FSDP.

Each check runs in its own process with its own time limit and writes its results as it ends, so one that fails
(out of memory, say) costs only itself. Writes OUT/gpu_checklist_cuda.json (or _cpu with --quick). The checks
themselves are in bench/gpu_checks.py; this file runs them, each in its own process, and writes the results.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, machine, update_readme_section
from gpu_checks import QWEN, TRAJECTORIES, child_compiled, child_fsdp, child_generation, child_step, launch, run_as_main
from gpu_profile import brief
from gpu_timing import against_plain

from inspo_cli.jsonio import atomic_write_json  # noqa: E402

# seconds; what is left of the budget goes to the next check
# the 3B step: plain `generate` references (an estimated 20 s), then a rollout of 2,500 decode steps (about 220 s at the
# H200's 87 ms per step), scoring and the update; cut off at 265 s on 2026-11-28 in its fifth call
CHECKS = ("sdpa", "generation", "compiled", "fsdp")  # and step-<a gpu_checks.QWEN shape>
CAPS = {"sdpa": 90.0, "generation": 210.0, "compiled": 150.0, "fsdp": 120.0, "step-qwen2.5-3b": 360.0}


# Every module the checks import, and the wheel that brings it: the GPU machines have no package index, so what their
# image lacks travels as a wheel (bench/README.md lists them). Checked first, in one go: a run once lost its whole
# lease to one missing wheel (pydantic).
NEEDED = {
    "torch": "torch",
    "transformers": "transformers",
    "trl": "trl",
    "accelerate": "accelerate",
    "datasets": "datasets",
    "dill": "dill",
    "multiprocess": "multiprocess",
    "bm25s": "bm25s",
    "orjson": "orjson",
    "gguf": "gguf",
    "typer": "typer",
    "pydantic": "pydantic",
    "pydantic_core": "pydantic_core",
    "annotated_types": "annotated-types",
    "typing_inspection": "typing-inspection",
    "fastapi": "fastapi",
    "starlette": "starlette",
    "sniffio": "sniffio",
    "platformdirs": "platformdirs",
    "rich": "rich",
    "yaml": "pyyaml",
    "safetensors": "safetensors",
    "tokenizers": "tokenizers",
    "huggingface_hub": "huggingface-hub",
    "peft": "peft",
    "inspo_cli.cli": "this repository (pip install --no-deps -e .)",
}


def missing_imports() -> list[str]:
    """The wheels to carry for every module in NEEDED that does not import here (empty: all do)."""
    import importlib

    missing = []
    for module, wheel in NEEDED.items():
        try:
            importlib.import_module(module)
        except Exception as error:  # ImportError, or a module that breaks on import (a wrong version)
            missing.append(f"{wheel} ({module}: {type(error).__name__}: {str(error)[:120]})")
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--quick", action="store_true", help="CPU, tiny shapes: the code paths only")
    parser.add_argument(
        "--recipe-lengths",
        action="store_true",
        help="with --quick: the step keeps the recipe's lengths (5 calls of 500 decode steps; about 80 s on 2 cores)",
    )
    parser.add_argument("--budget", type=float, default=480.0, help="seconds for all the checks together")
    parser.add_argument("--checks", default="sdpa,generation,step-qwen2.5-3b,compiled,fsdp,step-qwen2.5-7b")
    parser.add_argument("--readme", type=Path, help="a results JSON: copy it to bench/results/, write the section")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--timeout", type=float, default=300.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.readme:
        try:
            results = json.loads(args.readme.read_text())
        except (OSError, ValueError) as error:
            parser.error(f"--readme {args.readme}: cannot read its results ({type(error).__name__}: {error})")
        if not isinstance(results, dict) or not isinstance(results.get("checks"), dict):
            parser.error(f"--readme {args.readme}: not a checklist's results (no 'checks' mapping)")
        atomic_write_json(ROOT / "bench/results" / args.readme.name, results)
        update_readme_section("gpu-checklist", section(results))
        return
    if args.child:
        if args.child == "fsdp":
            child_fsdp(args.work, args.out, args.quick, args.timeout)
        elif args.child == "generation":
            child_generation(args.out, args.quick)
        elif args.child == "compiled":
            child_compiled(args.out, args.quick)
        elif args.child == "sdpa":
            script = ROOT / "bench/sdpa_shapes.py"
            device = ["--device", "cpu", "--quick"] if args.quick else ["--device", "cuda"]
            sys.exit(run_as_main([script.name, *device, "--out", str(args.out)], path=script))
        else:
            child_step(args.child.removeprefix("step-"), args.work, args.out, args.quick, args.recipe_lengths)
        return
    if args.out is None:
        parser.error("--out DIR is needed: where the results are written")
    if not (math.isfinite(args.budget) and args.budget > 0):
        parser.error(f"--budget {args.budget}: give a positive number of seconds")
    if unknown := [c for c in args.checks.split(",") if c not in CHECKS and not (c[:5] == "step-" and c[5:] in QWEN)]:
        steps = ", ".join(f"step-{name}" for name in QWEN)
        parser.error(f"--checks: no check named {', '.join(map(repr, unknown))}; use {', '.join(CHECKS)} or {steps}")
    missing = missing_imports()
    if missing:
        print("gpu_checklist: cannot import, carry these wheels and run again: " + "; ".join(missing), flush=True)
        sys.exit(2)
    if not args.quick and not cuda_present():
        print("gpu_checklist: no CUDA device here; on a CPU run it with --quick", flush=True)
        sys.exit(2)
    started = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    results_file = args.out / f"gpu_checklist_{'cpu' if args.quick else 'cuda'}.json"
    results: dict = {
        "machine": machine(("torch", "transformers", "trl", "accelerate", "datasets")),
        "checks": {},
        "skipped": {},
    }
    for check in args.checks.split(","):
        if args.quick:
            check = check if check in CHECKS else "step-qwen2-tiny"
            if check in results["checks"]:
                continue
        left = min(args.budget - (time.time() - started), CAPS.get(check, args.budget))
        if left < 60:
            results["skipped"][check] = f"{max(left, 0):.0f} s of the budget left"
            print(f"[{time.time() - started:6.0f} s] {check}: skipped, {results['skipped'][check]}", flush=True)
            continue
        # a folder of its own (under TMPDIR): two checklists at once, or a test beside one, never share or delete it
        with_work = Path(tempfile.mkdtemp(prefix=f"gpu-checklist-{check}-"))
        out = with_work / "result.json"
        print(f"[{time.time() - started:6.0f} s] {check}: up to {left:.0f} s", flush=True)
        run = launch(
            [
                sys.executable,
                __file__,
                "--child",
                check,
                "--work",
                str(with_work),
                "--out",
                str(out),
                "--timeout",
                str(max(30.0, left / 3)),
            ]
            + (["--quick"] if args.quick else [])
            + (["--recipe-lengths"] if args.recipe_lengths else []),
            ROOT,
            left,
        )
        entry = json.loads(out.read_text()) if out.exists() else {}
        entry["process"] = run
        results["checks"][check] = entry
        print(
            f"[{time.time() - started:6.0f} s] {check}: exit {run['exit_code']}\n{run['output_tail'][-1500:]}",
            flush=True,
        )
        atomic_write_json(results_file, results)
        shutil.rmtree(with_work, ignore_errors=True)
    atomic_write_json(results_file, results)  # also when every check was skipped
    print(json.dumps(summary(results), indent=1), flush=True)


def cuda_present() -> bool:
    import torch

    return torch.cuda.is_available()


def summary(results: dict) -> dict:
    """The figures the README section shows, per check."""
    shown = {}
    for check, entry in results["checks"].items():
        if check.startswith("step-"):
            rows = entry.get("metrics", [])
            row = rows[-1] if rows else {}
            shown[check] = {
                k: entry.get(k)
                for k in (
                    "parameters",
                    "exit_code",
                    "error",
                    "train_seconds",
                    "peak_allocated_gib",
                    "peak_reserved_gib",
                    "weights",
                    "predicted",
                )
            }
            if entry.get("memory_samples"):
                shown[check]["last_memory_sample"] = entry["memory_samples"][-1]
            shown[check].update(
                {
                    k: row.get(k)
                    for k in (
                        "step_seconds",
                        "time/generation",
                        "time/scoring",
                        "time/update",
                        "length/response",
                        "length/response_with_observations",
                        "update",
                    )
                }
            )
            shown[check]["generate_calls"] = entry.get("generate_calls", [])[:12]
            shown[check]["plain_generate"] = entry.get("plain_generate", [])
            shown[check]["plain_generate_error"] = entry.get("plain_generate_error")
            shown[check]["decode_profile"] = {k: brief(v) for k, v in entry.get("decode_profile", {}).items()}
            # from the partial results too: a step cut off by its time limit still reports its calls
            shown[check]["calls_against_plain"] = against_plain(
                entry.get("generate_calls", []), entry.get("plain_generate", [])
            )
            generation = row.get("time/generation")
            if generation and row.get("length/response") is not None:
                shown[check]["policy_tokens_per_second"] = row["length/response"] * TRAJECTORIES / generation
        elif check == "generation":
            shown[check] = [
                {
                    k: row.get(k)
                    for k in ("model", "dtype", "ms_per_step", "ratio_to_plain", "stop_check_share", "batch_sweep")
                }
                for row in entry.get("models", [])
            ] + [
                {"long_context": {k: row.get(k) for k in ("model", "ms_per_step", "ratio_to_plain")}}
                for row in entry.get("long_context", {}).get("models", [])
            ]
        elif check == "sdpa":
            shown[check] = {
                **{k: entry.get(k) for k in ("cudnn_version", "capability", "TORCH_CUDNN_SDPA_DEPRIORITIZED")},
                "summary": entry.get("summary"),
                "attention": {k: v for k, v in entry.get("attention", {}).items() if isinstance(v, dict)},
                "training": {k: v for k, v in entry.get("training", {}).items() if isinstance(v, dict)},
                "generate": entry.get("generate"),
                "exit_code": entry.get("process", {}).get("exit_code"),
            }
        elif check == "compiled":
            shown[check] = {
                "results": [
                    {
                        k: row.get(k)
                        for k in ("model", "layers", "full_layers", "decode_ms_per_step", "compiled_over_eager")
                        + ("first_compiled_call_s", "compile_s", "same_ids")
                    }
                    for row in entry.get("results", [])
                ],
                "at_full_depth": entry.get("at_full_depth"),
                "many_calls": entry.get("many_calls"),
                "error": entry.get("error"),
                "partial": entry.get("partial", False),  # cut off by its time limit after these depths
                "exit_code": entry.get("process", {}).get("exit_code"),
            }
        else:
            shown[check] = {
                k: entry.get(k)
                for k in ("checkpoints", "resume_same_metrics", "guard_stopped", "guard_saved_nothing_after")
            }
    if results.get("skipped"):
        shown["skipped"] = results["skipped"]
    return shown


def section(results: dict) -> str:
    return "## GPU checklist\n\n```json\n" + json.dumps(summary(results), indent=1) + "\n```\n"


if __name__ == "__main__":
    main()

"""`inspo recipe plan`'s CPU prediction against a measured peak: two real training steps of a ~100M-parameter model.

    python bench/resource_plan_check.py          # about 3 minutes on 2 cores; writes results/resource_plan_check.json

A random Qwen2-shaped model (12 layers, hidden 640, SmolLM2's tokenizer and vocabulary: 102M parameters, large
enough that its tensors dominate the process) is written to a temporary directory by a child process, so that
building it leaves no mark on this process's high-water mark. Then `inspo train` runs in this process, as the CLI
runs it, for two steps (Adam's state exists from the first optimizer step on, so the second update holds everything
the planner counts): float32 on CPU, the KL reference, gradient checkpointing, BM25 over the bundled world. Measured:
the kernel's resident-set high-water mark (VmHWM) minus the resident set just before the run (after every import).
Predicted: the planner's peak for the same recipe on CPU (no CUDA context, no allocator reserve; its host runtime
constant instead). glibc's malloc raises its mmap threshold after each large free and then keeps freed tensors in
its heap, so the resident set would count memory no tensor holds (about 0.2 GiB more here): the measurement runs with
the threshold fixed at 64 KiB (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), so that freed tensors are returned.
A thread samples the resident set every 20 ms and records, at the highest sample, the main thread's innermost frames
and the steps finished (the phase of the measured peak, to set against the planner's).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, machine, update_readme_section

from inspo_cli.jsonio import atomic_write_json  # noqa: E402

SHAPE = dict(
    hidden_size=640,
    intermediate_size=2560,
    num_hidden_layers=12,
    num_attention_heads=10,
    num_key_value_heads=2,
    max_position_embeddings=4096,
    max_window_layers=12,
    tie_word_embeddings=True,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    use_sliding_window=False,
)
TOLERANCE = 0.20


def build(out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    from inspo_cli.policy.models import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    torch.manual_seed(0)
    config = Qwen2Config(
        **SHAPE, vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id
    )
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(out)
    tokenizer.save_pretrained(out)


def recipe_text(model: Path) -> str:
    return f"""data: {{train: world, world_dir: {ROOT / "data/world"}}}
retriever: {{kind: bm25, corpus: {ROOT / "data/world/corpus.jsonl"}, topk: 3}}
model: {{name_or_path: {model}, dtype: float32, chat_template: off, gradient_checkpointing: true}}
rollout: {{max_turns: 1, max_tokens_per_turn: 16, max_observation_tokens: 64, max_prompt_tokens: 256,
          max_total_tokens: 352}}
training: {{steps: 2, group_size: 2, batch_size: 2, mini_batch_trajectories: 4, micro_batch_size: 2,
           learning_rate: 1.0e-5, warmup_ratio: 0.0, save_every: 1000, eval_every: 0}}
population: {{enabled: false}}
"""


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _steps_done(metrics: Path) -> int:
    """Training steps finished: metrics.jsonl's rows (one per step, written when it ends)."""
    try:
        return metrics.read_bytes().count(b"\n")
    except OSError:
        return 0


class PeakSampler:
    """Samples the resident set every 20 ms in a thread and keeps, at the highest sample, where the main thread
    was (its innermost frames): which phase the peak belongs to, to set against the planner's phases."""

    def __init__(self, metrics: Path, interval: float = 0.02):
        import threading

        self.metrics, self.interval, self.peak_kib, self.where, self.step = metrics, interval, 0, [], 0
        self.main = threading.main_thread().ident
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import traceback

        while not self.stop.wait(self.interval):
            rss = status_kib("VmRSS")
            if rss > self.peak_kib:
                frame = sys._current_frames().get(self.main)
                stack = traceback.extract_stack(frame) if frame is not None else []
                self.peak_kib = rss
                self.where = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in stack[-12:]]
                self.step = _steps_done(self.metrics)

    def __enter__(self) -> PeakSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def measure(work: Path) -> dict:
    import torch  # noqa: F401  everything the run imports, before the baseline
    import transformers  # noqa: F401
    import trl  # noqa: F401
    from gpu_checks import run_cli  # `inspo ARGS` in this process

    import inspo_cli.cli  # noqa: F401
    from inspo_cli.config import load_recipe
    from inspo_cli.config.resource_plan import GiB, Hardware, resource_plan
    from inspo_cli.policy.models import model_architecture

    model = work / "model"
    subprocess.run([sys.executable, __file__, "--build", str(model)], check=True)
    recipe = work / "recipe.yaml"
    recipe.write_text(recipe_text(model))
    baseline_kib, hwm_before_kib = status_kib("VmRSS"), status_kib("VmHWM")
    with PeakSampler(work / "runs/plan-check/metrics.jsonl") as sampler:
        code = run_cli(
            [
                "train",
                "--recipe",
                str(recipe),
                "--output-dir",
                str(work / "runs"),
                "--name",
                "plan-check",
                "--device",
                "cpu",
            ]
        )
    peak_kib = status_kib("VmHWM")
    rows = [json.loads(line) for line in (work / "runs/plan-check/metrics.jsonl").read_text().splitlines()]
    plan = resource_plan(
        load_recipe(recipe), model_architecture(str(model)), Hardware(1, 1e6, "cpu"), launches=("one-gpu",)
    )
    launch = plan.launches["one-gpu"]
    measured = (peak_kib - baseline_kib) * 1024 / GiB
    return {
        "exit_code": code,
        "parameters": plan.parameters,
        "steps": len(rows),
        "baseline_rss_gib": baseline_kib * 1024 / GiB,
        "hwm_before_gib": hwm_before_kib * 1024 / GiB,
        "measured_peak_growth_gib": measured,
        "predicted_peak_gib": launch.peak_gib,
        "predicted_peak_phase": launch.peak_phase,
        "predicted_phases_gib": {
            phase: {term: value / GiB for term, value in terms.items() if value}
            for phase, terms in launch.phases.items()
        },
        "sampled_peak_gib": (sampler.peak_kib - baseline_kib) * 1024 / GiB,
        "sampled_peak_at": sampler.where,
        "sampled_peak_steps_before": sampler.step,
        "lengths": plan.lengths,
        "ratio": launch.peak_gib / measured,
        "within_tolerance": abs(launch.peak_gib / measured - 1) <= TOLERANCE,
    }


def section(result: dict) -> str:
    phases = result["predicted_phases_gib"]
    lines = [
        "## The resource planner on CPU (`python bench/resource_plan_check.py`)",
        "",
        f"Two real `inspo train` steps of a random Qwen2-shaped model of {result['parameters'] / 1e6:.0f}M "
        "parameters (float32, KL reference, gradient checkpointing, BM25 over the world; "
        f"{result['machine']['cpu_cores']} CPU cores), against `inspo recipe plan`'s arithmetic for the same "
        'recipe on CPU (`resource_plan(..., Hardware(device="cpu"))`). Measured: the resident-set high-water '
        "mark minus the resident set before the run, after every import, with glibc's mmap threshold fixed at 64 KiB "
        "so that freed tensors leave the resident set. Results: "
        "`bench/results/resource_plan_check.json`.",
        "",
        "| | GiB |",
        "|---|---|",
        f"| measured peak growth | {result['measured_peak_growth_gib']:.2f} |",
        f"| predicted peak ({result['predicted_peak_phase']}) | {result['predicted_peak_gib']:.2f} |",
        f"| predicted / measured | {result['ratio']:.2f} (tolerance ±{TOLERANCE:.0%}) |",
        "",
    ]
    terms = phases[result["predicted_peak_phase"]]
    lines.append("Predicted terms of that phase: " + ", ".join(f"{k} {v:.2f}" for k, v in terms.items()) + ".")
    at = result["sampled_peak_at"]
    lines += [
        "",
        f"Measured peak (sampled every 20 ms: {result['sampled_peak_gib']:.2f} GiB) taken after "
        f"{result['sampled_peak_steps_before']} training step(s) (one optimizer step each), "
        f"in `{at[-1] if at else '?'}` "
        f"(called from `{' < '.join(f.split()[-1] for f in at[-5:-1][::-1])}`).",
    ]
    return "\n".join(lines) + "\n"


MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}


def main() -> None:
    if any(os.environ.get(k) != v for k, v in MALLOC_ENV.items()):  # glibc reads them at start: run again with them
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        build(args.build)
        return
    with tempfile.TemporaryDirectory() as work:
        result = {"machine": machine(("torch", "transformers", "trl")), **measure(Path(work))}
    atomic_write_json(ROOT / "bench/results/resource_plan_check.json", result)
    update_readme_section("resource-plan-check", section(result))
    print(json.dumps({k: v for k, v in result.items() if k != "predicted_phases_gib"}, indent=1))


if __name__ == "__main__":
    main()

"""The checks of bench/gpu_checklist.py, each run in its own process (`gpu_checklist.py --child NAME`): the trainer
step at the paper's shape beside `inspo recipe plan`'s prediction, generation speed, and FSDP2 (resume and the
non-finite guard); and the random-weight models they train (the published Qwen2.5 architectures, SmolLM2's tokenizer).
See gpu_checklist.py's docstring for what each measures.

torch, transformers and safetensors are imported inside the functions that use them, and so is every inspo_cli module
beyond the two below: the checklist imports this file before it checks, in one go, that every wheel a check needs is
there (`gpu_checklist.NEEDED`), and a missing one must be named, not crash the import.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, SMOLLM2
from gpu_timing import plain_reference, sample_memory, time_generate_calls

from inspo_cli.config.architecture import QWEN2_5_CONFIGS  # noqa: E402
from inspo_cli.jsonio import atomic_write_json  # noqa: E402

QWEN = {
    **QWEN2_5_CONFIGS,  # Qwen2.5-3B and -7B as published, the figures `inspo recipe plan` sizes them by
    # --quick: the same code on CPU
    "qwen2-tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=49152,
        max_position_embeddings=4096,
        max_window_layers=2,
        tie_word_embeddings=True,
    ),
}
COMMON = dict(
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    use_sliding_window=False,
    sliding_window=None,
    attention_dropout=0.0,
    initializer_range=0.02,
    bos_token_id=151643,
    eos_token_id=151643,
)
TOKENIZER = ROOT / ".gpu" / "tokenizer"  # SmolLM2-135M-Instruct's tokenizer files, carried (no hub there)
TRAJECTORIES = 2 * 4  # training.batch_size x group_size in step_overrides: one micro-batch of the recipe's 8
TIMING = (
    "time",
    "step_seconds",
    "step_time",
    "time/generation",
    "time/retrieval",
    "time/scoring",
    "time/update",
    "time/evolution",
    "time/evaluation",
)


def shape_error(names) -> str | None:
    """The `--models` error for names that are no bench shape (SmolLM2's or one of `QWEN`), else None."""
    unknown = [n for n in names if n not in QWEN and n != SMOLLM2]
    return f"--models: no shape named {', '.join(unknown)}; use {SMOLLM2} or {', '.join(QWEN)}" if unknown else None


def step_overrides(model_dir: Path, quick: bool, recipe_lengths: bool = False) -> list[str]:
    sets = [
        f"model.name_or_path={model_dir}",
        "model.backend=transformers",
        "data.train=world",
        f"data.world_dir={ROOT / 'data/world'}",
        "retriever.kind=bm25",
        f"retriever.corpus={ROOT / 'data/world/corpus.jsonl'}",
        "training.steps=1",
        "training.batch_size=2",
        "training.group_size=4",
        "training.mini_batch_trajectories=8",
        "training.warmup_ratio=0",
        "training.save_every=1000",
        "training.eval_every=0",
    ]
    if quick:  # CPU: float32 (TRL refuses bf16 autocast there), short turns
        sets.append("model.dtype=float32")
    if quick and not recipe_lengths:
        sets += [
            "rollout.max_tokens_per_turn=8",
            "rollout.max_observation_tokens=32",
            "rollout.max_prompt_tokens=512",
            "rollout.max_total_tokens=1024",
        ]
    return sets


def run_as_main(argv: list[str], module: str | None = None, path: Path | None = None) -> int:
    """`module` (by name) or the script at `path` run in this process as `python` runs it, with `argv` as its
    sys.argv; its exit code. In this process, so that a check's time limit, which kills it, stops the run too."""
    import runpy

    saved = sys.argv
    sys.argv = argv
    try:
        if module is not None:
            runpy.run_module(module, run_name="__main__")
        else:
            runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.argv = saved
    return 0


def run_cli(args: list[str]) -> int:
    """`inspo ARGS` in this process, as the console script runs it; its exit code."""
    return run_as_main(["inspo", *args], module="inspo_cli")


def carried_tokenizer() -> Path:
    """SmolLM2's tokenizer files: carried to a GPU machine under .gpu/tokenizer, else the packaged model's here."""
    from inspo_cli.policy.models import resolve_model_path

    return TOKENIZER if TOKENIZER.is_dir() else Path(resolve_model_path("smollm2-135m-instruct"))


def random_model(name: str, out: Path, device: str) -> int:
    """The architecture with random bfloat16 weights (initialised on `device`), and the carried tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config

    torch.manual_seed(0)
    config = Qwen2Config(**QWEN[name], **COMMON, dtype="bfloat16")
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    parameters = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out)
    del model
    AutoTokenizer.from_pretrained(carried_tokenizer()).save_pretrained(out)
    if device == "cuda":
        torch.cuda.empty_cache()
    return parameters


def predicted(recipe: Path, overrides: list[str], device: str) -> dict:
    """What `inspo recipe plan` predicts for this step on this one device, beside what it measures: GiB per phase of
    the one-process launch, and the seconds of its generation and update."""
    from inspo_cli.config import load_recipe
    from inspo_cli.config.resource_plan import GiB, Hardware, resource_plan
    from inspo_cli.policy.models import model_architecture

    try:
        import torch

        gib = torch.cuda.get_device_properties(0).total_memory / GiB if device == "cuda" else 24.0
        loaded = load_recipe(recipe, overrides)
        plan = resource_plan(loaded, model_architecture(loaded.model.name_or_path), Hardware(1, gib, device))
    except Exception as error:  # a prediction that fails must not cost the measurement
        return {"error": f"{type(error).__name__}: {error}"[:500]}
    one = plan.launches["one-gpu"]
    return {
        "gib_by_phase": {phase: one.total(phase) / GiB for phase in one.phases},
        "peak_phase": one.peak_phase,
        "seconds": plan.seconds,
        "policy_tokens_per_step": plan.policy_tokens_per_step,
    }


def tensors(directory: Path, device: str):
    from safetensors import safe_open

    for file in sorted(directory.glob("*.safetensors")):
        with safe_open(str(file), framework="pt", device=device) as f:
            for key in f.keys():
                yield key, f.get_tensor(key)


def changed_shares(initial: Path, final: Path, device: str) -> dict:
    """Of the parameters the run saved (float32), the share that differ from the initial bf16 weights in float32,
    and the share that still differ once rounded to bfloat16."""
    import torch

    before = dict(tensors(initial, "cpu"))
    total = in_fp32 = in_bf16 = 0
    for key, after in tensors(final, device):
        start = before.pop(key).to(device)
        total += after.numel()
        in_fp32 += int((after != start.to(after.dtype)).sum())
        in_bf16 += int((after.to(torch.bfloat16) != start.to(torch.bfloat16)).sum())
    return {
        "parameters": total,
        "final_dtype": str(after.dtype).removeprefix("torch."),
        "changed_float32": in_fp32 / total,
        "changed_after_bf16_rounding": in_bf16 / total,
        "tensors_not_saved": sorted(before),
    }


def child_step(name: str, work: Path, out: Path, quick: bool, recipe_lengths: bool = False) -> None:
    import torch

    device = "cpu" if quick else "cuda"
    result: dict = {"model": name, "device": device}
    started = time.time()
    model_dir = work / f"{name}-random"
    result["parameters"] = random_model(name, model_dir, device)
    result["build_seconds"] = round(time.time() - started, 1)
    # plain `generate` at the step's shapes first, in this process (gpu_timing.py): each rollout call's reference
    short = quick and not recipe_lengths
    widths, steps = ([64, 200], 6) if short else ([400, 2400], 32)
    dtype = "float32" if quick else "bfloat16"
    # a few decode steps profiled (gpu_profile.py): plain `generate` (padded rows at each width, equal rows at the
    # widest) and the second of the step's calls, where the time goes; shared with the partial writes below
    profile = result["decode_profile"] = {}
    try:
        result["plain_generate"] = plain_reference(model_dir, device, dtype, widths, TRAJECTORIES, steps, profile)
    except Exception as error:  # a reference that fails must not cost the step
        result["plain_generate"], result["plain_generate_error"] = [], f"{type(error).__name__}: {error}"[:500]
        if device == "cuda":
            torch.cuda.empty_cache()
    stop_sampling = None
    result["generate_calls"] = time_generate_calls(profile)  # shared with the partial writes below
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        stop_sampling = sample_memory(result, out, started)
    runs = work / "runs"
    recipe = ROOT / "recipes" / ("qwen2.5-7b" if name == "qwen2.5-7b" else "qwen2.5-3b") / "search-r1.yaml"
    args = ["train", "--recipe", str(recipe), "--output-dir", str(runs), "--name", name, "--device", device]
    overrides = step_overrides(model_dir, quick, recipe_lengths)
    for value in overrides:
        args += ["--set", value]
    result["predicted"] = predicted(recipe, overrides, device)
    started = time.time()
    try:
        result["exit_code"] = run_cli(args)
    except Exception as error:  # out of memory, say: what it was, beside the memory samples
        result["exit_code"], result["error"] = "exception", f"{type(error).__name__}: {error}"[:2000]
    result["train_seconds"] = round(time.time() - started, 1)
    if stop_sampling is not None:
        result["memory_samples"] = stop_sampling()
    if device == "cuda":
        result["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 2**30
        result["peak_reserved_gib"] = torch.cuda.max_memory_reserved() / 2**30
        result["gpu_total_gib"] = torch.cuda.get_device_properties(0).total_memory / 2**30
    metrics = runs / name / "metrics.jsonl"
    result["metrics"] = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    final = runs / name / "checkpoints" / "final"
    if final.is_dir():
        result["weights"] = changed_shares(model_dir, final, device)
    atomic_write_json(out, result)


def launch(argv: list[str], cwd: Path, timeout: float, env: dict | None = None) -> dict:
    started = time.time()
    try:  # stderr into stdout: the step lines (stderr) must survive a timeout too
        done = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, env=env)
        code, output = done.returncode, done.stdout
    except subprocess.TimeoutExpired as expired:
        code, output = "timeout", expired.output or b""
    output = output.decode(errors="replace")
    return {"exit_code": code, "seconds": round(time.time() - started, 1), "output_tail": output[-12000:]}


def child_generation(out: Path, quick: bool) -> None:
    """bench/generation_speed.py on the 3B architecture in bf16 (mixed precision): plain `generate`, the backend, a
    rollout in the trainer's context and before the issue-52 fix, and tokens/s against the generation batch."""
    shape = (
        ["--models", "qwen2-tiny", "--device", "cpu", "--new-tokens", "16", "--prompt", "64", "--sweep", "8"]
        if quick
        else ["--models", "qwen2.5-3b", "--device", "cuda", "--new-tokens", "64", "--sweep", "8", "32", "64", "128"]
    )
    # the same sides at the 3B step's late-turn contexts (about 2,000 tokens), no sweep: whether plain `generate`
    # itself slows there as the step's rollout did (about 87 ms per step against 33 at 400 tokens, H200)
    long = ["--prompt", "200" if quick else "2000", "--new-tokens", "16" if quick else "32", "--sweep"]
    runs = {"": shape, "long_context": [*shape[: shape.index("--sweep")], *long]}
    results = {}
    for key, arguments in runs.items():
        part = out.with_name(f"{out.stem}{key}.json")
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench/generation_speed.py"),
                *arguments,
                "--dtypes",
                "bfloat16",
                "--repeats",
                "2",
                "--out",
                str(part),
            ],
            check=key == "",  # the long-context run must not cost the main one's results
        )
        if part.exists():
            results[key] = json.loads(part.read_text())
    main = results.pop("")
    main.update(results)
    atomic_write_json(out, main)


def child_compiled(out: Path, quick: bool) -> None:
    """bench/compiled_generation.py (`model.compile_generation`: a static cache, torch.compile, CUDA graphs) against
    eager decoding on the 3B's width cut to 2, 4 and 8 of its 36 layers, extrapolated to 36 (loading the 3B and its
    first compiled call took over 140 s of a lease on an H200), then 140 compiled calls in a row at 2 layers: whether
    torch still replays CUDA graphs after 128 re-records; with --quick, qwen2-tiny at 1 and 2 layers on CPU.
    On CUDA, Inductor needs Triton and a C compiler (Triton builds its launchers): without them the check says so
    and ends."""
    if not quick:
        missing = [] if shutil.which("cc") or shutil.which("gcc") else ["a C compiler (cc, gcc)"]
        try:
            import triton  # noqa: F401
        except Exception as error:  # not in the image: too large to carry
            missing.append(f"triton ({type(error).__name__}: {str(error)[:120]})")
        if missing:
            atomic_write_json(out, {"error": "compiled decoding on CUDA needs " + " and ".join(missing)})
            return
    shape = (
        ["--models", "qwen2-tiny", "--device", "cpu", "--layers", "1,2", "--new-tokens", "16", "--reps", "1"]
        if quick
        else ["--models", "qwen2.5-3b", "--device", "cuda", "--layers", "2,4,8", "--new-tokens", "128", "--reps", "3"]
    )
    shape += ["--calls", "10" if quick else "140"]  # past the 128 re-records some torch releases allow
    script = ROOT / "bench/compiled_generation.py"
    code = run_as_main([script.name, *shape, "--out", str(out)], path=script)
    if code:
        sys.exit(code)


def child_fsdp(work: Path, out: Path, quick: bool, timeout: float) -> None:
    """Straight run, resume from the first checkpoint, and the guard, under accelerate's FSDP2 config."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers.tiny_model import build_tiny_model

    tiny = build_tiny_model(work / "tiny")
    recipe = work / "tiny.yaml"
    recipe.write_text(f"""data: {{train: world, world_dir: {ROOT / "data/world"}}}
retriever: {{kind: bm25, corpus: {ROOT / "data/world/corpus.jsonl"}, topk: 3}}
model: {{name_or_path: {tiny}, dtype: {"float32" if quick else "bfloat16"}, chat_template: auto}}
rollout: {{max_turns: 2, max_tokens_per_turn: 16, max_observation_tokens: 64, max_prompt_tokens: 256,
          max_total_tokens: 512}}
training: {{steps: 2, group_size: 2, batch_size: 2, mini_batch_trajectories: 4, micro_batch_size: 2,
           learning_rate: 1.0e-5, warmup_ratio: 0.0, save_every: 1, eval_every: 0}}
population: {{enabled: false}}
""")
    launcher = (
        [sys.executable, "-m", "inspo_cli"]
        if quick
        else [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(ROOT / "recipes/accelerate/8gpu-fsdp.yaml"),
            "--num_processes",
            "1",
            "-m",
            "inspo_cli",
        ]
    )
    runs = work / "fsdp-runs"
    result: dict = {"launcher": " ".join(launcher[1:])}
    result["straight"] = launch(
        [*launcher, "train", "--recipe", str(recipe), "--output-dir", str(runs), "--name", "straight"], ROOT, timeout
    )
    straight = runs / "straight"
    result["checkpoints"] = sorted(p.name for p in (straight / "checkpoints").glob("*")) if straight.exists() else []
    if (straight / "checkpoints/checkpoint-1").is_dir():
        cut = runs / "resumed"
        shutil.copytree(straight, cut)
        for path in ("checkpoints/checkpoint-2", "checkpoints/final", "summary.json"):
            target = cut / path
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
        result["resume"] = launch([*launcher, "train", "--resume", str(cut)], ROOT, timeout)

        def rows(run):
            path = run / "metrics.jsonl"
            lines = path.read_text().splitlines() if path.exists() else []
            return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]

        want, have = rows(straight), rows(cut)
        result["metrics_rows"] = {"straight": len(want), "resumed": len(have)}
        result["resume_same_metrics"] = bool(want) and want == have
        result["resume_differences"] = [
            {k: (w.get(k), h.get(k)) for k in set(w) | set(h) if w.get(k) != h.get(k)} for w, h in zip(want, have)
        ]
    result["guard"] = launch(
        [
            *launcher,
            "train",
            "--recipe",
            str(recipe),
            "--output-dir",
            str(runs),
            "--name",
            "blown",
            "--set",
            "training.learning_rate=1e39",
        ],
        ROOT,
        timeout,
    )
    output = result["guard"]["output_tail"]
    result["guard_stopped"] = result["guard"]["exit_code"] not in (0, "timeout") and "weights are not finite" in output
    result["guard_saved_nothing_after"] = not (runs / "blown/checkpoints/checkpoint-1").exists()
    atomic_write_json(out, result)

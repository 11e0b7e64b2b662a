"""bench/gpu_checklist.py is what the next lent GPU machine runs first, in a 15-minute lease: a check that crashes
there loses the lease. Its --quick form runs the same code on CPU; these keep it working as the code changes."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def timing(bench):
    return bench("gpu_timing")


@pytest.fixture
def carry(bench):
    return bench("gpu_carry")


def test_each_rollout_call_is_read_against_plain_generate_of_padded_rows_at_the_nearest_width(timing):
    reference = [
        {"width": 400, "padded": False, "decode_ms_per_step": 10.0},
        {"width": 400, "padded": True, "decode_ms_per_step": 20.0},
        {"width": 2400, "padded": False, "decode_ms_per_step": 30.0},
        {"width": 2400, "padded": True, "decode_ms_per_step": 40.0},
    ]
    calls = [
        {"rows": 8, "width": 300, "ms_per_step": 30.0},
        {"generate_call_seconds": 1.0, "contexts": 8},  # the public call around it: not a batch
        {"rows": 8, "width": 1500, "ms_per_step": 80.0, "profiled": True},
        {"rows": 8, "width": 2700, "ms_per_step": 80.0},
    ]
    rows = timing.against_plain(calls, reference)
    assert [(r["width"], r["plain_width"], r["plain_ms_per_step"], r["ratio"]) for r in rows] == [
        (300, 400, 20.0, 1.5),
        (1500, 2400, 40.0, 2.0),
        (2700, 2400, 40.0, 2.0),
    ]
    assert [r.get("profiled", False) for r in rows] == [False, True, False]  # its figure holds the profiler's cost
    assert timing.against_plain(calls, []) == []


def test_compiled_decoding_at_several_depths_is_extrapolated_per_side_by_a_line_through_them(bench):
    compiled = bench("compiled_generation")

    def row(model, layers, eager, fast, full=36):
        ms = {"eager": eager, "compiled": fast}
        return {"model": model, "layers": layers, "full_layers": full, "decode_ms_per_step": ms}

    # eager: 5 ms outside the layers + 0.8 per layer; compiled: 1 + 0.1 per layer, measured 0.3 ms off at 4 layers
    rows = [row("3b", 8, 11.4, 1.8), row("3b", 2, 6.6, 1.2), row("3b", 4, 8.2, 1.7), row("7b", 4, 9.0, 2.0, full=28)]
    full = compiled.at_full_depth(rows)
    assert set(full) == {"3b"}  # one depth says nothing about the slope
    x = full["3b"]
    assert x["extrapolated"] and x["layers"] == 36 and x["from_layers"] == [2, 4, 8]
    assert x["eager"] == {
        "ms_per_layer": 0.8,
        "ms_outside_layers": 5.0,
        "ms_per_step": 33.8,
        "worst_residual_ms": 0.0,
        "slope_below_zero": False,
    }
    # least squares through (2, 1.2), (4, 1.7), (8, 1.8): slope 1.6667 / 18.667 = 0.0893, not the 0.1 of the two
    # ends; intercept 1.5667 - 0.0893 x 4.667 = 1.15; worst residual at 4 layers: 1.7 - 1.507
    fast = x["compiled"]
    assert fast["ms_per_layer"] == 0.089 and fast["ms_outside_layers"] == 1.15 and fast["ms_per_step"] == 4.36
    assert fast["worst_residual_ms"] == 0.193 and not fast["slope_below_zero"]
    assert x["compiled_over_eager"] == round(4.36 / 33.8, 3)
    noise = compiled.at_full_depth([row("3b", 2, 6.6, 1.5), row("3b", 8, 11.4, 1.2)])["3b"]["compiled"]
    assert noise["slope_below_zero"] and noise["ms_per_layer"] == -0.05
    assert compiled.depth(rows[0]) == " at 8 of 36 layers" and compiled.depth(row("3b", 36, 1, 1)) == ""


def test_a_compiled_check_cut_off_after_one_depth_keeps_that_depth(bench, tmp_path, monkeypatch):
    compiled = bench("compiled_generation")
    done = []

    def measure(name, device, batch, length, new_tokens, reps, layers):
        if done:
            raise TimeoutError("the check's time limit")
        done.append(layers)
        return {
            "model": name,
            "layers": layers,
            "full_layers": 36,
            "decode_ms_per_step": {"eager": 9.0, "compiled": 2.0},
        }

    monkeypatch.setattr(compiled, "measure", measure)
    out = tmp_path / "compiled.json"
    argv = ["compiled_generation.py", "--models", "qwen2.5-3b", "--layers", "4,8", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(TimeoutError):
        compiled.main()
    kept = json.loads(out.read_text())
    assert kept["partial"] and [r["layers"] for r in kept["results"]] == [4] and "at_full_depth" not in kept


def test_many_calls_count_the_cuda_graph_recordings_and_the_times_torch_gave_up(bench, monkeypatch):
    """A GPU measurement (no CUDA graphs on CPU): torch's recorder and skip counter stood in for, the rest real."""
    from types import SimpleNamespace

    import torch._dynamo.utils
    from torch._inductor import cudagraph_trees

    compiled = bench("compiled_generation")
    model = SimpleNamespace(config=SimpleNamespace(num_hidden_layers=2))
    monkeypatch.setattr(compiled, "load", lambda name, device, layers: (model, None))
    monkeypatch.setattr(compiled, "prompts", lambda tokenizer, batch, length: [[1]])
    monkeypatch.setattr(compiled, "decoding_compile_config", lambda: None)
    monkeypatch.setattr(cudagraph_trees.CUDAGraphTreeManager, "record_function", lambda self, *a, **k: None)
    real_recorder = cudagraph_trees.CUDAGraphTreeManager.record_function
    counters = torch._dynamo.utils.counters["inductor"]
    calls = []

    def generate(model, tokenizer, contexts, new_tokens, config):
        calls.append(new_tokens)
        if len(calls) <= 12:  # a recording each of the first 12 calls, then torch gives up: eager from there
            cudagraph_trees.CUDAGraphTreeManager.record_function(object())
        else:
            counters["cudagraph_skips"] += 1
        return (0.01 if len(calls) <= 12 else 0.05), []

    monkeypatch.setattr(compiled, "generate", generate)
    counters["cudagraph_skips"] += 5  # skips before the calls are not theirs
    found = compiled.many_calls("qwen2.5-3b", "cuda", 8, 400, 2, 20)
    assert found == {
        "model": "qwen2.5-3b",
        "layers": 2,
        "calls": 20,
        "recordings": 12,
        "cudagraph_skips": 8,
        "first_10_median_s": 0.01,
        "last_10_median_s": 0.05,
    }
    assert calls == [16] * 20 and cudagraph_trees.CUDAGraphTreeManager.record_function is real_recorder


def test_layers_up_to_the_shapes_own_depth_are_measured(bench, tmp_path, monkeypatch):
    compiled = bench("compiled_generation")
    asked = []

    def measure(name, device, batch, length, new_tokens, reps, layers):
        asked.append(layers)
        return {
            "model": name,
            "layers": layers,
            "full_layers": 36,
            "decode_ms_per_step": {"eager": 9.0 + layers, "compiled": 2.0},
            "compiled_over_eager": 0.2,
            "compile_s": 1.0,
            "first_compiled_call_s": 2.0,
            "params_m": 3.0,
            "dtype": "bfloat16",
            "same_ids": True,
        }

    monkeypatch.setattr(compiled, "measure", measure)
    out = tmp_path / "compiled.json"
    argv = ["compiled_generation.py", "--models", "qwen2.5-3b", "--layers", "1,36", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    compiled.main()
    assert asked == [1, 36] and "partial" not in json.loads(out.read_text())


def test_without_a_c_compiler_the_compiled_check_says_so_and_loads_nothing(bench, tmp_path, monkeypatch):
    gpu_checks = bench("gpu_checks")
    monkeypatch.setattr(gpu_checks.shutil, "which", lambda name: None)
    monkeypatch.setattr(gpu_checks, "run_as_main", None)  # reached, the check would fail: it must end before
    out = tmp_path / "compiled.json"
    gpu_checks.child_compiled(out, quick=False)
    assert json.loads(out.read_text())["error"].startswith("compiled decoding on CUDA needs a C compiler (cc, gcc)")


def test_with_gcc_alone_and_triton_the_compiled_check_runs_the_gpu_measurement(bench, tmp_path, monkeypatch):
    import types

    gpu_checks = bench("gpu_checks")
    monkeypatch.setattr(gpu_checks.shutil, "which", lambda name: "/usr/bin/gcc" if name == "gcc" else None)
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    ran = []
    monkeypatch.setattr(gpu_checks, "run_as_main", lambda argv, path: ran.append((argv, path.name)) or 0)
    out = tmp_path / "compiled.json"
    gpu_checks.child_compiled(out, quick=False)
    ((argv, script),) = ran
    assert script == "compiled_generation.py" and not out.exists()
    options = dict(zip(argv[1::2], argv[2::2]))
    assert options == {
        "--models": "qwen2.5-3b",
        "--device": "cuda",
        "--layers": "2,4,8",
        "--new-tokens": "128",
        "--reps": "3",
        "--calls": "140",
        "--out": str(out),
    }


def test_a_compiled_measurement_that_fails_fails_the_check(bench, tmp_path, monkeypatch):
    gpu_checks = bench("gpu_checks")
    monkeypatch.setattr(gpu_checks, "run_as_main", lambda argv, path: 2)  # its option parser refused, say
    with pytest.raises(SystemExit) as exit_:
        gpu_checks.child_compiled(tmp_path / "compiled.json", quick=True)
    assert exit_.value.code == 2


def test_a_script_run_as_main_gives_its_exit_code_and_puts_argv_back(bench, tmp_path):
    gpu_checks = bench("gpu_checks")
    script = tmp_path / "s.py"
    script.write_text("import sys\nsys.exit(3 if sys.argv[1:] == ['--x'] else 0)\n")
    before = list(sys.argv)
    assert gpu_checks.run_as_main(["s.py", "--x"], path=script) == 3
    assert gpu_checks.run_as_main(["s.py"], path=script) == 0 and sys.argv == before


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--layers", "four"], "whole numbers of layers"),
        (["--layers", "0,4", "--models", "qwen2.5-3b"], "to 1 layer or more"),
        (["--layers", "4,8", "--models", "smollm2-135m"], "only the Qwen shapes"),
        (["--layers", "4,8", "--models", "qwen2.5-3b,smollm2-135m"], "only the Qwen shapes"),
        (["--layers", "4,37", "--models", "qwen2.5-3b"], "at most 36"),
        (["--layers", "4,", "--models", "qwen2.5-3b"], "whole numbers of layers"),
        (["--calls", "3"], "at least 10"),
    ],
)
def test_a_bad_layers_option_is_one_line_before_any_model_loads(repo_root, argv, message):
    done = subprocess.run(
        [sys.executable, str(repo_root / "bench/compiled_generation.py"), *argv],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_decode_step_is_timed_without_the_prefill(timing):
    # 1 token: 0.5 s (prefill and first token); 33 tokens: 1.78 s, so 32 decode steps took 1.28 s
    assert timing.decode_ms(0.5, 1.78, 33) == 40.0


@pytest.mark.slow
def test_the_quick_checklist_runs_generation_and_the_step_and_times_each_call_against_plain(repo_root, tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(repo_root / "bench/gpu_checklist.py"),
            "--out",
            str(tmp_path),
            "--quick",
            "--checks",
            "sdpa,generation,step-qwen2.5-3b,compiled",
        ],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads((tmp_path / "gpu_checklist_cpu.json").read_text())["checks"]
    assert results["generation"]["models"][0]["ms_per_step"]["a"] > 0
    step = results["step-qwen2-tiny"]
    assert step["exit_code"] == 0 and step["metrics"], step.get("error")
    plain = step["plain_generate"]
    assert [(r["width"], r["padded"]) for r in plain] == [(64, False), (64, True), (200, False), (200, True)]
    assert all(math.isfinite(r["decode_ms_per_step"]) and r["decode_ms_per_step"] > 0 for r in plain)
    batches = [c for c in step["generate_calls"] if "rows" in c]
    # a random policy never ends a turn: every call runs the turn's budget (8 tokens with --quick), 5 turns
    assert len(batches) == 5 and {c["steps"] for c in batches} == {8} and {c["rows"] for c in batches} == {8}
    assert all(c["shortest"] <= c["width"] for c in batches) and any(c["shortest"] < c["width"] for c in batches)
    shown = json.loads(done.stdout[done.stdout.rindex("\n{\n") :])  # the summary, printed last
    against = shown["step-qwen2-tiny"]["calls_against_plain"]
    assert [r["width"] for r in against] == [c["width"] for c in batches] and all(r["ratio"] > 0 for r in against)
    # where a decode step's time goes: plain `generate` (padded rows at each width, equal at the widest), and
    # the rollout's second call
    assert set(step["decode_profile"]) == {"plain_padded_64", "plain_padded_200", "plain_equal_200", "rollout"}
    assert [c.get("profiled", False) for c in batches] == [False, True, False, False, False]
    profiled = shown["step-qwen2-tiny"]["decode_profile"]["rollout"]
    assert profiled["steps"] == 5 and profiled["rows"] == 8 and profiled["host_ops_per_step"] > 100
    # compiled decoding at two depths of one width, both sides extrapolated to the full depth
    compiled = shown["compiled"]
    assert (
        compiled["exit_code"] == 0
        and not compiled["partial"]
        and [(r["layers"], r["full_layers"]) for r in compiled["results"]]
        == [
            (1, 2),
            (2, 2),
        ]
    )
    # whether both sides gave the same greedy ids is recorded (random weights may tie logits: not asserted here)
    assert all(isinstance(r["same_ids"], bool) and r["decode_ms_per_step"]["compiled"] > 0 for r in compiled["results"])
    # attention at new shapes against repeated ones, with torch's default backends and without cuDNN: on CPU both
    # sides are the same attention, so only the shape of the figures is checked
    sdpa = shown["sdpa"]
    assert sdpa["exit_code"] == 0 and sdpa["capability"] is None
    assert set(sdpa["attention"]) == set(sdpa["training"]) == {"padded_rows", "equal_rows"}
    rows = [*sdpa["attention"].values(), *sdpa["training"].values(), *sdpa["generate"]]
    sides = [row[side] for row in rows for side in ("default", "without_cudnn")]
    assert all(isinstance(side["cudnn_enabled"], bool) for side in sides)  # on a GPU: whether each side was as named
    assert [(r["width"], r["padded"]) for r in sdpa["generate"]] == [(64, True), (43, False), (100, True), (79, False)]
    assert set(sdpa["summary"]["generate"]) == {"64_padded", "43_equal", "100_padded", "79_equal"}
    calls = compiled["many_calls"]  # no CUDA graphs on CPU: the counts are there, and 0
    assert calls["calls"] == 10 and calls["layers"] == 1 and calls["cudagraph_skips"] == 0 and calls["recordings"] == 0
    full = compiled["at_full_depth"]["qwen2-tiny"]
    assert full["extrapolated"] and full["layers"] == 2 and full["from_layers"] == [1, 2]


@pytest.mark.slow
def test_a_reference_that_fails_costs_the_step_nothing(bench, repo_root, tmp_path, monkeypatch):
    monkeypatch.chdir(repo_root)
    gpu_checks = bench("gpu_checks")

    def fails(*args, **kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(gpu_checks, "plain_reference", fails)
    out = tmp_path / "result.json"
    gpu_checks.child_step("qwen2-tiny", tmp_path, out, quick=True)
    result = json.loads(out.read_text())
    assert result["plain_generate"] == [] and result["plain_generate_error"] == "RuntimeError: CUDA out of memory"
    assert result["exit_code"] == 0 and result["metrics"] and len(result["generate_calls"]) == 10


def test_the_carried_wheels_are_this_environments_versions_for_the_gpu_machines_python(carry):
    from importlib.metadata import version

    pins = carry.pinned()
    assert f"transformers=={version('transformers')}" in pins and f"pydantic=={version('pydantic')}" in pins
    assert len(pins) == len(set(carry.WHEELS))  # one version of each: two stop the whole install there
    command = carry.download_command(pins, carry.ROOT / ".whl")
    assert command[command.index("--python-version") + 1] == "3.12" and "--no-deps" in command
    assert "--only-binary=:all:" in command and command[-len(pins) :] == pins
    with pytest.raises(SystemExit, match="not-a-package-here is not installed here"):
        carry.pinned(("not-a-package-here",))


def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True)


def test_the_carried_folders_are_excluded_from_git_once_and_the_rest_of_the_exclude_file_is_kept(carry, tmp_path):
    repo = tmp_path / "repo"
    git("init", "-q", str(repo), cwd=tmp_path)
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_bytes(b"# mine \xff\n/.gl/")  # not UTF-8: git reads bytes, so its bytes stay as they were
    carry.exclude(repo)
    carry.exclude(repo)
    assert exclude.read_bytes() == b"# mine \xff\n/.gl/\n/.whl/\n/.gpu/\n/.whl.partial/\n/.whl.old/\n"


def test_in_a_git_worktree_whose_dot_git_is_a_file_the_carried_folders_are_ignored_too(carry, tmp_path):
    repo, tree = tmp_path / "repo", tmp_path / "tree"
    git("init", "-q", str(repo), cwd=tmp_path)
    (repo / "f").write_text("x")
    git("add", "f", cwd=repo)
    git("commit", "-qm", "f", cwd=repo)
    git("worktree", "add", "-q", str(tree), cwd=repo)
    assert (tree / ".git").is_file()
    carry.exclude(tree)
    (tree / ".whl").mkdir()
    (tree / ".whl" / "w.whl").write_text("")
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True, check=True)
    assert status.stdout == ""


def test_every_wheel_the_checklist_imports_is_carried_or_in_the_gpu_image(bench, carry):
    gpu_checklist = bench("gpu_checklist")

    needed = {wheel.replace("_", "-") for wheel in gpu_checklist.NEEDED.values() if not wheel.startswith("this ")}
    assert {w.replace("_", "-") for w in (*carry.WHEELS, *carry.IMAGE)} == needed


def test_the_memory_sampler_survives_a_write_that_meets_the_step_changing_its_results(timing, tmp_path, monkeypatch):
    """The step appends to the lists and dicts the sampler writes; a write that meets one (RuntimeError: changed
    size during iteration) is skipped, and the next tick writes: the partial results must not stop for good."""
    import time

    import torch

    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: 0)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: 0)
    writes, real = [], timing.atomic_write_json

    def flaky(path, data):
        writes.append(len(writes))
        if len(writes) == 1:
            raise RuntimeError("dictionary changed size during iteration")
        real(path, data)

    monkeypatch.setattr(timing, "atomic_write_json", flaky)
    out = tmp_path / "result.json"
    finish = timing.sample_memory({"model": "m"}, out, time.time(), every=0.01)
    deadline = time.time() + 10
    while len(writes) < 3 and time.time() < deadline:
        time.sleep(0.01)
    samples = finish()
    assert len(writes) >= 3 and out.exists() and len(samples) >= 3


def test_the_sdpa_check_reads_a_new_shapes_cost_over_a_repeats_per_side(bench):
    shapes = bench("sdpa_shapes")

    def side(new, repeated, backend="X", rss=None):
        return {"backend": backend, "new_ms_per_step": new, "repeated_ms_per_step": repeated, "rss_mib_gained_new": rss}

    result = {
        "attention": {
            "padded_rows": {
                "default": side(60.0, 2.0, "CUDNN_ATTENTION", 12.5),
                "without_cudnn": side(2.2, 2.0, rss=0.1),
            },
            "rows": 8,
        },
        "training": {"equal_rows": {"default": side(150.0, 50.0), "without_cudnn": side(60.0, 60.0)}, "heads": 16},
        "generate": [
            {"width": 400, "padded": True, "default": side(90.0, 36.0), "without_cudnn": side(33.0, 33.0)},
            {"width": 379, "padded": False, "default": side(0, 30.0), "without_cudnn": side(30.0, 30.0)},
        ],
    }
    read = shapes.summary(result)
    assert read["attention"] == {
        "padded_rows": {
            "default": 30.0,
            "without_cudnn": 1.1,
            "without_over_default_new": 0.04,
            "rss_mib_gained_new": [12.5, 0.1],
            "backends": ["CUDNN_ATTENTION", "X"],
        }
    }
    # the update's attention: no backend is named (it is left to torch), the same ratios
    assert read["training"] == {
        "equal_rows": {
            "default": 3.0,
            "without_cudnn": 1.0,
            "without_over_default_new": 0.4,
            "rss_mib_gained_new": [None, None],
        }
    }
    assert read["generate"]["400_padded"] == {"default": 2.5, "without_cudnn": 1.0, "without_over_default_new": 0.37}
    # a figure that is missing or 0 gives no ratio, never a division by it
    assert read["generate"]["379_equal"] == {"default": None, "without_cudnn": 1.0, "without_over_default_new": None}
    assert shapes.summary({}) == {"attention": {}, "generate": {}, "training": {}}


def test_the_sdpa_check_times_each_side_at_new_lengths_then_again_alternating_which_goes_first(bench, monkeypatch):
    import torch

    shapes = bench("sdpa_shapes")
    calls, seen = [], set()
    # each shape met keeps 2 MiB (a built graph), and every call 0.5 more (the rest of the process)
    monkeypatch.setattr(shapes, "rss_mib", lambda: 2.0 * len(seen) + 0.5 * len(calls))

    def step(length):  # cuDNN on: 10 ms at a length this side has not met (403: 40), 1 after; without: 3 ms always
        side = "default" if torch.backends.cuda.cudnn_sdp_enabled() else "without_cudnn"
        calls.append((side, length))
        first = (side, length) not in seen
        seen.add((side, length))
        return ((40.0 if length == 403 else 10.0) if first else 1.0) if side == "default" else 3.0

    lengths = [401, 402, 403]
    out = shapes.time_sides(lengths, {n: n for n in lengths}, 400, step, "cuda")  # "cuda": the switch as on a GPU
    assert out["default"] == {
        "rss_mib_gained_new": 7.5,  # over the 3 new lengths only: 3 x (2 + 0.5)
        "cudnn_enabled": True,
        "new_ms_per_step": 10.0,  # the median: one slow build does not move it
        "repeated_ms_per_step": 1.0,
    }
    assert out["without_cudnn"] == {
        "rss_mib_gained_new": 7.5,
        "cudnn_enabled": False,
        "new_ms_per_step": 3.0,
        "repeated_ms_per_step": 3.0,
    }
    d, w = "default", "without_cudnn"
    assert calls == [
        (d, 400), (w, 400),  # the warm-up, at a length outside those timed
        (d, 401), (w, 401), (w, 402), (d, 402), (d, 403), (w, 403),  # new: the first side alternates
        (d, 401), (w, 401), (w, 402), (d, 402), (d, 403), (w, 403),  # and again
    ]  # fmt: skip
    assert torch.backends.cuda.cudnn_sdp_enabled()


def test_without_cuda_the_full_checklist_is_one_line_that_names_quick(bench, tmp_path, monkeypatch, capsys):
    checklist = bench("gpu_checklist")
    monkeypatch.setattr(checklist, "missing_imports", lambda: [])
    monkeypatch.setattr(checklist, "cuda_present", lambda: False)
    monkeypatch.setattr(sys, "argv", ["gpu_checklist.py", "--out", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as stop:
        checklist.main()
    assert stop.value.code == 2
    assert capsys.readouterr().out.strip() == "gpu_checklist: no CUDA device here; on a CPU run it with --quick"
    assert not (tmp_path / "out").exists()


def test_checks_the_budget_cannot_hold_are_said_skipped_and_the_results_file_still_written(
    bench, tmp_path, monkeypatch, capsys
):
    checklist = bench("gpu_checklist")
    monkeypatch.setattr(checklist, "missing_imports", lambda: [])
    monkeypatch.setattr(checklist, "cuda_present", lambda: True)
    monkeypatch.setattr(checklist, "launch", lambda *a, **k: pytest.fail("nothing fits a 50 s budget"))
    argv = ["gpu_checklist.py", "--out", str(tmp_path), "--checks", "sdpa,compiled", "--budget", "50"]
    monkeypatch.setattr(sys, "argv", argv)
    checklist.main()
    out = capsys.readouterr().out
    assert "sdpa: skipped, " in out and "s of the budget left" in out and "compiled: skipped" in out
    written = json.loads((tmp_path / "gpu_checklist_cuda.json").read_text())
    assert written["checks"] == {} and set(written["skipped"]) == {"sdpa", "compiled"}
    assert set(checklist.summary(written)["skipped"]) == {"sdpa", "compiled"}


def test_a_generation_speed_row_says_how_many_samples_each_median_is_over(bench):
    speed = bench("generation_speed")
    mixed = {"samples": {"a": [1, 2, 3, 4], "b": [1] * 4, "b_stop": [1] * 4, "c": [1, 2], "c_before": [1, 2]}}
    assert speed.medians_of(mixed) == "medians of 4 for (a)/(b)/(b+stop), of 2 for (c)/(c-before)"
    assert speed.medians_of({"samples": {"a": [1, 2, 3], "b": [1] * 3, "b_stop": [1] * 3, "c": [1] * 3}}) == (
        "median of 3"
    )
    assert speed.medians_of({}) == "medians"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--quick"], "--out DIR is needed"),
        (["--quick", "--out", "OUT", "--budget", "nan"], "--budget nan: give a positive number of seconds"),
        (["--quick", "--out", "OUT", "--budget", "inf"], "--budget inf: give a positive number of seconds"),
        (["--quick", "--out", "OUT", "--checks", "sdpa,typo"], "--checks: no check named 'typo'; use sdpa"),
        (["--out", "OUT", "--checks", "step-qwen2.5-3bx"], "no check named 'step-qwen2.5-3bx'"),
        (["--out", "OUT", "--checks", "qwen2.5-3b"], "no check named 'qwen2.5-3b'"),
        (["--readme", "missing.json"], "--readme missing.json: cannot read its results (FileNotFoundError"),
    ],
)
def test_the_checklists_options_are_checked_before_anything_runs(bench, tmp_path, monkeypatch, capsys, argv, message):
    checklist = bench("gpu_checklist")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(checklist, "launch", lambda *a, **k: pytest.fail("nothing may run"))
    monkeypatch.setattr(sys, "argv", ["gpu_checklist.py", *argv])
    with pytest.raises(SystemExit) as stop:
        checklist.main()
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "OUT").exists()


def test_a_failed_download_leaves_the_wheels_there_were(carry, tmp_path, monkeypatch):
    wheels = tmp_path / ".whl"
    wheels.mkdir()
    (wheels / "kept-1.0-py3-none-any.whl").write_bytes(b"wheel")
    monkeypatch.setattr(carry, "ROOT", tmp_path)
    monkeypatch.setattr(carry, "exclude", lambda root=None: None)
    monkeypatch.setattr(carry, "pinned", lambda: ["transformers==0"])

    def failing(command, *a, **k):
        partial = tmp_path / ".whl.partial"
        assert str(partial) in command  # downloaded aside, not into .whl/
        partial.mkdir(parents=True, exist_ok=True)
        (partial / "half.whl").write_bytes(b"")
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(carry.subprocess, "run", failing)
    monkeypatch.setattr(sys, "argv", ["gpu_carry.py"])
    with pytest.raises(SystemExit, match=r"\.whl/ is left as it was"):
        carry.main()
    assert [p.name for p in wheels.iterdir()] == ["kept-1.0-py3-none-any.whl"]
    assert not (tmp_path / ".whl.partial").exists()
    fresh = tmp_path / ".whl.partial"
    fresh.mkdir()
    (fresh / "new-2.0-py3-none-any.whl").write_bytes(b"wheel")
    carry.swap_in(fresh, wheels, tmp_path / ".whl.old")
    assert [p.name for p in wheels.iterdir()] == ["new-2.0-py3-none-any.whl"]  # one version of each, the new one
    assert not fresh.exists() and not (tmp_path / ".whl.old").exists()
    fresh.mkdir()
    (fresh / "newer-3.0-py3-none-any.whl").write_bytes(b"wheel")
    rename = type(fresh).rename

    def failing_rename(self, target):
        if self == fresh:
            raise OSError(18, "Invalid cross-device link")
        return rename(self, target)

    monkeypatch.setattr(type(fresh), "rename", failing_rename)
    with pytest.raises(OSError):
        carry.swap_in(fresh, wheels, tmp_path / ".whl.old")
    assert [p.name for p in wheels.iterdir()] == ["new-2.0-py3-none-any.whl"]  # the set there was, kept


def test_a_cuda_device_with_an_index_is_synchronised_like_cuda(bench, monkeypatch):
    """`--device cuda:0` must time with CUDA synchronisation too, or the figures are kernel launches only."""
    import torch

    common = bench("_common")  # the one synchronizer sdpa_shapes, gpu_timing and compiled_generation time with
    waited = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: waited.append(device))
    common.synchronizer("cuda:1")()
    common.synchronizer("cuda")()
    common.synchronizer("cpu")()
    assert waited == [torch.device("cuda:1"), torch.device("cuda")]  # the device timed, not the current one


def test_quick_runs_each_named_check_and_any_step_as_the_tiny_step_once(bench, tmp_path, monkeypatch):
    checklist = bench("gpu_checklist")
    launched, works = [], []
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # TMPDIR, as tempfile read it
    running = tmp_path / "gpu-checklist-sdpa"  # another checklist's check, running now
    running.mkdir()
    (running / "result.json").write_text("{}")

    def fake_launch(argv, cwd, timeout, env=None):
        launched.append(argv[argv.index("--child") + 1])
        works.append(argv[argv.index("--work") + 1])
        return {"exit_code": 0, "output_tail": ""}

    monkeypatch.setattr(checklist, "missing_imports", lambda: [])
    monkeypatch.setattr(checklist, "launch", fake_launch)
    out = tmp_path / "out"
    argv = ["gpu_checklist.py", "--quick", "--out", str(out), "--checks", "sdpa,step-qwen2.5-3b,step-qwen2.5-7b"]
    monkeypatch.setattr(sys, "argv", argv)
    checklist.main()
    assert launched == ["sdpa", "step-qwen2-tiny"]
    assert (running / "result.json").exists() and str(running) not in works  # its folder is its own, left alone
    assert all(w.startswith(str(tmp_path)) and not Path(w).exists() for w in works)  # under TMPDIR, removed after

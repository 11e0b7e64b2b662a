"""The planner's premises about what the optimizer step and the backward hold, measured on CPU in a fresh process
(the resident set's high-water mark; glibc's mmap threshold fixed so that freed tensors leave the resident set):

- transformers' default optimizer, which inspo's GRPO config keeps, is fused AdamW, which updates in place: no
  parameter-sized temporaries (foreach AdamW takes one float32 copy of the parameters);
- an embedding's backward makes a dense vocab x hidden gradient before adding it to an existing .grad."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MEASURE = r"""
import json, sys, torch
torch.set_num_threads(1)

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024

def growth(fn):
    before = status("VmRSS")
    open("/proc/self/clear_refs", "w").write("5")  # resets VmHWM to the current resident set
    fn()
    return (status("VmHWM") - before) / 2**20

mode, out = sys.argv[1], {}
if mode in ("fused", "foreach"):
    params = [torch.nn.Parameter(torch.randn(4_000_000)) for _ in range(10)]  # 40M float32: 153 MiB
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-3, fused=mode == "fused", foreach=mode == "foreach")
    opt.step()  # Adam's state exists from here on
    out = {"step_mib": growth(opt.step), "parameters_mib": 40_000_000 * 4 / 2**20}
else:
    embedding = torch.nn.Embedding(40_000, 1_000)  # 153 MiB
    ids = torch.randint(0, 40_000, (64,))
    embedding(ids).sum().backward()  # .grad exists from here on
    out = {"backward_mib": growth(lambda: embedding(ids).sum().backward()), "weight_mib": 40_000_000 * 4 / 2**20}
print(json.dumps(out))
"""


def measure(mode: str) -> dict:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "65536"}
    done = subprocess.run([sys.executable, "-c", MEASURE, mode], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's /proc")


def test_fused_adamw_steps_in_place_and_foreach_takes_a_float32_copy():
    fused, foreach = measure("fused"), measure("foreach")
    assert fused["step_mib"] < 0.1 * fused["parameters_mib"]
    assert foreach["step_mib"] == pytest.approx(foreach["parameters_mib"], rel=0.15)


def test_an_embeddings_backward_makes_a_dense_gradient_before_accumulating_it():
    result = measure("embedding")
    assert result["backward_mib"] == pytest.approx(result["weight_mib"], rel=0.15)


def test_the_trainer_builds_fused_adamw(repo_root):
    """What the planner counts for the optimizer step rests on this: inspo hands TRL no `optim`, so transformers'
    default on torch >= 2.8 applies; a change of either would change the optimizer step's memory."""
    from inspo_cli.config import load_recipe
    from inspo_cli.config.batch_plan import batch_plan
    from inspo_cli.training.grpo import grpo_config

    for name in ("qwen2.5-3b/inspo", "qwen2.5-7b/search-r1"):
        recipe = load_recipe(repo_root / f"recipes/{name}.yaml", check_paths=False)
        config = grpo_config(recipe, batch_plan(recipe, 8), repo_root / "runs/x", device="cpu")
        assert str(config.optim) in ("adamw_torch_fused", "OptimizerNames.ADAMW_TORCH_FUSED"), config.optim

"""The planner's premises about what the optimizer step and the backward hold, measured on CPU in a fresh process
(the resident set's high-water mark; glibc's mmap threshold fixed so that freed tensors leave the resident set):

- transformers' default optimizer, which inspo's GRPO config keeps, is fused AdamW, which updates in place: no
  parameter-sized temporaries (foreach AdamW takes one float32 copy of the parameters);
- at the end of the backward, a tied input embedding and LM head hold three vocab x hidden gradients (the head's,
  the embedding's dense one and their sum), an untied embedding one."""

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
else:  # an input embedding and an LM head over 64 tokens, the head's weight the embedding's (tied) or its own
    embedding = torch.nn.Embedding(40_000, 1_000)  # 153 MiB
    head = embedding.weight if mode == "tied" else torch.nn.Parameter(torch.randn(40_000, 1_000) * 0.01)
    ids = torch.randint(0, 40_000, (64,))

    def backward():
        (embedding(ids) @ head.T).logsumexp(-1).sum().backward()

    backward()  # .grad exists from here on, as in a second micro-batch
    out = {"backward_mib": growth(backward), "weight_mib": 40_000_000 * 4 / 2**20}
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


def test_a_tied_embedding_holds_three_gradients_at_the_end_of_the_backward_an_untied_one_no_more_than_one():
    """Tied: the head's gradient waits for the embedding's dense one, and their sum is a third (then added to .grad);
    untied, each gradient is added to its .grad as it comes, so one vocab x hidden gradient at a time."""
    tied, untied = measure("tied"), measure("untied")
    assert tied["backward_mib"] == pytest.approx(3 * tied["weight_mib"], rel=0.15)
    assert untied["backward_mib"] == pytest.approx(untied["weight_mib"], rel=0.25)


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


def test_the_plan_counts_what_was_measured_here():
    """No temporaries for fused AdamW (DeepSpeed's float32 gradient copy under ZeRO-3), and a tied embedding's three
    gradients at the backward's end where they outweigh the activations and LM head of its start."""
    from inspo_cli.config import load_recipe
    from inspo_cli.config.architecture import published_architecture
    from inspo_cli.config.resource_plan import Lengths, resource_plan

    arch = published_architecture("Qwen/Qwen2.5-3B")
    plans = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch).launches
    step = plans["fsdp2"].phases["optimizer step"]
    copy = "float32 gradient copy (DeepSpeed)"
    assert step[copy] == 0 and "activations" not in step  # fused AdamW steps in place
    assert plans["zero3"].phases["optimizer step"][copy] == arch.parameters() * 4 / 8  # DeepSpeed's float32 copy
    assert plans["one-gpu"].phases["optimizer step"][copy] == 0
    # the 3B's tied embedding: at its bound the activations outweigh the three gradients the backward's end holds
    end = "tied embedding gradients (end of backward)"
    assert plans["one-gpu"].phases["update"][end] == 0
    short = resource_plan(
        load_recipe("qwen2.5-3b/search-r1"), arch, lengths=Lengths(prompt=1, observation=1, trajectory=1)
    ).launches
    update = short["one-gpu"].phases["update"]
    assert update[end] + update["activations"] + update["LM head (chunked log-probs)"] == pytest.approx(
        3 * arch.vocab * arch.hidden * 4
    )
    assert short["one-gpu+lora"].phases["update"][end] == 0  # the embedding is frozen
    fsdp2 = short["fsdp2"].phases["update"]  # sharded, the gradients are in the compute dtype (bf16)
    assert fsdp2[end] + fsdp2["activations"] + fsdp2["LM head (chunked log-probs)"] == pytest.approx(
        3 * arch.vocab * arch.hidden * 2
    )
    untied = resource_plan(load_recipe("qwen2.5-7b/search-r1"), published_architecture("Qwen/Qwen2.5-7B")).launches
    assert all(p.phases["update"][end] == 0 for p in untied.values())

"""`inspo recipe plan`: the model's size from its config alone, and memory figures held against what was measured.

The anchors (each test says what it compares and the tolerance it allows):
1. H100, the 3B checklist step before the bf16 generation copy: allocator peak 24.5 GiB (still generating);
2. H200, 40 trajectories: 47,591 MiB in nvidia-smi as the update began
   (bench/results/gpu_checklist_cuda_2026-11-27.json);
3. H200, the 3B checklist step with the bf16 generation copy: 23.57 GiB loading, 25.19 GiB generating;
4. Search-R1's 7B GRPO at "just below 80GB" per GPU on 8 x 80 GB (Search-R1 issue #109, train_grpo.sh);
5. CPU: bench/resource_plan_check.py's measured peak (bench/results/resource_plan_check.json), within 20%.
"""

from __future__ import annotations

import json
import math

import pytest
from helpers.cli_helpers import assert_one_line_error, invoke

from inspo_cli.config import bundled_recipes, load_recipe
from inspo_cli.config.architecture import architecture_from_config, published_architecture
from inspo_cli.config.resource_fit import refusal
from inspo_cli.config.resource_plan import (
    CUDA_CONTEXT_GIB,
    FRAGMENTATION,
    GiB,
    Hardware,
    Lengths,
    Timing,
    resource_plan,
)
from inspo_cli.errors import InspoError
from inspo_cli.policy.models import model_architecture

H100_GIB = 81559 / 1024  # what an "80GB" H100 reports
CHECKLIST_STEP = [
    "model.backend=transformers",
    "training.batch_size=2",
    "training.group_size=4",
    "training.mini_batch_trajectories=8",
]
# The checklist's random policy writes no valid tag: every turn runs its 500 tokens and gets the corrective message
# (about 40 tokens) after a first prompt of about 300 tokens.
CHECKLIST_LENGTHS = Lengths(prompt=300, observation=40)


def _allocated(terms: dict, *leave_out: str) -> float:
    """GiB torch's allocator counts: every term but the CUDA context and the allocator's reserve."""
    return sum(v for k, v in terms.items() if not k.startswith("overhead") and k not in leave_out) / GiB


def test_parameter_counts_match_the_published_models():
    assert published_architecture("Qwen/Qwen2.5-3B").parameters() == 3_085_938_688  # "3.09B"
    assert published_architecture("Qwen/Qwen2.5-7B-Instruct").parameters() == 7_615_616_512  # "7.62B"
    assert published_architecture("gemma3-270m").parameters() == 268_098_176


def test_parameter_count_matches_the_packaged_smollm2_and_the_tiny_model_as_loaded(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from inspo_cli.config import ModelConfig
    from inspo_cli.policy.models import load_model

    tiny = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model_architecture(str(tiny_model_dir)).parameters() == sum(p.numel() for p in tiny.parameters())
    smol, _ = load_model(ModelConfig(name_or_path="smollm2-135m-instruct", dtype="float32"), "cpu")
    assert model_architecture("smollm2-135m-instruct").parameters() == sum(p.numel() for p in smol.parameters())
    assert published_architecture("smollm2-135m-instruct").parameters() == 134_515_008


def test_qwen2_biases_and_untied_embeddings_count():
    qwen = published_architecture("Qwen/Qwen2.5-7B")
    no_bias = architecture_from_config(
        {
            **json.loads(json.dumps(qwen.__dict__)),
            "model_type": "mistral",
            "hidden_size": qwen.hidden,
            "intermediate_size": qwen.intermediate,
            "num_hidden_layers": qwen.layers,
            "num_attention_heads": qwen.heads,
            "num_key_value_heads": qwen.kv_heads,
            "vocab_size": qwen.vocab,
            "tie_word_embeddings": True,
        },
        "x",
    )
    biases = qwen.layers * (qwen.heads + 2 * qwen.kv_heads) * qwen.head_dim
    assert qwen.parameters() - no_bias.parameters() == biases + qwen.vocab * qwen.hidden


def test_anchor_h100_3b_step_allocator_peak():
    """Measured: 24.5 GiB allocator peak, the check cut off while generating, before the bf16 generation copy.
    Predicted: the larger of the load (float32 policy + the reference loaded in float32, then cast) and the first
    step's generation (no Adam state yet), without the context and reserve torch does not count. Within 10%: the
    lengths are the checklist's (a random policy runs every turn to its limit), the rest is arithmetic."""
    recipe = load_recipe("recipes/qwen2.5-3b/search-r1.yaml", CHECKLIST_STEP)
    plan = resource_plan(
        recipe,
        published_architecture("Qwen/Qwen2.5-3B"),
        Hardware(1, H100_GIB),
        CHECKLIST_LENGTHS,
        generation_copy=False,
    ).launches["one-gpu"]
    load, generation = _allocated(plan.phases["load"]), _allocated(plan.phases["generation"], "Adam state")
    assert generation < load  # the peak is the reference's float32 load, not generation
    assert load == pytest.approx(24.5, rel=0.10)
    assert plan.generation_batch == 8


def test_anchor_h200_3b_step_load_and_rollout_with_the_generation_copy():
    """H200, 2026-11-28 (bench/results/gpu_checklist_cuda.json, step-qwen2.5-3b-again-265s), the allocator sampled
    every 10 s: a 23.57 GiB peak while loading (the reference loaded in float32, then cast), then 25.19 GiB by the
    fifth turn of the first step's rollout (the bf16 generation copy, contexts of about 2,700 tokens), when the check
    was cut off. Predicted: the load and the first step's generation (no Adam state yet), without the context and
    reserve torch does not count. Within 5%."""
    recipe = load_recipe("recipes/qwen2.5-3b/search-r1.yaml", CHECKLIST_STEP)
    plan = resource_plan(
        recipe, published_architecture("Qwen/Qwen2.5-3B"), Hardware(1, 143771 / 1024), CHECKLIST_LENGTHS
    ).launches["one-gpu"]
    assert _allocated(plan.phases["load"]) == pytest.approx(23.57, rel=0.05)
    assert _allocated(plan.phases["generation"], "Adam state") == pytest.approx(25.19, rel=0.05)


def test_anchor_h200_update_start_in_nvidia_smi():
    """Measured: 47,591 MiB in nvidia-smi (every 20 s) as scoring and the first update of 40 trajectories (5
    micro-batches of 8) began. Predicted: the first update's phase (Adam's state comes at the optimizer step after the
    5th micro-batch) with the context and reserve, which nvidia-smi sees. Within 15%: one sample every 20 s."""
    recipe = load_recipe(
        "recipes/qwen2.5-3b/search-r1.yaml",
        [
            "model.backend=transformers",
            "training.batch_size=8",
            "training.group_size=5",
            "training.mini_batch_trajectories=40",
        ],
    )
    plan = resource_plan(
        recipe, published_architecture("Qwen/Qwen2.5-3B"), Hardware(1, 141.0), CHECKLIST_LENGTHS, generation_copy=False
    ).launches["one-gpu"]
    update = _allocated(plan.phases["update"], "Adam state")
    seen = update * (1 + FRAGMENTATION) + CUDA_CONTEXT_GIB
    assert plan.generation_batch == 40
    assert seen == pytest.approx(47591 / 1024, rel=0.15)


def test_anchor_search_r1_7b_on_8_h100s():
    """Search-R1 issue #109: train_grpo.sh's 7B peaks "just below 80GB" per GPU on 8 x 80 GB. Its settings in our terms:
    FSDP2 over 8 GPUs, vLLM colocated at 0.6, 8 trajectories per GPU per pass (ppo_micro_batch_size 64 / 8), sequences
    of at most 4,096 + 500 tokens (max_prompt_length + max_response_length), gradient checkpointing; its FSDP offloads
    parameters, gradients, optimizer and reference to the CPU, so those terms are left out here. Compared: the
    planner's update peak within [85%, 105%] of the card's 79.6 GiB ("just below" the card's memory)."""
    recipe = load_recipe("recipes/qwen2.5-7b/search-r1.yaml", ["model.vllm_gpu_memory_utilization=0.6"])
    plan = resource_plan(
        recipe, published_architecture("Qwen/Qwen2.5-7B"), Hardware(8, H100_GIB), Lengths(trajectory=4096 + 500)
    ).launches["fsdp2"]
    offloaded = ("weights", "gradients", "Adam state", "KL reference")
    on_gpu = _allocated(plan.phases["update"], *offloaded)
    peak = on_gpu * (1 + FRAGMENTATION) + CUDA_CONTEXT_GIB
    assert 0.85 * H100_GIB <= peak <= 1.05 * H100_GIB


def test_anchor_cpu_measured_peak_within_20_percent(repo_root, tmp_path):
    """bench/resource_plan_check.py's measured growth of the resident set over two CPU training steps of a 102M model,
    against the planner's peak for its recipe, computed here again: within 20% (the issue's tolerance; RSS counts
    the allocator's and the libraries' own memory, which the planner states as one constant)."""
    import sys

    sys.path.insert(0, str(repo_root / "bench"))
    from resource_plan_check import SHAPE, recipe_text

    result = json.loads((repo_root / "bench/results/resource_plan_check.json").read_text())
    assert result["exit_code"] == 0 and result["steps"] == 2
    (tmp_path / "config.json").write_text(json.dumps({**SHAPE, "model_type": "qwen2", "vocab_size": 49152}))
    (tmp_path / "recipe.yaml").write_text(recipe_text(tmp_path))
    plan = resource_plan(
        load_recipe(tmp_path / "recipe.yaml"),
        model_architecture(str(tmp_path)),
        Hardware(1, 1e6, "cpu"),
        launches=("one-gpu",),
    )
    assert plan.parameters == result["parameters"]
    assert plan.launches["one-gpu"].peak_gib == pytest.approx(result["predicted_peak_gib"])
    assert plan.launches["one-gpu"].peak_gib == pytest.approx(result["measured_peak_growth_gib"], rel=0.20)
    # the same phase: the measured peak was sampled in the backward of the second step, Adam's state held
    assert plan.launches["one-gpu"].peak_phase == "update" == result["predicted_peak_phase"]
    assert result["sampled_peak_steps_before"] == 1
    assert "backward" in result["sampled_peak_at"][-1]


def test_phases_hold_what_each_launch_holds():
    recipe = load_recipe("recipes/qwen2.5-3b/search-r1.yaml", ["model.backend=transformers"])
    params = published_architecture("Qwen/Qwen2.5-3B").parameters()
    plans = resource_plan(recipe, published_architecture("Qwen/Qwen2.5-3B"), Hardware(8, 80)).launches
    one, ddp, zero3, fsdp2, lora = (plans[k] for k in ("one-gpu", "ddp", "zero3", "fsdp2", "one-gpu+lora"))
    assert one.phases["update"]["weights"] == params * 4  # float32 masters under bf16 autocast
    assert one.phases["generation"]["generation copy (bf16)"] == params * 2
    assert one.phases["generation"]["KL reference"] == params * 2 and one.phases["load"]["KL reference"] > params * 4
    assert one.phases["update"]["Adam state"] == params * 8 and "gradients" not in one.phases["generation"]
    assert ddp.phases["update"]["gradients"] == 2 * params * 4  # DDP's buckets beside the gradients
    assert (
        zero3.phases["update"]["weights"] == params * 6 / 8 and zero3.phases["update"]["KL reference"] == params * 2 / 8
    )
    assert fsdp2.phases["update"]["KL reference"] == params * 4 / 8  # FSDP shards it in float32
    copy = "generation copy (bf16)"
    assert zero3.phases["generation"][copy] == 0 == fsdp2.phases["generation"][copy]
    assert "generation copy (bf16)" not in one.phases["update"]  # freed when the rollout ends
    assert lora.phases["update"]["KL reference"] == 0 and lora.phases["update"]["weights"] < params * 2.1
    # auto generation batch on a GPU: as many of the step's 320 (2,560) rows as fit (the anchors: the whole share)
    assert 1 < zero3.generation_batch < 320 and 1 < one.generation_batch < 320
    assert max(p.total("generation") for p in (one, zero3)) <= 80 * GiB


def test_activations_follow_the_residual_streams_dtype():
    """Over float32 masters (one GPU, DDP) the residual stream is float32; ZeRO-3 and FSDP2 compute in bf16."""
    from inspo_cli.config.resource_plan import activation_bytes

    arch = published_architecture("Qwen/Qwen2.5-3B")
    plans = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch).launches
    tokens = 8 * 8192
    assert plans["one-gpu"].phases["update"]["activations"] == activation_bytes(arch, tokens, 4, 2, False)[0]
    assert plans["fsdp2"].phases["update"]["activations"] == activation_bytes(arch, tokens, 2, 2, False)[0]
    step = plans["fsdp2"].phases["optimizer step"]
    assert "activations" not in step  # freed by then (the step itself: test_optimizer_memory.py)


def test_no_kl_no_reference():
    plans = resource_plan(
        load_recipe("qwen2.5-3b/search-r1", ["training.kl_beta=0"]), published_architecture("Qwen/Qwen2.5-3B")
    ).launches
    assert all(terms["KL reference"] == 0 for p in plans.values() for terms in p.phases.values())


def test_checkpointing_lowers_activations_and_vllm_takes_its_share():
    arch = published_architecture("Qwen/Qwen2.5-3B")
    on = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch).launches["fsdp2"]
    off = resource_plan(load_recipe("qwen2.5-3b/search-r1", ["model.gradient_checkpointing=false"]), arch).launches[
        "fsdp2"
    ]
    assert on.phases["update"]["activations"] == off.activations_other < off.phases["update"]["activations"] / 3
    assert on.phases["generation"]["vLLM share"] == 0.4 * 80 * GiB and on.phases["generation"]["KV cache"] == 0


def test_generation_batch_size_field_is_read_when_the_recipe_has_it():
    recipe = load_recipe("qwen2.5-3b/search-r1", ["model.backend=transformers"])
    arch = published_architecture("Qwen/Qwen2.5-3B")
    auto = resource_plan(recipe, arch).launches["fsdp2"]
    recipe.rollout.generation_batch_size = 64  # (a recipe from before the field has none: auto)
    chosen = resource_plan(recipe, arch).launches["fsdp2"]
    assert (auto.generation_batch, chosen.generation_batch) == (73, 64)  # auto: what 80 GiB holds of 320
    assert chosen.phases["generation"]["KV cache"] == pytest.approx(auto.phases["generation"]["KV cache"] * 64 / 73)
    recipe.rollout.generation_batch_size = 1000
    assert resource_plan(recipe, arch).launches["fsdp2"].generation_batch == 320  # at most the share


def test_step_tokens_and_time_from_the_stated_constants():
    arch = published_architecture("Qwen/Qwen2.5-3B")
    plan = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch, timing=Timing(10.0, 1000.0))
    assert plan.policy_tokens_per_step == 512 * 5 * 5 * 500 and plan.timed == "ZeRO-3 over 8 GPUs"
    assert plan.seconds["update"] == pytest.approx(2560 / 8 * 8192 / 1000)
    assert plan.seconds["generation"] == pytest.approx(5 * 500 * 10.0 / 1000)  # vLLM: all 320 rows in one call
    hf = resource_plan(
        load_recipe("qwen2.5-3b/search-r1", ["model.backend=transformers"]), arch, timing=Timing(10.0, 1000.0)
    )
    calls = math.ceil(320 / hf.launches["zero3"].generation_batch)
    assert calls > 1 and hf.seconds["generation"] == pytest.approx(calls * 5 * 500 * 10.0 / 1000)


def test_the_7b_recipe_on_one_gpu_is_refused_with_the_numbers_and_a_launch_that_fits():
    result = invoke("recipe", "plan", "qwen2.5-7b/search-r1", "--gpus", 1, "--launch", "one-gpu")
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    assert "GiB per process as one GPU" in line and "1 GPU of 80 GiB" in line and "fits: " in line
    assert "over 8 GPUs" in line and "weights" in result.stdout and "fits" in result.stdout


def test_the_7b_recipe_on_a_node_is_refused_at_its_bound_and_told_the_micro_batch_that_fits():
    result = invoke("recipe", "plan", "qwen2.5-7b/search-r1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "8 GPUs of 80 GiB" in result.stderr and "training.micro_batch_size=4" in result.stderr
    assert invoke("recipe", "plan", "qwen2.5-7b/search-r1", "--trajectory-tokens", 6144).exit_code == 0


def test_the_bound_is_the_prompt_and_search_r1s_cap_on_the_response():
    """7 turns of 500 and 6 observations of 500 would make 6,500 response tokens; Search-R1 keeps 4,096 of them."""
    from inspo_cli.config.resource_plan import plan_lengths

    recipe = load_recipe("recipes/qwen2.5-7b/search-r1.yaml", check_paths=False)
    assert plan_lengths(recipe.rollout, Lengths())["trajectory"] == 4096 + 4096
    recipe.rollout.max_response_tokens = 100_000  # no cap: max_total_tokens bounds it
    assert plan_lengths(recipe.rollout, Lengths())["trajectory"] == 10_240
    recipe.rollout.max_response_tokens = 1000
    assert plan_lengths(recipe.rollout, Lengths(prompt=300))["trajectory"] == 1300


def test_json_gives_the_same_numbers():
    result = invoke("recipe", "plan", "qwen2.5-3b/search-r1", "--json", "--launch", "fsdp2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    fsdp2 = data["launches"]["fsdp2"]
    assert fsdp2["fits"] and fsdp2["peak_gib"] == pytest.approx(max(fsdp2["totals_gib"].values()))
    assert data["model"]["parameters"] == 3_085_938_688 and data["refusal"] is None


def test_vllm_generates_the_whole_share_whatever_generation_batch_size_says():
    """The field is the transformers backend's; vLLM never reads it, so it changes neither its batch nor its time."""
    arch = published_architecture("Qwen/Qwen2.5-3B")
    shipped = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch)
    capped = resource_plan(load_recipe("qwen2.5-3b/search-r1", ["rollout.generation_batch_size=8"]), arch)
    assert capped.launches["zero3"].generation_batch == shipped.launches["zero3"].generation_batch == 320
    assert capped.seconds == shipped.seconds


def test_the_response_cap_bounds_the_decode_steps_and_policy_tokens():
    arch = published_architecture("Qwen/Qwen2.5-3B")
    timing = Timing(10.0, 1000.0)
    capped = resource_plan(
        load_recipe("qwen2.5-3b/search-r1", ["rollout.max_response_tokens=600"]), arch, timing=timing
    )
    assert capped.lengths["completion"] == 600
    assert capped.policy_tokens_per_step == 512 * 5 * 600  # not 5 turns of 500
    assert capped.seconds["generation"] == pytest.approx(600 * 10.0 / 1000)
    narrowed = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch, Hardware(), Lengths(trajectory=4200), timing)
    assert narrowed.policy_tokens_per_step == 512 * 5 * 5 * 500  # a short prompt leaves every turn its room
    given = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch, Hardware(), Lengths(4096, None, 4200), timing)
    assert given.policy_tokens_per_step == 512 * 5 * 104  # the prompt's length given: 104 tokens of room
    out = invoke("recipe", "plan", "qwen2.5-3b/search-r1", "--prompt-tokens", "4096", "--trajectory-tokens", "4200")
    assert "at most 266,240 (every trajectory decoding 104 tokens: the response cap" in out.stdout


@pytest.mark.parametrize("name", sorted(bundled_recipes()))
def test_every_shipped_recipe_gets_a_plan(name):
    result = invoke("recipe", "plan", name)
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output and "GiB per process" in result.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--gpus", "0"], "--gpus 0"),
        (["--gpu-memory", "-1"], "--gpu-memory -1"),
        (["--gpu-memory", "nan"], "--gpu-memory nan"),
        (["--launch", "tp"], "--launch tp"),
        (["--decode-ms", "inf"], "--decode-ms inf"),
        (["--trajectory-tokens", "0"], "--trajectory-tokens 0"),
        # lengths that contradict the prompt, and values past any hardware (they overflowed to inf)
        (["--trajectory-tokens", "4096"], "--trajectory-tokens 4096: not longer than the prompt (4096 tokens)"),
        (["--prompt-tokens", "100", "--trajectory-tokens", "50"], "give at least 101"),
        (["--gpu-memory", "1e308"], "--gpu-memory 1e+308: give at most 100000"),
        (["--decode-ms", "1e308"], "--decode-ms 1e+308: give at most 1e+06"),
        (["--update-tokens-per-s", "1e300"], "give at most 1e+12"),
        (["--update-tokens-per-s", "1e-306"], "--update-tokens-per-s 1e-306: give at least 1 token per second"),
    ],
)
def test_bad_options_are_one_line_errors(args, fragment):
    assert_one_line_error(invoke("recipe", "plan", "qwen2.5-3b/search-r1", *args), fragment)


def test_an_unknown_hub_model_names_the_fix(tmp_path):
    with pytest.raises(InspoError, match="some/model.*config.json"):
        model_architecture("some/model")
    (tmp_path / "config.json").write_text("[1]")
    with pytest.raises(InspoError, match="JSON object"):
        model_architecture(str(tmp_path))


@pytest.mark.parametrize(
    "text, fragment",
    [
        (
            '{"hidden_size": 1e308, "num_hidden_layers": 2, "num_attention_heads": 1, "intermediate_size": 1, '
            '"vocab_size": 1}',
            "hidden 100000... (309 digits) is no model's size",
        ),
        (
            '{"hidden_size": -4, "num_hidden_layers": 2, "num_attention_heads": 1, '
            '"intermediate_size": 1, "vocab_size": 1}',
            "hidden -4 is no model's size",
        ),
        ('{"hidden_size": ' + "9" * 5000 + "}", "not JSON"),
        ('{"hidden_size": "x"}', "not a decoder config"),
    ],
)
def test_a_damaged_config_is_one_line_on_the_command_line(tmp_path, text, fragment):
    (tmp_path / "config.json").write_text(text)
    result = invoke("recipe", "plan", "qwen2.5-3b/search-r1", "--set", f"model.name_or_path={tmp_path}")
    assert_one_line_error(result, fragment)


def test_adapters_that_name_each_other_as_base_are_refused(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for adapter, base in ((first, second), (second, first)):
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    with pytest.raises(InspoError, match="leads back to an adapter"):
        model_architecture(str(first))


def test_refusal_is_none_when_a_requested_launch_fits():
    plan = resource_plan(load_recipe("qwen2.5-3b/search-r1"), published_architecture("Qwen/Qwen2.5-3B"))
    assert refusal(plan, ("fsdp2",)) is None
    assert "needs" in refusal(plan, ("one-gpu",)) and math.isfinite(plan.launches["one-gpu"].peak_gib)


def test_the_generation_copy_and_zero3s_gather_appear_only_where_the_code_makes_them():
    """The bf16 copy is made for float32 masters on one GPU or DDP, not for LoRA (its base is bf16 already); ZeRO-3
    gathers every parameter for generation, which its working set holds (one row per call, so the cache is small)."""
    recipe = load_recipe("qwen2.5-3b/search-r1", ["model.backend=transformers", "rollout.generation_batch_size=1"])
    architecture = published_architecture("Qwen/Qwen2.5-3B")
    plan = resource_plan(recipe, architecture)
    params = architecture.parameters()
    assert plan.launches["one-gpu"].phases["generation"]["generation copy (bf16)"] == params * 2
    assert plan.launches["one-gpu+lora"].phases["generation"]["generation copy (bf16)"] == 0
    assert plan.launches["zero3"].phases["generation"]["generation working set"] >= params * 2
    assert plan.launches["fsdp2"].phases["generation"]["generation working set"] < params * 2


def test_a_zero_dimension_is_no_model(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "hidden_size": 64,
                "num_hidden_layers": 0,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 100,
            }
        )
    )
    with pytest.raises(InspoError, match="layers 0 is no model's size"):
        model_architecture(str(tmp_path))


def test_when_nothing_fits_the_advice_is_for_the_phase_the_peak_is_in():
    arch = published_architecture("Qwen/Qwen2.5-3B")
    plan = resource_plan(load_recipe("qwen2.5-3b/search-r1"), arch, Hardware(2, 0.5))
    line = refusal(plan, ("zero3",))
    assert plan.launches["zero3"].peak_phase == "update" and line.endswith(
        "fits: nothing planned; shorten rollout.max_total_tokens, or use larger GPUs"
    )
    recipe = load_recipe("qwen2.5-3b/search-r1", ["model.backend=transformers", "rollout.generation_batch_size=320"])
    generating = resource_plan(recipe, arch, Hardware(8, 80))
    assert generating.launches["zero3"].peak_phase == "generation"
    assert "lower rollout.generation_batch_size (transformers backend)" in refusal(generating, ("zero3",))


@pytest.mark.parametrize("name", ["qwen2.5-3b/sft", "qwen2.5-3b/rejection-sampling"])
def test_a_recipe_that_does_not_generate_while_training_shows_no_generation_figures(name):
    out = invoke("recipe", "plan", name).stdout
    assert "no generation while training" in out and "policy tokens per step" not in out
    assert "generation batch per process" not in out and "update " in out
    some_cannot_run = invoke("recipe", "plan", "qwen2.5-3b/search-r1", "--gpus", "3").stdout  # DDP over 3 cannot
    assert "cannot run this recipe" in some_cannot_run
    assert "policy tokens per step: at most 6,400,000 (every trajectory's every turn at its limit)" in some_cannot_run


def test_a_launch_that_cannot_run_is_refused_in_one_line_when_nothing_fits():
    result = invoke("recipe", "plan", "qwen2.5-3b/search-r1", "--launch", "ddp", "--gpus", "3", "--gpu-memory", "1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "cannot run as DDP over 3 GPUs" in result.stderr
    assert "nothing planned; shorten rollout.max_total_tokens" in result.stderr

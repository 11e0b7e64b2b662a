"""What a recipe needs per process, by launch and phase, before anything is loaded: `inspo recipe plan`.

    plan = resource_plan(recipe, architecture, Hardware(gpus=8, gpu_gib=80))
    plan.launches["fsdp2"].peak_gib, plan.launches["fsdp2"].fits

Every figure is arithmetic on the model's shape and the recipe's numbers, with the constants below stated once.
Where an amount depends on what the policy writes (trajectory lengths), the plan takes the recipe's *bound*: every
trajectory as long as the recipe allows (`Lengths` narrows it to measured lengths). Three phases per launch:

- load: the policy, and the KL reference as TRL loads it (in the policy's loading dtype: float32 under mixed
  precision) before a one-process or DDP launch casts it to bf16 (training/trl_patches.py,
  `_hold_reference_in_compute_dtype`);
- generation: one `generate` call of the transformers backend at the last turn (the widest contexts), or vLLM's share;
- update: the forward and backward of one micro-batch;
- optimizer step: fused AdamW's update, in place (activations are freed by then); under ZeRO-3, DeepSpeed's float32
  copy of the gradient partition.

What each phase holds follows inspo's code and TRL 1.16's (see `_terms`); Adam's state appears at the first optimizer
step and stays, so it is counted in every generation and update after the first (the first step's generation runs
without it). Anchored on measurements in tests/config/test_resource_plan.py. Whether a plan fits, and what would:
resource_fit.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from inspo_cli.config.architecture import Architecture
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.registry import is_sft

GiB = 2**30
LAUNCHES = ("one-gpu", "ddp", "zero3", "fsdp2")
LAUNCH_NAMES = {"one-gpu": "one GPU", "ddp": "DDP", "zero3": "ZeRO-3", "fsdp2": "FSDP2"}
DEFAULT_GPUS, DEFAULT_GPU_GIB = 8, 80.0  # one node of 8 x 80 GB (H100/A100): the paper's and Search-R1's machine

# Constants (override the two time constants with your own measurement: --decode-ms, --update-tokens-per-s)
DECODE_MS = 35.0  # ms per decode step of HF `generate`, Qwen2.5-3B, batch 8, H100 (issue 52); launch-bound, so taken
#                   as the same at any batch size
EFFECTIVE_TFLOPS = 400.0  # per GPU in the update: 40% of an H100's 989 dense bf16 TFLOP/s
CUDA_CONTEXT_GIB = 0.75  # CUDA context, cuBLAS/NCCL workspaces: outside torch's allocator count, per process
FRAGMENTATION = 0.05  # the caching allocator's reserve beyond what is allocated, as a share of the peak
HOST_RUNTIME_GIB = 0.25  # on CPU: what a run holds beyond tensors (tokenizer, data, retriever, TRL): the growth of
#                          bench/resource_plan_check.py's process over its two tensors when loaded
# per parameter: the bf16 copy the transformers backend generates from (float32 masters, one-process or DDP launch;
# made for each rollout and freed after it: inspo_cli/policy/generation_weights.py)
GENERATION_COPY_BYTES = 2
LM_HEAD_TILE = (4096, 32768)  # TRL 1.16's chunked log-prob kernel: tokens x vocabulary entries per tile
ZERO3_LIVE_PARAMETERS = 1e9  # DeepSpeed's stage3_max_live_parameters default: gathered at once in the update
ZERO3_SUB_GROUP = 1e9  # DeepSpeed's sub_group_size default: parameters whose gradients are copied to float32 at once
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# of the free memory an auto-sized generate call fills, here and in inspo_cli.policy.generation_memory
FREE_SHARE = 0.85


@dataclass(frozen=True)
class Hardware:
    gpus: int = DEFAULT_GPUS
    gpu_gib: float = DEFAULT_GPU_GIB
    device: str = "cuda"  # cpu: one process, host memory, no CUDA context


@dataclass(frozen=True)
class Lengths:
    """Token counts to plan for; None: the recipe's bound."""

    prompt: int | None = None  # the first prompt (instruction + question)
    observation: int | None = None  # one observation (passages, or the corrective message)
    trajectory: int | None = None  # the longest trajectory of a batch, prompt included


@dataclass(frozen=True)
class Timing:
    decode_ms: float = DECODE_MS
    update_tokens_per_s: float | None = None  # per GPU; None: EFFECTIVE_TFLOPS over the FLOPs per token


@dataclass
class LaunchPlan:
    launch: str
    processes: int
    lora: bool
    generation_batch: int = 0  # trajectories in one generate call, per process
    phases: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> term -> bytes
    activations_other: float = 0.0  # the update's activations with gradient checkpointing toggled
    problem: str | None = None  # why this launch cannot run the recipe at all (the batch does not divide)
    gpu_gib: float = 0.0

    @property
    def label(self) -> str:
        name = LAUNCH_NAMES[self.launch] + (" + LoRA" if self.lora else "")
        return name if self.launch == "one-gpu" else f"{name} over {self.processes} GPU{'s' * (self.processes > 1)}"

    def total(self, phase: str) -> float:
        return sum(self.phases[phase].values())

    @property
    def peak_phase(self) -> str:
        return max(self.phases, key=self.total)

    @property
    def peak_gib(self) -> float:
        return self.total(self.peak_phase) / GiB if self.phases else math.inf

    @property
    def fits(self) -> bool:
        return self.problem is None and self.peak_gib <= self.gpu_gib


@dataclass
class ResourcePlan:
    architecture: Architecture
    parameters: int
    hardware: Hardware
    lengths: dict[str, int]
    launches: dict[str, LaunchPlan]  # key: launch name, "+lora" appended for the LoRA alternative
    policy_tokens_per_step: int
    seconds: dict[str, float]  # generation, update: per step, on the launch timed
    timed: str  # the launch the seconds are for: the widest that fits (else the widest, smallest peak)
    update_tokens_per_s: float
    timing: Timing


def plan_lengths(rollout, lengths: Lengths) -> dict[str, int]:
    """The prompt, observation, turn and trajectory lengths the plan uses; the trajectory is capped by the recipe."""
    prompt = min(lengths.prompt or rollout.max_prompt_tokens, rollout.max_prompt_tokens)
    observation = lengths.observation or rollout.max_observation_tokens
    turns = rollout.max_turns + 1  # `max_turns` with search, then one without
    response = min(turns * rollout.max_tokens_per_turn + rollout.max_turns * observation, rollout.max_response_tokens)
    longest = prompt + response
    bound = min(rollout.max_total_tokens, longest)
    trajectory = min(lengths.trajectory or bound, rollout.max_total_tokens)
    return {
        "prompt": prompt,
        "observation": observation,
        "turns": turns,
        "turn": rollout.max_tokens_per_turn,
        "trajectory": trajectory,
        "completion": max(trajectory - prompt, 1),
    }


def plan_decode_steps(rollout, used: dict[str, int], lengths: Lengths) -> int:
    """An upper bound on one trajectory's decode steps: every turn at its limit, within the response cap and the
    trajectory's room after its prompt. The prompt counts only where the user gave its length: the recipe's longest
    prompt is the wide side for memory, but a shorter one leaves more room to decode."""
    prompt = used["prompt"] if lengths.prompt else 1
    return max(1, min(used["turns"] * used["turn"], rollout.max_response_tokens, used["trajectory"] - prompt))


def generation_rows(recipe, processes: int) -> tuple[int, bool]:
    """(the trajectories one generate call may hold per process, whether memory may lower it): a positive
    `rollout.generation_batch_size` caps the process's share of the step; 0 or "auto" (or a recipe without the
    field) takes the share, or on a GPU as many rows as fit (`inspo_cli.policy.generation_memory`)."""
    share = batch_plan(recipe, processes).generation_batch_per_process
    if getattr(recipe.model, "backend", "transformers") != "transformers":
        return share, False  # vLLM schedules the whole share itself, within its own memory share; the field is unread
    chosen = getattr(recipe.rollout, "generation_batch_size", "auto")
    if chosen in (None, "auto", 0):
        return share, True
    return max(1, min(int(chosen), share)), False


def _launch(
    recipe,
    arch: Architecture,
    hardware: Hardware,
    lengths: dict[str, int],
    launch: str,
    lora: bool,
    generation_copy: bool,
) -> LaunchPlan:
    processes = 1 if launch == "one-gpu" or hardware.device == "cpu" else hardware.gpus
    plan = LaunchPlan(launch, processes, lora, gpu_gib=hardware.gpu_gib)
    try:
        plan.generation_batch, to_memory = generation_rows(recipe, processes)
    except InspoError as error:
        plan.problem = str(error)
        return plan
    plan.phases, plan.activations_other = _terms(recipe, arch, hardware, lengths, plan, generation_copy, to_memory)
    return plan


def _terms(
    recipe,
    arch: Architecture,
    hardware: Hardware,
    lengths: dict[str, int],
    plan: LaunchPlan,
    generation_copy: bool,
    to_memory: bool,
) -> tuple[dict[str, dict[str, float]], float]:
    m, t = recipe.model, recipe.training
    gpu = hardware.device != "cpu"
    dtype = ("bfloat16" if gpu else "float32") if m.dtype == "auto" else m.dtype
    mixed = dtype != "float32"  # bf16/fp16 compute under autocast (training.trainer_inputs.training_precision)
    compute = DTYPE_BYTES[dtype]
    sharded = plan.launch in ("zero3", "fsdp2")
    shard = plan.processes if sharded else 1
    params = arch.parameters()
    vllm = m.backend == "vllm"
    colocated_vllm = vllm and m.vllm_mode == "colocate"
    rl = not is_sft(t.algorithm)  # SFT (and rejection sampling's update) has no rollouts in the trainer, no KL

    # The trained weights as each launch holds them
    if plan.lora:
        adapter = arch.lora_parameters(m.lora_rank)
        weights = params * compute / shard + adapter * 4  # the base in model.dtype, PEFT's adapters in float32
        trained = adapter
    elif plan.launch == "zero3" and mixed:
        weights, trained = params * (compute + 4) / shard, params  # bf16 parameters + float32 masters
    else:
        weights, trained = params * (4 if mixed else compute) / shard, params  # float32 masters under autocast
    trained_shard = trained / (shard if not plan.lora else 1)
    gradients = trained_shard * (
        compute if plan.launch == "zero3" and mixed and not plan.lora else 4 if (mixed or plan.lora) else compute
    )
    buckets = gradients if plan.launch == "ddp" and plan.processes > 1 else 0.0  # DDP's reducer keeps its own copy
    adam = trained_shard * 8
    copy = (
        params * GENERATION_COPY_BYTES
        if rl and generation_copy and mixed and not plan.lora and not vllm and plan.launch in ("one-gpu", "ddp")
        else 0.0
    )

    # The KL reference (TRL builds none with LoRA: it disables the adapter instead)
    reference = reference_at_load = 0.0
    if rl and t.kl_beta > 0 and not plan.lora:
        if plan.launch == "fsdp2":
            reference = params * (4 if mixed else compute) / shard  # sharded in float32, computing in bf16
        elif plan.launch == "zero3":
            reference = params * compute / shard
        else:
            reference = params * compute
            # loaded like the policy, then cast parameter by parameter (the largest one held twice meanwhile)
            reference_at_load = params * (4 if mixed else compute) + mixed * arch.largest_matrix * compute

    # Generation: one call at the last turn, the widest contexts (rollout.py, policy/transformers_backend.py)
    width = lengths["trajectory"]
    kv_per_token = arch.layers * 2 * arch.kv_heads * arch.head_dim * compute
    fp32_stream = mixed and not plan.lora and plan.launch in ("one-gpu", "ddp")
    generation_stream = 4 if fp32_stream and not copy else compute  # the residual stream's bytes in generation
    prefill_per_token = 2 * generation_stream * arch.hidden + 3 * compute * arch.intermediate  # one layer at a time
    fixed = 0.0  # what a call holds whatever its rows
    if fp32_stream and not copy:
        fixed += arch.largest_matrix * compute  # autocast re-casts each float32 weight, no cache under no_grad
    if plan.launch == "zero3":
        fixed += params * compute  # TRL gathers every ZeRO-3 parameter for generation
    elif plan.launch == "fsdp2":
        fixed += 2 * arch.layer_parameters() * compute  # one unit gathered, the next prefetched
    per_row = width * (kv_per_token + prefill_per_token) + arch.vocab * 4 * 3  # + the last position's logits,
    #                                                                              processed scores, probabilities
    if to_memory and gpu and rl and not vllm:  # auto: the rows the free memory holds, as the backend measures it
        resident = weights + copy + adam + reference + fixed + CUDA_CONTEXT_GIB * GiB
        room = FREE_SHARE * (hardware.gpu_gib * GiB - resident)
        plan.generation_batch = max(1, min(plan.generation_batch, int(room // per_row)))
    rows = plan.generation_batch
    kv_cache = working = 0.0
    if rl and not vllm:
        kv_cache = rows * width * kv_per_token
        working = rows * (per_row - width * kv_per_token) + fixed
    vllm_share = m.vllm_gpu_memory_utilization * hardware.gpu_gib * GiB if rl and colocated_vllm and gpu else 0.0

    # Update: one micro-batch's forward and backward
    tokens = t.micro_batch_size * lengths["trajectory"]
    stream = 4 if fp32_stream else compute
    with_ckpt, without_ckpt = activation_bytes(arch, tokens, stream, compute, plan.lora)
    activations, other = (with_ckpt, without_ckpt) if m.gradient_checkpointing else (without_ckpt, with_ckpt)
    scored = t.micro_batch_size * lengths["completion"]
    head = min(scored, LM_HEAD_TILE[0]) * LM_HEAD_TILE[1] * compute + scored * arch.hidden * 4
    tied_end = 0.0
    if not plan.lora:
        head += arch.vocab * arch.hidden * 4  # the head's gradient, accumulated in float32
        if arch.tied_embeddings:  # at the backward's end the head's gradient waits for the embedding's dense one and
            # their sum is a third (tests/config/test_optimizer_memory.py); the activations are freed by then, so
            # this counts what that moment needs beyond the activations and head counted above
            grad_bytes = compute if sharded and mixed else 4
            tied_end = max(0.0, 3 * arch.vocab * arch.hidden * grad_bytes - activations - head)
    gathered = 0.0
    if plan.launch == "zero3":
        gathered = min(ZERO3_LIVE_PARAMETERS, params) * compute
    elif plan.launch == "fsdp2":
        gathered = 2 * arch.layer_parameters() * compute + arch.vocab * arch.hidden * 4  # + the head, full_tensor()

    overhead = (CUDA_CONTEXT_GIB if gpu else HOST_RUNTIME_GIB) * GiB
    phases = {
        "load": {"weights": weights, "KL reference": reference_at_load or reference, "vLLM share": vllm_share},
        "generation": {
            "weights": weights,
            "generation copy (bf16)": copy,
            "Adam state": adam,
            "KL reference": reference,
            "KV cache": kv_cache,
            "generation working set": working,
            "vLLM share": vllm_share,
        },
        "update": {
            "weights": weights,
            "gradients": gradients + buckets,
            "Adam state": adam,
            "KL reference": reference,
            "activations": activations,
            "LM head (chunked log-probs)": head,
            "tied embedding gradients (end of backward)": tied_end,
            "gathered parameters": gathered,
            "vLLM share": 0.0 if m.vllm_enable_sleep_mode else vllm_share,
        },
        # transformers' default optimizer on torch >= 2.8 (inspo pins 2.13) is fused AdamW, which updates in place:
        # no parameter-sized temporaries (foreach AdamW would take one float32 copy; test_optimizer_memory.py).
        # Under ZeRO-3 DeepSpeed wraps it and first copies each sub-group's bf16 gradient partition to float32
        # (stage3.py `_prepare_fp32_grad_for_sub_group`; sub_group_size 1e9 parameters by default)
        "optimizer step": {
            "weights": weights,
            "gradients": gradients + buckets,
            "Adam state": adam,
            "KL reference": reference,
            "float32 gradient copy (DeepSpeed)": (
                min(trained_shard, ZERO3_SUB_GROUP) * 4 if plan.launch == "zero3" and mixed and not plan.lora else 0.0
            ),
            "vLLM share": 0.0 if m.vllm_enable_sleep_mode else vllm_share,
        },
    }
    if not rl:
        del phases["generation"]
    for terms in phases.values():
        terms["overhead (context, allocator)"] = overhead + FRAGMENTATION * sum(terms.values()) * gpu
    return phases, other


def activation_bytes(arch: Architecture, tokens: int, stream: int, compute: int, lora: bool) -> tuple[float, float]:
    """(with, without) gradient checkpointing: what the backward needs of one micro-batch of `tokens` tokens.

    Per token and decoder layer, what autograd saves in HF's Qwen2/Llama layer under autocast: each RMSNorm's input
    and output in the residual stream's dtype (`stream`: float32 over float32 weights), and in `compute`'s dtype the
    inputs cast for q/k/v (three casts), q, k, v, q and k with their rotated halves, SDPA's q, k, v (repeated to all
    heads), output and o_proj's input; the MLP's two casts, gate, silu(gate), up and their product. LoRA adds the
    dropout's output and mask for each adapted linear. Checkpointing keeps each layer's input, and recomputes one
    layer at a time."""
    h, i, kvd = arch.hidden, arch.intermediate, arch.kv_heads * arch.head_dim
    per_layer = 4 * stream * h + compute * (13 * h + 4 * kvd + 4 * i)
    if lora:
        per_layer += (compute + 1) * (6 * h + i)
    final = 2 * stream * h  # the final norm
    without = tokens * (arch.layers * per_layer + final)
    with_checkpointing = tokens * (arch.layers * stream * h + per_layer + 2 * stream * h + final)
    return with_checkpointing, without


def flops_per_token(recipe, params: int) -> float:
    """Update FLOPs per trajectory token: forward and backward (6N), the recomputed forward under checkpointing,
    the reference's forward (KL) and the old policy's (several updates per generation)."""
    passes = 6 + 2 * recipe.model.gradient_checkpointing + 2 * (recipe.training.kl_beta > 0)
    passes += 2 * (batch_plan(recipe).updates_per_step > 1)
    return passes * params


def resource_plan(
    recipe,
    arch: Architecture,
    hardware: Hardware = Hardware(),
    lengths: Lengths = Lengths(),
    timing: Timing = Timing(),
    launches: tuple[str, ...] = LAUNCHES,
    generation_copy: bool = True,
) -> ResourcePlan:
    """Every launch in `launches` (and, unless the recipe trains LoRA, LoRA on one GPU as an alternative)."""
    used = plan_lengths(recipe.rollout, lengths)
    lora = recipe.model.lora
    plans = {name: _launch(recipe, arch, hardware, used, name, lora, generation_copy) for name in launches}
    if not lora:
        plans["one-gpu+lora"] = _launch(recipe, arch, hardware, used, "one-gpu", True, generation_copy)
    t = recipe.training
    per_step = t.batch_size * t.group_size
    rl = not is_sft(t.algorithm)
    decode_steps = used["decode_steps"] = plan_decode_steps(recipe.rollout, used, lengths)
    policy_tokens = per_step * decode_steps * rl
    params = arch.parameters()
    rate = timing.update_tokens_per_s or EFFECTIVE_TFLOPS * 1e12 / flops_per_token(recipe, params)
    possible = sorted(
        (p for p in plans.values() if p.problem is None), key=lambda p: (not p.fits, -p.processes, p.peak_gib)
    )
    timed = possible[0] if possible else plans[launches[0]]  # the widest launch that fits (else the widest)
    seconds = {"generation": math.nan, "update": math.nan}
    if timed.problem is None:
        trajectories = per_step // timed.processes
        calls = math.ceil(trajectories / timed.generation_batch)
        seconds = {
            "generation": rl * calls * decode_steps * timing.decode_ms / 1000,
            "update": trajectories * used["trajectory"] / rate,
        }
    return ResourcePlan(arch, params, hardware, used, plans, policy_tokens, seconds, timed.label, rate, timing)

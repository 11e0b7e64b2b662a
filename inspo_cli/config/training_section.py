"""The recipe's training section: which algorithm trains the policy and App. B's optimisation settings. Part of the
typed recipe (`sections.py`, which re-exports it); same conventions. What each loss type asks of the other fields
is in `loss_rules.py`, read from the loss types' records (`inspo_cli.registry.LOSS_TYPES`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from inspo_cli.config.loss_rules import (
    GSPO_CLIP,
    SUMMING_LOSSES,
    TOKEN_SCALE_CLIP,
    check_loss,
    dividing_by,
    listed,
    loss_warnings,
)
from inspo_cli.config.validation import (
    _fraction,
    _positive,
    _registered,
    _require,
    check_choices,
    choice_field,
    choices,
)
from inspo_cli.registry import ALGORITHMS, IMPORT_PATH_HINT, LEVELS, LOSS_TYPES, is_sft

__all__ = [
    "GRPO_ONLY",
    "GSPO_CLIP",
    "LOSS_TYPES",
    "SUMMING_LOSSES",
    "TOKEN_SCALE_CLIP",
    "TrainingConfig",
    "loss_warnings",
]
MAX_STEPS = 1_000_000  # the paper trains 300 steps, Search-R1's scripts 1,005; more is a typo, not a run
GRPO_ONLY = (
    "loss_type",
    "importance_sampling_level",
    "clip_epsilon_high",
    "scale_rewards",
    "num_iterations",
    "mask_truncated_completions",
    "top_entropy_quantile",
    "dynamic_sampling",
)
MAX_ROUNDS = 100  # dynamic sampling's extra generation rounds per step
MAX_ITERATIONS = 64  # PPO epochs over one generated batch: veRL's ppo_epochs; more is a typo, not a run
_NEEDS_LEVEL = "; ".join(f"{name} needs {loss.level}" for name, loss in LOSS_TYPES.items() if loss.level)


@dataclass
class TrainingConfig:
    """GRPO optimisation (App. B). Units, as Search-R1's scripts run them: `batch_size` counts questions per step
    (each gets `group_size` rollouts: 512 x 5 = 2,560 trajectories); `mini_batch_trajectories` counts trajectories
    per optimizer update over all devices (256: ten updates per step); `micro_batch_size` counts trajectories per
    device in one forward/backward pass (8: veRL's 64 over 8 GPUs). With `algorithm: sft` or `rejection-sampling`,
    `batch_size` counts examples per optimizer update, `micro_batch_size` per device and pass, and
    `mini_batch_trajectories` is unused."""

    algorithm: str = field(
        default="grpo",
        metadata={"help": f"How the policy is trained: {ALGORITHMS.choices()}; or {IMPORT_PATH_HINT} (a builder)."},
    )
    steps: int = field(
        default=300,
        metadata={"help": "Training steps (the paper: 300); with sft or rejection-sampling, optimizer updates."},
    )
    group_size: int = field(
        default=5,
        metadata={"help": "Rollouts per question, GRPO's group G whose mean reward is the baseline (the paper: 5)."},
    )
    batch_size: int = field(
        default=512,
        metadata={
            "help": "Questions per training step (the paper: 512, so 2,560 trajectories); with sft or "
            "rejection-sampling, examples per optimizer update."
        },
    )
    mini_batch_trajectories: int = field(
        default=256,
        metadata={
            "help": "Trajectories per optimizer update, over all devices. Search-R1 repeats each question n_agent=5 "
            "times before veRL splits the batch, so its ppo_mini_batch_size of 256 counts trajectories: 2,560 / "
            "256 = 10 optimizer updates per step (docs/faithfulness.md). Unused by sft and rejection-sampling."
        },
    )
    micro_batch_size: int = field(
        default=8,
        metadata={
            "help": "Trajectories (sft: examples) per device and forward/backward pass: 8 GPUs x 8 = the paper's "
            "micro-batch of 64."
        },
    )
    learning_rate: float = field(
        default=5e-7, metadata={"help": "AdamW's peak learning rate (the paper: 5e-7 for 3B, 3e-7 for 7B)."}
    )
    lr_scheduler: str = choice_field(
        ("cosine", "linear", "constant"),
        "cosine",
        "The learning-rate schedule after a linear warm-up: {choices} (the paper: cosine; Search-R1's veRL: constant).",
    )
    warmup_ratio: float = field(
        default=0.1,
        metadata={"help": "The fraction of the optimizer updates spent warming the learning rate up (the paper: 0.1)."},
    )
    kl_beta: float = field(
        default=0.001,
        metadata={
            "help": "beta, the KL penalty's weight against the reference policy (the paper: 0.001); 0 disables it."
        },
    )
    clip_epsilon: float = field(
        default=0.2,
        metadata={
            "help": "epsilon, PPO's clip range of the importance ratio (the paper: 0.2). GSPO clips its sequence ratio "
            "far tighter: 3e-4, with clip_epsilon_high 4e-4."
        },
    )
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradients are clipped to this global norm."})
    loss_type: str = field(
        default="grpo",
        metadata={
            "help": f"How the policy loss weighs tokens and ratios, TRL's loss_type: {LOSS_TYPES.choices()}. Their own "
            "parameters keep TRL's defaults (`inspo recipe check --trl`); docs/rl-switches.md gives each one's formula."
        },
    )
    importance_sampling_level: str = choice_field(
        LEVELS,
        "token",
        "{choices}. The importance ratio per token (PPO, GRPO, the paper) or one per trajectory, the geometric mean of "
        "its tokens' ratios. GSPO is sequence with loss_type grpo and GSPO's own clip range, clip_epsilon 3e-4 and "
        "clip_epsilon_high 4e-4 (GSPO v2, §5.1): a clip range of 0.2 is made for one token's ratio, and `inspo "
        f"recipe check` warns about it. {_NEEDS_LEVEL}; with {listed(list(SUMMING_LOSSES))} each trajectory then "
        "weighs by its length (TRL warns, and so does the check).",
    )
    clip_epsilon_high: float | None = field(
        default=None,
        metadata={
            "help": "The upper clip range 1 + epsilon_high of the ratio (DAPO's clip-higher: 0.28); null: "
            "clip_epsilon, "
            "symmetric clipping as in the paper. With loss_type cispo, the bound of the clipped ratio itself "
            "(ScaleRL: 5.0)."
        },
    )
    scale_rewards: str = choice_field(
        ("group", "batch", "none"),
        "group",
        yaml_bool={True: "group", False: "none"},
        help="{choices}. The advantage is the reward minus its group's mean, divided by the standard "
        "deviation of the group (GRPO, Search-R1's veRL and the paper), of the whole batch, or by nothing "
        "(Dr. GRPO). A bare YAML true/false means group/none.",
    )
    num_iterations: int = field(
        default=1,
        metadata={
            "help": "Passes over each generated batch (veRL's ppo_epochs, GRPO's mu; the paper and Search-R1: 1). Each "
            "pass makes batch_size x group_size / mini_batch_trajectories optimizer updates."
        },
    )
    mask_truncated_completions: bool = field(
        default=False,
        metadata={
            "help": "Leave out of the loss every trajectory cut by a length limit: its context "
            "(rollout.max_total_tokens) "
            "filled, or its last turn ran out of rollout.max_tokens_per_turn (DAPO's overlong filtering; the paper "
            "and Search-R1 train on them). inspo decides this from the rollout, not from TRL's test for a final "
            "EOS, which a trajectory ending at </answer> never has."
        },
    )
    top_entropy_quantile: float = field(
        default=1.0,
        metadata={
            "help": "Keep in the policy loss only this top share of the policy's tokens by entropy (Beyond the 80/20 "
            "Rule: 0.2); 1.0: every token, as in the paper."
        },
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={
            "help": "DAPO's dynamic sampling: drop the groups whose rollouts all earn the same reward (they give no "
            "gradient) and fill the batch from further questions; their rewards still reach INSPO's instruction "
            "weights and their rollouts the replay buffer (inspo_cli/training/dynamic_sampling.py). The paper "
            "trains on every group."
        },
    )
    dynamic_sampling_max_rounds: int = field(
        default=3,
        metadata={
            "help": "dynamic_sampling: extra generation rounds a step may run to fill its batch, each at most one "
            "batch "
            "of questions; what is still missing after them is filled with dropped groups."
        },
    )
    log_completions: bool = field(
        default=False,
        metadata={
            "help": "TRL prints 8 sampled completions at every logged step and sends the step's completions to the "
            "trackers (and a parquet file per step under the run's checkpoints)."
        },
    )
    kl_bias_correction: bool = field(
        default=False,
        metadata={
            "help": "TRL multiplies the KL term by the importance ratio by default (use_bias_correction_kl); eq. 2's "
            "beta*KL, and veRL's low_var_kl, do not. The estimator itself is k3 = exp(ref - logp) - (ref - "
            "logp) - 1 in both."
        },
    )
    entropy_coef: float = field(
        default=0.001,
        metadata={
            "help": "Search-R1's veRL default entropy bonus (actor.entropy_coeff); 0 disables it. TRL subtracts it "
            "times the mean entropy per token whatever the loss_type, where veRL aggregates it as its policy loss: "
            "next to the policy loss it has the same scale under "
            f"{listed(dividing_by('trajectory', 'micro-batch tokens', 'batch tokens'), 'and')} (means over tokens), "
            f"max_total_tokens / L times that under {listed(dividing_by('max_total_tokens'), 'and')} and about 1 / L "
            f"of it under {listed(dividing_by('nothing'), 'and')}, for L policy tokens per trajectory (`inspo recipe "
            "check` warns; docs/rl-switches.md#the-entropy-bonus-across-loss-types)."
        },
    )
    weight_decay: float = field(
        default=0.01, metadata={"help": "AdamW's weight decay, as Search-R1's veRL (the HF Trainer default is 0)."}
    )
    adam_beta2: float = field(
        default=0.999, metadata={"help": "AdamW's beta2: veRL's actor and HF's default; veRL's SFT trainer uses 0.95."}
    )
    vllm_is_correction: str = choice_field(
        ("off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask"),
        "off",
        yaml_bool={True: "sequence_mask", False: "off"},
        help="{choices}. TRL corrects for "
        "vLLM/trainer log-prob mismatch by default (sequence_mask, clip 3); neither Search-R1 nor the paper "
        "does. A bare YAML true/false/on/off means TRL's own default mode, sequence_mask, or off.",
    )
    vllm_is_clip: float = field(
        default=3.0, metadata={"help": "The importance-ratio bound C_max for vllm_is_correction."}
    )
    save_every: int = field(default=100, metadata={"help": "Save a checkpoint every N steps (the unit of `steps`)."})
    keep_checkpoints: int = field(
        default=0,
        metadata={
            "help": "Keep only the newest N checkpoints (TRL's save_total_limit); 0 keeps every one, as Search-R1's "
            "veRL does. A 135M model's checkpoint (weights, AdamW state) is 1.6 GB, a 3B model's about 37 GB."
        },
    )
    eval_every: int = field(
        default=100,
        metadata={
            "help": "Evaluate the policy with its best instruction every N steps, and after the last (App. B: 100); "
            "0: never. App. B's checkpoint (--checkpoint best) is chosen among these steps only, never a save in "
            "between (0: among every save)."
        },
    )

    def __post_init__(self) -> None:
        for name, example in (
            ("steps", "300"),
            ("batch_size", "512"),
            ("mini_batch_trajectories", "256"),
            ("micro_batch_size", "8"),
            ("learning_rate", "5e-7"),
            ("save_every", "100"),
            ("max_grad_norm", "1.0"),
            ("vllm_is_clip", "3.0"),
        ):
            _positive(getattr(self, name), name, example)
        _require(
            self.steps <= MAX_STEPS,
            "steps",
            f"must be at most {MAX_STEPS:,} (got {self.steps:,}); the paper trains 300",
        )
        _require(
            self.keep_checkpoints >= 0,
            "keep_checkpoints",
            f"must be >= 0 (got {self.keep_checkpoints}); 0 keeps every checkpoint, N keeps the newest N",
        )
        _require(
            self.eval_every >= 0,
            "eval_every",
            f"must be >= 0 (got {self.eval_every}); 0 turns evaluation during "
            "training off, the paper evaluates every 100 steps",
        )
        _require(
            self.group_size >= 2,
            "group_size",
            f"must be >= 2 for GRPO's group baseline (got {self.group_size}); the paper uses 5",
        )
        if not is_sft(self.algorithm):
            per_step = self.batch_size * self.group_size
            _require(
                per_step % self.mini_batch_trajectories == 0,
                "mini_batch_trajectories",
                f"counts trajectories per optimizer update, so must divide batch_size x group_size = {per_step} "
                f"trajectories per step (got {self.mini_batch_trajectories}); the paper uses 256 of 2,560",
            )
            _require(
                self.micro_batch_size <= self.mini_batch_trajectories,
                "micro_batch_size",
                f"counts trajectories per device and pass, so must be <= mini_batch_trajectories "
                f"({self.mini_batch_trajectories}); got {self.micro_batch_size}",
            )
        check_choices(self)
        _require(0 <= self.warmup_ratio < 1, "warmup_ratio", f"must be in [0, 1) (got {self.warmup_ratio})")
        _require(self.kl_beta >= 0, "kl_beta", f"must be >= 0 (got {self.kl_beta}); 0 disables the KL term")
        _require(
            0 < self.clip_epsilon < 1,
            "clip_epsilon",
            f"must be in (0, 1) (got {self.clip_epsilon}); the paper uses 0.2",
        )
        _registered(self.algorithm, ALGORITHMS, "algorithm")
        _registered(self.loss_type, LOSS_TYPES, "loss_type")
        check_loss(self, choices(TrainingConfig, "vllm_is_correction"))
        _require(
            1 <= self.num_iterations <= MAX_ITERATIONS,
            "num_iterations",
            f"must be between 1 and {MAX_ITERATIONS} (got {self.num_iterations}); the paper makes 1 pass",
        )
        _fraction(self.top_entropy_quantile, "top_entropy_quantile")
        _require(
            not self.dynamic_sampling or self.scale_rewards != "batch",
            "scale_rewards",
            "must be group or none with dynamic_sampling: each generation round would divide its advantages by "
            "its own batch's deviation, and the filled batch would mix those scales",
        )
        if is_sft(self.algorithm):  # the RL switches mean nothing to SFT: refused rather than silently unused
            for name in GRPO_ONLY:
                _require(
                    getattr(self, name) == TrainingConfig.__dataclass_fields__[name].default,
                    name,
                    f"is a GRPO setting, unused by training.algorithm {self.algorithm}; remove it",
                )
        _require(
            1 <= self.dynamic_sampling_max_rounds <= MAX_ROUNDS,
            "dynamic_sampling_max_rounds",
            f"must be between 1 and {MAX_ROUNDS} (got {self.dynamic_sampling_max_rounds}); DAPO's recipe allows "
            "10 batches in all",
        )
        _require(
            self.entropy_coef >= 0, "entropy_coef", f"must be >= 0 (got {self.entropy_coef}); 0 disables the bonus"
        )
        _require(self.weight_decay >= 0, "weight_decay", f"must be >= 0 (got {self.weight_decay})")

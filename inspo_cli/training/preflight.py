"""What a recipe can be refused for before anything is loaded or created.

`check_recipe` is what `inspo recipe check` adds to the loader's validation of types, values and paths: the
checks that need more than one field (the batch arithmetic for a number of processes, the initial population, a
model directory that holds no model) or more than the names (the tools, built without a retriever: a tag the
protocol owns, a build that fails). `check_run` adds what depends on the command and the machine (the device,
vLLM's mode, the optimizer's key) and is run by every `train`/`evolve` before its run directory exists, so a
start that would fail leaves nothing behind.
"""

from __future__ import annotations

from pathlib import Path

from inspo_cli.agent.tools import ToolContext, build_tools
from inspo_cli.config import Recipe
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.errors import InspoError
from inspo_cli.instructions.initial import initial_instructions
from inspo_cli.instructions.population import check_initial_texts
from inspo_cli.instructions.providers.api_keys import read_api_key
from inspo_cli.policy.models import check_model_location, default_device
from inspo_cli.runs import RunDir
from inspo_cli.training.trackers import check_wandb
from inspo_cli.training.trainer_inputs import launched_sharded

STAGED_ONE_PROCESS = (
    "population.stage {stage} runs in one process (its evolve stage does); launch it without "
    "accelerate, or run `inspo evolve` and `inspo train` as separate steps"
)
VLLM_SERVER_ON_CPU = (
    "model.vllm_mode=server needs a GPU: TRL syncs the weights into the server through vLLM's NCCL "
    "weight-transfer engine; on CPU use model.vllm_mode=colocate"
)

VLLM_SLEEP_ON_CPU = (
    "model.vllm_enable_sleep_mode needs a GPU: vLLM's CPU build has no sleep mode (it frees GPU "
    "memory only); set model.vllm_enable_sleep_mode=false"
)


class _RetrieverNotOpened:
    """What a tool is built over when only its tags and names are checked (`recipe check`): the recipe's retriever
    is opened when the run starts, so a tool that searches while it is being built is told so."""

    def search(self, queries, k):
        raise RuntimeError(
            "a tool searched while it was being built, before the recipe's retriever is opened; "
            "search in its call(), not in build()"
        )


def check_recipe(recipe: Recipe, processes: int = 1) -> None:
    """Refuse in one line what every run of `recipe` on `processes` processes would refuse later."""

    batch_plan(recipe, processes)  # the batch divides into micro-batches over the processes
    # the tools' tags and names, built over a retriever not opened yet (a tool may hold on to it; none searches)
    build_tools(recipe.agent.tools, ToolContext(_RetrieverNotOpened(), recipe.retriever.topk))
    population = recipe.population
    if population.enabled:
        check_initial_texts(population, initial_instructions(recipe))
        if population.stage != "online" and processes > 1:
            raise InspoError(STAGED_ONE_PROCESS.format(stage=population.stage))
    check_model_location(recipe.model.name_or_path)
    if recipe.sampling.model:
        check_model_location(recipe.sampling.model, "sampling.model")


def check_run(kind: str, recipe: Recipe, processes: int, device: str | None) -> None:
    """`check_recipe`, then what `inspo train` (kind "train") or `inspo evolve` ("evolve") needs on this machine."""

    check_recipe(recipe, processes)
    population = recipe.population
    if kind == "evolve":
        if not population.enabled:
            raise InspoError(
                "inspo evolve needs population.enabled=true (it evolves the instruction population); "
                "set it with --set population.enabled=true"
            )
        if population.stage != "online":
            raise InspoError(
                f"population.stage {population.stage} chains evolve and train: run it with inspo "
                "train; inspo evolve itself is the offline loop (drop population.stage)"
            )
        if processes > 1:
            raise InspoError("inspo evolve runs in one process; launch it without accelerate")
    on_cpu = (device or default_device()) == "cpu"
    on_one_gpu = processes == 1 and not on_cpu and not launched_sharded()
    if kind == "train" and on_one_gpu:
        check_one_gpu_fit(recipe)
    if recipe.model.backend == "vllm" and recipe.model.vllm_mode == "server" and on_cpu:
        raise InspoError(VLLM_SERVER_ON_CPU)
    if recipe.model.vllm_enable_sleep_mode and on_cpu:
        raise InspoError(VLLM_SLEEP_ON_CPU)
    check_wandb(recipe)  # installed, and a key unless offline
    if population.enabled and (population.evolve_until > 0 or population.initial_rewrites):
        if recipe.optimizer.replay is None:
            read_api_key(recipe.optimizer)  # a missing key is refused now, not at the first evolution
        else:
            check_replay_source(Path(recipe.optimizer.replay), "optimizer.replay")


ROLLOUT_BYTES_PER_TOKEN = 12  # a kept rollout's token, before compression: its id in JSON and its text


def rollouts_size_bytes(recipe: Recipe) -> float:
    """What `run.save_rollouts: all` keeps over the run at the recipe's bound, before gzip (several-fold smaller):
    every trajectory of every step at rollout.max_total_tokens, about ROLLOUT_BYTES_PER_TOKEN bytes a token."""
    t = recipe.training
    return float(t.steps) * t.batch_size * t.group_size * recipe.rollout.max_total_tokens * ROLLOUT_BYTES_PER_TOKEN


def rollouts_size_warning(recipe: Recipe) -> str | None:
    """What `inspo train` says before a run whose `run.save_rollouts: all` could keep more than a GB."""
    if recipe.run.rollout_groups is not None or (size := rollouts_size_bytes(recipe)) < 1e9:
        return None
    t = recipe.training
    return (
        f"run.save_rollouts=all keeps every trajectory: {t.batch_size * t.group_size:,} a step of up to "
        f"{recipe.rollout.max_total_tokens:,} tokens over {t.steps:,} steps, up to {size / 1e9:,.0f} GB before "
        "compression (gzip shrinks it several-fold); a number of groups per step keeps less (the default, 2)"
    )


def gpu_memory_gib() -> float:
    """The memory of the GPU this process trains on (torch's current CUDA device), in GiB."""
    import torch

    return torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory / 2**30


def check_one_gpu_fit(recipe: Recipe) -> None:
    """`inspo recipe plan`'s arithmetic for this GPU, before anything loads: refuse a recipe that cannot fit it
    whatever the trajectories' lengths, and warn when it fits only below the recipe's length bound. A model whose
    shape cannot be read without loading it (a hub id no recipe names, offline) is not checked."""
    from inspo_cli.config.resource_fit import one_gpu_fit
    from inspo_cli.policy.models import model_architecture
    from inspo_cli.progress import err_console

    try:
        architecture = model_architecture(recipe.model.name_or_path)
    except InspoError:
        return
    refused, warning = one_gpu_fit(recipe, architecture, gpu_memory_gib())
    if refused:
        raise InspoError(refused)
    if warning:
        err_console.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)


def check_replay_source(source: Path, given_as: str) -> None:
    """Refuse a record to replay the optimizer from that holds no record: `given_as` (a field or a flag) names it."""
    if not source.exists():
        raise InspoError(
            f"{given_as}: {source} does not exist; give the optimizer_calls.jsonl of a run, or a run or "
            "ablation directory"
        )
    if source.is_dir() and next(source.rglob(RunDir.OPTIMIZER_CALLS), None) is None:
        raise InspoError(
            f"{given_as}: {source} holds no optimizer_calls.jsonl; give the directory of a run that "
            "called the optimizer"
        )

"""The RL switches of the field as recipe fields (issue 41, item 4): each reaches TRL's GRPOConfig (or, for what TRL
cannot see, the trainer), is refused in one line when it cannot work, and every loss type trains a step."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from helpers.cli_helpers import assert_one_line_error, invoke
from helpers.scripted_trainer import RecordingSource, ScriptedBackend, generation_batch

from inspo_cli.config import Recipe, TrainingConfig, load_recipe
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.config.loader import RecipeError
from inspo_cli.config.training_section import GRPO_ONLY, LOSS_TYPES
from inspo_cli.policy.generation import Generation
from inspo_cli.training.grpo import grpo_config


def test_the_loss_types_are_every_one_trl_offers():
    from trl import GRPOConfig

    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    offered = re.search(r"Supported values are (.*?)\. ", help_text).group(1)
    assert set(re.findall(r"'(\w+)'", offered)) == set(LOSS_TYPES)


# (recipe override, GRPOConfig attribute, what TRL holds); the defaults are the paper's and reach TRL as such
FIELDS = [
    ("training.loss_type=sapo", "loss_type", "sapo"),
    ("training.importance_sampling_level=sequence", "importance_sampling_level", "sequence"),
    ("training.clip_epsilon_high=0.28", "epsilon_high", 0.28),
    ("training.scale_rewards=batch", "scale_rewards", "batch"),
    ("training.scale_rewards=false", "scale_rewards", "none"),
    ("training.num_iterations=2", "num_iterations", 2),
    ("training.top_entropy_quantile=0.2", "top_entropy_quantile", 0.2),
    ("training.log_completions=true", "log_completions", True),
]


@pytest.fixture
def recipe_file(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(
        "training:\n  batch_size: 4\n  group_size: 2\n  mini_batch_trajectories: 8\n  micro_batch_size: 4\n"
    )
    return path


@pytest.mark.parametrize("override, attribute, value", FIELDS)
def test_each_field_reaches_trl(recipe_file, tmp_path, override, attribute, value):
    recipe = load_recipe(recipe_file, [override], check_paths=False)
    default = grpo_config(Recipe(), batch_plan(Recipe()), tmp_path / "c")
    assert getattr(grpo_config(recipe, batch_plan(recipe), tmp_path / "c"), attribute) == value
    assert getattr(default, attribute) != value


def test_the_defaults_are_the_papers(tmp_path):
    args = grpo_config(Recipe(), batch_plan(Recipe()), tmp_path / "c")
    assert (
        args.loss_type,
        args.importance_sampling_level,
        args.epsilon,
        args.epsilon_high,
        args.scale_rewards,
        args.num_iterations,
        args.mask_truncated_completions,
        args.top_entropy_quantile,
        args.vllm_enable_sleep_mode,
        args.log_completions,
    ) == ("grpo", "token", 0.2, None, "group", 1, False, 1.0, False, False)


def test_sleep_mode_reaches_trl(tmp_path):
    recipe = Recipe()
    recipe.model.backend = "vllm"
    recipe.model.vllm_enable_sleep_mode = True
    assert grpo_config(recipe, batch_plan(recipe), tmp_path / "c").vllm_enable_sleep_mode is True


@pytest.mark.parametrize(
    "override, expected",
    [
        ("training.loss_type=luspo", "training.importance_sampling_level: must be sequence with loss_type luspo"),
        ("training.importance_sampling_level=sequence", None),
        (
            "training.importance_sampling_level=seq",
            "training.importance_sampling_level: must be one of token, sequence",
        ),
        ("training.scale_rewards=std", "training.scale_rewards: must be one of group, batch, none (got 'std')"),
        ("training.clip_epsilon_high=0", "training.clip_epsilon_high: must be in (0, 100] (got 0.0)"),
        ("training.clip_epsilon_high=-0.28", "training.clip_epsilon_high: must be in (0, 100]"),
        ("training.clip_epsilon_high=nan", "training.clip_epsilon_high: expected a finite number, got 'nan'"),
        ("training.clip_epsilon_high=inf", "training.clip_epsilon_high: expected a finite number, got 'inf'"),
        ("training.clip_epsilon_high=101", "training.clip_epsilon_high: must be in (0, 100] (got 101.0)"),
        ("training.clip_epsilon_high=abc", "training.clip_epsilon_high"),
        ("training.num_iterations=0", "training.num_iterations: must be between 1 and 64 (got 0)"),
        ("training.num_iterations=65", "training.num_iterations: must be between 1 and 64 (got 65)"),
        ("training.num_iterations=1.5", "training.num_iterations"),
        ("training.top_entropy_quantile=1.5", "training.top_entropy_quantile: must be in [0, 1] (got 1.5)"),
        ("training.top_entropy_quantile=nan", "training.top_entropy_quantile: expected a finite number, got 'nan'"),
        ("training.mask_truncated_completions=maybe", "training.mask_truncated_completions"),
        (
            "model.vllm_enable_sleep_mode=true",
            "model.vllm_enable_sleep_mode: needs model.backend=vllm with model.vllm_mode=colocate",
        ),
    ],
)
def test_bad_values_are_refused_in_one_line(recipe_file, override, expected):
    if expected is None:
        load_recipe(recipe_file, [override], check_paths=False)
        return
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe_file, [override], check_paths=False)
    assert "\n" not in str(info.value) and expected in str(info.value), str(info.value)


def test_combinations_trl_would_misread_are_refused(recipe_file):
    for overrides, expected in (
        (
            ["training.loss_type=cispo"],
            "training.clip_epsilon_high: must be set to 1 or more with loss_type cispo, "
            "which caps each token's importance weight at it (got None: TRL would take clip_epsilon, 0.2",
        ),
        (["training.loss_type=cispo", "training.clip_epsilon_high=0.28"], "(got 0.28: a cap below 1"),
        (
            ["training.loss_type=sapo", "training.clip_epsilon_high=0.28"],
            "training.clip_epsilon_high: is unused by loss_type sapo",
        ),
        (
            ["training.dynamic_sampling=true", "training.scale_rewards=batch"],
            "training.scale_rewards: must be group or none with dynamic_sampling",
        ),
        (
            ["training.algorithm=sft", "training.num_iterations=2"],
            "training.num_iterations: is a GRPO setting, unused by training.algorithm sft",
        ),
        (["training.algorithm=sft", "training.dynamic_sampling=true"], "training.dynamic_sampling: is a GRPO setting"),
        (
            ["training.loss_type=vespo", "training.importance_sampling_level=sequence"],
            "training.importance_sampling_level: must be token with loss_type vespo",
        ),
        (
            ["training.loss_type=vespo", "training.vllm_is_correction=sequence_mask"],
            "training.vllm_is_correction: must be off, token_truncate or token_mask with loss_type vespo",
        ),
    ):
        with pytest.raises(RecipeError, match=re.escape(expected)):
            load_recipe(recipe_file, overrides, check_paths=False)


# a value other than the default for every GRPO setting (the list is TrainingConfig's GRPO_ONLY, which it must match)
GRPO_SETTINGS = {
    "loss_type": "dapo",
    "importance_sampling_level": "sequence",
    "clip_epsilon_high": 0.28,
    "scale_rewards": "none",
    "num_iterations": 2,
    "mask_truncated_completions": True,
    "top_entropy_quantile": 0.5,
    "dynamic_sampling": True,
}


@pytest.mark.parametrize("algorithm", ["sft", "rejection-sampling"])
@pytest.mark.parametrize("name", list(GRPO_SETTINGS))
def test_every_grpo_setting_is_refused_under_an_sft_algorithm(recipe_file, algorithm, name):
    """SFTTrainer never reads them: a recipe that sets one under SFT would run without it, silently."""
    assert set(GRPO_SETTINGS) == set(GRPO_ONLY)
    override = f"training.{name}={json.dumps(GRPO_SETTINGS[name])}"
    load_recipe(recipe_file, [override], check_paths=False)  # the value itself is fine under GRPO
    with pytest.raises(RecipeError) as info:
        load_recipe(recipe_file, [f"training.algorithm={algorithm}", override], check_paths=False)
    assert f"training.{name}: is a GRPO setting, unused by training.algorithm {algorithm}; remove it" in str(
        info.value
    ) and "\n" not in str(info.value)


def test_sleep_mode_on_cpu_is_refused_before_the_run_starts(recipe_file, tmp_path):
    result = invoke(
        "train",
        "--recipe",
        recipe_file,
        "--device",
        "cpu",
        "--output-dir",
        tmp_path / "runs",
        "--set",
        "model.backend=vllm",
        "--set",
        "model.vllm_enable_sleep_mode=true",
    )
    assert_one_line_error(result, "model.vllm_enable_sleep_mode needs a GPU")
    assert not (tmp_path / "runs").exists()


def test_num_iterations_multiplies_the_updates_of_a_step_not_the_generations():
    """veRL's ppo_epochs: each pass over the step's batch makes batch x G / mini-batch updates; TRL generates anew
    every steps_per_generation x num_iterations passes, so steps_per_generation stays one pass."""
    one = batch_plan(Recipe(training=TrainingConfig()), processes=8)
    two = batch_plan(Recipe(training=TrainingConfig(num_iterations=2)), processes=8)
    assert (one.updates_per_step, one.steps_per_generation, one.max_updates) == (10, 40, 3000)
    assert (two.updates_per_step, two.steps_per_generation, two.max_updates) == (20, 40, 6000)
    assert two.generation_batch == one.generation_batch == 512 * 5


def test_two_passes_generate_once_and_end_the_step_once(make_trainer):
    source = RecordingSource("Answer the given question.")
    trainer = make_trainer(source, num_iterations=2)
    trainer.train()
    assert trainer.state.global_step == 2  # two optimizer updates: one per pass over the same rollouts
    assert len(source.sampled) == 1 and len(source.observed) == 1  # one generation, its rewards observed once
    assert source.ended == [1] and trainer.step == 1


class CutOddRows(ScriptedBackend):
    """Search, then: an answer on even rows; on odd rows a turn that runs out of tokens ("length")."""

    def generate(self, contexts, max_new_tokens, stop=()):
        out = []
        for row, context in enumerate(contexts):
            searched = "<information>" in self.tokenizer.decode(context)
            text = (
                ("<answer> Ada Vell </answer>" if row % 2 == 0 else "I keep thinking and thinking")
                if searched
                else "<search> founder of Hokin Works </search>"
            )
            ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
            out.append(Generation(ids, "length" if searched and row % 2 else "stop"))
        return out


@pytest.mark.parametrize("mask", [False, True])
def test_masking_truncated_trajectories_leaves_exactly_them_out_of_the_loss(make_trainer, mask):
    """One search, then the final turn (max_turns 1): odd rows run out of tokens without an answer. With the switch
    their whole completion leaves the loss (and TRL's token count); without it, nothing changes."""
    trainer = make_trainer(mask_truncated_completions=mask)
    trainer.engine.config.max_turns = 1
    trainer.engine.backend = CutOddRows(trainer.processing_class)
    batch = generation_batch()
    inputs = trainer._generate_and_score_completions(batch)
    loss_mask = inputs["completion_mask"] * inputs["tool_mask"]
    kept = loss_mask.sum(dim=1)
    assert all(kept[row] > 0 for row in range(0, len(batch), 2))
    assert all((kept[row] == 0) == mask for row in range(1, len(batch), 2))
    assert inputs["num_items_in_batch"] == loss_mask.sum()
    assert trainer._metrics["train"]["length/truncated_share"][-1] == 0.5
    # masked after TRL measured the completions (the policy's tokens): its lengths still count the truncated ones
    assert trainer._metrics["train"]["completions/min_length"][-1] == 19


class CutEveryRow(ScriptedBackend):
    """Search, then a turn that runs out of tokens on every row."""

    def generate(self, contexts, max_new_tokens, stop=()):
        searched = ["<information>" in self.tokenizer.decode(context) for context in contexts]
        texts = ["I keep thinking and thinking" if s else "<search> founder of Hokin Works </search>" for s in searched]
        return [
            Generation(self.tokenizer(text, add_special_tokens=False)["input_ids"], "length" if s else "stop")
            for text, s in zip(texts, searched)
        ]


def test_a_batch_the_mask_empties_is_said_and_counted_not_trained_silently(make_trainer, capsys):
    """Every trajectory cut and masked: no token is left in the loss, so the step trains nothing; the run goes on,
    but says so on a warning line and in the metric loss/all_truncated."""
    trainer = make_trainer(mask_truncated_completions=True)
    trainer.engine.config.max_turns = 1
    trainer.model.train()
    trainer.engine.backend = CutOddRows(trainer.processing_class)
    trainer._generate_and_score_completions(generation_batch())
    assert trainer._metrics["train"]["loss/all_truncated"] == [0.0] and "warning" not in capsys.readouterr().err
    trainer.engine.backend = CutEveryRow(trainer.processing_class)
    inputs = trainer._generate_and_score_completions(generation_batch())
    assert inputs["num_items_in_batch"] == 0 and trainer._metrics["train"]["loss/all_truncated"] == [0.0, 1.0]
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning")]
    assert "every trajectory of the batch was cut by a length limit" in line
    assert "this batch trains nothing" in line


class RecordingLLM:
    def __init__(self, events):
        self.events = events

    def wake_up(self, tags):
        self.events.append(("wake", tuple(tags)))

    def sleep(self, level):
        self.events.append(("sleep", level))


class SleepyVLLMGeneration:
    """TRL's vllm_generation at the seam, in sleep mode (vLLM's CPU build has none): records what is woken, put to
    sleep and synced, in order."""

    enable_sleep_mode = True

    def __init__(self):
        self.events: list = []
        self.llm = RecordingLLM(self.events)
        self._llm_weights_sleeping = True

    def sync_weights(self):
        self.events.append(("sync",))
        self._llm_weights_sleeping = False


def test_sleep_mode_wakes_the_kv_cache_around_every_rollout_and_resyncs_after_sleep(make_trainer):
    """TRL wakes the KV cache only inside its own generate, which a rollout_func never calls: each rollout of the
    trainer (training's, then verification's after the updates) wakes it, and sleeping at level 2 discards the
    weights, so the next rollout syncs them again even at the same step."""
    trainer = make_trainer()
    trainer.use_vllm, trainer.vllm_mode, trainer.vllm_generation = True, "colocate", SleepyVLLMGeneration()
    trainer._last_loaded_step = -1
    with trainer._policy_for_generation():
        trainer.vllm_generation.events.append(("generate",))
    with trainer._policy_for_generation():
        trainer.vllm_generation.events.append(("generate",))
    once = [("sync",), ("wake", ("kv_cache",)), ("generate",), ("sleep", 2)]
    assert trainer.vllm_generation.events == once + once
    assert trainer.vllm_generation._llm_weights_sleeping


def test_without_sleep_mode_nothing_is_woken(make_trainer):
    trainer = make_trainer()
    generation = SleepyVLLMGeneration()
    generation.enable_sleep_mode = False
    trainer.use_vllm, trainer.vllm_mode, trainer.vllm_generation = True, "colocate", generation
    trainer._last_loaded_step = -1
    for _ in range(2):
        with trainer._policy_for_generation():
            pass
    assert generation.events == [("sync",)]


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_every_loss_type_trains_a_step_of_the_tiny_model(make_trainer, loss_type):
    level = "sequence" if loss_type == "luspo" else "token"
    high = {"cispo": 5.0, "sapo": None, "vespo": None}.get(loss_type, 0.28)
    trainer = make_trainer(
        loss_type=loss_type, importance_sampling_level=level, clip_epsilon_high=high, num_iterations=2
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    trainer.train()
    changed = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert sorted(changed) == sorted(before)
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    assert losses and all(math.isfinite(loss) for loss in losses)
    assert trainer.args.loss_type == loss_type and trainer.epsilon_high == (high or 0.2)

"""Loss-type ablations that would measure something else (issue 51): `inspo recipe check` says so in a warning line
(the recipe still runs): a sequence ratio under a loss that sums tokens (TRL's own warning), GSPO's sequence ratio
at a token's clip range, and an entropy bonus whose strength next to the policy loss depends on the loss_type."""

from __future__ import annotations

import inspect
import re

import pytest
from helpers.cli_helpers import invoke

from inspo_cli.config import TrainingConfig, load_recipe
from inspo_cli.config.batch_plan import batch_plan
from inspo_cli.config.training_section import GSPO_CLIP, SUMMING_LOSSES, loss_warnings
from inspo_cli.training.grpo import grpo_config


def warnings_for(max_completion_tokens=8192, **fields) -> list[str]:
    return loss_warnings(TrainingConfig(**fields), max_completion_tokens)


def test_the_losses_warned_about_at_sequence_level_are_those_trl_warns_about():
    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer.__init__)
    warned = re.search(r'importance_sampling_level == "sequence" and args\.loss_type in \[(.*?)\]', source).group(1)
    assert tuple(re.findall(r'"(\w+)"', warned)) == SUMMING_LOSSES


@pytest.mark.parametrize("loss_type", SUMMING_LOSSES)
def test_a_sequence_ratio_under_a_loss_that_sums_tokens_is_warned_about(loss_type):
    clip = {"clip_epsilon_high": 5.0} if loss_type == "cispo" else {}
    [summing, *_] = warnings_for(loss_type=loss_type, importance_sampling_level="sequence", **clip)
    assert summing.startswith(
        f"training.importance_sampling_level=sequence with loss_type {loss_type}: the loss "
        "sums per-token terms, which weighs each trajectory by its length"
    )
    assert not any("sums per-token" in line for line in warnings_for(loss_type=loss_type, **clip))


def test_gspo_at_a_tokens_clip_range_is_warned_about_and_at_its_own_is_not():
    [line] = warnings_for(importance_sampling_level="sequence", entropy_coef=0.0)
    assert line == (
        "training.importance_sampling_level=sequence clips one ratio per trajectory, the geometric mean "
        "of its tokens' ratios, at clip_epsilon 0.2, a range made for one token's ratio; GSPO clips the "
        "sequence ratio at 3e-4 / 4e-4 (set training.clip_epsilon=3e-4 training.clip_epsilon_high=4e-4)"
    )
    [line] = warnings_for(importance_sampling_level="sequence", clip_epsilon=3e-4, clip_epsilon_high=0.28)
    assert "at clip_epsilon 0.0003 / clip_epsilon_high 0.28, a range made for one token's ratio" in line
    assert warnings_for(importance_sampling_level="sequence", clip_epsilon=3e-4, clip_epsilon_high=4e-4) == []
    assert warnings_for(importance_sampling_level="sequence", loss_type="sapo") == []  # sapo gates, never clips
    assert warnings_for() == []  # the paper's token ratio at 0.2


def test_gspos_clip_range_reaches_trl(tmp_path, repo_root):
    recipe = load_recipe(
        repo_root / "recipes/qwen2.5-3b/search-r1.yaml",
        [
            "training.importance_sampling_level=sequence",
            "training.clip_epsilon=3e-4",
            "training.clip_epsilon_high=4e-4",
        ],
    )
    assert loss_warnings(recipe.training, recipe.rollout.max_total_tokens) == []
    args = grpo_config(recipe, batch_plan(recipe, 8), tmp_path / "c")
    assert (args.importance_sampling_level, args.epsilon, args.epsilon_high) == ("sequence", *GSPO_CLIP)


def test_an_entropy_bonus_whose_weight_depends_on_the_loss_type_is_warned_about():
    [line] = warnings_for(loss_type="dr_grpo")
    assert line == (
        "training.entropy_coef 0.001 with loss_type dr_grpo: TRL adds the bonus as a mean over tokens "
        "for every loss type, so next to this policy loss it is 8,192 / L times as strong as under grpo "
        "(8x at L = 1,000 tokens, 27x at 300), for trajectories of L tokens written by the policy; "
        "compare loss types with training.entropy_coef=0, or say so"
    )
    assert (
        "1,664 / L times as strong as under grpo (2x at L = 1,000 tokens, 6x at 300)"
        in warnings_for(1664, loss_type="dr_grpo")[0]
    )
    [line] = warnings_for(
        loss_type="luspo", importance_sampling_level="sequence", clip_epsilon=3e-4, clip_epsilon_high=4e-4
    )
    assert "with loss_type luspo" in line and "about 1 / L as strong as under grpo" in line
    for same_scale in ("grpo", "bnpo", "dapo", "sapo", "vespo"):
        assert warnings_for(loss_type=same_scale) == [], same_scale
    assert warnings_for(loss_type="dr_grpo", entropy_coef=0.0) == []


def test_recipe_check_prints_the_warnings_on_stderr_and_still_passes(repo_root):
    result = invoke(
        "recipe",
        "check",
        repo_root / "recipes/qwen2.5-3b/search-r1.yaml",
        "--set",
        "training.importance_sampling_level=sequence",
        "--set",
        "training.loss_type=dr_grpo",
    )
    assert result.exit_code == 0, result.output
    lines = result.stderr.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == ["warning"] * 3
    assert "loss_type: dr_grpo" in result.stdout and "warning" not in result.stdout
    assert invoke("recipe", "check", repo_root / "recipes/qwen2.5-3b/search-r1.yaml").stderr == ""


def test_train_says_the_same_warnings_before_it_starts(tmp_path, monkeypatch):
    """`inspo train` warns as `recipe check` does (on the main process), before anything loads; here the model then
    cannot be loaded, so the run stops right after."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    result = invoke(
        "train",
        "--recipe",
        "demo",
        "--set",
        "model.name_or_path=nobody/absent-model",
        "--set",
        "training.importance_sampling_level=sequence",
        "--set",
        "training.loss_type=dr_grpo",
        "--output-dir",
        tmp_path / "runs",
    )
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and lines[-1].startswith("error: ") and "Traceback" not in result.output
    assert sum(line.startswith("warning: ") for line in lines) == 3 and "dr_grpo" in result.stderr

"""The outcome reward GRPO optimises: an `inspo_cli.metrics` score of the answer the policy generated, nothing else.

    reward = make_reward_func(RewardConfig(metric="em"))
    reward(completions=[...], answer=["Paris", None], golden_answers=[["Paris"], ["Rome"]], well_formed=[True, False])
    -> [1.0, 0.0]

`answer` is extracted by the rollout engine from *policy-generated tokens only* (never from the prompt or an
inserted passage), so an instruction's example `<answer>` tag or a passage that happens to contain the
answer cannot earn reward. With `format_weight > 0` (Search-R1's format-shaped variant), a well-formed
trajectory with a wrong answer earns `format_weight` instead of 0; a correct answer always earns the metric.
Well-formed (decided by the trainer) means: every action parsed and the trajectory ended in an answer. It
does not require a search: a policy too small to use passages learns to answer at once (the CPU demo shows it).
"""

from __future__ import annotations

from collections.abc import Sequence

from inspo_cli.config import RewardConfig
from inspo_cli.metrics import METRICS, exact_match


def followed_protocol(trajectory) -> bool:
    """Well-formed for the format-shaped reward, as Search-R1's check: every action parsed, ended in an answer."""
    return trajectory.stop_reason == "answer" and trajectory.invalid_actions == 0


def outcome_rewards(
    answers: Sequence[str | None],
    golden_answers: Sequence[Sequence[str]],
    well_formed: Sequence[bool],
    metric: str = "em",
    format_weight: float = 0.0,
) -> list[float]:
    score = METRICS[metric]
    rewards = []
    for answer, gold, formed in zip(answers, golden_answers, well_formed, strict=True):
        value = score(answer, gold)
        rewards.append(value if value > 0 or not formed else max(value, format_weight))
    return rewards


def trajectory_rewards(trajectories, golden_answers: Sequence[Sequence[str]], config: RewardConfig) -> list[float]:
    """The reward of finished trajectories (what GRPO's reward function computes from the same fields)."""
    return outcome_rewards(
        [t.answer for t in trajectories],
        golden_answers,
        [followed_protocol(t) for t in trajectories],
        config.metric,
        config.format_weight,
    )


def rollout_and_score(engine, instructions: Sequence[str], questions: Sequence, config: RewardConfig):
    """Roll out `instructions[i]` on `questions[i]` (anything with `.question` and `.golden_answers`), one batch;
    returns (trajectories, rewards). Verification and `inspo evolve` score rollouts through this; the trainer's
    rollouts are scored by TRL through `make_reward_func`, with the same rewards."""
    if not questions:
        return [], []
    trajectories = engine.run(list(instructions), [q.question for q in questions])
    return trajectories, trajectory_rewards(trajectories, [q.golden_answers for q in questions], config)


def make_reward_func(config: RewardConfig):
    """A TRL reward function `(completions, answer, golden_answers, well_formed, **kwargs) -> list[float]`."""

    def outcome(completions, answer, golden_answers, well_formed, log_metric=None, **kwargs) -> list[float]:
        if log_metric is not None:  # EM is reported whatever the reward is, so runs stay comparable
            em = [exact_match(a, g) for a, g in zip(answer, golden_answers)]
            log_metric("em", sum(em) / max(len(em), 1))
        return outcome_rewards(answer, golden_answers, well_formed, config.metric, config.format_weight)

    outcome.__name__ = f"outcome_{config.metric}"
    return outcome

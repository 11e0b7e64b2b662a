"""The keys every logged step of a training run carries, for the `inspo train` tests."""

from __future__ import annotations

STEP_KEYS = {
    "step",
    "update",
    "reward",
    "reward_std",
    "em",
    "search/searches_per_trajectory",
    "search/valid_action_rate",
    "length/prompt",
    "length/response",
    "length/response_with_observations",
    "length/observation_share",
    "kl",
    "learning_rate",
    "time/generation",
    "time/retrieval",
    "time/scoring",
    "time/update",
}

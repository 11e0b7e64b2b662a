"""The search agent: the Search-R1 text protocol, the tools, and the multi-turn rollout engine (the loop). What
generates the policy's tokens is `inspo_cli.policy`."""

from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION, STOP_STRINGS, Action, build_prompt, parse_action
from inspo_cli.agent.rollout import RolloutEngine, Trajectory

__all__ = [
    "CORRECTIVE_OBSERVATION",
    "STOP_STRINGS",
    "Action",
    "RolloutEngine",
    "Trajectory",
    "build_prompt",
    "parse_action",
]

"""The search agent: the Search-R1 text protocol, policy backends, and the multi-turn rollout engine."""

from inspo_cli.agent.backends import Generation, PolicyBackend, TransformersBackend, VLLMBackend, load_backend
from inspo_cli.agent.protocol import CORRECTIVE_OBSERVATION, STOP_STRINGS, Action, build_prompt, parse_action
from inspo_cli.agent.rollout import RolloutEngine, Trajectory

__all__ = [
    "CORRECTIVE_OBSERVATION",
    "STOP_STRINGS",
    "Action",
    "Generation",
    "PolicyBackend",
    "RolloutEngine",
    "Trajectory",
    "TransformersBackend",
    "VLLMBackend",
    "build_prompt",
    "load_backend",
    "parse_action",
]

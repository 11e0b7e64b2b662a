"""Shared by the tool tests (tests/agent/test_*tools*.py, test_calculator.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def masked(tokenizer, trajectory, value):
    return tokenizer.decode([i for i, m in zip(trajectory.completion_ids, trajectory.completion_mask) if m == value])


ECHO = '''
"""Echo: repeats its text (a toy tool from outside the package)."""
from inspo_cli.agent.tools import Observation, Tool


class Echo(Tool):
    name, tag, argument = "echo", "echo", "text"
    description = "Repeats its text."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def call(self, arguments):
        return [Observation(a["text"].upper()) for a in arguments]


def build(context):
    return Echo()
'''

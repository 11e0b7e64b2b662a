"""The paper's agent is unchanged by the tools (issue 40): search alone, in the Search-R1 protocol, gives the same
token ids, masks, searches, stop reasons and rewards as the engine before tools existed, recorded in
tests/fixtures/rollouts_before_tools.json by tests/helpers/before_after.py (its docstring says how)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import before_after

BEFORE = json.loads((Path(__file__).resolve().parents[1] / "fixtures/rollouts_before_tools.json").read_text())


def _same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for i, (have, expected) in enumerate(zip(got, want)):
        for key in expected:
            assert have[key] == expected[key], (i, key)


def test_a_scripted_policy_through_every_path_of_the_protocol_is_token_identical(tiny_model_dir):
    _same(before_after.scripted(str(tiny_model_dir)), BEFORE["scripted"])


def test_the_tiny_model_sampling_from_a_fixed_seed_is_token_identical(tiny_model_dir):
    _same(
        before_after.sampled(str(before_after.ROOT / "recipes/demo.yaml"), str(tiny_model_dir), seed=5), BEFORE["tiny"]
    )


@pytest.mark.slow
def test_the_demo_policy_sampling_from_a_fixed_seed_is_token_identical():
    """SmolLM2 from the shipped warm start, which searches (twice in 5 of 6 trajectories) and answers."""
    got = before_after.sampled(str(before_after.ROOT / "recipes/demo.yaml"), None, seed=5)
    assert sum(len(row["queries"]) for row in got) >= 6
    _same(got, BEFORE["demo"])

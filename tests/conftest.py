"""Test set-up: never touch the network, and skip slow tests unless --runslow (CI passes it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow (real models, large data)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --runslow to run")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama with a real BPE tokenizer and a chat template (built offline, ~1 s)."""
    from tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def slurm():
    """A real one-node SLURM (tests/slurm_cluster.py); skipped where it cannot run, unless INSPO_REQUIRE_SLURM=1."""
    from slurm_cluster import available, slurm_cluster

    why = available()
    if why is not None:
        if os.environ.get("INSPO_REQUIRE_SLURM") == "1":
            pytest.fail(f"INSPO_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)
    with slurm_cluster() as conf:
        yield conf

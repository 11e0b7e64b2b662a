"""Test set-up: never touch the network, and skip slow tests unless --runslow (CI passes it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
if os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n 2` (CI): one thread each, so the workers never fight for
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the two cores (subprocesses inherit it); before torch
        os.environ.setdefault(variable, "1")

# Under `pytest -n` a module's tests run on one worker, in order, as they do without -n (a module-scoped server or
# model is shared, and a test may follow another's traces on it); tests that must not run beside one another even
# across modules share one of these groups.
XDIST_GROUPS = {
    "slurm": lambda item: "slurm" in getattr(item, "fixturenames", ()),  # one SLURM per machine (munge)
    "vllm": lambda item: item.module.__name__.startswith("test_vllm"),
}  # engines bind cores, take GBs

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow (real models, large data)")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="slow: pass --runslow to run")
    for item in items:
        if "slow" in item.keywords and not config.getoption("--runslow"):
            item.add_marker(skip)
        group = next((group for group, member in XDIST_GROUPS.items() if member(item)), item.module.__name__)
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture
def bench(repo_root, monkeypatch):
    """`bench("gpu_timing")`: a bench/ script imported as a module; every bench module the test imported is dropped
    after it, so the next test imports them afresh."""
    import importlib

    monkeypatch.syspath_prepend(str(repo_root / "bench"))
    before = set(sys.modules)
    yield importlib.import_module
    for name in set(sys.modules) - before:
        if str(repo_root / "bench") in str(getattr(sys.modules[name], "__file__", "") or ""):
            sys.modules.pop(name, None)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama with a real BPE tokenizer and a chat template (built offline, ~1 s)."""
    from helpers.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def make_trainer(tmp_path, tiny_model_dir):
    """A SearchGRPOTrainer on the tiny model with a scripted policy (helpers/scripted_trainer.py)."""
    from helpers.scripted_trainer import trainer_factory

    return trainer_factory(tmp_path, tiny_model_dir)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture
def qwen_tokenizer(tiny_tokenizer):
    """The tiny tokenizer with Qwen2.5-Instruct's own chat template, which renders tools (function calling)."""
    import copy

    from inspo_cli.agent.call_formats import QWEN25_TEMPLATE

    tokenizer = copy.deepcopy(tiny_tokenizer)
    tokenizer.chat_template = QWEN25_TEMPLATE
    return tokenizer


@pytest.fixture(scope="session")
def slurm():
    """A real one-node SLURM (tests/helpers/slurm_cluster.py); skipped where it cannot run, unless
    INSPO_REQUIRE_SLURM=1."""
    from helpers.slurm_cluster import available, slurm_cluster

    why = available()
    if why is not None:
        if os.environ.get("INSPO_REQUIRE_SLURM") == "1":
            pytest.fail(f"INSPO_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)
    with slurm_cluster() as conf:
        yield conf


# -- fixtures several test modules share (a test module never imports another's) ------------------------------------


@pytest.fixture
def serve():
    """start(provider, *replies) -> a fake Anthropic/Gemini/OpenAI server on loopback
    (tests/helpers/fake_providers.py), each closed after the test."""
    from helpers.fake_providers import serving

    yield from serving()


@pytest.fixture(scope="module")
def world_retriever():
    """BM25 over the shipped world corpus, top 2."""
    from inspo_cli.config import RetrieverConfig
    from inspo_cli.retrieval import open_from_config

    return open_from_config(RetrieverConfig(kind="bm25", corpus=str(REPO_ROOT / "data/world/corpus.jsonl"), topk=2))


@pytest.fixture
def trained(tmp_path, repo_root, tiny_model_dir, monkeypatch) -> Path:
    """An unfinished-looking INSPO run with a final model and a checkpoint at step 4 (demo: one update per step)."""
    import json
    import shutil

    from inspo_cli.config import dump_recipe, load_recipe
    from inspo_cli.instructions.population import InstructionPopulation

    monkeypatch.chdir(repo_root)
    recipe = load_recipe("recipes/demo.yaml", [f"model.name_or_path={tiny_model_dir}"])
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "recipe.yaml").write_text(dump_recipe(recipe))
    (run / "run.json").write_text(json.dumps({"name": "run", "seed": 0, "command": ["inspo", "train"]}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i, "update": i, "reward": 0.1 * i}) + "\n" for i in range(1, 5))
    )
    shutil.copytree(tiny_model_dir, run / "checkpoints" / "final")
    checkpoint = run / "checkpoints" / "checkpoint-4"
    shutil.copytree(tiny_model_dir, checkpoint)
    (checkpoint / "trainer_state.json").write_text(json.dumps({"global_step": 4, "log_history": []}))
    population = InstructionPopulation(recipe.population, seed=0, initial_texts=["Search first. {question}"])
    state = {"step": 4, "population": population.state_dict(), "replay": {"capacity": 8, "entries": []}}
    (checkpoint / "coevolution.json").write_text(json.dumps(state))
    (run / "coevolution.json").write_text(json.dumps(state))  # as `inspo evolve` keeps it
    (run / "summary.json").write_text(
        json.dumps({"steps": 4, "best_instruction": "Answer.", "best_instruction_id": "i0"})
    )
    return run


@pytest.fixture(scope="module")
def tiny_world(tmp_path_factory) -> Path:
    """The tiny generated world (157 passages): corpus.jsonl and its QA files, written once per module."""
    from inspo_cli.world import generate_world, write_world

    out = tmp_path_factory.mktemp("world")
    write_world(generate_world(seed=0, size="tiny"), out)
    return out


@pytest.fixture(scope="module")
def corpus300(tmp_path_factory) -> Path:
    """The first 300 passages of the bundled world's corpus, written once per module."""
    path = tmp_path_factory.mktemp("c300") / "corpus.jsonl"
    with (REPO_ROOT / "data" / "world" / "corpus.jsonl").open() as f:
        path.write_text("".join(next(f) for _ in range(300)))
    return path


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """The site as `mkdocs build --strict` writes it, built once for every test that reads it: `.result` (the
    build's CompletedProcess) and `.site` (its directory)."""
    site = tmp_path_factory.mktemp("site") / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return SimpleNamespace(result=result, site=site)

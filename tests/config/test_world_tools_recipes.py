"""recipes/world-tools/ (issue 40): search and the calculator on the laptop, static and INSPO, in both protocols; each
loads, starts from the shipped tools warm start, and has room for its prompt."""

from __future__ import annotations

import pytest

from inspo_cli.config import load_recipe

RECIPES = ("static", "inspo", "static-function-calling", "inspo-function-calling")


@pytest.mark.parametrize("name", RECIPES)
def test_each_tools_recipe_loads_with_both_tools_from_the_tools_warm_start(repo_root, name):
    recipe = load_recipe(repo_root / f"recipes/world-tools/{name}.yaml")  # the adapter and world exist
    assert recipe.agent.tools == ["search", "calculator"]
    assert recipe.model.name_or_path == str(repo_root / "data/warm-start/smollm2-135m-world-tools")
    assert recipe.data.world_dir == str(repo_root / "data/world-tools")
    assert recipe.population.enabled == name.startswith("inspo")
    assert recipe.agent.protocol == ("function-calling" if name.endswith("function-calling") else "search-r1")
    assert recipe.rollout.max_turns == 3  # two searches and a calculation


def test_the_static_recipe_asks_with_the_instruction_the_warm_start_was_trained_with(repo_root):
    warm = load_recipe(repo_root / "recipes/world-tools/warm-start-lora.yaml")
    assert warm.agent.tools == ["search", "calculator"] and warm.data.world_dir == str(repo_root / "data/world-tools")
    static = load_recipe(repo_root / "recipes/world-tools/static.yaml")
    assert static.population.instructions == warm.population.instructions


@pytest.mark.slow
@pytest.mark.parametrize("name", ["static", "static-function-calling", "warm-start-lora"])
def test_every_test_question_s_prompt_fits_without_cutting_the_instruction(repo_root, name):
    """A prompt past rollout.max_prompt_tokens loses its beginning: the instruction (and with function calling, the
    tools' schemas)."""
    from dataclasses import replace

    from inspo_cli.agent.rollout import RolloutEngine
    from inspo_cli.agent.tools import recipe_tools
    from inspo_cli.benchmarks import WORLD, load_benchmark
    from inspo_cli.policy.models import load_tokenizer, uses_chat_template

    recipe = load_recipe(repo_root / f"recipes/world-tools/{name}.yaml")
    tokenizer = load_tokenizer(replace(recipe.model, name_or_path="smollm2-135m-instruct"))
    engine = RolloutEngine(
        None,
        None,
        tokenizer,
        recipe.rollout,
        chat=uses_chat_template(tokenizer, recipe.model.chat_template),
        tools=recipe_tools(recipe, None),
        protocol=recipe.agent.protocol,
    )
    questions = [
        q
        for split in ("train", "test")
        for q in load_benchmark(WORLD, split, world_dir=repo_root / recipe.data.world_dir)
    ]
    longest = max(len(engine.prompt_ids(recipe.population.instructions[0], q.question)) for q in questions)
    assert longest <= recipe.rollout.max_prompt_tokens


@pytest.mark.parametrize(
    "adapter, readme",
    [("smollm2-135m-world", "README.md"), ("smollm2-135m-world-tools", "smollm2-135m-world-tools/README.md")],
)
def test_each_shipped_warm_start_is_the_file_its_readme_names(repo_root, adapter, readme):
    """The checksum bench/warm_start_adapter.py and bench/tools_warm_start.py wrote beside the adapter they exported."""
    import hashlib
    import re

    weights = (repo_root / "data/warm-start" / adapter / "adapter_model.safetensors").read_bytes()
    named = re.search(
        r"SHA-256 of `adapter_model.safetensors` \(bf16\): `([0-9a-f]{64})`",
        (repo_root / "data/warm-start" / readme).read_text(),
    )
    assert named is not None and hashlib.sha256(weights).hexdigest() == named.group(1)

"""A run directory's recipe.yaml written by an older release resumes and is evaluated as that run was trained, not
with the defaults a later release brought."""

from __future__ import annotations

import yaml

from inspo_cli.config import dump_recipe, load_recipe
from inspo_cli.runs import RunDir


def test_a_run_started_before_the_no_search_turn_and_response_cap_settings_keeps_how_it_was_trained(
    tmp_path, repo_root
):
    """Its recipe.yaml has neither rollout.single_turn_stop nor rollout.max_response_tokens: resumed or evaluated,
    its turn without search still ends at the first tag and only max_total_tokens bounds it, not today's defaults."""
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    for name in ("qwen2.5-3b/grpo-no-search", "qwen2.5-7b/search-r1"):
        old = yaml.safe_load(dump_recipe(load_recipe(repo_root / f"recipes/{name}.yaml", check_paths=False)))
        del old["rollout"]["single_turn_stop"], old["rollout"]["max_response_tokens"]
        run.recipe_file.write_text(yaml.safe_dump(old), encoding="utf-8")
        rollout = run.recipe().rollout
        assert (rollout.single_turn_stop, rollout.max_response_tokens) == ("tag", rollout.max_total_tokens)
    current = load_recipe(repo_root / "recipes/qwen2.5-3b/grpo-no-search.yaml", check_paths=False)
    run.recipe_file.write_text(dump_recipe(current), encoding="utf-8")
    assert (run.recipe().rollout.single_turn_stop, run.recipe().rollout.max_response_tokens) == ("eos", 4096)

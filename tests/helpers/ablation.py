"""An ablation of the tiny model for `inspo ablate`: a population of two instructions and a sweep file of two
variants (INSPO and a static instruction)."""

from __future__ import annotations

import yaml

from helpers.runs import write_recipe
from inspo_cli.config.instruction_defaults import WORKED_EXAMPLE_INSTRUCTION

SECOND = "Search, then answer. Question: {question}\n"


def population(**overrides) -> dict:
    return {
        "enabled": True,
        "instructions": [WORKED_EXAMPLE_INSTRUCTION, SECOND],
        "size": 2,
        "n_parent": 1,
        "prune_every": 2,
        "evolve_until": 0,
        **overrides,
    }


def tiny_sweep(tmp_path, repo_root, tiny_model_dir, seeds=(0, 1), steps=3):
    """A sweep file of two variants of the tiny model (INSPO and a static instruction), checkpointing every step."""
    recipe = write_recipe(
        tmp_path,
        repo_root,
        str(tiny_model_dir),
        population=population(),
        training={"steps": steps, "save_every": 1, "keep_checkpoints": 1},
    )
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        yaml.safe_dump(
            {
                "recipe": str(recipe),
                "seeds": list(seeds),
                "variants": {"inspo": [], "static": ["population.enabled=false"]},
            }
        )
    )
    return sweep

"""Typed recipes: `sections` defines them, `loader` reads YAML and `--set` overrides into them (`recipe_files`
finds the file a recipe name means, `build` types the values)."""

from inspo_cli.config.loader import dump_recipe, load_recipe, recipe_to_dict
from inspo_cli.config.recipe_files import (
    PROJECT_ROOT,
    SHORT_NAMES,
    RecipeError,
    bundled_recipes,
    find_recipe,
    resolve_path,
    short_names,
)
from inspo_cli.config.sections import (
    AgentConfig,
    DataConfig,
    EvaluationConfig,
    JudgeConfig,
    ModelConfig,
    OptimizerConfig,
    PopulationConfig,
    Recipe,
    RetrieverConfig,
    RewardConfig,
    RolloutConfig,
    RunConfig,
    SamplingConfig,
    TrainingConfig,
)

__all__ = [
    "PROJECT_ROOT",
    "RecipeError",
    "SHORT_NAMES",
    "bundled_recipes",
    "short_names",
    "dump_recipe",
    "find_recipe",
    "load_recipe",
    "recipe_to_dict",
    "resolve_path",
    "AgentConfig",
    "DataConfig",
    "EvaluationConfig",
    "JudgeConfig",
    "ModelConfig",
    "OptimizerConfig",
    "PopulationConfig",
    "Recipe",
    "RetrieverConfig",
    "RewardConfig",
    "RolloutConfig",
    "RunConfig",
    "SamplingConfig",
    "TrainingConfig",
]

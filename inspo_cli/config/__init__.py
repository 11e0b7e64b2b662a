"""Typed recipes: `sections` defines them, `loader` reads YAML and `--set` overrides into them."""

from inspo_cli.config.loader import (PROJECT_ROOT, RecipeError, bundled_recipes, dump_recipe, find_recipe, load_recipe,
                                     recipe_to_dict, resolve_path)
from inspo_cli.config.sections import (
    AgentConfig,
    DataConfig,
    EvaluationConfig,
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
    "PROJECT_ROOT", "RecipeError", "bundled_recipes", "dump_recipe", "find_recipe", "load_recipe", "recipe_to_dict",
    "resolve_path",
    "AgentConfig", "DataConfig", "EvaluationConfig", "ModelConfig", "OptimizerConfig", "PopulationConfig", "Recipe",
    "RetrieverConfig", "RewardConfig", "RolloutConfig", "RunConfig", "SamplingConfig", "TrainingConfig",
]

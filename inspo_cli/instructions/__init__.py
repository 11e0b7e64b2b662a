"""Instructions: the built-in texts and INSPO's machinery — sampling, the population, the replay buffer, the
optimizer's prompts and LMs, and evolution. Plain Python: nothing here imports torch."""

from inspo_cli.instructions.defaults import SEARCH_R1_INSTRUCTION

__all__ = ["SEARCH_R1_INSTRUCTION"]

"""Instructions: INSPO's machinery — sampling, the population, the replay buffer, the optimizer's prompts and LMs,
and evolution. Plain Python: nothing here imports torch at module level (the local optimizer LM imports it when
it loads its model). The built-in texts are `inspo_cli.config.instruction_defaults`."""

"""Training: `SearchGRPOTrainer` (TRL's GRPOTrainer with multi-turn search rollouts) and the run around it."""

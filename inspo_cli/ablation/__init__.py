"""`inspo ablate`: plans (variants x seeds), the ablation directory, running the plan, and the table with CIs."""

"""`inspo report`: figures and tables over seeds from run and ablation directories."""

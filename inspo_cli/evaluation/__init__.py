"""`inspo evaluate`'s machinery: the paper's inference methods (`methods/`, registered in `inspo_cli.registry`),
scoring (`runner`), a session over a model and a retriever (`session`), a trained run's policies (`checkpoints`) and
Table-1 reports (`report`). Import from the modules themselves; this package re-exports nothing."""

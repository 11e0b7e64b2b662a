"""The policy: the model being trained, loaded and generating. models.py loads it (a hub id, a local directory, or a
packaged model) after model_files.py has checked the directory's small files; a backend generates its tokens behind
`PolicyBackend` (generation.py): transformers_backend.py, with compiled decoding (compiled_generation.py) and calls
sized to memory (generation_memory.py), or vLLM (vllm_backend.py, whose engines vllm_engine.py starts); backends.py's
`load_backend` builds the one a recipe asks for. generation_weights.py casts a mixed-precision trainer's weights for
its rollouts; seeds.py derives every sampling seed from `run.seed`. The rollout loop that calls a backend is
`inspo_cli.agent`."""

"""The optimizer LM's providers: one `LanguageModel` (language_model.py) in front of Gemini, Claude, OpenAI-compatible
servers and a local transformers model (lm_clients.py, local_lm.py), with the retries, budget and accounting every
provider shares (optimizer_lm.py), opened from a recipe (opening.py), the API key kept out of diagnostics
(api_keys.py), each call's line in the run's record (call_record.py) and its price (prices.py, prices.yaml). The rest
of instructions/ (population, proposers, evolution) sees only `LanguageModel`."""

"""The `local` optimizer provider: a transformers model on this machine writes the new instructions.

    optimizer = open_optimizer(OptimizerConfig(provider="local", model="smollm2-135m-instruct"))

`lm_clients.py` builds it for `optimizer.provider: local`. It is an optimizer LM like the others, so it lives with
them; it needs torch and `inspo_cli.policy.models`, which it imports inside its functions, so that importing the
instruction machinery never loads torch (the contract "instructions are torch-free" in pyproject.toml allows
exactly these imports). It calls `model.generate` itself rather than going through `TransformersBackend`: that
backend always samples the full distribution (top_k=0, right for the policy), while this client has always sampled
with transformers' default top-k of 50, and the demo's optimizer (temperature 0.7) should not change its answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from inspo_cli.instructions.providers.lm_errors import Completion

if TYPE_CHECKING:
    from inspo_cli.config import OptimizerConfig


class LocalTransformersClient:
    """A transformers model on this machine: no key, no network. Loaded on the first call, then kept.

    Its answer is started with `RESPONSE_PREFIX` (the model continues after it, and the returned text includes it):
    every optimizer prompt asks for candidates in `<ins_1>...</ins_1>` tags, which API models write but small local
    models (the offline default is a 135M model) seldom do unprompted; opened for them, they write an instruction,
    and seldom close it. An answer that used all of max_output_tokens without an EOS is `truncated`, as an API's
    would be: its unclosed last block is cut off, not an instruction. optimizer.thinking_budget is ignored here.
    """

    provider = "local"
    RESPONSE_PREFIX = "<ins_1>\n"
    concurrent = False  # one model in this process: calls from several threads would only queue for it

    def __init__(self, config: OptimizerConfig):
        self.model = config.model  # a packaged name (smollm2-135m-instruct), a directory or a cached hub id
        self.endpoint = f"local:{config.model}"
        self._temperature = config.temperature
        self._max_new_tokens = config.max_output_tokens
        self._loaded: tuple[Any, Any] | None = None  # (model, tokenizer)

    def __repr__(self) -> str:
        return f"LocalTransformersClient(model={self.model!r}, loaded={self._loaded is not None})"

    def attempt(self, prompt: str) -> Completion:
        import torch

        from inspo_cli.policy.generation import decoding_attention
        from inspo_cli.policy.models import uses_chat_template

        model, tokenizer = self._load()
        if uses_chat_template(tokenizer, "auto"):
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
            )
            encoded = tokenizer(text + self.RESPONSE_PREFIX, return_tensors="pt", add_special_tokens=False)
        else:
            encoded = tokenizer(f"{prompt}\n\n{self.RESPONSE_PREFIX}", return_tensors="pt")
        encoded = encoded.to(model.device)
        greedy = self._temperature == 0
        sampling = {"do_sample": False} if greedy else {"do_sample": True, "temperature": self._temperature}
        with torch.no_grad(), decoding_attention(model.device):  # on a GPU: no cuDNN graph per new length
            output = model.generate(
                **encoded, max_new_tokens=self._max_new_tokens, pad_token_id=tokenizer.pad_token_id, **sampling
            )
        prompt_length = encoded["input_ids"].shape[1]
        new_tokens = output[0, prompt_length:]
        return Completion(
            text=self.RESPONSE_PREFIX + tokenizer.decode(new_tokens, skip_special_tokens=True),
            input_tokens=int(prompt_length),
            output_tokens=int(new_tokens.shape[0]),
            truncated=self._cut_off(new_tokens.tolist(), model, tokenizer),
        )

    def _cut_off(self, new_tokens: list[int], model: Any, tokenizer: Any) -> bool:
        """Whether generation stopped at max_new_tokens rather than at an end-of-sequence token."""
        if len(new_tokens) < self._max_new_tokens:
            return False  # at batch 1 generation stops early only at an EOS
        eos = model.generation_config.eos_token_id
        eos = {tokenizer.eos_token_id} if eos is None else set(eos) if isinstance(eos, (list, tuple)) else {eos}
        return new_tokens[-1] not in eos

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            from inspo_cli.config import ModelConfig
            from inspo_cli.policy.models import load_model

            self._loaded = load_model(ModelConfig(name_or_path=self.model, dtype="auto"))
        return self._loaded

"""A tiny random causal LM with a real byte-level BPE tokenizer, built offline in about a second.

The tokenizer is trained on text that contains the protocol's tags, so `<search>` and `</answer>` are ordinary
(multi-token or merged) text, never special tokens, exactly as with real models.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_TEXT = [
    "<think> I need to find who founded the company. </think> <search> founder of Hokin Works </search>",
    '<information>Doc 1(Title: "Hokin Works") Hokin Works was founded in 1843 by Ada Vell.</information>',
    "<think> The answer is Ada Vell. </think> <answer> Ada Vell </answer>",
    "Answer the given question. Question: who founded Hokin Works?\n",
    "My previous action is invalid. If I want to search, I should put the query between <search> and </search>.",
    "the of and to in a is was by for on with as at from river castle violin harbour comet orchard 0123456789",
]


def build_tiny_model(out_dir: Path, chat: bool = True, seed: int = 0, vocab_size: int = 400) -> Path:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(_TEXT * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>" if chat else "<|endoftext|>", pad_token="<|endoftext|>"
    )
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=True,
    )
    model = LlamaForCausalLM(config)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir

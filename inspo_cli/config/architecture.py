"""A causal LM's shape, read from its config.json without loading a weight: what `inspo recipe plan` sizes.

    arch = architecture_from_config(json.loads(Path("model/config.json").read_text()), "model/config.json")
    arch.parameters()        # embeddings (tied or not), attention with its kv heads and biases, MLP, norms

The paper recipes name hub ids that cannot be read here without the hub, so their published configs are written
out below (`PUBLISHED_CONFIGS`); `bench/gpu_checklist.py` builds its random Qwen2.5 models from the same figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from inspo_cli.errors import InspoError

# Qwen2.5-3B and -7B as published (config.json of Qwen/Qwen2.5-3B and Qwen/Qwen2.5-7B); the -Instruct models have the
# same shapes. These keys are the ones `transformers.Qwen2Config` takes.
QWEN2_5_CONFIGS = {
    "qwen2.5-3b": dict(
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        max_window_layers=36,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=131072,
        max_window_layers=28,
        tie_word_embeddings=False,
    ),
}
_SMOLLM2_135M = dict(
    model_type="llama",
    hidden_size=576,
    intermediate_size=1536,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    head_dim=64,
    vocab_size=49152,
    tie_word_embeddings=True,
    attention_bias=False,
    mlp_bias=False,
)
_GEMMA3_270M = dict(
    model_type="gemma3_text",
    hidden_size=640,
    intermediate_size=2048,
    num_hidden_layers=18,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=256,
    vocab_size=262144,
    tie_word_embeddings=True,
)
PUBLISHED_CONFIGS = {  # name_or_path (lower case) -> config.json fields
    **{
        f"qwen/qwen2.5-{size}{variant}": {"model_type": "qwen2", **QWEN2_5_CONFIGS[f"qwen2.5-{size}"]}
        for size in ("3b", "7b")
        for variant in ("", "-instruct")
    },
    "smollm2-135m-instruct": _SMOLLM2_135M,
    "huggingfacetb/smollm2-135m-instruct": _SMOLLM2_135M,
    "huggingfacetb/smollm2-135m": _SMOLLM2_135M,
    "gemma3-270m": _GEMMA3_270M,
    "google/gemma-3-270m": _GEMMA3_270M,
}

# Per family: q/k/v biases, o-projection bias, RMSNorms per decoder layer, per-head q/k norms
_FAMILIES = {
    "qwen2": (True, False, 2, False),
    "qwen3": (False, False, 2, True),
    "gemma3_text": (False, False, 4, True),
    "gemma2": (False, False, 4, False),
    "llama": (None, None, 2, False),
    "mistral": (False, False, 2, False),
}


@dataclass(frozen=True)
class Architecture:
    source: str  # where the figures come from: a config.json path or "published config of <id>"
    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    tied_embeddings: bool
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    norms_per_layer: int
    qk_norm: bool

    @property
    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of every linear layer of one decoder layer: q, k, v, o, gate, up, down."""
        h, q, kv, i = self.hidden, self.heads * self.head_dim, self.kv_heads * self.head_dim, self.intermediate
        return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]

    def layer_parameters(self) -> int:
        weights = sum(n_in * n_out for n_in, n_out in self.linear_shapes)
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        biases = (
            (q + 2 * kv) * self.qkv_bias
            + self.hidden * self.o_bias
            + (2 * self.intermediate + self.hidden) * self.mlp_bias
        )
        return weights + biases + self.norms_per_layer * self.hidden + 2 * self.head_dim * self.qk_norm

    def parameters(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return embeddings + self.layers * self.layer_parameters() + self.hidden  # + the final norm

    def lora_parameters(self, rank: int) -> int:
        """A LoRA adapter of rank `rank` on every linear layer of every decoder layer (PEFT's "all-linear", which
        leaves the LM head out)."""
        return self.layers * rank * sum(n_in + n_out for n_in, n_out in self.linear_shapes)

    @property
    def largest_matrix(self) -> int:
        """Elements of the largest weight matrix (the embedding or the LM head)."""
        return max(self.vocab * self.hidden, *(n_in * n_out for n_in, n_out in self.linear_shapes))


MAX_DIMENSION = 2**24  # far above any model's width, depth, heads or vocabulary (Gemma 3: 262,144 entries)


def architecture_from_config(config: object, source: str) -> Architecture:
    """The shape a transformers config.json describes (a multimodal config's `text_config` when it has one)."""
    if not isinstance(config, dict):
        raise InspoError(f"{source}: not a config.json (a JSON object is expected); download or save the model again")
    config = config.get("text_config") or config
    model_type = str(config.get("model_type", "llama"))
    family = _FAMILIES.get(model_type, _FAMILIES["llama"])
    try:
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        attention_bias = bool(config.get("attention_bias", False))
        shape = Architecture(
            source=source,
            vocab=int(config["vocab_size"]),
            hidden=hidden,
            intermediate=int(config["intermediate_size"]),
            layers=int(config["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            tied_embeddings=bool(config.get("tie_word_embeddings", False)),
            qkv_bias=attention_bias if family[0] is None else family[0],
            o_bias=attention_bias if family[1] is None else family[1],
            mlp_bias=bool(config.get("mlp_bias", False)),
            norms_per_layer=family[2],
            qk_norm=family[3],
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as error:
        raise InspoError(
            f"{source}: not a decoder config inspo can size ({type(error).__name__}: {error}); "
            "it needs hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and "
            "vocab_size"
        ) from None
    for name in ("vocab", "hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim"):
        value = getattr(shape, name)
        if not 0 < value <= MAX_DIMENSION:
            shown = str(value) if len(str(value)) <= 12 else f"{str(value)[:6]}... ({len(str(value))} digits)"
            raise InspoError(
                f"{source}: {name} {shown} is no model's size (1 to {MAX_DIMENSION:,} expected); "
                "download or save the model again"
            )
    return shape


def published_architecture(name_or_path: str) -> Architecture | None:
    config = PUBLISHED_CONFIGS.get(name_or_path.lower())
    return None if config is None else architecture_from_config(config, f"published config of {name_or_path}")

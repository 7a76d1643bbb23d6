"""A dense decoder's parameter count from its Hugging Face config (a pure function)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import UsageError

#: Keys that mark a mixture of experts: its active and total counts differ, and the
#: dense formula would be silently wrong.
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_intermediate_size")


def _dim(config: Mapping[str, Any], key: str, source: str) -> int:
    value = config.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{source}: {key} must be a positive integer, got {value!r}")
    return value


def params_from_hf_config(config: Mapping[str, Any], source: str = "config.json") -> int:
    """Dense decoder parameters: embeddings, attention (GQA), gated MLP, norms, lm head.

    Biases on q/k/v are counted where the architecture has them (Qwen2, or an
    explicit ``attention_bias``); with them, Qwen2.5-7B and Llama-3.1-8B come
    out at their published counts to the parameter.
    """
    if any(config.get(key) for key in MOE_KEYS):
        raise UsageError(f"{source}: mixture-of-experts configs are not supported; pass --params")
    hidden, inter, layers, vocab = (
        _dim(config, k, source)
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "vocab_size")
    )
    heads = _dim(config, "num_attention_heads", source)
    kv_heads = heads  # plain multi-head attention when the key is absent
    if "num_key_value_heads" in config:
        kv_heads = _dim(config, "num_key_value_heads", source)
    head_dim = _dim(config, "head_dim", source) if config.get("head_dim") else hidden // heads
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    if config.get("attention_bias") or config.get("model_type") == "qwen2":
        attention += (heads + 2 * kv_heads) * head_dim
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    return layers * per_layer + embeddings + hidden

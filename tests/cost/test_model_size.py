"""A dense decoder's parameter count from its Hugging Face config, to the parameter."""

from __future__ import annotations

import pytest

from wanrl_s3.cost.model_size import params_from_hf_config
from wanrl_s3.errors import UsageError

LLAMA_31_8B = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "tie_word_embeddings": False,
}  # fmt: skip
QWEN25_7B = {
    "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
    "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
    "vocab_size": 152064, "tie_word_embeddings": False,
}  # fmt: skip


@pytest.mark.parametrize(
    ("config", "published"), [(LLAMA_31_8B, 8_030_261_248), (QWEN25_7B, 7_615_616_512)]
)
def test_parameter_count_matches_the_published_one(config: dict, published: int) -> None:
    assert params_from_hf_config(config) == published


def test_moe_and_missing_fields_are_refused() -> None:
    with pytest.raises(UsageError, match="mixture-of-experts"):
        params_from_hf_config({**LLAMA_31_8B, "num_local_experts": 8})
    with pytest.raises(UsageError, match="hidden_size"):
        params_from_hf_config({k: v for k, v in LLAMA_31_8B.items() if k != "hidden_size"})

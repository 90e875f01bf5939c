# Builds a small hybrid (attention + MLP) model directly with Megatron Core 0.19.2.
import torch
from megatron.core.models.hybrid import HybridModel
from megatron.core.transformer.transformer_config import TransformerConfig


def build(spec, vocab_size=32000):
    config = TransformerConfig(
        num_layers=4,
        hidden_size=1024,
        num_attention_heads=16,
        pipeline_model_parallel_size=2,
        bf16=True,
        params_dtype=torch.bfloat16,
    )
    return HybridModel(config=config, hybrid_stack_spec=spec, vocab_size=vocab_size,
                       max_sequence_length=4096)

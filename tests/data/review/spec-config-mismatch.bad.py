from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig


def provider():
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,
                               qk_layernorm=True, normalization="RMSNorm")
    spec = get_gpt_layer_local_spec()
    return config, spec

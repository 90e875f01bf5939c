# config-field.bad.py with the fix applied; a field of the code's own config subclass, and a
# config nothing shows to be Megatron's (an HF config), are left alone.
from dataclasses import dataclass

from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
from megatron.core.transformer.transformer_config import TransformerConfig


@dataclass
class MyConfig(TransformerConfig):
    my_extra: int = 0


def layer_spec(config):
    spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False)
    return spec, getattr(config, 'qk_l2_norm', None), config.my_extra


def hf_heads(config):
    return config.qk_l2_norm

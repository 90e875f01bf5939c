# config-field.bad.py with the fix applied; a field of the code's own config subclass is left alone.
from dataclasses import dataclass

from megatron.core.transformer.transformer_config import TransformerConfig


@dataclass
class MyConfig(TransformerConfig):
    my_extra: int = 0


def use_l2_norm(config):
    return getattr(config, 'qk_l2_norm', None), config.my_extra

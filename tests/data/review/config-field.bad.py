# Reduced from NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/llama4_utils.py:148
# (TransformerConfig.qk_l2_norm: a field from 0.16.1 on, absent from 0.13.1; NeMo pins 0.13).
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec


def layer_spec(config):
    return get_gpt_decoder_block_spec(config, use_transformer_engine=False), config.qk_l2_norm

# source: NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/llama4_utils.py:148
# expect: config-field 0.13.1 line 9
# silent: config-field 0.19.2
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec


def get_llama4_layer_spec(config):
    spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False)
    return spec, config.qk_l2_norm

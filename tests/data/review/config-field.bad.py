# Reduced from NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/llama4_utils.py:148
# (TransformerConfig.qk_l2_norm: a field from 0.16.1 on, absent from 0.13.1; NeMo pins 0.13).
def use_l2_norm(config):
    return config.qk_l2_norm

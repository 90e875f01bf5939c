# source: NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/llama4_utils.py:148
# expect: config-field 0.13.1 line 5
# silent: config-field 0.19.2
def qk_norm(config):
    return config.qk_l2_norm

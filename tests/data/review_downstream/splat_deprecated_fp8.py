# source: NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/base.py:163
# expect: deprecated-keyword 0.13.1 line 9
# expect: deprecated-keyword 0.19.2 line 9
from megatron.core.models.gpt import gpt_layer_specs


def layer_spec(config):
    kwargs = {
        "fp8": bool(config.num_moe_experts and (config.fp8 is not None)),
    }
    return gpt_layer_specs.get_gpt_layer_with_transformer_engine_spec(**kwargs)

from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec


def provider(config):
    return GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=128)

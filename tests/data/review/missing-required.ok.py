from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec


def provider(config):
    return GPTModel(config, get_gpt_layer_local_spec(), 128, max_sequence_length=32)

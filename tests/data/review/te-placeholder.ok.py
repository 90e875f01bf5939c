from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

spec = get_gpt_layer_local_spec()

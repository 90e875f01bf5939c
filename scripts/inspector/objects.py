"""The default table of Megatron Core objects whose live signatures the report carries (data).

Keys are ``module:attr`` exactly as ``--object`` takes them and as the report's ``objects`` map
is keyed.  Order is the report's order.
"""
import re

DEFAULT_OBJECTS = (
    "megatron.core.transformer.transformer_config:TransformerConfig",
    "megatron.core.transformer.transformer_config:MLATransformerConfig",
    "megatron.core.model_parallel_config:ModelParallelConfig",
    "megatron.core.models.gpt.gpt_model:GPTModel",
    "megatron.core.models.hybrid.hybrid_model:HybridModel",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_local_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_with_transformer_engine_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_decoder_block_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_mtp_block_spec",
    "megatron.core.models.hybrid.hybrid_layer_specs:hybrid_stack_spec",
    "megatron.core.transformer.spec_utils:ModuleSpec",
    "megatron.core.transformer.spec_utils:build_module",
    "megatron.core.transformer.transformer_block:TransformerBlock",
    "megatron.core.transformer.transformer_layer:TransformerLayer",
    "megatron.core.parallel_state:initialize_model_parallel",
    "megatron.core.parallel_state:destroy_model_parallel",
    "megatron.core.process_groups_config:ProcessGroupCollection",
    "megatron.core.process_groups_config:ProcessGroupCollection.use_mpu_process_groups",
    "megatron.core.hyper_comm_grid:HyperCommGrid",
    "megatron.core.tensor_parallel.random:model_parallel_cuda_manual_seed",
    "megatron.core.distributed:DistributedDataParallel",
    "megatron.core.distributed:DistributedDataParallelConfig",
    "megatron.core.transformer.enums:AttnBackend",
    "megatron.core.extensions.transformer_engine:TELayerNormColumnParallelLinear",
)

# module: dotted identifiers; attr: dotted identifiers (a class attribute is allowed)
_OBJECT_RE = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def valid_object_key(text):
    return bool(_OBJECT_RE.match(text))

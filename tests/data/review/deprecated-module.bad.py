# Reduced from alibaba/Pai-Megatron-Patch@a098ca5acbdeaf7172ce0393fa309b39a77506db:megatron_patch/model/llama3/layer_specs.py:19
# (custom_layers.transformer_engine warns DeprecationWarning on import through 0.16.1; gone in 0.17.1).
from megatron.core.transformer.custom_layers.transformer_engine import TENorm, TERowParallelLinear

LAYERS = (TENorm, TERowParallelLinear)

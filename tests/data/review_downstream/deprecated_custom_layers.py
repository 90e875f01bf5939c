# source: alibaba/Pai-Megatron-Patch@a098ca5acbdeaf7172ce0393fa309b39a77506db:megatron_patch/model/llama3/layer_specs.py:19
# expect: deprecated-module 0.13.1 line 5
# expect: deprecated-module 0.16.1 line 5
# expect: unresolved-import 0.19.2 line 5
from megatron.core.transformer.custom_layers.transformer_engine import TENorm, TEDotProductAttention

LAYERS = (TENorm, TEDotProductAttention)

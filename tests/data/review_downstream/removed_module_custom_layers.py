# source: alibaba/Pai-Megatron-Patch@a098ca5acbdeaf7172ce0393fa309b39a77506db:megatron_patch/model/llama3/layer_specs.py:19
# expect: unresolved-import 0.19.2 line 4
# silent: unresolved-import 0.13.1
from megatron.core.transformer.custom_layers.transformer_engine import TENorm

NORM = TENorm

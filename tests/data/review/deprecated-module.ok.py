# deprecated-module.bad.py with the fix applied.
from megatron.core.extensions.transformer_engine import TENorm, TERowParallelLinear

LAYERS = (TENorm, TERowParallelLinear)

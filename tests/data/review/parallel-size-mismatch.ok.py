from megatron.core import parallel_state
from megatron.core.transformer.transformer_config import TransformerConfig


def setup():
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
    return TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, tensor_model_parallel_size=2)

"""A tiny provider for review_model_code.py --build tests: qk_layernorm in the config but not in
the spec (so the build reports that it had no effect)."""
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.transformer.transformer_config import TransformerConfig


def model_provider(pre_process=True, post_process=True):
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, qk_layernorm=True)
    return GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                    vocab_size=128, max_sequence_length=32,
                    pre_process=pre_process, post_process=post_process)


def broken_provider():
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=6,
                               tensor_model_parallel_size=4)
    return GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                    vocab_size=128, max_sequence_length=32)

from megatron.core.models.hybrid.hybrid_model import HybridModel


def provider(config, spec):
    return HybridModel(config=config, hybrid_stack_spec=spec, vocab_size=128,
                       max_sequence_length=32, hybrid_layer_pattern="*-*-")

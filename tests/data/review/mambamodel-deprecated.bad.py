from megatron.core.models.mamba import MambaModel


def provider(config, spec):
    return MambaModel(config=config, mamba_stack_spec=spec, vocab_size=128, max_sequence_length=32)

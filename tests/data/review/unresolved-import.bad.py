from megatron.core.models.hybrid import HybridModel

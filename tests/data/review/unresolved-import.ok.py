from megatron.core.models.hybrid.hybrid_model import HybridModel
from megatron.core.models.mamba import HybridModel as ReExported

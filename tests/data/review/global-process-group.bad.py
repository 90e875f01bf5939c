# Reduced from modelscope/ms-swift@b6af05674945e6fae3cca8fc02698bbd97cef6d9:swift/megatron/model/modules/gated_self_attention.py:36
# (a SelfAttention subclass reads the global TP rank; SelfAttention keeps self.pg_collection, 0.16.1 on).
from megatron.core.parallel_state import get_tensor_model_parallel_rank
from megatron.core.transformer.attention import SelfAttention


class GatedSelfAttention(SelfAttention):
    def forward(self, hidden_states):
        rank = get_tensor_model_parallel_rank()
        return hidden_states, rank

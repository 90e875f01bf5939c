# source: NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/llama4_utils.py:305
# expect: global-process-group 0.19.2 line 10
# silent: global-process-group 0.13.1
from megatron.core import parallel_state
from megatron.core.transformer.attention import SelfAttention


class Llama4SelfAttention(SelfAttention):
    def forward(self, hidden_states):
        cp = parallel_state.get_context_parallel_world_size()
        return hidden_states, cp

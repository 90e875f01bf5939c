# The fix applied to global-process-group.bad.py; a module-level helper with no collection in
# scope (reduced from volcengine/verl@b178a3cd56f58b2d502255daba591e92833930a7:verl/utils/megatron_utils.py:60)
# gets one info note, never a warning.
from megatron.core import mpu
from megatron.core.transformer.attention import SelfAttention


class GatedSelfAttention(SelfAttention):
    def forward(self, hidden_states):
        rank = self.pg_collection.tp.rank()
        return hidden_states, rank


def uses_vpp():
    return mpu.get_pipeline_model_parallel_world_size() > 1

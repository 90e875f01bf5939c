# removed-attribute.bad.py with the fix applied (the call guarded by hasattr).
from megatron.core import mpu


def stage_bounds():
    split_rank = None
    if hasattr(mpu, "get_pipeline_model_parallel_split_rank"):
        split_rank = getattr(mpu, "get_pipeline_model_parallel_split_rank")()
    return split_rank

# Reduced from volcengine/verl@b178a3cd56f58b2d502255daba591e92833930a7:verl/utils/megatron_utils.py:90
# (parallel_state.get_pipeline_model_parallel_split_rank: there through 0.13.1, gone from 0.14.0).
from megatron.core import mpu


def stage_bounds():
    split_rank = mpu.get_pipeline_model_parallel_split_rank()
    return split_rank

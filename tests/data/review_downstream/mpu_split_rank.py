# source: volcengine/verl@b178a3cd56f58b2d502255daba591e92833930a7:verl/utils/megatron_utils.py:90
# expect: removed-attribute 0.19.2 line 8
# silent: removed-attribute 0.13.1
from megatron.core import mpu


def split_rank():
    return mpu.get_pipeline_model_parallel_split_rank()

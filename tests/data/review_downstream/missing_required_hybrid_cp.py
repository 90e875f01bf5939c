# source: NVIDIA/NeMo@8cfedd7203462cb251a914e700e5605444277561:nemo/collections/llm/gpt/model/base.py:110
# expect: missing-required 0.19.2 line 7
from megatron.core.utils import get_batch_on_this_cp_rank


def slice_batch(batch):
    return get_batch_on_this_cp_rank(batch)

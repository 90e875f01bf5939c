# source: THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:slime/backends/megatron_utils/model_provider.py:172
# expect: removed-keyword 0.19.2 line 9
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec


def layer_spec(args):
    return get_gpt_layer_local_spec(
        num_experts=args.num_experts,
        moe_use_legacy_grouped_gemm=args.moe_use_legacy_grouped_gemm,
    )

# source: alibaba/Pai-Megatron-Patch@a098ca5acbdeaf7172ce0393fa309b39a77506db:examples/deepseek_v3/pretrain_deepseek.py:115
# expect: positional-mismatch 0.13.1 line 12
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec


def layer_spec(args):
    return get_gpt_layer_local_spec(
        args.num_experts,
        args.moe_grouped_gemm,
        args.qk_layernorm,
        args.multi_latent_attention,
        args.moe_use_legacy_grouped_gemm,
    )

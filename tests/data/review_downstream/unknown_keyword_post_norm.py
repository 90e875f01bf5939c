# source: THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:slime_plugins/models/glm4.py:11
# expect: unknown-keyword 0.19.2 line 9
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec


def get_glm_spec(args):
    return get_gpt_layer_with_transformer_engine_spec(
        qk_layernorm=args.qk_layernorm,
        post_self_attn_layernorm=args.post_self_attn_layernorm,
    )

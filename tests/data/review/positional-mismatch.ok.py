from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec


def spec_for(config):
    return get_gpt_layer_with_transformer_engine_spec(
        config.num_moe_experts, config.moe_grouped_gemm, config.qk_layernorm,
        config.multi_latent_attention, qk_l2_norm=config.qk_l2_norm)

from megatron.core.transformer.transformer_config import TransformerConfig

config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=8,
                           moe_router_enable_expert_bias=True, moe_router_score_function="sigmoid",
                           add_bias_linear=False)

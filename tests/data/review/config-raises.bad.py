from megatron.core.transformer.transformer_config import TransformerConfig

# Expert bias (aux-loss-free routing) with the default softmax score function: 0.19.2 refuses it.
config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=8,
                           moe_router_enable_expert_bias=True, add_bias_linear=False)

from megatron.core.transformer.transformer_config import MLATransformerConfig

config = MLATransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, max_position_embeddings=4096)

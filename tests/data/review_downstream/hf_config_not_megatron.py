# source: THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:slime_plugins/models/qwen3_next.py:37
# silent: config-field 0.15.3
# A module adapted from Hugging Face reads its HF config: fields TransformerConfig lacks in
# 0.15.3 are not a break there (nothing shows this config is a Megatron one).
import torch


class Qwen3NextGatedDeltaNet(torch.nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.num_v_heads = config.linear_num_value_heads

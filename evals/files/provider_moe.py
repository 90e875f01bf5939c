# MoE GPT built directly with Megatron Core 0.19.2 (no Transformer Engine on this machine).
# The intent: 8 experts per MoE layer, top-2 routing, EP=4 on 8 GPUs with TP=2.
import torch
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.transformer.transformer_config import TransformerConfig


def build():
    config = TransformerConfig(
        num_layers=8,
        hidden_size=1024,
        num_attention_heads=16,
        num_moe_experts=8,
        moe_router_topk=2,
        tensor_model_parallel_size=2,
        expert_model_parallel_size=4,
        sequence_parallel=True,
        add_bias_linear=False,
        bf16=True,
        params_dtype=torch.bfloat16,
    )
    spec = get_gpt_layer_local_spec()
    return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=32000,
                    max_sequence_length=4096)

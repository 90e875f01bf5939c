# model_provider for pretrain_gpt.py-style training (Megatron-LM 0.19.2 layout), PP=4 run.
# Machine: PyTorch + megatron-core 0.19.2, Transformer Engine NOT installed.
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec
from megatron.training import get_args
from megatron.training.arguments import core_transformer_config_from_args


def model_provider(pre_process=True, post_process=True, vp_stage=None):
    args = get_args()
    config = core_transformer_config_from_args(args)
    layer_spec = get_gpt_layer_with_transformer_engine_spec()
    return GPTModel(
        config=config,
        transformer_layer_spec=layer_spec,
        vocab_size=args.vocab_size,
        max_sequence_length=args.max_position_embeddings,
        pre_process=True,
        post_process=True,
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        vp_stage=vp_stage,
    )

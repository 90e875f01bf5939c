# model_provider for a Megatron-LM 0.19.2 run (PP=2, untied embeddings, TE not installed).
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.training import get_args
from megatron.training.arguments import core_transformer_config_from_args


# get_model (megatron/training/training.py, 0.19.2) calls the provider with pre_process,
# post_process, vp_stage (with virtual pipeline stages), config and pg_collection as keywords.
def model_provider(pre_process=True, post_process=True, vp_stage=None, config=None, pg_collection=None):
    args = get_args()
    if config is None:  # get_model passes the config it was given, else None
        config = core_transformer_config_from_args(args)
    return GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=args.padded_vocab_size,
        max_sequence_length=args.max_position_embeddings,
        pre_process=pre_process,
        post_process=post_process,
        share_embeddings_and_output_weights=not args.untie_embeddings_and_output_weights,
        position_embedding_type=args.position_embedding_type,
        vp_stage=vp_stage,
        pg_collection=pg_collection,
    )

# source: ISEEKYAN/mbridge@10cb17f59dd082ef1dd9d5a36f8b1b5b3a5ecc3e:mbridge/models/glm4moe.py:221
# expect: unresolved-import 0.13.1 line 6 info
# The import is optional (the code returns None without it): an info, never an error.
def mtp_block_spec():
    try:
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_layer_specs
    except ImportError:
        return None
    return get_gpt_decoder_layer_specs

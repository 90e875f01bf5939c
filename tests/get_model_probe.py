"""Child process: build a provider file's model_provider through Megatron-LM's own get_model (1-rank gloo, CPU).

    python tests/get_model_probe.py PORT PROVIDER_FILE...

Prints, as its last line, one JSON object mapping each file to {"built": "GPTModel", "pre_process": ...,
"post_process": ..., "shares_embeddings": ...} or {"error": "TypeError: ..."}.
get_model (megatron/training/training.py) is the caller whose keywords decide whether a provider's
signature works; only what needs a GPU is stubbed (moving the built model with .cuda()).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import warnings


def main() -> int:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    warnings.simplefilter("ignore")
    port, files = int(sys.argv[1]), sys.argv[2:]
    import torch
    from megatron.core import parallel_state
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.training import training
    from megatron.training.global_vars import set_args

    # get_model ends by moving the model to torch.cuda.current_device(); no GPU here, and placement is
    # not what this probe checks.
    torch.nn.Module.cuda = lambda self, device=None: self
    torch.cuda.current_device = lambda: 0

    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    parallel_state.initialize_model_parallel()
    # The attributes get_model (wrap_with_ddp=False) and the provider read; nothing else is set.
    set_args(argparse.Namespace(
        create_all_gather_group=False, virtual_pipeline_model_parallel_size=None, init_model_with_meta_device=False,
        freeze_all_layers=False, use_torch_fsdp2=False, use_megatron_fsdp=False, use_cpu_initialization=True,
        fp16=False, bf16=False, padded_vocab_size=128, max_position_embeddings=32,
        untie_embeddings_and_output_weights=True, position_embedding_type="learned_absolute"))
    config = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True)

    out = {}
    for i, path in enumerate(files):
        spec = importlib.util.spec_from_file_location(f"provider_under_test_{i}", path)
        provider = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(provider)
        try:
            m = training.get_model(provider.model_provider, wrap_with_ddp=False, config=config)[0]
            out[path] = {"built": type(m).__name__, "pre_process": m.pre_process, "post_process": m.post_process,
                         "shares_embeddings": m.share_embeddings_and_output_weights}
        except Exception as e:  # the error is the probe's answer
            out[path] = {"error": f"{type(e).__name__}: {e}"}
    parallel_state.destroy_model_parallel()
    torch.distributed.destroy_process_group()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

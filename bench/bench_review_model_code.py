#!/usr/bin/env python3
"""Review a generated 2,000-line provider file without --build, against
`python -m py_compile` of the same file, as a ratio measured in the same run."""

import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "review_model_code.py")
BLOCK = '''
def provider_{i}(pre_process=True, post_process=True, pg_collection=None):
    config = TransformerConfig(num_layers={n}, hidden_size=64, num_attention_heads=4,
                               tensor_model_parallel_size=2, qk_layernorm=True)
    spec = get_gpt_layer_local_spec(qk_layernorm=True)
    return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=128,
                    max_sequence_length=32, pre_process=pre_process, post_process=post_process)
'''
HEAD = ("from megatron.core.models.gpt import GPTModel\n"
        "from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec\n"
        "from megatron.core.transformer.transformer_config import TransformerConfig\n")


def timed(cmd, runs=5):
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        best = min(best, time.perf_counter() - t)
    return best


def main():
    text = HEAD
    i = 0
    while text.count("\n") < 2000:
        text += BLOCK.format(i=i, n=2 + i % 8)
        i += 1
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "providers.py")
        with open(path, "w") as fh:
            fh.write(text)
        review = timed([sys.executable, SCRIPT, path, "--json"])
        compile_ = timed([sys.executable, "-m", "py_compile", path])
    print(f"lines {text.count(chr(10))}  review {review:.3f}s  py_compile {compile_:.3f}s  "
          f"ratio {review / compile_:.1f}x (best of 5, {sys.executable})")


if __name__ == "__main__":
    main()

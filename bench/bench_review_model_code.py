#!/usr/bin/env python3
"""review_model_code.py on a generated 2,000-line provider file (no --build) against
`python -m py_compile` of the same file: medians of interleaved fresh processes, and their
ratio, measured in the same run (bench/timing.py)."""

import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(REPO, "scripts", "review_model_code.py")
ROUNDS = 7
LINES = 2000
HEAD = ("from megatron.core import mpu, parallel_state\n"
        "from megatron.core.models.gpt import GPTModel\n"
        "from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec\n"
        "from megatron.core.transformer.attention import SelfAttention\n"
        "from megatron.core.transformer.transformer_config import TransformerConfig\n")
# Each provider has what the rules read: a config with literal sizes (some from a ** dict),
# a spec call, a model, config field reads, a Megatron subclass whose method reads a global
# group, and a module-attribute call.
BLOCK = '''
def provider_{i}(pre_process=True, post_process=True, pg_collection=None):
    kw = {{"num_layers": {n}, "hidden_size": 64, "num_attention_heads": 4}}
    kw["qk_layernorm"] = True
    config = TransformerConfig(tensor_model_parallel_size=2, **kw)
    spec = get_gpt_layer_local_spec(qk_layernorm=config.qk_layernorm)
    return GPTModel(config=config, transformer_layer_spec=spec, vocab_size=128,
                    max_sequence_length=32, pre_process=pre_process, post_process=post_process)


class Attention_{i}(SelfAttention):
    def forward(self, hidden_states):
        cp = parallel_state.get_context_parallel_world_size()
        return hidden_states * cp * self.config.hidden_size, mpu.get_data_parallel_rank()
'''


def source():
    text, i = HEAD, 0
    while text.count("\n") < LINES:
        text += BLOCK.format(i=i, n=2 + i % 8)
        i += 1
    return text


def main():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "providers.py")
        with open(path, "w") as fh:
            fh.write(source())
        review = f"review_model_code.py ({LINES} lines)"
        cases = {timing.BASELINE: [sys.executable, "-c", "pass"],
                 "python -m py_compile": [sys.executable, "-m", "py_compile", path],
                 review: [sys.executable, SCRIPT, path, "--json"]}
        times = timing.rounds(cases, ROUNDS)
    timing.print_table(times)
    ratio = statistics.median(times[review]) / statistics.median(times["python -m py_compile"])
    print(f"review / py_compile: {ratio:.1f}x ({sys.executable})")


if __name__ == "__main__":
    main()

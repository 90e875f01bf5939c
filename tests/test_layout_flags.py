"""Every flag the layout checker understands is spelled, stored and defaulted
as the installed Megatron-LM parser (megatron-core 0.19.2) does.

The parser is built by ``megatron.training.arguments.add_megatron_arguments``
(many flags are generated from config dataclasses), so the test asks the real
parser object, not the source text."""

import argparse
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import flags  # noqa: E402

pytestmark = pytest.mark.slow

REQUIRED_BY_ISSUE = """--tensor-model-parallel-size --pipeline-model-parallel-size
--num-layers-per-virtual-pipeline-stage --num-virtual-stages-per-pipeline-rank
--context-parallel-size --expert-model-parallel-size --expert-tensor-parallel-size --num-layers
--hidden-size --ffn-hidden-size --num-attention-heads --group-query-attention --num-query-groups
--kv-channels --seq-length --max-position-embeddings --micro-batch-size --global-batch-size
--num-experts --moe-ffn-hidden-size --vocab-size --make-vocab-size-divisible-by
--sequence-parallel --use-distributed-optimizer --decoder-first-pipeline-num-layers
--decoder-last-pipeline-num-layers --pipeline-model-parallel-layout
--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split --mtp-num-layers
--swiglu --disable-bias-linear --untie-embeddings-and-output-weights --recompute-granularity
--bf16 --fp16 --use-megatron-fsdp --use-torch-fsdp2 --no-overlap-p2p-communication""".split()

KIND_TO_ACTION = {"true": "_StoreTrueAction", "false": "_StoreFalseAction"}


@pytest.fixture(scope="module")
def megatron_actions():
    from megatron.training.arguments import add_megatron_arguments
    parser = argparse.ArgumentParser(allow_abbrev=False)
    add_megatron_arguments(parser)
    return {opt: action for action in parser._actions for opt in action.option_strings}


def test_issue_flags_are_all_understood():
    ours = {f.option for f in flags.FLAGS}
    assert set(REQUIRED_BY_ISSUE) <= ours, set(REQUIRED_BY_ISSUE) - ours


@pytest.mark.parametrize("flag", flags.FLAGS, ids=lambda f: f.option)
def test_flag_matches_megatron_parser(flag, megatron_actions):
    action = megatron_actions.get(flag.option)
    assert action is not None, f"{flag.option} is not a Megatron-LM flag in 0.19.2"
    assert action.dest == flag.dest
    default = action.default.name if flag.kind == "enum" else action.default
    assert default == flag.default, (flag.option, action.default, flag.default)
    if flag.kind in KIND_TO_ACTION:
        assert type(action).__name__ == KIND_TO_ACTION[flag.kind]
    elif flag.kind == "choice":
        assert tuple(action.choices) == tuple(flag.choices)
    elif flag.kind == "enum":
        assert tuple(c.name for c in action.choices) == tuple(flag.choices)
    elif flag.kind == "float":
        assert action.type is float
    elif flag.kind in ("size", "count"):
        assert action.type is int
    elif flag.kind == "str":
        assert action.type in (None, str)
    elif flag.kind == "freq":
        assert action.type.__name__ == "moe_freq_type"


def test_world_flags_are_not_megatron_flags(megatron_actions):
    """--world-size etc. belong to the checker; none collides with Megatron-LM."""
    for flag in flags.WORLD_FLAGS:
        assert flag.option not in megatron_actions


@pytest.mark.parametrize("text", ["4", "([1]*3+[0]*1)*3", "[1,0,1,1]"])
def test_moe_layer_freq_parses_like_megatron(text):
    from megatron.training.arguments import moe_freq_type
    layout, _ = flags.parse_layout(["--world-size", "1", "--moe-layer-freq", text])
    assert layout.moe_layer_freq == moe_freq_type(text)

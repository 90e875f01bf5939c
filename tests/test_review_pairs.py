"""Config and spec agree: every config/spec pair checks_pairs derives from the release index
for the spec functions it flags is proven by building a tiny GPTModel both ways (same
config, spec given the value vs left at its default): the modules differ, so the spec
decides.  Pairs it does not flag for "config decides" build the same module both ways."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "scripts" / "model_review"), str(REPO / "tests")]

import release_index  # noqa: E402
from model_review import checks_pairs, releases  # noqa: E402

VIEW = releases.View(release_index, "0.19.2")
LOCAL, BLOCK = checks_pairs.PROVEN
# A value away from the default for each config field, plus settings it needs.
VALUES = {"num_moe_experts": ({}, 2), "qk_layernorm": ({}, True), "qk_l2_norm": ({}, True),
          "moe_grouped_gemm": ({"num_moe_experts": 2}, True), "normalization": ({}, "RMSNorm")}
BASE = dict(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True)


@pytest.fixture(scope="module")
def world():
    from review_helpers import cpu_world
    with cpu_world():
        yield


def built(spec_fn, field, param, with_value):
    from build_child import structure
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig
    extra, value = VALUES[field]
    config = TransformerConfig(**BASE, **extra, **{field: value})
    kwargs = {param: value} if with_value else {}
    if spec_fn == BLOCK:
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
        spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False, **kwargs)
    else:
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
        spec = get_gpt_layer_local_spec(**kwargs)
    return structure(GPTModel(config, spec, 128, 32))


def all_pairs(spec_fn):
    """Every derived pair, the not-flagged ones included."""
    saved, checks_pairs.NOT_FLAGGED = checks_pairs.NOT_FLAGGED, {}
    try:
        return checks_pairs.pairs(VIEW, spec_fn)
    finally:
        checks_pairs.NOT_FLAGGED = saved


@pytest.mark.parametrize("spec_fn", checks_pairs.PROVEN)
def test_flagged_pairs_are_decided_by_the_spec(world, spec_fn):
    flagged = checks_pairs.pairs(VIEW, spec_fn)
    assert flagged, spec_fn
    for param, field, _, _ in flagged:
        assert built(spec_fn, field, param, True) != built(spec_fn, field, param, False), param


@pytest.mark.parametrize("spec_fn", checks_pairs.PROVEN)
def test_unflagged_pairs_have_a_checked_reason(world, spec_fn):
    for param, field, _, _ in all_pairs(spec_fn):
        reason = checks_pairs.NOT_FLAGGED.get(param)
        if reason is None:
            continue
        if reason.startswith("config decides"):
            assert built(spec_fn, field, param, True) == built(spec_fn, field, param, False), param
        elif "kitchen" in reason:
            from megatron.core.extensions import kitchen
            assert not kitchen.HAVE_KITCHEN
        elif param == "fp8":
            text = Path(sys.modules["megatron.core.models.gpt.gpt_layer_specs"].__file__).read_text()
            assert "fp8: Optional[str] = None,  # pylint: disable=unused-argument" in text
        elif "CUDA" in reason:
            import torch
            assert not torch.cuda.is_available()

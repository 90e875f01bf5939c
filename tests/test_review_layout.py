"""Literal sizes in a config call: what the review reports (through the layout checker's
rules) is what TransformerConfig itself raises when the same call runs with 0.19.2, for the
rules Megatron Core checks when the config is built.  The rules checked later (at model build,
with real TP/PP groups) are proven against Megatron by tests/test_layout_rules.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts")]

from model_review.review import review_paths  # noqa: E402

BASE = "num_layers=8, hidden_size=96, num_attention_heads=6"
CASES = [
    ("heads-divisible-by-tp", "tensor_model_parallel_size=4"),
    ("query-groups-vs-tp", "num_attention_heads=8, num_query_groups=6, tensor_model_parallel_size=4"),
    ("uneven-stages", "pipeline_model_parallel_size=4, num_layers_in_first_pipeline_stage=3, "
                      "num_layers_in_last_pipeline_stage=2, pipeline_dtype=torch.float32"),
    ("moe-ffn-without-experts", "moe_ffn_hidden_size=128"),
    ("moe-bias-needs-etp1", "num_moe_experts=4, expert_tensor_parallel_size=2, add_bias_linear=True"),
]


def _call(extra):
    kw = dict(item.split("=", 1) for item in (BASE + ", " + extra).split(", "))
    return "TransformerConfig(" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")"


@pytest.mark.parametrize("rule,extra", CASES)
def test_reported_as_megatron_raises(tmp_path, rule, extra):
    call = _call(extra)
    path = tmp_path / "cfg.py"
    path.write_text("import torch\nfrom megatron.core.transformer.transformer_config import "
                    f"TransformerConfig\nconfig = {call}\n")
    found = [f for f in review_paths([str(path)], "0.19", rule_ids={"layout"})["findings"]]
    assert f"layout.{rule}" in {f["rule"] for f in found}, found
    import torch  # noqa: F401 (the call's pipeline_dtype)
    from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: F401
    with pytest.raises(Exception) as exc:
        eval(call)  # noqa: S307 (the test's own literal call)
    finding = next(f for f in found if f["rule"] == f"layout.{rule}")
    assert str(exc.value).strip() in finding["message"] or \
        finding["message"].startswith(str(exc.value).strip()[:40]), (exc.value, finding["message"])


def test_valid_sizes_give_nothing(tmp_path):
    path = tmp_path / "cfg.py"
    path.write_text("from megatron.core.transformer.transformer_config import TransformerConfig\n"
                    f"config = {_call('tensor_model_parallel_size=2, pipeline_model_parallel_size=2')}\n")
    assert review_paths([str(path)], "0.19", rule_ids={"layout"})["findings"] == []

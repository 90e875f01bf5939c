"""--build: a tiny provider that works (parameter counts, the config setting the spec ignored)
and one that raises a catalogued error (TransformerConfig's heads/TP check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "review_model_code.py"
DIR = REPO / "tests" / "data" / "review" / "build"


def build(target):
    r = subprocess.run([sys.executable, str(SCRIPT), str(DIR / "tiny_provider.py"), "--json",
                        "--build", target, "--timeout", "240"], capture_output=True, text=True,
                       timeout=300, cwd=DIR)
    return r.returncode, json.loads(r.stdout)


@pytest.mark.slow
def test_build_counts_and_no_effect():
    rc, out = build("tiny_provider:model_provider")
    b = out["build"]
    assert b["ok"], b
    assert b["model"] == "GPTModel" and b["parameters"] == sum(b["parameters_by_module"].values())
    assert {"field": "qk_layernorm", "value": True, "default": False} in b["no_effect"]
    # the ast review saw the same disagreement without running anything
    assert "spec-config-mismatch" in out["summary"]["by_rule"]
    assert rc in (0, 1)


@pytest.mark.slow
def test_build_failure_is_reported_and_matched():
    rc, out = build("tiny_provider:broken_provider")
    b = out["build"]
    assert rc == 1 and not b["ok"]
    assert "num_attention_heads (6) must be a multiple of tensor_model_parallel_size (4)" in b["error"]
    try:
        import triage  # noqa: F401
    except ImportError:
        assert b["match"] is None and "issue 11" in b["match_reason"]
    else:
        assert b["match"]["matches"][0]["id"] == "TP-01", b["match"]

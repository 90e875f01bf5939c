"""review_model_code.py checks a config's literal sizes with the rules of the release it reviews.

It used 0.19.2's rules whatever --megatron-version said, so a MoE config with the default bias
passed a 0.13 review although 0.13.1 refuses it (a benchmark answer noticed). The oracle is each
release itself: the same TransformerConfig(...) built in the installed 0.19.2 and in the 0.13.1
environment (tests/old_envs.py); the review of that release has an error exactly when it raises.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import old_envs

REPO = Path(__file__).resolve().parent.parent
# Config keywords whose fate differs between the two releases (or does not), each a size rule.
CONFIGS = {
    "moe-default-bias": dict(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=8,
                             moe_router_topk=2),
    "moe-no-bias": dict(num_layers=2, hidden_size=64, num_attention_heads=4, num_moe_experts=8,
                        moe_router_topk=2, add_bias_linear=False),
    "groups-divide-tp": dict(num_layers=2, hidden_size=256, num_attention_heads=16, num_query_groups=8,
                             tensor_model_parallel_size=16),
    "heads-not-divisible-by-tp": dict(num_layers=2, hidden_size=96, num_attention_heads=6,
                                      tensor_model_parallel_size=4),
}
BUILD = """
import json, sys, warnings
warnings.simplefilter("ignore")
from megatron.core.transformer.transformer_config import TransformerConfig
out = {}
for name, kw in json.loads(sys.argv[1]).items():
    try:
        TransformerConfig(**kw)
        out[name] = None
    except Exception as exc:
        out[name] = type(exc).__name__ + ": " + str(exc)
print(json.dumps(out))
"""


def _built(release: str) -> dict:
    py = old_envs.python_for(release)
    proc = subprocess.run([str(py), "-c", BUILD, json.dumps(CONFIGS)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-800:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _reviewed(release: str, tmp_path: Path) -> dict:
    out = {}
    for name, kw in CONFIGS.items():
        src = tmp_path / f"{name}.py"
        args = ", ".join(f"{k}={v!r}" for k, v in kw.items())
        src.write_text("from megatron.core.transformer.transformer_config import TransformerConfig\n"
                       f"cfg = TransformerConfig({args})\n")
        proc = subprocess.run([sys.executable, str(REPO / "scripts" / "review_model_code.py"), "--json",
                               "--megatron-version", release, str(src)], capture_output=True, text=True, timeout=120)
        assert proc.returncode in (0, 1), proc.stderr[-500:]
        findings = json.loads(proc.stdout)["findings"]
        out[name] = [f["message"] for f in findings if f["severity"] == "error" and f["rule"].startswith("layout.")]
    return out


@pytest.mark.parametrize("release", ["0.13.1", "0.19.2"])
def test_the_review_of_a_release_errs_exactly_where_that_release_raises(release, tmp_path):
    built, reviewed = _built(release), _reviewed(release, tmp_path)
    for name in CONFIGS:
        assert bool(reviewed[name]) == (built[name] is not None), (release, name, built[name], reviewed[name])
    # The two releases really differ on the first config: the test would not see a release mix-up otherwise.
    assert CONFIGS and (release == "0.19.2") == (built["moe-default-bias"] is None)

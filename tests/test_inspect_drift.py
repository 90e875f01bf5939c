"""--check-references against a real older release (megatron-core 0.16.1 on Python 3.11).

The environment .venv-0161 is built by tests/fixtures/make_old_env.sh when missing (about a
minute); the test skips only when no Python 3.11 exists.  The inspector itself then runs under
that interpreter, so this also proves it works on Python 3.11 with an older torch.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "inspect_core_api.py")
DRIFT = os.path.join(ROOT, "tests", "fixtures", "hostile", "drift")
REFERENCES = os.path.join(ROOT, "references")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from inspector import probes  # noqa: E402
import inspector_schema as schema  # noqa: E402

pytestmark = pytest.mark.slow

EXPECTED_DRIFT = {
    "name:megatron.core.models.hybrid.hybrid_model:HybridModel": "missing",
    "signature:megatron.core.parallel_state:initialize_model_parallel": "mismatch",
    "default:TransformerConfig.gtp_weight_remat_size": "missing",
}


@pytest.fixture(scope="module")
def old_python():
    import old_envs  # builds .venv-0161 (make_old_env.sh) once across parallel workers
    return str(old_envs.python_for("0.16.1"))


@pytest.fixture(scope="module")
def old_report(old_python, tmp_path_factory):
    # One run checks the drift fixture and the bundle's own references together.
    refs = tmp_path_factory.mktemp("refs")
    # Named to sort first: a fact stated twice keeps its first source.
    shutil.copy(os.path.join(DRIFT, "reference.md"), refs / "00_drift_fixture.md")
    if os.path.isdir(REFERENCES):
        for name in os.listdir(REFERENCES):
            if name.endswith(".md"):
                shutil.copy(os.path.join(REFERENCES, name), refs / name)
    r = subprocess.run([old_python, SCRIPT, "--json", "--check-references", "--references-dir", str(refs)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def test_old_release_report_has_the_schema(old_report):
    assert schema.validate(old_report, probes.KERNELS) == []
    assert old_report["megatron_core"]["version"] == "0.16.1"
    assert old_report["python"]["version"].startswith("3.11.")


def test_known_016_differences_are_found(old_report):
    refs = old_report["references"]
    assert refs["status"] == "available"
    flagged = {r["id"]: r["status"] for r in refs["does_not_hold"] if "00_drift_fixture.md" in r["source"]}
    assert flagged == EXPECTED_DRIFT
    sig = [r for r in refs["does_not_hold"] if r["id"] == "signature:megatron.core.parallel_state:initialize_model_parallel"][0]
    assert "rank_offset" in sig["detail"]


def test_controls_that_hold_in_016_are_not_flagged(old_report):
    flagged = {r["id"] for r in old_report["references"]["does_not_hold"]}
    assert "name:megatron.core.parallel_state:destroy_model_parallel" not in flagged
    assert "default:TransformerConfig.tensor_model_parallel_size" not in flagged


def test_hybrid_objects_are_missing_in_016(old_report):
    for key in ("megatron.core.models.hybrid.hybrid_model:HybridModel",
                "megatron.core.models.hybrid.hybrid_layer_specs:hybrid_stack_spec"):
        entry = old_report["objects"][key]
        assert entry["status"] == "missing"
        assert "No module named 'megatron.core.models.hybrid'" in entry["reason"]


def test_untagged_hybrid_facts_in_the_bundle_are_flagged(old_report):
    """Any fact in references/ about megatron.core.models.hybrid, stated for 0.19.2 only
    (no version tag), cannot hold in 0.16.1 and must be listed."""
    results = old_report["references"]["does_not_hold"]
    hybrid_ids = {r["id"] for r in results if "megatron.core.models.hybrid" in r["id"]
                  and r["id"] != "name:megatron.core.models.hybrid.hybrid_model:HybridModel"}
    if not os.path.isdir(REFERENCES):
        pytest.skip("no references/ yet")
    stated = []
    for name in sorted(os.listdir(REFERENCES)):
        if name.endswith(".md"):
            with open(os.path.join(REFERENCES, name), encoding="utf-8") as f:
                stated.append(f.read())
    if "megatron.core.models.hybrid" not in "\n".join(stated):
        pytest.skip("references/ states nothing about megatron.core.models.hybrid yet")
    assert hybrid_ids, "references/ mention megatron.core.models.hybrid but no such fact was flagged"

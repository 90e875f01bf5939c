"""The default report in the real environment (megatron-core 0.19.2): schema, live signatures
matching inspect.signature, config fields, verdicts, --tiny-model counts, secrets.

One inspector run serves every test here (module fixture), so the file costs about one import
of megatron.core plus one for the independent checker.
"""
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "inspect_core_api.py")
DRIFT = os.path.join(ROOT, "tests", "fixtures", "hostile", "drift")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from inspector import STATUSES, objects, probes  # noqa: E402
import inspector_schema as schema  # noqa: E402

pytestmark = pytest.mark.slow

SECRETS = {"HF_TOKEN": "hf_inspectorTestSecret0123", "NCCL_IB_PASSWORD": "ncclTestPassw0rd!",
           "TORCH_HUB_URL": "https://bob:urlPassw0rd99@example.com/hub"}
EXTRA_OBJECTS = ["megatron.core.transformer.mlp:MLP", "megatron.core.no_such_module:X",
                 "megatron.core.parallel_state:no_such_attr"]
FILTER = "recompute"

# Computes the same facts independently, in the same interpreter, straight from the objects.
CHECKER = r"""
import dataclasses, importlib, inspect, json, sys
keys = json.loads(sys.argv[1])
out = {"signatures": {}, "verdicts": {}}
for key in keys:
    module, attr = key.split(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismethod(obj):
        try:
            out["signatures"][key] = str(inspect.signature(obj))
        except (TypeError, ValueError):
            pass
for name, (module, attr) in json.loads(sys.argv[2]).items():
    out["verdicts"][name] = getattr(importlib.import_module(module), attr)
from megatron.core.transformer.transformer_config import TransformerConfig
out["fields"] = [f.name for f in dataclasses.fields(TransformerConfig) if sys.argv[3] in f.name.lower()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def run():
    environ = dict(os.environ, **SECRETS)
    args = [sys.executable, SCRIPT, "--json", "--full", "--tiny-model", "--config-fields", FILTER,
            "--check-references", "--references-dir", DRIFT]
    for key in EXTRA_OBJECTS:
        args += ["--object", key]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300, env=environ)
    return r


@pytest.fixture(scope="module")
def report(run):
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def independent(report):
    keys = [k for k, v in report["objects"].items() if v["status"] == "available"]
    verdicts = {k: list(v) for k, v in probes.VERDICTS.items()}
    r = subprocess.run([sys.executable, "-c", CHECKER, json.dumps(keys), json.dumps(verdicts), FILTER],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_report_has_the_documented_schema(report):
    assert schema.validate(report, probes.KERNELS) == []
    assert set(report["kernels"]) == set(probes.KERNELS)


def test_versions_are_the_installed_ones(report):
    from importlib import metadata
    assert report["megatron_core"]["status"] == "available"
    assert report["megatron_core"]["version"] == metadata.version("megatron-core") == "0.19.2"
    assert report["torch"]["version"].split("+")[0] == metadata.version("torch").split("+")[0]
    assert report["megatron_core"]["path"].replace("~", os.path.expanduser("~"), 1).endswith(
        os.path.join("megatron", "core"))


def test_every_default_object_is_reported_with_a_status(report):
    for key in objects.DEFAULT_OBJECTS + tuple(EXTRA_OBJECTS[:1]):
        assert report["objects"][key]["status"] in STATUSES, key
    available = [k for k, v in report["objects"].items() if v["status"] == "available"]
    assert len(available) >= 15


def test_signatures_match_inspect_signature_of_the_installed_objects(report, independent):
    live = independent["signatures"]
    reported = {k: v["signature"] for k, v in report["objects"].items() if v.get("signature")}
    assert reported == live
    assert "rank_offset: int = 0" in reported["megatron.core.parallel_state:initialize_model_parallel"]


def test_bad_objects_are_reported_not_fatal(report):
    assert report["objects"]["megatron.core.no_such_module:X"]["status"] == "missing"
    assert "No module named 'megatron.core.no_such_module'" in report["objects"]["megatron.core.no_such_module:X"]["reason"]
    entry = report["objects"]["megatron.core.parallel_state:no_such_attr"]
    assert entry["status"] == "missing" and "no_such_attr" in entry["reason"]


def test_te_placeholders_are_reported_unavailable_never_as_classes(report):
    # This environment has no transformer_engine: megatron's TE classes are MagicMock placeholders.
    assert report["kernels"]["transformer_engine"]["status"] == "not_installed"
    assert report["megatron_core"]["verdicts"]["HAVE_TE"]["value"] is False
    te_obj = report["objects"]["megatron.core.extensions.transformer_engine:TELayerNormColumnParallelLinear"]
    assert te_obj["status"] == "missing" and "MagicMock" in te_obj["reason"]
    assert te_obj["signature"] is None
    assert "TELayerNormColumnParallelLinear" in report["megatron_core"]["te_symbols"]["magicmock"]
    assert "TEGroupedLinear" in report["megatron_core"]["te_symbols"]["none"]


def test_verdicts_equal_megatrons_own_flags(report, independent):
    reported = {k: v.get("value") for k, v in report["megatron_core"]["verdicts"].items()}
    assert reported == independent["verdicts"]


def test_config_fields_filtered_with_types_and_defaults(report, independent):
    rows = report["config_fields"]
    assert [r["name"] for r in rows] == independent["fields"] and rows
    row = {r["name"]: r for r in rows}["recompute_granularity"]
    assert row["default"] == "None" and row["defined_in"] == "TransformerConfig"


def test_tiny_model_parameter_count_matches_the_formula(report):
    tiny = report["tiny_model"]
    assert tiny["status"] == "available"
    c = tiny["config"]
    h, v, s, layers = c["hidden_size"], c["vocab_size"], c["max_sequence_length"], c["num_layers"]
    ffn = 4 * h
    per_layer = (2 * h) + (h * 3 * h + 3 * h) + (h * h + h) + (2 * h) + (h * ffn + ffn) + (ffn * h + h)
    expected = {"embedding": v * h + s * h, "decoder": layers * per_layer + 2 * h, "output_layer": v * h}
    assert tiny["parameters"]["by_child"] == expected
    assert tiny["parameters"]["total"] == sum(expected.values())


def test_drift_fixture_holds_in_this_release(report):
    refs = report["references"]
    assert refs["status"] == "available" and refs["checked"] == 5
    assert refs["does_not_hold"] == [] and refs["could_not_check"] == []


def test_secrets_never_reach_the_output(run):
    text = run.stdout + run.stderr
    for value in ("hf_inspectorTestSecret0123", "ncclTestPassw0rd!", "urlPassw0rd99"):
        assert value not in text
    env = json.loads(run.stdout)["env"]
    assert env["NCCL_IB_PASSWORD"] == "<redacted>"
    assert env["TORCH_HUB_URL"] == "https://<redacted>@example.com/hub"
    assert "HF_TOKEN" not in env  # not on the allow-list at all


def test_home_directory_is_shown_as_tilde(run):
    home = os.path.expanduser("~")
    if home in ("", "/"):
        pytest.skip("HOME is /")
    assert not re.search(re.escape(home) + r"(/|\b)", run.stdout)


def test_megatron_vcs_suffix_is_explained_when_present(report):
    core = report["megatron_core"]
    if "+" in (core.get("module_version") or ""):
        assert not core["source_checkout"] and "enclosing git repository" in core["note"]
    else:
        assert "note" not in core


def test_text_mode_prints_the_signature_of_each_requested_object(independent):
    # --help promises the signature of every --object; text mode prints it, not only --json.
    args = [sys.executable, SCRIPT]
    for key in EXTRA_OBJECTS:
        args += ["--object", key]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    block = r.stdout.split("signatures (--object):\n", 1)[1].splitlines()[:len(EXTRA_OBJECTS)]
    mlp = EXTRA_OBJECTS[0]
    assert block[0] == "  " + mlp + independent["signatures"][mlp]
    assert block[1] == "  megatron.core.no_such_module:X: missing, no signature: " \
                       "ModuleNotFoundError: No module named 'megatron.core.no_such_module'"
    assert block[2].startswith("  megatron.core.parallel_state:no_such_attr: missing, no signature: ")

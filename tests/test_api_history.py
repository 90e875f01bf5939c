"""scripts/api_history.py: its contract (names, flags, JSON keys, exit codes) under plain python3.

The CLI runs with `python3` when that is a different interpreter without torch (Python 3.11 here),
as a user's machine would; facts it prints come from the release index (tests/test_release_index.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "api_history.py"
PY = shutil.which("python3") or sys.executable


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd="/")


def js(*args: str) -> dict:
    p = run(*args, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_help_is_the_manual_and_imports_nothing_heavy():
    p = run("--help")
    assert p.returncode == 0 and p.stderr == ""
    for flag in ("--at", "--diff", "--under", "--json", "--limit", "Exit codes: 0 found, 1 unknown name"):
        assert flag in p.stdout
    code = (f"import sys; sys.argv = ['api_history.py', 'GPTModel']; sys.path.insert(0, {str(ROOT / 'scripts')!r}); "
            "import io, api_history; api_history.main(['GPTModel'], io.StringIO()); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'megatron', 'numpy')))")
    assert subprocess.run([PY, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


def test_name_json_schema():
    out = js("GPTModel")
    assert out["schema_version"] == 1 and out["name"] == "megatron.core.models.gpt.gpt_model:GPTModel"
    assert out["events"], "GPTModel changed between 0.12 and 0.19"
    for ev in out["events"]:
        assert set(ev) == {"version", "change", "detail", "successor", "inferred", "since"}
        assert ev["change"] in ("added", "removed", "renamed", "moved", "signature_changed",
                                "default_changed", "message_changed", "deprecated", "ignored", "body_changed")
        assert isinstance(ev["inferred"], bool)
    assert out["releases"][0] == "0.12.3" and out["releases"][-1] == "0.19.2"


def test_field_flag_and_module_names():
    field = js("TransformerConfig.tensor_model_parallel_size", "--at", "0.12")
    assert field["name"].endswith("ModelParallelConfig.tensor_model_parallel_size")
    assert field["at"]["release"] == "0.12.3" and field["at"]["field"]["default"] == "1"
    flag = js("--use-custom-fsdp")
    assert flag["name"] == "--use-custom-fsdp" and flag["releases"][-1] == "0.13.1"
    assert flag["events"][-1]["version"] == "0.14.0"
    mod = js("megatron.core.models.hybrid")
    assert mod["releases"][0] == "0.18.2" and mod["events"][0]["change"] == "added"


def test_at_shows_the_signature_of_that_release():
    p = run("megatron.core.parallel_state:initialize_model_parallel", "--at", "0.17")
    assert p.returncode == 0
    assert "in 0.17.1:" in p.stdout and "create_all_gather_group" in p.stdout.split("in 0.17.1:")[1]
    p = run("megatron.core.parallel_state:initialize_model_parallel", "--at", "0.18")
    assert "create_all_gather_group" not in p.stdout.split("in 0.18.2:")[1]
    out = js("HybridModel", "--at", "0.17")
    assert out["at"] == {"release": "0.17.1", "present": False}


def test_unknown_name_exits_1_with_suggestions():
    p = run("GPTModle")
    assert p.returncode == 1 and p.stdout == ""
    assert "did you mean" in p.stderr and "GPTModel" in p.stderr and len(p.stderr.splitlines()) == 1
    p = run("GPTModle", "--json")
    assert p.returncode == 1 and "GPTModel" in json.loads(p.stdout)["suggestions"]
    assert run("--use-custom-fsdpp").returncode == 1


@pytest.mark.parametrize("args", [
    [], ["GPTModel", "--at", "0.11"], ["GPTModel", "--at", "latest"], ["--diff", "0.17", "0.15"],
    ["--diff", "0.15"], ["--diff", "0.15", "0.16", "--under"], ["GPTModel", "--under", "megatron"],
    ["GPTModel", "--limit", "0"], ["--diff", "0.15", "0.15"], [""], ["GPTModel", "--bogus"]])
def test_bad_input_exits_2_with_one_line(args):
    p = run(*args)
    assert p.returncode == 2, (args, p.stdout, p.stderr)
    assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_diff_lists_every_event_between_two_releases():
    out = js("--diff", "0.17", "0.18", "--under", "megatron.core.parallel_state", "--limit", "100000")
    assert out["from"] == "0.17.1" and out["to"] == "0.18.2"
    assert all(e["version"] == "0.18.2" and e["name"].startswith("megatron.core.parallel_state")
               for e in out["events"])
    assert any(e["name"] == "megatron.core.parallel_state:initialize_model_parallel"
               and e["change"] == "signature_changed" for e in out["events"])
    whole = js("--diff", "0.12", "0.19", "--limit", "5")
    assert whole["count"] > 1000 and len(whole["events"]) == 5 and whole["truncated"] == whole["count"] - 5
    text = run("--diff", "0.15", "0.16", "--under", "--moe", "--limit", "3")
    assert text.returncode == 0 and "more" in text.stdout.splitlines()[-1]


def test_name_with_diff_restricts_events():
    every = js("megatron.core.parallel_state:initialize_model_parallel")["events"]
    some = js("megatron.core.parallel_state:initialize_model_parallel", "--diff", "0.16", "0.18")["events"]
    assert some == [e for e in every if e["version"] in ("0.17.1", "0.18.2")] and some


def test_missing_index_data_is_one_line_not_a_traceback(tmp_path):
    p = subprocess.run([PY, str(SCRIPT), "GPTModel"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, RELEASE_INDEX_DIR=str(tmp_path)))
    assert p.returncode == 2 and "make index-releases" in p.stderr and len(p.stderr.splitlines()) == 1

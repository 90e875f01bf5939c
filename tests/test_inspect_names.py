"""inspect_core_api.py --object as users type it, and --megatron-version for another release.

The spellings are those benchmark agents used (72 of their inspector calls exited 2 on them).
The oracles: the live signature of the installed 0.19.2 and of the installed 0.13.1 environment
(tests/old_envs.py), which the release-index answer for that release must agree with.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import cli_cases
import old_envs

REPO = Path(__file__).resolve().parent.parent
SCRIPT = str(REPO / "scripts" / "inspect_core_api.py")

SPELLINGS = {
    "GPTModel": "megatron.core.models.gpt.gpt_model:GPTModel",
    "PipelineParallelLayerLayout": "megatron.core.transformer.pipeline_parallel_layer_layout:PipelineParallelLayerLayout",
    "megatron.core.parallel_state.initialize_model_parallel": "megatron.core.parallel_state:initialize_model_parallel",
    "megatron.core.process_groups_config.ProcessGroupCollection.use_mpu_process_groups":
        "megatron.core.process_groups_config:ProcessGroupCollection.use_mpu_process_groups",
    "GPTModel.forward": "megatron.core.models.gpt.gpt_model:GPTModel.forward",
    "get_num_layers_to_build": "megatron.core.transformer.transformer_block:get_num_layers_to_build",
}


def _run(python, *args):
    return subprocess.run([str(python), SCRIPT, *args], capture_output=True, text=True, timeout=240,
                          cwd=REPO, env=cli_cases.env())


def _params(signature_text: str) -> list[str]:
    inner = signature_text[signature_text.index("(") + 1:signature_text.rindex(")")]
    names, depth, cur = [], 0, ""
    for ch in inner:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            names.append(cur)
            cur = ""
        else:
            cur += ch
    names.append(cur)
    out = [n.split(":")[0].split("=")[0].strip().lstrip("*") for n in names]
    return [n for n in out if n and n != "/"]  # a bare * (keyword-only marker) or / is not a parameter


@pytest.fixture(scope="module")
def live():
    # One live run for every spelling (each run imports megatron in a child: seconds), naming the
    # installed release with --megatron-version: the live import answers, not the index.
    args = [a for spelling in SPELLINGS for a in ("--object", spelling)]
    r = _run(sys.executable, "--json", "--megatron-version", "0.19", *args)
    assert r.returncode == 0, r.stderr[-500:]
    return r, json.loads(r.stdout)


def test_each_spelling_is_read_as_its_key_and_inspected_live(live):
    r, out = live
    assert "objects_from_release_index" not in out
    for spelling, key in SPELLINGS.items():
        assert f"--object {spelling} read as {key}" in r.stderr
        assert out["objects"][key]["status"] == "available", (spelling, out["objects"][key])


@pytest.mark.parametrize("bad,needle", [
    ("GPTModle", "close names: GPTModel"),
    ("megatron.core.parallel_state", "is a module; give MODULE:ATTR"),
])
def test_an_unknown_or_module_name_exits_2_in_one_line(bad, needle):
    r = _run(sys.executable, "--object", bad)
    assert r.returncode == 2 and r.stdout == ""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0]


def test_another_release_comes_from_the_index_and_agrees_with_that_release_installed():
    key = SPELLINGS["get_num_layers_to_build"]
    old = old_envs.python_for("0.13.1")
    live = _run(old, "--json", "--object", key)
    assert live.returncode == 0, live.stderr[-500:]
    live_params = _params(json.loads(live.stdout)["objects"][key]["signature"])
    r = _run(sys.executable, "--json", "--object", "get_num_layers_to_build", "--megatron-version", "0.13")
    assert r.returncode == 0, r.stderr[-500:]
    out = json.loads(r.stdout)
    assert out["megatron_version"] == "0.13.1" and out["installed_megatron_core"].startswith("0.19.2")
    sig = out["objects_from_release_index"]["objects"][key]["signature"]
    assert [p["name"] for p in sig["params"]] == live_params == ["config", "vp_stage"]


def test_another_release_without_an_object_exits_2_naming_what_to_run():
    r = _run(sys.executable, "--megatron-version", "0.13")
    assert r.returncode == 2 and "api_history.py TransformerConfig --at 0.13" in r.stderr


def test_without_megatron_the_signature_comes_from_the_index(live):
    # Plain python3 of this machine has no megatron-core: the live probe says so, and the index answers.
    r = _run(cli_cases.PLAIN, "--json", "--object", "GPTModel.forward")
    out = json.loads(r.stdout)
    key = SPELLINGS["GPTModel.forward"]
    if out["megatron_core"]["status"] == "available":
        pytest.skip("this python3 has megatron-core")
    fallback = out["objects_from_release_index"]
    assert fallback["release"] == "0.19.2"
    signature = live[1]["objects"][key]["signature"]
    assert [p["name"] for p in fallback["objects"][key]["signature"]["params"]] == _params(signature)
    text = _run(cli_cases.PLAIN, "--object", "GPTModel.forward").stdout
    assert "megatron-core is not importable here; release 0.19.2 as indexed" in text

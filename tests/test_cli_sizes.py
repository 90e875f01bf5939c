"""Bounded output (issue 22 item 7): for a typical input every script's text is at most 4 KB and its
--json at most 16 KB; --full (or a narrower flag) gives the rest.

Typical inputs are those of tests/cli_cases.py (what each --help shows first), run with plain python3
(no torch, no megatron) and, for the inspector, also with .venv (megatron-core 0.19.2 installed:
the case where its default signatures made --json 49 KB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import cli_cases

TEXT_MAX, JSON_MAX = 4096, 16384
BIG_WORLD = ["--world-size", "16384", "--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "8",
             "--num-layers", "96", "--hidden-size", "12288", "--num-attention-heads", "96", "--seq-length", "2048",
             "--max-position-embeddings", "2048", "--micro-batch-size", "1", "--global-batch-size", "1536", "--bf16"]


def _cases():
    out = []
    for script, argvs in cli_cases.TYPICAL.items():
        for argv in argvs:
            for form in ("text", "json"):
                out.append(pytest.param(script, argv, form, id=f"{script}:{' '.join(argv[:2])}:{form}"))
    for flag in ("--ranks", "--plan"):
        for world, argv in (("typical", cli_cases.LAUNCH), ("16384", BIG_WORLD)):
            if flag == "--plan" and world == "16384":
                continue
            for form in ("text", "json"):
                out.append(pytest.param("check_parallel_layout.py", argv + [flag], form,
                                        id=f"check_parallel_layout.py:{flag}:{world}:{form}"))
    return out


def _size(proc, form):
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-800:])
    if form == "json":
        json.loads(proc.stdout)
    return len(proc.stdout.encode("utf-8"))


@pytest.mark.parametrize("script,argv,form", _cases())
def test_default_output_is_bounded(script, argv, form):
    proc = cli_cases.run(script, argv + (["--json"] if form == "json" else []), timeout=300)
    assert _size(proc, form) <= (JSON_MAX if form == "json" else TEXT_MAX)


VENV_PY = os.path.join(cli_cases.REPO, ".venv", "bin", "python")


def _inspector(python, *args):
    env = cli_cases.env()
    return subprocess.run([python, str(cli_cases.REPO / "scripts" / "inspect_core_api.py"), *args],
                          capture_output=True, text=True, timeout=600, env=env, cwd=cli_cases.REPO)


@pytest.fixture(scope="module")
def installed_json():
    if not os.path.exists(VENV_PY):
        pytest.skip("no .venv with megatron-core")
    return _inspector(VENV_PY, "--json")


def test_inspector_json_with_megatron_installed_is_bounded_and_full_keeps_signatures(installed_json):
    default = json.loads(installed_json.stdout)
    assert default["megatron_core"]["status"] == "available"
    assert len(installed_json.stdout.encode()) <= JSON_MAX
    omitted = {k: v["signature_omitted"] for k, v in default["objects"].items() if "signature_omitted" in v}
    assert omitted["megatron.core.transformer.transformer_config:TransformerConfig"] > 10_000
    full = _inspector(VENV_PY, "--json", "--full")
    sigs = {k: v["signature"] for k, v in json.loads(full.stdout)["objects"].items() if v.get("signature")}
    assert {k: len(v) for k, v in sigs.items() if k in omitted} == omitted  # nothing lost, only held back
    asked = _inspector(VENV_PY, "--json", "--object", "megatron.core.models.gpt.gpt_model:GPTModel")
    entry = json.loads(asked.stdout)["objects"]["megatron.core.models.gpt.gpt_model:GPTModel"]
    assert entry["signature"] and "signature_omitted" not in entry


@pytest.mark.parametrize("args", [[], ["--check-references"]])
def test_inspector_text_with_megatron_installed_is_bounded(args):
    if not os.path.exists(VENV_PY):
        pytest.skip("no .venv with megatron-core")
    proc = _inspector(VENV_PY, *args)
    assert proc.returncode == 0, proc.stderr[-800:]
    assert len(proc.stdout.encode()) <= TEXT_MAX


def test_check_references_without_megatron_says_so_in_one_line():
    """Plain python3 has no megatron: one line on why, not a line for each of the ~250 facts."""
    proc = cli_cases.run("inspect_core_api.py", ["--check-references"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("references"))
    section = [line for line in lines[start:] if not line.startswith(("env:", "took "))]
    assert len(section) <= 2 and "megatron-core is not installed" in " ".join(section), section
    report = json.loads(cli_cases.run("inspect_core_api.py", ["--check-references", "--json"]).stdout)
    assert report["references"]["status"] == "not_installed" and "does_not_hold" not in report["references"]


def test_api_history_full_lifts_the_bound():
    proc = cli_cases.run("api_history.py", ["--diff", "0.15", "0.17", "--full"])
    assert proc.returncode == 0 and len(proc.stdout.encode()) > 10 * TEXT_MAX
    assert "more (" not in proc.stdout
    short = cli_cases.run("api_history.py", ["--diff", "0.15", "0.17"]).stdout
    assert short.rstrip().splitlines()[-1].startswith("  ... ") and "--full" in short.splitlines()[-1]

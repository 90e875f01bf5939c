"""``--build MODULE:FUNCTION``: run the user's provider in a child process (it imports torch,
megatron and the user's code; this process never does) and match a failure against the
troubleshooting catalogue with the triage script's matcher."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from . import build_child  # standard library at import time; run as a script in the child

CHILD = os.path.abspath(build_child.__file__)
TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def match(text, version):
    """triage.match_log's result, or None with the reason it is not available."""
    try:
        from triage import match_log  # noqa: PLC0415 (optional sibling package)
    except ImportError:
        return None, "the triage matcher (scripts/triage, issue 11) is not in this checkout"
    return match_log(text, megatron_version=version), None


def run_build(target, search_dirs, version, timeout, python=None):
    if not TARGET.match(target):
        raise ValueError(f"--build {target!r}: expected MODULE:FUNCTION, e.g. my_provider:model_provider")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
    cmd = [python or sys.executable, CHILD, target, *search_dirs]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=os.getcwd())
    except subprocess.TimeoutExpired:
        return {"target": target, "ok": False, "error": f"timed out after {timeout} s",
                "match": None, "match_reason": "no traceback (timeout)"}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("MODEL_REVIEW_BUILD ")]
    if not lines:
        tail = (proc.stderr or proc.stdout)[-2000:]
        return {"target": target, "ok": False, "error": f"the child exited {proc.returncode} "
                "without a result", "traceback": tail, "match": None,
                "match_reason": "no result from the child"}
    result = json.loads(lines[-1].split(" ", 1)[1])
    result["target"] = target
    if not result["ok"]:
        tb = result["traceback"]
        result["error"] = tb.strip().splitlines()[-1][:500]
        if re.search(r"No module named '(torch|megatron)'", result["error"]):
            result["hint"] = (f"{sys.executable} has no torch or megatron-core: run this "
                              "script with the Python you train with")
        result["match"], result["match_reason"] = match(tb, version)
    return result

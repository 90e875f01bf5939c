"""Hostile arguments for every flag of every script, generated from their argparse parsers.

Each flag gets values by what its parser says it takes (``tests/cli_parsers.py``): a number type
gets numbers no script can use (and words); a choice flag a value outside its choices; a string
flag a 100,000-character string and an empty one; a positional path a path that does not exist.
A new flag is covered without touching the tests. Run with plain ``python3`` (no torch, no
megatron): the scripts must answer without them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import cli_parsers

REPO = cli_parsers.REPO
PLAIN = shutil.which("python3") or sys.executable
HUGE_TEXT = "A" * 100_000
LOG = REPO / "evals" / "files" / "convert_dp_cp_not_initialized.log"
PROVIDER = REPO / "evals" / "files" / "provider_dense.py"

# The arguments that make each script do its ordinary work; a hostile flag is added to them.
BASE = {
    "api_history.py": ["GPTModel"],
    "check_parallel_layout.py": ["--world-size", "8"],
    "explain_error.py": [str(LOG)],
    "review_model_code.py": [str(PROVIDER)],
    "inspect_core_api.py": ["--timeout", "20"],
}
NUMBER_TYPES = {"int", "float", "_positive", "positive_int", "_positive_int", "nonneg_int"}
FLOAT_TYPES = {"float", "_positive"}


def env() -> dict:
    out = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    out["PYTHONDONTWRITEBYTECODE"] = "1"
    return out


def run(script: str, argv: list[str], timeout: float = 120, stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL) -> subprocess.CompletedProcess:
    return subprocess.run([PLAIN, str(REPO / "scripts" / script), *argv], stdout=stdout, stderr=subprocess.PIPE,
                          stdin=stdin, timeout=timeout, cwd=REPO, env=env(), text=True, errors="replace")


def _values(action: dict) -> list[tuple[str, list[str], bool]]:
    """(case name, values, must be rejected) for one action."""
    typ, choices = action["type"], action["choices"]
    if not action["takes_value"]:
        return []
    if choices:
        return [("not-a-choice", ["not-a-choice"], True)]
    if typ in NUMBER_TYPES or (typ and "int" in typ.lower()):
        cases = [("huge", ["99999999999999999999"], True), ("word", ["x"], True)]
        if typ in FLOAT_TYPES or (typ and "float" in typ.lower()):
            cases += [("nan", ["nan"], True), ("inf", ["inf"], True), ("negative", ["-5"], True)]
        return cases
    if action["options"] or action["nargs"] in (None, "?"):  # an option's or a single positional's text
        return [("huge-text", [HUGE_TEXT], False), ("empty", [""], False)]
    return [("missing-path", ["/nonexistent/dir/input.txt"], True)]  # FILE... / PATH...


def cases() -> list[tuple[str, str, str, list[str], bool]]:
    """(script, flag, case, argv, must be rejected) for every value-taking action of every script."""
    out = []
    for path in cli_parsers.COMMANDS:
        script = path.name
        for action in cli_parsers.parser_actions(path, PLAIN):
            flag = action["options"][0] if action["options"] else action["dest"]
            nargs = action["nargs"] if isinstance(action["nargs"], int) else 1
            for case, values, reject in _values(action):
                vals = values * max(nargs, 1)
                if action["options"]:
                    argv = BASE.get(script, []) + [f"{flag}={vals[0]}" if nargs == 1 else flag, *([] if nargs == 1 else vals)]
                else:
                    argv = vals
                out.append((script, flag, case, argv, reject))
    return out


def one_line_reason(proc: subprocess.CompletedProcess, script: str) -> bool:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return len(lines) == 1 and lines[0].startswith(script.rsplit(".", 1)[0])


LAUNCH = ["--world-size", "64", "--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "2",
          "--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32",
          "--seq-length", "4096", "--max-position-embeddings", "4096", "--micro-batch-size", "1",
          "--global-batch-size", "256", "--bf16"]
# A typical input of each script (what its --help shows first); the output-size and pipe tests run
# each with and without --json.
TYPICAL = {
    "api_history.py": [["GPTModel"], ["--diff", "0.15", "0.17"], ["--use-custom-fsdp"]],
    "check_parallel_layout.py": [LAUNCH],
    "explain_error.py": [[str(LOG)]],
    "review_model_code.py": [[str(PROVIDER)]],
    "inspect_core_api.py": [[]],
}


def run_closed_pipe(script: str, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """The script writing into a pipe whose reader has already gone (``script | head`` at its worst)."""
    r, w = os.pipe()
    os.close(r)
    try:
        return run(script, argv, timeout=timeout, stdout=w)
    finally:
        os.close(w)

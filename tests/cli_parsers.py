"""The argparse parsers of every scripts/*.py, read by running the script up to its first parse.

A child process replaces ``ArgumentParser.parse_known_args`` with a function that prints the
parser's actions as JSON and exits, then runs the script as ``__main__``: whatever flags a script
defines (today or later) are listed without the test naming them. Standard library only.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (REPO / "scripts").glob("*.py") if not p.name.startswith("_"))
# Modules beside the scripts that are libraries, not commands (no __main__ block).
COMMANDS = [p for p in SCRIPTS
            if re.search(r"^if __name__ == .__main__.:", p.read_text(encoding="utf-8"), re.M)]

_GRAB = r"""
import argparse, json, os, runpy, sys
def grab(self, args=None, namespace=None):
    out = []
    for a in self._actions:
        if isinstance(a, argparse._HelpAction):
            continue
        out.append({"options": list(a.option_strings), "dest": a.dest, "nargs": a.nargs,
                    "takes_value": a.nargs != 0, "type": getattr(a.type, "__name__", None) if a.type else None,
                    "choices": list(a.choices) if a.choices and not isinstance(a.choices, dict) else None,
                    "required": bool(a.required)})
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
    os._exit(0)
argparse.ArgumentParser.parse_known_args = grab
sys.argv = [sys.argv[1], "--json"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def parser_actions(script: Path, python: str = sys.executable) -> list[dict]:
    proc = subprocess.run([python, "-c", _GRAB, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    if proc.returncode != 0 or not proc.stdout.startswith("["):
        raise RuntimeError(f"{script.name}: no parser captured (rc {proc.returncode}): {proc.stderr[-400:]}")
    return json.loads(proc.stdout)

#!/usr/bin/env python3
"""Run one command for an answering agent and log what it cost (standard library only).

  python3 RUN/bin/logged.py LABEL --start          mark the start of the task (first call)
  python3 RUN/bin/logged.py LABEL -- COMMAND ...   run COMMAND, pass its output through, and append
                                                   one JSON line to RUN/logs/LABEL.jsonl

COMMAND is either one argument, a bash command line (``-- 'grep -n x f | head'``), or several
arguments, the words of one command as the calling shell passed them (``-- grep -n "a b" f``):
those are quoted again (shlex), so a quoted pattern or ``python3 -c 'print(1)'`` reaches the
command as typed. (Until 2026-12-02 they were joined with spaces and re-read by bash, which split
quoted arguments and made agents of both conditions retry or read far more than they asked for.)

Each line (schema_version 1): {"label", "n", "command", "exit_code", "stdout_bytes", "stderr_bytes",
"start", "end"} with times in seconds since the epoch. The benchmark's report counts tool calls,
bytes read and wall time from these lines, so a file is read through it too
(``logged.py LABEL -- cat FILE`` or ``-- sed -n 1,80p FILE``). Exit code: the command's own;
2 for bad arguments.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

LOGS = Path(__file__).resolve().parent.parent / "logs"
LABEL_RE = re.compile(r"t[0-9a-f]{6}")


def _append(label: str, record: dict) -> None:
    LOGS.mkdir(exist_ok=True)
    path = LOGS / f"{label}.jsonl"
    n = sum(1 for _ in path.open()) if path.exists() else 0
    with path.open("a") as f:
        f.write(json.dumps({"schema_version": 1, "label": label, "n": n, **record}) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not LABEL_RE.fullmatch(argv[0]) or argv[1] not in ("--start", "--"):
        print("usage: logged.py LABEL --start | logged.py LABEL -- COMMAND ...", file=sys.stderr)
        return 2
    label = argv[0]
    if argv[1] == "--start":
        now = time.time()
        _append(label, {"command": "--start", "exit_code": 0, "stdout_bytes": 0, "stderr_bytes": 0, "start": now, "end": now})
        return 0
    words = argv[2:]
    command = words[0] if len(words) == 1 else shlex.join(words)
    if not command.strip():
        print("logged.py: empty command", file=sys.stderr)
        return 2
    start = time.time()
    p = subprocess.run(["bash", "-c", command], capture_output=True)
    end = time.time()
    sys.stdout.buffer.write(p.stdout)
    sys.stderr.buffer.write(p.stderr)
    _append(label, {"command": command, "exit_code": p.returncode, "stdout_bytes": len(p.stdout),
                    "stderr_bytes": len(p.stderr), "start": start, "end": end})
    return p.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

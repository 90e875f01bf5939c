#!/usr/bin/env python3
"""Run one command for an answering agent and log what it cost (standard library only).

  python3 RUN/bin/logged.py LABEL --start          mark the start of the task (first call)
  python3 RUN/bin/logged.py LABEL -- COMMAND ...   run COMMAND with bash, pass its output through,
                                                   and append one JSON line to RUN/logs/LABEL.jsonl

Each line (schema_version 1): {"label", "n", "command", "exit_code", "stdout_bytes", "stderr_bytes",
"start", "end"} with times in seconds since the epoch. The benchmark's report counts tool calls,
bytes read and wall time from these lines, so a file is read through it too
(``logged.py LABEL -- cat FILE`` or ``-- sed -n 1,80p FILE``). Exit code: the command's own;
2 for bad arguments.
"""

from __future__ import annotations

import json
import re
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
    command = " ".join(argv[2:])
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

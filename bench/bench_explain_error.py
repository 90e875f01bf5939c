#!/usr/bin/env python3
"""Benchmark scripts/explain_error.py on a 50 MB multi-rank training log against `grep -F`.

The log is generated (tests/triage_logs.py): iteration lines from eight ranks with, about once
in a thousand lines, an NCCL INFO, dataset or logging WARNING line, and one error printed by
three ranks near the end ("training log"). A second case ("warning-heavy") makes every line
one of the five kinds at random, so a fifth of all lines is a WARNING line the script must look
at. Each round runs every command on the same file, in turn; the report gives the median and
best wall times and their ratio to `grep -F` for the error's fixed text (on a loaded machine the
best run is the least disturbed one). The target (issue 19): a 50 MB log in under 2 s, with
the error placed both by its catalogue entry and at its raise site (the release index of every
release is read for that; the bench fails when either is missing).

  python bench/bench_explain_error.py [--rounds N] [--megabytes M]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "explain_error.py")
sys.path.insert(0, os.path.join(ROOT, "tests"))

import triage_logs  # noqa: E402

MESSAGE = "ValueError: num_attention_heads (12) must be a multiple of tensor_model_parallel_size (8)."
NEEDLE = "must be a multiple of tensor_model_parallel_size"
TARGET_S = 2.0


def write_log(path: str, megabytes: int, warning_every: int) -> int:
    block = ("\n".join(triage_logs.noise(5000, seed=1, warning_every=warning_every)) + "\n").encode()
    with open(path, "wb") as f:
        while f.tell() < megabytes * 1_000_000:
            f.write(block)
        f.write(triage_logs.multi_rank_log(MESSAGE, ranks=(1, 3, 6)).encode())
        return f.tell()


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True)
    return time.perf_counter() - t, r


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--megabytes", type=int, default=50)
    args = p.parse_args()
    grep = shutil.which("grep")
    if grep is None:
        print("bench_explain_error: no grep on PATH; nothing to compare with", file=sys.stderr)
        return 1
    for label, every in (("training log", 1000), ("warning-heavy", 0)):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "job.log")
            size = write_log(log, args.megabytes, every)
            cases = {"grep -F": [grep, "-F", NEEDLE, log],
                     "explain_error.py": [sys.executable, SCRIPT, "--json", log]}
            times = {k: [] for k in cases}
            for _ in range(args.rounds):
                for name, cmd in cases.items():
                    dt, r = timed(cmd)
                    if name == "explain_error.py" and (r.returncode != 0 or b'"TP-01"' not in r.stdout
                                                       or b'"function": "TransformerConfig.__post_init__"' not in r.stdout):
                        print(f"explain_error.py did not find TP-01 and its raise site: rc={r.returncode} "
                              f"{r.stderr[-500:]!r}", file=sys.stderr)
                        return 1
                    times[name].append(dt)
        med = {k: statistics.median(v) for k, v in times.items()}
        best = {k: min(v) for k, v in times.items()}  # the least disturbed run, on a shared machine
        print(f"{label}: {size / 1e6:.1f} MB, {args.rounds} rounds, wall time median / best")
        for name in times:
            print(f"  {name:18s} {med[name] * 1000:8.1f} ms / {best[name] * 1000:8.1f} ms")
        print(f"  ratio explain_error.py / grep -F: median {med['explain_error.py'] / med['grep -F']:.1f}x, "
              f"best {best['explain_error.py'] / best['grep -F']:.1f}x")
        print(f"  target 2 s: best {'met' if best['explain_error.py'] < TARGET_S else 'MISSED'}, "
              f"median {'met' if med['explain_error.py'] < TARGET_S else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Benchmark scripts/api_history.py against a bare `python -c pass`.

Each round runs every case once, in turn (interleaved, so machine load hits all cases alike);
the report gives the median wall time per case and its ratio to the bare interpreter start
measured in the same run. The issue's target: every query under one second.

  python bench/bench_api_history.py [--rounds N] [--python PATH]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "api_history.py")

CASES = {
    "python -c pass": ["-c", "pass"],
    "class (GPTModel)": [SCRIPT, "GPTModel"],
    "field --at 0.12 --json": [SCRIPT, "TransformerConfig.num_layers", "--at", "0.12", "--json"],
    "flag (--use-custom-fsdp)": [SCRIPT, "--use-custom-fsdp"],
    "unknown short name (fuzzy)": [SCRIPT, "GPTModle"],
    "unknown dotted name (fuzzy)": [SCRIPT, "megatron.core.models.gpt.gpt_modle.GPTModel"],
    "--diff 0.12 0.19 --json (all)": [SCRIPT, "--diff", "0.12", "0.19", "--json", "--limit", "1000000"],
}


def once(python, argv):
    start = time.perf_counter()
    proc = subprocess.run([python, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr.decode()[-300:]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="interpreter to run the script with")
    args = parser.parse_args()
    times = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for name, argv in CASES.items():
            times[name].append(once(args.python, argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'case':<32} {'median s':>9} {'max s':>7} {'x python -c pass':>17}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<32} {med:>9.3f} {max(values):>7.3f} {med / base:>17.1f}")
    worst = max(statistics.median(v) for k, v in times.items() if k != "python -c pass")
    print(f"slowest query (median): {worst:.3f} s ({'under' if worst < 1 else 'OVER'} the 1 s target)")


if __name__ == "__main__":
    main()

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
import sys

import timing  # bench/timing.py (this folder is on sys.path when a bench runs)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "api_history.py")

CASES = {
    timing.BASELINE: ["-c", "pass"],
    "class (GPTModel)": [SCRIPT, "GPTModel"],
    "field --at 0.12 --json": [SCRIPT, "TransformerConfig.num_layers", "--at", "0.12", "--json"],
    "flag (--use-custom-fsdp)": [SCRIPT, "--use-custom-fsdp"],
    "unknown short name (fuzzy)": [SCRIPT, "GPTModle"],
    "unknown dotted name (fuzzy)": [SCRIPT, "megatron.core.models.gpt.gpt_modle.GPTModel"],
    "--diff 0.12 0.19 --json (all)": [SCRIPT, "--diff", "0.12", "0.19", "--json", "--limit", "1000000"],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="interpreter to run the script with")
    args = parser.parse_args()
    times = timing.rounds({name: [args.python, *argv] for name, argv in CASES.items()}, args.rounds)
    timing.print_table(times, width=32)
    worst = max(statistics.median(v) for k, v in times.items() if k != timing.BASELINE)
    print(f"slowest query (median): {worst:.3f} s ({'under' if worst < 1 else 'OVER'} the 1 s target)")


if __name__ == "__main__":
    main()

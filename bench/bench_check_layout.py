#!/usr/bin/env python3
"""Benchmark scripts/check_parallel_layout.py against a bare `python -c pass`.

Each round runs every case once, in turn (interleaved, so machine load hits
all cases alike); the report gives the median wall time per case and its
ratio to the bare interpreter start measured in the same run.  The issue's
target: --plan for 16,384 GPUs under one second.

  python bench/bench_check_layout.py [--rounds N]
"""

import argparse
import os
import sys

import timing  # bench/timing.py (this folder is on sys.path when a bench runs)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check_parallel_layout.py")

GPT3 = ("--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 "
        "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 4096 "
        "--vocab-size 51200 --bf16 --use-distributed-optimizer --sequence-parallel").split()
MOE = ("--num-layers 61 --hidden-size 7168 --num-attention-heads 128 --seq-length 4096 "
       "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 16384 "
       "--vocab-size 129280 --bf16 --use-distributed-optimizer --num-experts 256 "
       "--moe-ffn-hidden-size 2048 --moe-router-topk 8 --disable-bias-linear --swiglu "
       "--position-embedding-type rope").split()

CASES = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "check (1536 GPUs)": [sys.executable, SCRIPT, "--world-size", "1536",
                          "--tensor-model-parallel-size", "8",
                          "--pipeline-model-parallel-size", "12"] + GPT3[:-9] +
                         ["--micro-batch-size", "1", "--global-batch-size", "1536",
                          "--vocab-size", "51200", "--bf16", "--json"],
    "check --ranks (1024 GPUs)": [sys.executable, SCRIPT, "--world-size", "1024",
                                  "--tensor-model-parallel-size", "8",
                                  "--pipeline-model-parallel-size", "8", "--ranks",
                                  "--json"] + GPT3,
    "plan dense (16384 GPUs)": [sys.executable, SCRIPT, "--world-size", "16384", "--plan",
                                "--json"] + GPT3,
    "plan MoE 256 experts (16384 GPUs)": [sys.executable, SCRIPT, "--world-size", "16384",
                                          "--plan", "--json"] + MOE,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    times = timing.rounds(CASES, args.rounds)
    timing.print_table(times)
    worst_plan = max(max(v) for k, v in times.items() if k.startswith("plan"))
    print(f"slowest --plan run: {worst_plan:.3f} s "
          f"({'under' if worst_plan < 1 else 'OVER'} the 1 s target)")


if __name__ == "__main__":
    main()

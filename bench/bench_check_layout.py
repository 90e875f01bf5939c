#!/usr/bin/env python3
"""Benchmark scripts/check_parallel_layout.py against a bare `python -c pass`.

Each round runs every case once, in turn (interleaved, so machine load hits
all cases alike); the report gives the median wall time per case and its
ratio to the bare interpreter start measured in the same run.  Targets:
--plan for 1,024 GPUs under one second with the performance model (issue
21), compared with the --plan before it (the checker at BASELINE_COMMIT,
unpacked from git into a temporary folder, run in the same rounds).

  python bench/bench_check_layout.py [--rounds N]
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile

import timing  # bench/timing.py (this folder is on sys.path when a bench runs)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check_parallel_layout.py")
# The last commit whose --plan ranked by the bubble + communication heuristic.
BASELINE_COMMIT = "e112b6e"

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


def baseline_script(tmp):
    """check_parallel_layout.py at BASELINE_COMMIT, or None outside a git clone."""
    try:
        archive = subprocess.run(["git", "-C", ROOT, "archive", BASELINE_COMMIT, "scripts",
                                  "references/index"],
                                 capture_output=True, check=True, timeout=60).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.join(tmp, "scripts", "check_parallel_layout.py")


QWEN_MOE = ("--num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --num-attention-heads 32 "
            "--group-query-attention --num-query-groups 4 --kv-channels 128 --num-experts 128 "
            "--moe-ffn-hidden-size 768 --moe-router-topk 8 --swiglu --disable-bias-linear "
            "--vocab-size 151936 --seq-length 4096 --max-position-embeddings 4096 "
            "--global-batch-size 512 --bf16 --use-distributed-optimizer").split()


def plan_moe_1024(script):
    """A 128-expert model with the micro batch left free: the planner's largest search here."""
    return [sys.executable, script, "--world-size", "1024", "--plan", "--json"] + QWEN_MOE


def plan_1024(script):
    return [sys.executable, script, "--world-size", "1024", "--plan", "--json"] + GPT3[:4] + \
        GPT3[4:]


def cpu_seconds(argv):
    """User + system CPU seconds of one run of ``argv`` (the child's rusage): what a run costs
    whatever else loads the machine, which wall time on a shared machine does not show."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120,
                   check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def cpu_report(cases, n):
    """CPU seconds (fastest of ``n`` interleaved rounds) of the --plan cases and their baselines."""
    names = [k for k in cases if k.startswith("plan") and "1024" in k]
    best = {k: float("inf") for k in names}
    for _ in range(n):
        for k in names:
            best[k] = min(best[k], cpu_seconds(cases[k]))
    lines = [f"cpu (user+sys, fastest round) {k:<44} {best[k]:.3f} s" for k in names]
    for k in names:
        old = f"{k} @{BASELINE_COMMIT}"
        if old in best:
            lines.append(f"cpu ratio '{k}': x{best[k] / best[old]:.2f} the --plan of "
                         f"{BASELINE_COMMIT}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    cases = dict(CASES)
    cases["plan dense (1024 GPUs)"] = plan_1024(SCRIPT)
    cases["plan MoE, mbs free (1024 GPUs)"] = plan_moe_1024(SCRIPT)
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline_script(tmp)
        if old:
            cases[f"plan dense (1024 GPUs) @{BASELINE_COMMIT}"] = plan_1024(old)
            cases[f"plan MoE, mbs free (1024 GPUs) @{BASELINE_COMMIT}"] = plan_moe_1024(old)
        times = timing.rounds(cases, args.rounds)
        cpu_lines = cpu_report(cases, args.rounds) if old else []
    timing.print_table(times, width=44)
    if old:
        import statistics
        new_s = statistics.median(times["plan dense (1024 GPUs)"])
        old_s = statistics.median(times[f"plan dense (1024 GPUs) @{BASELINE_COMMIT}"])
        print(f"--plan 1024 GPUs: {new_s:.3f} s, x{new_s / old_s:.2f} the --plan of "
              f"{BASELINE_COMMIT} ({old_s:.3f} s)")
        moe_s = statistics.median(times["plan MoE, mbs free (1024 GPUs)"])
        moe_old = statistics.median(times[f"plan MoE, mbs free (1024 GPUs) @{BASELINE_COMMIT}"])
        print(f"--plan MoE 1024 GPUs, micro batch free: {moe_s:.3f} s, x{moe_s / moe_old:.2f} "
              f"the --plan of {BASELINE_COMMIT} ({moe_old:.3f} s; it did not vary the micro "
              "batch)")
        print("\n".join(cpu_lines))
    for case in ("plan dense (1024 GPUs)", "plan MoE, mbs free (1024 GPUs)"):
        worst = max(times[case])
        print(f"slowest '{case}' run: {worst:.3f} s "
              f"({'under' if worst < 1 else 'OVER'} the 1 s target)")


if __name__ == "__main__":
    main()

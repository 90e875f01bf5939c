#!/usr/bin/env python3
"""Benchmark: the default `inspect_core_api.py --json` run against a bare `import megatron.core`.

Both are run as fresh processes with the same interpreter, interleaved (the order alternates
every round so neither always gets the warmer cache), for several rounds; the ratio of the
medians is printed.  Goal from issue 6: at most 1.3x.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "inspect_core_api.py")
GOAL = 1.3


def timed(argv):
    start = time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=900)
    elapsed = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit("bench_inspector: %s exited %d" % (argv[1:3], r.returncode))
    return elapsed, r.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--python", default=sys.executable, help="interpreter to measure (default: this one)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = p.parse_args()
    bare_argv = [args.python, "-c", "import megatron.core"]
    inspect_argv = [args.python, SCRIPT, "--json"]
    timed(bare_argv)  # warm the file cache once, untimed
    bare, insp = [], []
    for i in range(args.rounds):
        order = [(bare_argv, bare), (inspect_argv, insp)]
        for argv, sink in (order if i % 2 == 0 else order[::-1]):
            elapsed, out = timed(argv)
            sink.append(elapsed)
            if argv is inspect_argv:
                json.loads(out)  # the run must have produced a valid report
    result = {"rounds": args.rounds, "python": args.python,
              "bare_import_median_s": round(statistics.median(bare), 3),
              "inspect_json_median_s": round(statistics.median(insp), 3),
              "bare_import_s": [round(x, 3) for x in bare], "inspect_json_s": [round(x, 3) for x in insp]}
    result["ratio"] = round(result["inspect_json_median_s"] / result["bare_import_median_s"], 3)
    result["goal"] = GOAL
    if args.json:
        print(json.dumps(result))
    else:
        print("bare `import megatron.core`: median %.2f s  %s" % (result["bare_import_median_s"], result["bare_import_s"]))
        print("inspect_core_api.py --json:  median %.2f s  %s" % (result["inspect_json_median_s"], result["inspect_json_s"]))
        print("ratio %.2fx (goal <= %.1fx, %d rounds, interleaved)" % (result["ratio"], GOAL, args.rounds))


if __name__ == "__main__":
    main()

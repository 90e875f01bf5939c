#!/usr/bin/env python3
"""Benchmark: the default `inspect_core_api.py --json` run against a bare `import megatron.core`.

Both are run as fresh processes with the same interpreter, interleaved (the order alternates
every round so neither always gets the warmer cache), for several rounds; the ratio of the
medians is printed.  Goal from issue 6: at most 1.3x.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "inspect_core_api.py")
GOAL = 1.3


def _children_cpu():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(argv, cpu_sink=None):
    """Wall seconds of one run; its CPU seconds (grandchildren included) go to cpu_sink."""
    cpu0, start = _children_cpu(), time.perf_counter()
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=900)
    elapsed = time.perf_counter() - start
    if cpu_sink is not None:
        cpu_sink.append(_children_cpu() - cpu0)
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
    bare, insp, bare_cpu, insp_cpu = [], [], [], []
    for i in range(args.rounds):
        order = [(bare_argv, bare, bare_cpu), (inspect_argv, insp, insp_cpu)]
        for argv, sink, cpu_sink in (order if i % 2 == 0 else order[::-1]):
            elapsed, out = timed(argv, cpu_sink)
            sink.append(elapsed)
            if argv is inspect_argv:
                json.loads(out)  # the run must have produced a valid report
    result = {"rounds": args.rounds, "python": args.python,
              "bare_import_median_s": round(statistics.median(bare), 3),
              "inspect_json_median_s": round(statistics.median(insp), 3),
              "bare_import_s": [round(x, 3) for x in bare], "inspect_json_s": [round(x, 3) for x in insp]}
    result["ratio"] = round(result["inspect_json_median_s"] / result["bare_import_median_s"], 3)
    # CPU seconds (user+sys, all processes of the run) depend far less on other load than wall time.
    result["cpu_ratio"] = round(statistics.median(insp_cpu) / statistics.median(bare_cpu), 3)
    result["bare_import_cpu_median_s"] = round(statistics.median(bare_cpu), 3)
    result["inspect_json_cpu_median_s"] = round(statistics.median(insp_cpu), 3)
    result["load_average_1min"] = round(os.getloadavg()[0], 2)
    result["cpus"] = os.cpu_count()
    result["goal"] = GOAL
    if args.json:
        print(json.dumps(result))
    else:
        print("bare `import megatron.core`: median %.2f s  %s" % (result["bare_import_median_s"], result["bare_import_s"]))
        print("inspect_core_api.py --json:  median %.2f s  %s" % (result["inspect_json_median_s"], result["inspect_json_s"]))
        print("wall ratio %.2fx (goal <= %.1fx, %d rounds, interleaved)" % (result["ratio"], GOAL, args.rounds))
        print("cpu ratio %.2fx (user+sys of every process: %.2f s vs %.2f s)" % (
            result["cpu_ratio"], result["inspect_json_cpu_median_s"], result["bare_import_cpu_median_s"]))
        print("machine: %d cpus, 1-min load average %.2f at the end" % (result["cpus"], result["load_average_1min"]))


if __name__ == "__main__":
    main()

"""Shared by the CLI benchmarks: interleaved rounds of fresh processes, a table of medians and
ratios against the bare interpreter start measured in the same run (the case named BASELINE).
Importing it runs nothing (`make bench` also runs this file: it just returns)."""

import statistics
import subprocess
import time

BASELINE = "python -c pass"


def once(argv, ok=(0, 1)):
    """Wall seconds of one run; an exit code outside ok stops the benchmark."""
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{argv[:4]} failed: {proc.stderr.decode()[-300:]}")
    return elapsed


def rounds(cases, n):
    """{case: [seconds per round]}; each round runs every case once, in turn, so load hits all alike."""
    times = {name: [] for name in cases}
    for _ in range(n):
        for name, argv in cases.items():
            times[name].append(once(argv))
    return times


def print_table(times, width=36):
    base = statistics.median(times[BASELINE])
    print(f"{'case':<{width}} {'median s':>9} {'max s':>7} {'x python -c pass':>17}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:<{width}} {med:>9.3f} {max(values):>7.3f} {med / base:>17.1f}")

#!/usr/bin/env python3
"""Fit the performance model's constants on the fit rows of tests/data/perf_split.json and write
scripts/parallel_layout/perf_calibration.json; print the fit and held-out error tables.

  .venv/bin/python dev/fit_performance.py [--check]   (--check: refit, compare, write nothing)
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import calibration as C  # noqa: E402
from parallel_layout import performance as P  # noqa: E402

BASE = {"default": [0.5, 1.0, 0.0], "borrow": {"h200": "h100"}}


def compute():
    pub, models, split = C.load(os.path.join(ROOT, "tests", "data"))
    fit_rows, test_rows = C.split(pub["rows"], split)
    fit_items, _ = C.prepared(fit_rows, models)
    calib = C.fit(fit_items, {**BASE, "constants": {}})
    calib["borrow"] = {"h200": "h100"}
    calib["fitted_on"] = {
        "data": "tests/data/perf_published.json (Megatron-Bridge %s@%s)" % (
            pub["source"]["repo"], pub["source"]["commit"][:12]),
        "releases": split["fit_releases"], "rows": len(fit_items),
        "held_out_releases": split["test_releases"],
        "constants": "per GPU and precision: [GEMM efficiency, element-wise factor, MoE layer latency in seconds]"}
    return calib, fit_items, C.prepared(test_rows, models)[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    calib, fit_items, test_items = compute()
    print("fit rows:\n" + C.format_table(C.error_rows(fit_items, calib)))
    print("held-out rows:\n" + C.format_table(C.error_rows(test_items, calib)))
    if args.check:
        same = calib == P.load_calibration()
        print("shipped calibration is", "current" if same else "STALE")
        return 0 if same else 1
    with open(P.CALIBRATION, "w") as fh:
        json.dump(calib, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

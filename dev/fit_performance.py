#!/usr/bin/env python3
"""Fit the performance model's constants on the fit rows of tests/data/perf_split.json and write
scripts/parallel_layout/perf_calibration.json and the error table tests/data/perf_error_table.json
(every fit and held-out row, the rows the model cannot represent and why, the --plan rank of each
held-out layout, the software drift between releases); print the tables.

  .venv/bin/python dev/fit_performance.py [--check]   (--check: recompute, compare, write nothing)
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import calibration as C  # noqa: E402
from parallel_layout import performance as P  # noqa: E402

TABLE = os.path.join(ROOT, "tests", "data", "perf_error_table.json")
BASE = {"default": [0.5, 1.0, 0.0], "borrow": {"h200": "h100"}}
# Candidates for performance.gemm_seconds' half_dim (one constant for every GPU), chosen by the
# fit rows' summed squared log error; the held-out rows play no part.
GEMM_HALF_DIMS = (0, 256, 512, 1024, 2048)


def compute():
    pub, models, split = C.load(os.path.join(ROOT, "tests", "data"))
    fit_rows, test_rows = C.split(pub["rows"], split)
    fit_items, _ = C.prepared(fit_rows, models)
    losses = {}
    for half_dim in GEMM_HALF_DIMS:
        trial = C.fit(fit_items, {**BASE, "gemm_half_dim": half_dim, "constants": {}})
        losses[half_dim] = round(sum(e * e for e in C._log_errors(fit_items, trial)), 4)
    best = min(GEMM_HALF_DIMS, key=lambda d: losses[d])
    calib = C.fit(fit_items, {**BASE, "gemm_half_dim": best, "constants": {}})
    calib["gemm_half_dim_fit_loss"] = {str(d): v for d, v in losses.items()}
    calib["borrow"] = {"h200": "h100"}
    calib["fitted_on"] = {
        "data": "tests/data/perf_published.json (Megatron-Bridge %s@%s)" % (
            pub["source"]["repo"], pub["source"]["commit"][:12]),
        "releases": split["fit_releases"], "rows": len(fit_items),
        "held_out_releases": split["test_releases"],
        "constants": "per GPU: GEMM efficiency per precision class (bf16, fp8 = FP8 and "
                     "MXFP8, nvfp4), element-wise factor, MoE layer latency in seconds; for "
                     "all GPUs the GEMM half-efficiency dimension (gemm_half_dim, the candidate "
                     "of GEMM_HALF_DIMS with the least fit-row loss)"}
    return calib, fit_items, C.prepared(test_rows, models)[0]


def error_table(calib, fit_items, test_items):
    """The artefact tests/test_layout_perf.py recomputes."""
    pub, models, split = C.load(os.path.join(ROOT, "tests", "data"))
    fit_rows, test_rows = C.split(pub["rows"], split)
    test_errors = C.error_rows(test_items, calib)
    ranks = C.plan_ranks(test_items, calib)
    ranked = [r for r in ranks if r["rank"] is not None]
    return {
        "note": "Recomputed by dev/fit_performance.py and tests/test_layout_perf.py; error = "
                "predicted / measured - 1 of tokens/s/GPU.",
        "fit": {"rows": C.error_rows(fit_items, calib),
                "summary": _summary(C.error_rows(fit_items, calib))},
        "held_out": {"rows": test_errors, "summary": _summary(test_errors)},
        "not_representable": [
            {"id": r["id"], "why": why} for r, why in
            C.prepared(fit_rows, models)[1] + C.prepared(test_rows, models)[1]],
        "plan_ranks": {"rows": ranks,
                       "top3": sum(1 for r in ranked if r["rank"] <= 3),
                       "ranked": len(ranked), "held_out": len(ranks)},
        "release_drift_26.04.01_to_26.06": C.release_drift(pub["rows"], "26.04.01", "26.06"),
        "persistence_floor": persistence_floor(pub["rows"], split, test_errors),
    }


def persistence_floor(rows, split, test_errors):
    """The floor under the held-out error that the split allows (calibration.persistence_rows),
    beside the model's own error on the same rows."""
    floor = C.persistence_rows(rows, split, {e["id"]: e["moe"] for e in test_errors})
    same = {f["id"] for f in floor}
    model = [e for e in test_errors if e["id"] in same]
    return {"note": "Each held-out row whose setting (model, system, precision, GPUs, batch, "
                    "layout) was published in a fit release, predicted by its own measurement "
                    "in the newest such release: no model fitted on the fit releases knows more "
                    "of an unchanged setting.",
            "rows": floor, "summary": _summary(floor), "model_on_same_rows": _summary(model)}


def _summary(errors):
    return {f"{gpu}/{prec}": v for (gpu, prec), v in C.summary(errors).items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    calib, fit_items, test_items = compute()
    table = error_table(calib, fit_items, test_items)
    print("fit rows:\n" + C.format_table(C.error_rows(fit_items, calib)))
    print("held-out rows:\n" + C.format_table(C.error_rows(test_items, calib)))
    ranks = table["plan_ranks"]
    floor = table["persistence_floor"]["summary"]["all/all"]
    print(f"persistence floor ({floor['rows']} held-out rows, each predicted by its own setting's "
          f"latest fit-release measurement): median {floor['median_abs_error']:.1%}, max "
          f"{floor['max_abs_error']:.1%}")
    print(f"--plan top 3: {ranks['top3']} of {ranks['held_out']} held-out layouts "
          f"({ranks['ranked']} ranked at all)")
    if args.check:
        same = calib == P.load_calibration() and json.loads(json.dumps(table)) == _load(TABLE)
        print("shipped calibration and error table are", "current" if same else "STALE")
        return 0 if same else 1
    with open(P.CALIBRATION, "w") as fh:
        json.dump(calib, fh, indent=1, sort_keys=True)
        fh.write("\n")
    with open(TABLE, "w") as fh:
        json.dump(table, fh, indent=0, sort_keys=True)
        fh.write("\n")
    return 0


def _load(path):
    with open(path) as fh:
        return json.load(fh)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The performance model against Megatron-Bridge's published tokens/s/GPU: the error table per GPU
and precision on the fit rows and on the held-out rows (newer releases, never used to fit), the
rows the model cannot represent, the --plan rank of each held-out published layout, and the
software drift of unchanged settings between two releases.  Recomputed from tests/data and the
shipped constants (tests/test_layout_perf.py checks the same numbers).

  python bench/bench_perf_model.py [--rows]
"""

import argparse
import collections
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "dev"))

from parallel_layout import calibration as C  # noqa: E402
from parallel_layout import performance as P  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", action="store_true", help="also print every held-out row")
    parser.add_argument("--newest-only", action="store_true",
                        help="diagnostic, not the frozen split: refit on every release before "
                             "the newest and judge the newest alone (MoE rows only)")
    args = parser.parse_args()
    if args.newest_only:
        return newest_only()
    pub, models, split = C.load(os.path.join(ROOT, "tests", "data"))
    fit_rows, test_rows = C.split(pub["rows"], split)
    calib = P.load_calibration()
    fit_items, fit_skipped = C.prepared(fit_rows, models)
    test_items, test_skipped = C.prepared(test_rows, models)
    start = time.perf_counter()
    fit_errors = C.error_rows(fit_items, calib)
    test_errors = C.error_rows(test_items, calib)
    per_row = (time.perf_counter() - start) / max(1, len(fit_errors) + len(test_errors))
    print(f"fit releases {', '.join(split['fit_releases'])}: {len(fit_errors)} rows")
    print(C.format_table(fit_errors))
    print(f"\nheld out, releases {', '.join(split['test_releases'])}: {len(test_errors)} rows")
    print(C.format_table(test_errors))
    for kind, moe in (("dense", False), ("MoE", True)):
        errs = [abs(e["error"]) for e in test_errors if e["moe"] is moe]
        if errs:
            print(f"  {kind}: {len(errs)} rows, median |err| {statistics.median(errs):.1%}, "
                  f"max {max(errs):.1%}")
    if args.rows:
        for e in sorted(test_errors, key=lambda e: e["error"]):
            print(f"  {e['error']:+7.1%}  {e['id']}")
    why = collections.Counter(w for _, w in fit_skipped + test_skipped)
    print(f"\nnot representable: {sum(why.values())} rows")
    for reason, n in why.most_common():
        print(f"  {n:>3}  {reason}")
    ranks = C.plan_ranks(test_items, calib)
    ranked = [r for r in ranks if r["rank"] is not None]
    top3 = sum(1 for r in ranked if r["rank"] <= 3)
    print(f"\n--plan: published layout in the top 3 for {top3} of {len(ranks)} held-out rows "
          f"({top3 / len(ranks):.0%}); {len(ranked)} ranked at all, median rank "
          f"{statistics.median(r['rank'] for r in ranked) if ranked else '-'}")
    if ranked:
        gaps = [r["first_over_published"] for r in ranked]
        print(f"  the plan's first is predicted {statistics.median(gaps):.1%} faster than the "
              f"published layout (median; {sum(1 for g in gaps if g <= 0.05)} of {len(gaps)} "
              "within 5%)")
    drift = C.release_drift(pub["rows"], "26.04.01", "26.06")
    print(f"\nsoftware drift 26.04.01 -> 26.06 on {len(drift)} unchanged settings: median "
          f"x{statistics.median(drift.values()):.3f}, range x{min(drift.values()):.2f} .. "
          f"x{max(drift.values()):.2f}")
    import fit_performance
    floor = fit_performance.persistence_floor(pub["rows"], split, test_errors)
    print(f"\npersistence floor: {len(floor['rows'])} held-out rows whose setting a fit release "
          "published, each predicted by that setting's newest fit-release measurement")
    for key, s in sorted(floor["summary"].items(), key=lambda kv: (kv[0] == "all/all", kv[0])):
        model = floor["model_on_same_rows"][key]
        print(f"  {key:<12} {s['rows']:>3} rows  floor median {s['median_abs_error']:6.1%} max "
              f"{s['max_abs_error']:6.1%}   model median {model['median_abs_error']:6.1%} max "
              f"{model['max_abs_error']:6.1%}")
    print(f"\nprediction: {per_row * 1e6:.0f} us per layout")


def newest_only():
    """Refit on all releases but the newest, judge the newest: how well the model's structure
    predicts a release whose software the fit has nearly seen (chosen after the frozen split's
    result, so a diagnostic, not a held-out claim)."""
    import fit_performance
    pub, models, split = C.load(os.path.join(ROOT, "tests", "data"))
    releases = sorted({r["release"] for r in pub["rows"]},
                      key=lambda r: [int(x) for x in r.split(".")])
    newest = releases[-1]
    fit_items, _ = C.prepared([r for r in pub["rows"] if r["release"] != newest], models)
    test_items, _ = C.prepared([r for r in pub["rows"] if r["release"] == newest], models)
    calib = C.fit(fit_items, {**fit_performance.BASE, "constants": {}})
    print(f"diagnostic: fit on {', '.join(releases[:-1])}; judge {newest} "
          f"({len(test_items)} rows)")
    print(C.format_table(C.error_rows(test_items, calib)))


if __name__ == "__main__":
    main()

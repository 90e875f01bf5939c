"""Fit and judge the performance model on published measurements.

Rows come from tests/data/perf_published.json (Megatron-Bridge's performance summary, compiled by
dev/extract_perf_tables.py), model shapes from tests/data/perf_models.json, the fit/test split from
tests/data/perf_split.json (frozen before the first fit).  ``fit`` chooses, per GPU and precision
with fitted rows, the GEMM efficiency and the element-wise factor that minimise the squared log
error on the fit rows only; ``error_table`` reports the held-out rows.  The fitted constants ship in
parallel_layout/perf_calibration.json (``dev/fit_performance.py`` rewrites it; a test refits and
compares).  Stdlib only.
"""

from __future__ import annotations

import collections
import json
import math
import os
import statistics

from . import flags as F
from . import gpus as G
from . import performance as P

EFFICIENCY_RANGE = (0.15, 1.0)
FACTOR_RANGE = (0.1, 8.0)
LATENCY_RANGE = (0.0, 0.01)  # seconds per MoE layer and microbatch
SWEEPS = 4
# The same Blackwell silicon in another system: a GEMM efficiency the data cannot fit for one
# (no dense rows in that precision) is the sister's.
SISTER = {"b200": "gb200", "b300": "gb300"}
MIN_DENSE_ROWS = 4  # fewer dense rows in a precision than this: tied to the sister as well


def load(data_dir):
    def read(name):
        with open(os.path.join(data_dir, name)) as fh:
            return json.load(fh)
    return read("perf_published.json"), read("perf_models.json"), read("perf_split.json")


def row_argv(row, models):
    """Megatron-LM flags of a published row: the model's flags, the precision's, the layout, and
    the overlap flags of Megatron-Bridge's performance recipes (distributed optimizer, gradient
    reduce and parameter gather overlap, TP communication overlap with sequence parallelism)."""
    m = models["models"][row["model"]]
    gpu = G.get(G.SYSTEMS[row["system"]])
    argv = m["flags"].split() + models["precision_flags"][row["precision"]]
    argv += ["--world-size", row["gpus"], "--gpus-per-node", min(gpu["nvlink_domain"], row["gpus"]),
             "--tensor-model-parallel-size", row["tp"], "--pipeline-model-parallel-size", row["pp"],
             "--context-parallel-size", row["cp"], "--micro-batch-size", row["mbs"],
             "--global-batch-size", row["gbs"], "--seq-length", row["seq_length"],
             "--max-position-embeddings", row["seq_length"], "--use-distributed-optimizer",
             "--overlap-grad-reduce", "--overlap-param-gather"]
    if row.get("ep") and "--num-experts" in m["flags"]:  # 25.11 prints EP 1 for dense models
        argv += ["--expert-model-parallel-size", row["ep"], "--expert-tensor-parallel-size", 1]
    if "w/o MTP" in row.get("model_note", ""):
        argv += ["--mtp-num-layers", 0]
    argv += split_flags(int(m["flags"].split("--num-layers ")[1].split()[0]), row["pp"],
                        row.get("vp") if (row.get("vp") or 1) > 1 else None)
    if row["tp"] > 1:
        argv += ["--sequence-parallel", "--tp-comm-overlap"]
    if row.get("fsdp"):
        argv += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads_params",
                 "--ckpt-format", "fsdp_dtensor"]
    return [str(a) for a in argv]


def split_flags(layers, pp, vpp):
    """The pipeline split of a row: even, even with embedding and loss counted as layers (the
    --account-for-* flags), or else a layout string spreading the layers (Megatron-Bridge's
    recipes give such strings for DeepSeek-V3 and Kimi-K2, whose 61 layers split no other way)."""
    stages = pp * (vpp or 1)
    out = ["--num-virtual-stages-per-pipeline-rank", vpp] if vpp else []
    if pp == 1 or layers % stages == 0:
        return out
    if (layers + 2) % stages == 0:
        return out + ["--account-for-embedding-in-pipeline-split",
                      "--account-for-loss-in-pipeline-split"]
    from .plan import layout_string
    return ["--pipeline-model-parallel-layout", layout_string(layers, pp, vpp)]


def representable(row, models):
    """None, or why the model cannot represent the row."""
    why = models["sections_not_representable"].get(row["section"])
    if why:
        return f"{row['section']}: {why}"
    why = models["not_representable"].get(row["model"])
    if why:
        return why
    if row["model"] not in models["models"]:
        return "no model shape in tests/data/perf_models.json"
    return None


def prepared(rows, models):
    """[(row, layout, gpu)] of the representable rows; [(row, why)] of the others."""
    ok, skipped = [], []
    for row in rows:
        why = representable(row, models)
        if why:
            skipped.append((row, why))
            continue
        layout, _ = F.parse_layout(row_argv(row, models))
        layout.megatron_version = "0.19.2"
        ok.append((row, layout, G.get(G.SYSTEMS[row["system"]])))
    return ok, skipped


def split(rows, split_spec):
    fit = [r for r in rows if r["release"] in split_spec["fit_releases"]]
    test = [r for r in rows if r["release"] in split_spec["test_releases"]]
    return fit, test


def group_key(row):
    return G.SYSTEMS[row["system"]], row["precision"].lower()


def _log_errors(items, calib):
    out = []
    for row, layout, gpu in items:
        perf = P.predict(layout, gpu, calib)
        out.append(math.log(perf["tokens_per_second_per_gpu"] / row["tokens_per_sec_per_gpu"]))
    return out


def _golden(f, lo, hi, iters=24):
    """Minimise a unimodal f on [lo, hi] (golden-section search)."""
    r = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - r * (b - a), a + r * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - r * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + r * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(items, base):
    """Constants per GPU from ``items`` (fit rows only): a GEMM efficiency per precision class
    with rows (BF16, FP8 incl. MXFP8, NVFP4), one element-wise factor and, with MoE rows, one MoE
    layer latency shared by the GPU's precisions.  Coordinate descent of golden-section searches
    minimising the summed squared log error.  A precision with fewer than MIN_DENSE_ROWS dense
    rows (MoE rows cannot tell GEMM speed from the other constants) takes the GEMM efficiency of
    the same silicon in its sister system (``SISTER``, recorded in ``tied``).  Returns a
    calibration dict (``base`` gives the defaults and the borrow table)."""
    groups = {}
    for item in items:
        groups.setdefault(G.SYSTEMS[item[0]["system"]], []).append(item)
    calib = json.loads(json.dumps(base))
    calib["constants"] = {}
    eff0, factor0, latency0 = calib["default"]
    calib["tied"] = {}
    for gpu, members in sorted(groups.items(), key=lambda kv: kv[0] in SISTER):
        classes = sorted({P.precision_class(item[0]["precision"].lower()) for item in members})
        dense_rows = collections.Counter(P.precision_class(item[0]["precision"].lower())
                                         for item in members if not item[1].num_experts)
        dense = {c for c, n in dense_rows.items() if n >= MIN_DENSE_ROWS}
        entry = {"gemm_efficiency": {c: eff0 for c in classes}, "elementwise_factor": factor0,
                 "moe_layer_latency": latency0}
        calib["constants"][gpu] = entry
        sister = calib["constants"].get(SISTER.get(gpu), {}).get("gemm_efficiency", {})
        free = []
        for c in classes:  # MoE rows alone cannot tell GEMM speed from the other constants
            if c not in dense and c in sister:
                entry["gemm_efficiency"][c] = sister[c]
                calib["tied"][f"{gpu}/{c}"] = SISTER[gpu]
            else:
                free.append(c)
        params = [("gemm_efficiency", c, EFFICIENCY_RANGE) for c in free]
        params.append(("elementwise_factor", None, FACTOR_RANGE))
        if any(item[1].num_experts for item in members):  # else the latency is not identifiable
            params.append(("moe_layer_latency", None, LATENCY_RANGE))

        def put(key, cls, x):
            if cls is None:
                entry[key] = x
            else:
                entry[key][cls] = x

        for _ in range(SWEEPS):
            for key, cls, bounds in params:
                def loss(x, key=key, cls=cls):
                    put(key, cls, x)
                    return sum(e * e for e in _log_errors(members, calib))
                put(key, cls, _golden(loss, *bounds))
        entry["gemm_efficiency"] = {c: round(v, 4) for c, v in entry["gemm_efficiency"].items()}
        entry["elementwise_factor"] = round(entry["elementwise_factor"], 4)
        entry["moe_layer_latency"] = round(entry["moe_layer_latency"], 6)
    return calib


def error_rows(items, calib):
    """[{id, gpu, precision, model, moe, measured, predicted, error}] with error = predicted /
    measured - 1."""
    out = []
    for row, layout, gpu in items:
        perf = P.predict(layout, gpu, calib)
        pred = perf["tokens_per_second_per_gpu"]
        out.append({"id": row["id"], "gpu": gpu["name"], "precision": row["precision"],
                    "model": row["model"], "moe": bool(layout.num_experts),
                    "measured": row["tokens_per_sec_per_gpu"], "predicted": pred,
                    "error": round(pred / row["tokens_per_sec_per_gpu"] - 1, 4)})
    return out


def summary(errors):
    """{(gpu, precision): {rows, median_abs_error, max_abs_error}} and the same over all rows."""
    groups = {}
    for e in errors:
        groups.setdefault((e["gpu"], e["precision"]), []).append(abs(e["error"]))
    groups[("all", "all")] = [abs(e["error"]) for e in errors]
    return {k: {"rows": len(v), "median_abs_error": round(statistics.median(v), 4),
                "max_abs_error": round(max(v), 4)} for k, v in groups.items() if v}


def format_table(errors):
    lines = [f"{'gpu':<8} {'precision':<9} {'rows':>4} {'median |err|':>12} {'max |err|':>9}"]
    for (gpu, prec), s in sorted(summary(errors).items(), key=lambda kv: kv[0] == ("all", "all")):
        lines.append(f"{gpu:<8} {prec:<9} {s['rows']:>4} {s['median_abs_error']:>12.1%} "
                     f"{s['max_abs_error']:>9.1%}")
    return "\n".join(lines)


def plan_ranks(items, calib=None):
    """[{id, rank, plans, why, first_over_published, fits_memory_estimate}]: where ``--plan`` (on
    the row's GPU, with the row's model, batch, micro batch and virtual stages given, the sizes
    TP/PP/CP/EP/ETP free) ranks the published layout; ``why`` says why it is not ranked (a split
    the plan does not enumerate); ``first_over_published``: predicted tokens/s/GPU of the plan's
    first over the published's, minus 1.

    The published layout ran on that GPU, so the memory estimate of its flags (which lack any
    setting the tables do not record, such as recomputation) is no verdict on it: the budget is
    the GPU's HBM or the published layout's estimate, whichever is larger (``memory_budget``).
    ``fits_memory_estimate`` records whether the estimate is within the HBM."""
    from . import plan
    out = []
    for row, layout, gpu in items:
        layout, fits = memory_budget(layout, gpu)
        plans = plan.enumerate_layouts(layout, gpu=gpu, calib=calib, detail=0)
        rank = plan.rank_of(layout, plans)
        why = None
        if rank is None:
            why = "not among the valid layouts --plan enumerates"
        gap = None  # how much faster than the published layout the plan's first predicts
        if rank is not None:
            first = plans[0]["performance"]["tokens_per_second_per_gpu"]
            own = plans[rank - 1]["performance"]["tokens_per_second_per_gpu"]
            gap = round(first / own - 1, 4)
        out.append({"id": row["id"], "rank": rank, "plans": len(plans), "why": why,
                    "first_over_published": gap, "fits_memory_estimate": fits})
    return out


def memory_budget(layout, gpu):
    """(a copy of ``layout`` whose ``gpu_memory_gib`` is the GPU's HBM or, when larger, the
    layout's own memory estimate; whether the estimate is within the HBM, None if unknown).  A
    measured layout fits by definition: judging the other plans against its estimate keeps the
    estimate's comparisons between layouts and drops only its absolute verdict."""
    import copy
    from . import memory as M
    hbm = G.memory_budget_gib(gpu["name"])
    total = (M.estimate(layout) or {}).get("total_bytes_per_gpu")
    layout = copy.copy(layout)
    layout.gpu_memory_gib = hbm if total is None else max(hbm, total / M.GIB * (1 + 1e-9))
    return layout, None if total is None else total <= hbm * M.GIB


SETTING_FIELDS = ("section", "model", "system", "precision", "gpus", "gbs", "mbs", "seq_length",
                  "tp", "pp", "cp", "vp", "ep")


def setting_key(row):
    """What a published row fixes apart from the container release: model, system, precision, GPU
    count, batch and layout."""
    return tuple(row.get(k) for k in SETTING_FIELDS)


def release_drift(rows, old, new):
    """Measured new/old tokens/s/GPU of the settings (model, system, precision, GPUs, batch,
    layout) published unchanged in releases ``old`` and ``new``: software change alone."""
    before = {setting_key(r): r for r in rows if r["release"] == old}
    return {r["id"]: round(r["tokens_per_sec_per_gpu"]
                           / before[setting_key(r)]["tokens_per_sec_per_gpu"], 4)
            for r in rows if r["release"] == new and setting_key(r) in before}


def persistence_rows(rows, split_spec, ids):
    """The held-out rows (``ids``: {id: is MoE} of those the model represents) whose setting was
    published in a fit release, each "predicted" by that setting's own measurement in the newest
    such release: [{id, gpu, precision, model, moe, measured, predicted, error, from_release}].  No model fitted on the fit releases knows
    more about an unchanged setting than its latest measurement there, so this table's error is
    a floor under what the split lets any such model reach (software gains after the newest fit
    release show up as error here as in the model's table)."""
    order = {r: i for i, r in enumerate(split_spec["fit_releases"])}
    latest = {}
    for r in rows:
        if r["release"] in order:
            k = setting_key(r)
            if k not in latest or order[r["release"]] > order[latest[k]["release"]]:
                latest[k] = r
    out = []
    for r in rows:
        old = latest.get(setting_key(r))
        if r["id"] not in ids or old is None:
            continue
        out.append({"id": r["id"], "gpu": G.SYSTEMS[r["system"]], "precision": r["precision"],
                    "model": r["model"], "moe": ids[r["id"]],
                    "measured": r["tokens_per_sec_per_gpu"],
                    "predicted": old["tokens_per_sec_per_gpu"], "from_release": old["release"],
                    "error": round(old["tokens_per_sec_per_gpu"] / r["tokens_per_sec_per_gpu"]
                                   - 1, 4)})
    return out

"""``--plan``: enumerate every valid layout for a model and a world size, fastest first.

Candidates are the (TP, PP, CP, EP, ETP) whose product fits the world, and, where the flags leave
them free, the micro-batch size (1, 2, 4, 8 dividing the global batch per DP rank; larger ones
only while they fit in memory) and then, at each candidate's fastest micro batch, the virtual
pipeline size (divisors of the layers per stage, up to 8, with the interleaved schedule's
microbatch rule).  Cheap divisibility filters prune them before the full rule table runs.  Ranking
(best first): fits in GPU memory, then predicted tokens/s/GPU of ``parallel_layout.performance``
on ``--gpu`` (H100 when not given).  ``score`` is the ranking key: predicted GPU-seconds per token.
"""

from __future__ import annotations

import copy

from . import derive as D
from . import gpus as G
from . import memory as M
from . import performance as PERF
from .rules import RULES, Ctx, Skip, check, divisors, version_tuple

DEFAULT_GPU_MEMORY_GIB = 80
DEFAULT_GPU = "h100"  # the GPU --plan predicts for without --gpu
MBS_OPTIONS = (1, 2, 4, 8)
MAX_VPP = 8
# The rules a micro-batch or virtual-pipeline variant of a valid candidate can newly break.
VARIANT_RULE_IDS = frozenset({"global-batch-divisible", "vpp-layers-at-build",
                              "interleaved-needs-pp", "interleaved-microbatch-group"})

# Rules that read the sizes the planner varies run for every candidate; the
# other error rules cannot change between candidates and run once.
SIZE_RULES = frozenset({
    "world-divisible", "expert-grid-divisible", "heads-divisible-by-tp", "query-groups-vs-tp",
    "experts-divisible-by-ep", "ep-needs-experts", "seq-divisible-by-2cp",
    "layers-divisible-by-pp", "global-batch-divisible", "ffn-divisible-by-tp",
    "moe-ffn-divisible-by-etp", "sequence-parallel-seq-divisible", "moe-bias-needs-etp1",
    "torch-fsdp2", "torch-dcp", "recompute-full-settings",
})
PLAN_RULES = tuple(r for r in RULES if r.kind == "error" and r.id in SIZE_RULES)
FIXED_RULES = tuple(r for r in RULES if r.kind == "error" and r.id not in SIZE_RULES)
VARIANT_RULES = tuple(r for r in RULES if r.kind == "error" and r.id in VARIANT_RULE_IDS)


def _violates(layout, rules):
    """True when one of ``rules`` finds a violation.  The loop of ``rules.check`` without what
    --plan discards (the derived sizes, the unverified-release list, every other violation):
    it stops at the first violation, and the memory estimate runs only for valid candidates."""
    ctx = Ctx(layout)
    for rule in rules:
        try:
            if rule.check(ctx) is not None:
                return True
        except Skip:
            continue
    return False


def spread_free(layout):
    """True when the given split policy is a layout string (--pipeline-model-parallel-layout,
    without --decoder-first/last-pipeline-num-layers or --account-for-*): then a PP (x VPP) that
    does not divide the layers is planned with the spread string of ``layout_string``, as
    Megatron-Bridge's recipes split DeepSeek-V3's and Kimi-K2's 61 layers.  Without a string the
    plan keeps Megatron's default, the even split."""
    L = layout
    return bool(L.num_layers and L.pipeline_model_parallel_layout) and not (
        L.decoder_first_pipeline_num_layers or L.decoder_last_pipeline_num_layers
        or L.account_for_embedding_in_pipeline_split or L.account_for_loss_in_pipeline_split
        or D.hybrid_segments(L) is not None)


def _uneven(layout, pp, vpp):
    return layout.num_layers % (pp * (vpp or 1)) != 0


def _set_split(variant, spread, vpp):
    """Virtual stages ``vpp`` on ``variant``: the flag, or a spread layout string where the layers
    do not divide over the stages."""
    pp = variant.pipeline_model_parallel_size
    if spread and pp > 1 and _uneven(variant, pp, vpp):
        variant.pipeline_model_parallel_layout = layout_string(variant.num_layers, pp, vpp)
        variant.num_virtual_stages_per_pipeline_rank = None
    else:
        variant.pipeline_model_parallel_layout = None
        variant.num_virtual_stages_per_pipeline_rank = vpp


def _prune(layout, tp, pp, cp, ep, etp, spread=False):
    """Fast necessary conditions, so most candidates never reach check()."""
    L = layout
    if L.num_attention_heads and L.num_attention_heads % tp:
        return False
    g = D.num_query_groups(L)
    if g and g % tp and (tp % g or version_tuple(L.megatron_version) < (0, 16)):
        return False  # query-groups-vs-tp (divisor allowed from 0.16)
    if L.seq_length and cp > 1 and L.seq_length % (2 * cp):
        return False
    if L.num_layers and pp > L.num_layers:
        return False
    if L.num_layers and D.layers_for_split(L) % pp and not spread:
        return False  # candidates use an even split (or a spread layout string)
    ffn = D.ffn_hidden_size(L)
    if ffn and ffn % tp:
        return False
    if L.seq_length and tp > 1 and (L.seq_length // cp) % tp:
        return False  # candidates use SP when TP > 1
    experts = D.num_experts(L)
    if ep > 1 and (not experts or experts % ep):
        return False
    if experts:
        moe_ffn = D.moe_ffn_hidden_size(L)
        if moe_ffn % etp or (L.add_bias_linear and etp > 1):
            return False
    world = L.world_size
    if world % (etp * ep * pp):
        return False
    gbs, micro = L.global_batch_size, L.micro_batch_size
    if gbs and micro and gbs % (micro * (world // (tp * pp * cp))):
        return False
    return True


def candidates(layout, spread=False):
    L = layout
    world = L.world_size
    divs = divisors(world)
    experts = D.num_experts(L)
    ep_options = [e for e in divs if experts and experts % e == 0] if experts else [1]
    # Per-axis filters first, so a world with many divisors stays fast.
    tps = [t for t in divs if not L.num_attention_heads or L.num_attention_heads % t == 0]
    pps = [p for p in divs if not L.num_layers or D.layers_for_split(L) % p == 0
           or (spread and p <= L.num_layers)]
    cps = [c for c in divs if c == 1 or not L.seq_length or L.seq_length % (2 * c) == 0]
    for tp in tps:
        for pp in pps:
            if world % (tp * pp):
                continue
            for cp in cps:
                if world % (tp * pp * cp):
                    continue
                etp_options = sorted({tp, 1}) if experts else [tp]
                for ep in ep_options:
                    for etp in etp_options:
                        if _prune(layout, tp, pp, cp, ep, etp, spread):
                            yield tp, pp, cp, ep, etp


def _variant(layout, tp, pp, cp, ep, etp):
    variant = copy.copy(layout)  # dataclasses.replace re-runs __init__: 3x slower here
    for key, value in dict(
        tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
        context_parallel_size=cp, expert_model_parallel_size=ep,
        expert_tensor_parallel_size=None if etp == tp else etp,
        sequence_parallel=tp > 1,
        num_layers_per_virtual_pipeline_stage=None,
        num_virtual_stages_per_pipeline_rank=None,
        pipeline_model_parallel_layout=None,
        decoder_first_pipeline_num_layers=None, decoder_last_pipeline_num_layers=None,
    ).items():  # the --account-for-* split policy stays as the user gave it
        setattr(variant, key, value)
    return variant


def bubble_fraction(pp, m, vpp=None):
    """1F1B: (p-1)/(m+p-1) of the step; interleaved: (p-1)/(v*m+p-1)
    (Narayanan et al. 2021, section 2.2)."""
    if pp == 1:
        return 0.0
    m = m or pp
    v = vpp or 1
    return (pp - 1) / (v * m + pp - 1)


def enumerate_layouts(layout, limit=None, gpu=None, full=False, calib=None, detail=None,
                      exact=None, own=None, stats=None):
    """All valid layouts, ranked best first; each entry is JSON-ready with its predicted
    ``performance`` (compact unless ``full``; only tokens/s/GPU past the first ``detail``).

    With ``exact=N`` only the first N fitting plans and the plans ranked above ``own`` (the
    user's layout) must be exact: candidates are evaluated in order of ``step_lower_bound`` and
    one whose bound is slower than both is left out whole (``stats["bounded_out"]`` counts them).
    The first N plans and the rank of ``own`` are those of the full search."""
    plans = []
    base = _variant(layout, 1, 1, 1, 1, 1)
    if not check(base, rules=FIXED_RULES, with_memory=False).valid:
        return plans  # a size-independent rule fails: no layout can be valid
    gpu = gpu or G.get(DEFAULT_GPU)
    budget = (layout.gpu_memory_gib or G.memory_budget_gib(gpu["name"])) * M.GIB
    opts = PERF.perf_options(layout)
    shape = PERF.model_shape(layout, opts)
    mbs_free = layout.micro_batch_size is None and layout.global_batch_size is not None
    vpp_free = (layout.num_layers_per_virtual_pipeline_stage is None
                and layout.num_virtual_stages_per_pipeline_rank is None
                and layout.pipeline_model_parallel_layout is None
                and D.hybrid_segments(layout) is None)
    fixed_vpp = None if vpp_free else D.virtual_pipeline_size(layout)
    verdicts = {}  # (PP, VPP, micro batch, DP) -> the variant rules' verdict
    cands = []
    spread = spread_free(layout)
    for tp, pp, cp, ep, etp in candidates(layout, spread):
        variant = _variant(layout, tp, pp, cp, ep, etp)
        if mbs_free:
            variant.micro_batch_size = 1
        if spread and pp > 1 and _uneven(variant, pp, fixed_vpp):
            if pp * (fixed_vpp or 1) > layout.num_layers:
                continue  # a stage without a decoder layer
            # Checked (and its memory estimated) with the split it is planned with.
            _set_split(variant, spread, fixed_vpp)
        if _violates(variant, PLAN_RULES):
            continue
        cands.append(variant)

    memo = {}

    def memory(i):  # estimated for the candidates that need it only
        if i not in memo:
            memo[i] = M.estimate(cands[i]) or {}
        return memo[i]

    def expand(i):
        variant = cands[i]
        mem = memory(i)
        total = mem.get("total_bytes_per_gpu")
        act = mem.get("activation_bytes_per_gpu") or 0
        micro = variant.micro_batch_size or 1
        mbs_list = []
        for mbs in (MBS_OPTIONS if mbs_free else (micro,)):
            if mbs > micro and total is not None and total + act * (mbs - micro) / micro > budget:
                break  # a larger micro batch only needs more memory
            mbs_list.append(mbs)
        # Micro batches first (without interleaving), then the virtual stages at the fastest
        # micro batch: the two choices barely interact (the micro batch sets GEMM sizes and
        # memory, VPP the bubble), and searching them apart keeps large worlds fast.
        found = []
        for mbs in mbs_list:
            plan = _plan(variant, gpu, shape, opts, mbs, fixed_vpp, micro, total, act, budget,
                         full, calib, verdicts, spread)
            if plan:
                found.append(plan)
        if vpp_free and found:
            best = min(found, key=lambda p: p["score"] or float("inf"))["micro_batch_size"]
            for vpp in _vpp_options(variant, variant.pipeline_model_parallel_size, spread)[1:]:
                plan = _plan(variant, gpu, shape, opts, best, vpp, micro, total, act, budget,
                             full, calib, verdicts, spread)
                if plan:
                    found.append(plan)
        return found

    largest = max(MBS_OPTIONS) if mbs_free else (layout.micro_batch_size or 1)
    smallest = 1 if mbs_free else largest
    vpps = [max(v or 1 for v in _vpp_options(c, c.pipeline_model_parallel_size, spread))
            if vpp_free else (fixed_vpp or 1) for c in cands]
    bounds = _lower_bounds(layout, cands, gpu, shape, opts, calib, largest, smallest,
                           vpps) if exact else None
    order = range(len(cands))
    own_index = None
    if bounds is not None:
        own_sizes = _sizes(own) if own is not None else None
        own_index = next((i for i, c in enumerate(cands) if _sizes(c) == own_sizes), None)
        order = sorted(order, key=lambda i: (i != own_index, bounds[i]))
    per_cand = {}
    kept = []  # sort keys (does not fit, score) of the best ``exact`` plans so far
    own_key = None
    bounded_out = 0
    for i in order:
        if bounds is not None and len(kept) >= exact and _below(
                bounds[i], kept[exact - 1], own_key,
                lambda: (memory(i).get("total_bytes_per_gpu") or 0) > budget):
            bounded_out += 1
            continue
        found = per_cand[i] = expand(i)
        if bounds is None:
            continue
        if i == own_index:
            mine = rank_of(own, found)
            own_key = _key(found[mine - 1]) if mine is not None else None
            if own_key is not None and own_key[1] is None:
                bounds = None  # unpredicted: every predicted plan ranks above it
                continue
        kept = sorted(kept + [_key(p) for p in found if p["score"] is not None])[:exact]
    for i in sorted(per_cand):  # candidate order, so ties sort as in the full search
        plans += per_cand[i]
    plans.sort(key=lambda p: (p["fits_memory"] is False, p["score"] if p["score"] is not None
                              else float("inf"), p["total_bytes_per_gpu"] or 0))
    plans = plans[:limit] if limit else plans
    for i, p in enumerate(plans):  # render only what is shown; the rest keep tokens/s only
        p["performance"] = _render(p["performance"], full, detail is None or i < detail)
    if stats is not None:
        stats["bounded_out"] = bounded_out
    return plans


def _key(plan):
    return (plan["fits_memory"] is False, plan["score"])


def _below(bound, nth, own_key, does_not_fit):
    """True when every variant of a candidate whose score is at least ``bound`` ranks below both
    the ``nth`` plan's key and the given layout's (``own_key``, None when it is not a plan).
    A plan that does not fit ranks below every plan that fits, so past a plan that does not fit
    only candidates that do not fit either (``does_not_fit()``: at their smallest micro batch,
    the variants' least memory) can be below it."""
    for nonfit, score in (nth,) if own_key is None else (nth, own_key):
        if bound <= score + 1e-9:
            return False
        if nonfit and not does_not_fit():
            return False
    return True


def _sizes(layout):
    return (layout.tensor_model_parallel_size, layout.pipeline_model_parallel_size,
            layout.context_parallel_size, layout.expert_model_parallel_size, D.etp(layout))


def _lower_bounds(layout, cands, gpu, shape, opts, calib, largest, smallest, vpps):
    """Per candidate, the score (GPU-seconds per token) none of its variants can beat
    (``performance.step_lower_bound`` from the ``smallest`` to the ``largest`` micro batch, at
    most ``vpps[i]`` virtual stages), or None when the model cannot
    predict this model at all (then nothing is bounded)."""
    if not layout.global_batch_size or not layout.seq_length or shape.get("vocab") is None:
        return None
    try:
        prec = PERF.precision(layout, opts)
        if prec == "fp32" or D.hybrid_segments(layout) is not None:
            return None
        hw = PERF.hardware(gpu, prec, calib or PERF.calibration())
        tokens = layout.global_batch_size * layout.seq_length
        return [PERF.step_lower_bound(c, shape, hw, opts, largest, smallest, v)
                * layout.world_size / tokens for c, v in zip(cands, vpps)]
    except Exception:  # noqa: BLE001 - no bound: every candidate is evaluated
        return None


def _render(perf, full, detailed):
    if perf is None:
        return None
    if not detailed:
        return {"tokens_per_second_per_gpu": round(perf.tokens_per_second_per_gpu, 1)}
    d = perf.as_dict()
    if full:  # the breakdown per plan; calibration and formula are the same for every plan
        return {k: v for k, v in d.items() if k not in ("calibration", "model_flops_formula",
                                                        "mfu_peak", "gpu", "precision")}
    return _compact(d)


def _vpp_options(variant, pp, spread=False):
    if pp <= 1 or not variant.num_layers:
        return (None,)
    if spread and _uneven(variant, pp, None):  # spread strings: any VPP with a layer per stage
        return (None,) + tuple(v for v in range(2, MAX_VPP + 1) if pp * v <= variant.num_layers)
    per_stage = D.layers_for_split(variant) // pp
    return (None,) + tuple(v for v in range(2, MAX_VPP + 1) if per_stage % v == 0)


def _plan(variant, gpu, shape, opts, mbs, vpp, micro, total, act, budget, full, calib, verdicts,
          spread=False):
    """One plan entry for ``variant`` at micro-batch ``mbs`` and virtual stages ``vpp``, or None
    when the interleaving or batch rules reject it.  Activation memory scales with the micro
    batch (Korthikanti et al. 2022: linear in b)."""
    tp, pp, cp = (variant.tensor_model_parallel_size, variant.pipeline_model_parallel_size,
                  variant.context_parallel_size)
    ep, etp = variant.expert_model_parallel_size, D.etp(variant)
    # Set in place: the candidate is this loop's own copy and every call sets both.
    variant.micro_batch_size = mbs
    _set_split(variant, spread, vpp)
    if mbs != micro or vpp is not None:  # the candidate was checked without VPP
        # The variant rules read only PP, VPP, the micro batch, DP and the fixed model and batch.
        key = (pp, vpp, mbs, D.data_parallel_size(variant))
        if key not in verdicts:
            verdicts[key] = not _violates(variant, VARIANT_RULES)
        if not verdicts[key]:
            return None
    if total is not None and mbs != micro:
        total = total + act * (mbs - micro) / micro
    m = D.num_microbatches(variant)
    dp = D.data_parallel_size(variant)
    try:
        perf = PERF.prediction(variant, gpu, calib, opts=opts, shape=shape)
    except Exception:  # noqa: BLE001 - a plan without a prediction still lists the layout
        perf = None
    tokens = perf.tokens_per_second_per_gpu if perf else None
    node = variant.gpus_per_node
    return {
        "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
        "context_parallel_size": cp, "expert_model_parallel_size": ep,
        "expert_tensor_parallel_size": etp,
        "data_parallel_size": dp,
        "expert_data_parallel_size": D.expert_data_parallel_size(variant),
        "micro_batch_size": mbs,
        "virtual_pipeline_model_parallel_size": vpp,
        "num_microbatches": m,
        "fits_memory": None if total is None else total <= budget,
        "total_bytes_per_gpu": None if total is None else int(total),
        "pipeline_bubble_fraction": round(bubble_fraction(pp, m, vpp), 4),
        "tp_within_node": tp <= node and node % tp == 0,
        "score": round(1 / tokens, 9) if tokens else None,
        "performance": perf,  # a PERF.Prediction until rendered (_render)
        "flags": _flags(tp, pp, cp, ep, etp, mbs, vpp),
    }


def _compact(perf):
    keys = ("step_seconds", "tokens_per_second_per_gpu", "model_tflops_per_gpu", "mfu",
            "top_terms")
    return {k: perf[k] for k in keys}


def _flags(tp, pp, cp, ep, etp, mbs=None, vpp=None):
    parts = [f"--tensor-model-parallel-size {tp}", f"--pipeline-model-parallel-size {pp}",
             f"--context-parallel-size {cp}"]
    if mbs is not None:
        parts.append(f"--micro-batch-size {mbs}")
    if vpp is not None:
        parts.append(f"--num-virtual-stages-per-pipeline-rank {vpp}")
    if ep > 1:
        parts.append(f"--expert-model-parallel-size {ep}")
    if etp != tp:
        parts.append(f"--expert-tensor-parallel-size {etp}")
    if tp > 1:
        parts.append("--sequence-parallel")
    return " ".join(parts)


def rank_of(layout, plans):
    """1-based rank of the layout's own sizes (TP, PP, CP, EP, ETP, micro-batch and virtual
    pipeline sizes) among ``plans``, or None when they are not among the valid layouts."""
    key = (layout.tensor_model_parallel_size, layout.pipeline_model_parallel_size,
           layout.context_parallel_size, layout.expert_model_parallel_size, D.etp(layout),
           layout.micro_batch_size or 1, D.virtual_pipeline_size(layout))
    for i, p in enumerate(plans, 1):
        if (p["tensor_model_parallel_size"], p["pipeline_model_parallel_size"],
                p["context_parallel_size"], p["expert_model_parallel_size"],
                p["expert_tensor_parallel_size"], p["micro_batch_size"],
                p["virtual_pipeline_model_parallel_size"]) == key:
            return i
    return None


def layout_string(layers, pp, vpp=None):
    """A --pipeline-model-parallel-layout that spreads ``layers`` decoder layers over PP x VPP
    stages as evenly as possible, embedding on the first and loss on the last stage, the smaller
    stages first at those two ends (Megatron's string: stage v*PP + r runs on PP rank r)."""
    stages = pp * (vpp or 1)
    base, extra = divmod(layers, stages)
    sizes = [base] * stages
    order = list(range(1, stages - 1)) + [0, stages - 1] if stages > 2 else list(range(stages))
    for i in order[:extra]:
        sizes[i] += 1
    parts = ["t" * n for n in sizes]
    parts[0] = "E" + parts[0]
    parts[-1] = parts[-1] + "L"
    return "|".join(parts)

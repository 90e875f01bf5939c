"""``--plan``: enumerate every valid layout for a model and a world size.

Candidates are the (TP, PP, CP, EP, ETP, VPP) whose product fits the world;
cheap divisibility filters prune them before the full rule table runs.
Ranking (best first): fits in GPU memory, then estimated step-time overhead
= pipeline bubble fraction + communication time share, with TP kept inside
a node.  The cost model is a heuristic for ordering candidates (see
references/parallelism-reference.md#communication-volume-per-step), not a
performance prediction.
"""

from __future__ import annotations

import copy

from . import derive as D
from . import memory as M
from .rules import RULES, check, divisors, version_tuple

# Link bandwidths (bytes/s) for the ordering heuristic only.
INTRA_NODE_BW = 450e9  # NVLink 4 per direction, H100 SXM
INTER_NODE_BW = 50e9  # 400 Gb/s InfiniBand per GPU
PEAK_FLOPS = 989e12  # H100 SXM dense bf16
DEFAULT_GPU_MEMORY_GIB = 80
# Share of the DP gradient/parameter traffic left exposed: Megatron overlaps
# it with the backward pass (--overlap-grad-reduce / --overlap-param-gather).
DP_EXPOSED = 0.2

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


def _prune(layout, tp, pp, cp, ep, etp):
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
    if L.num_layers and D.layers_for_split(L) % pp:
        return False  # candidates use an even split
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


def candidates(layout):
    L = layout
    world = L.world_size
    divs = divisors(world)
    experts = D.num_experts(L)
    ep_options = [e for e in divs if experts and experts % e == 0] if experts else [1]
    # Per-axis filters first, so a world with many divisors stays fast.
    tps = [t for t in divs if not L.num_attention_heads or L.num_attention_heads % t == 0]
    pps = [p for p in divs if not L.num_layers or D.layers_for_split(L) % p == 0]
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
                        if _prune(layout, tp, pp, cp, ep, etp):
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
        account_for_embedding_in_pipeline_split=False,
        account_for_loss_in_pipeline_split=False,
    ).items():
        setattr(variant, key, value)
    return variant


def cp_penalty(layout, cp):
    """CP is for long sequences: below 4096 tokens per CP rank, attention
    kernels run short and the ring exchange is poorly hidden, so each halving
    costs 5% in the ranking (heuristic)."""
    if cp == 1 or not layout.seq_length:
        return 0.0
    local = layout.seq_length // cp
    return 0.05 * max(0, (4096 // max(local, 1)).bit_length() - 1) + 0.01 * (cp - 1) / cp


def bubble_fraction(pp, m, vpp=None):
    """1F1B: (p-1)/(m+p-1) of the step; interleaved: (p-1)/(v*m+p-1)
    (Narayanan et al. 2021, section 2.2)."""
    if pp == 1:
        return 0.0
    m = m or pp
    v = vpp or 1
    return (pp - 1) / (v * m + pp - 1)


def comm_seconds(layout, tp, pp, cp, ep, dp, first_stage_params=None):
    """Per-GPU communication time per step (heuristic; formulas in the reference)."""
    L = layout
    if None in (L.hidden_size, L.num_layers, L.seq_length):
        return 0.0
    b = L.micro_batch_size or 1
    m = D.num_microbatches(L) or 1
    s, h, layers = L.seq_length // cp, L.hidden_size, L.num_layers
    act = 2 * s * b * h  # bf16 bytes of one [s/cp, b, h] activation
    node = L.gpus_per_node

    def bw(group):
        return INTRA_NODE_BW if group <= node and node % group == 0 else INTER_NODE_BW

    t = 0.0
    if tp > 1:  # 4 all-reduce-equivalents per layer per microbatch (fwd+bwd)
        t += 4 * 2 * (tp - 1) / tp * act * (layers / pp) * m / bw(tp)
    if cp > 1:  # ring exchange of K and V per layer, fwd + bwd
        t += 2 * 2 * (cp - 1) * act / tp * (layers / pp) * m / bw(tp * cp)
    if pp > 1:  # send activation forward, gradient backward
        t += 2 * act / (tp if tp > 1 else 1) * m / INTER_NODE_BW
    if ep > 1 and D.num_experts(L):  # 2 all-to-all fwd + 2 bwd
        t += 4 * (ep - 1) / ep * act * L.moe_router_topk / tp * (layers / pp) * m / bw(ep * tp)
    params = first_stage_params or (M.stage_params(L) or [[0, 0, 0]])[0]
    if dp > 1:  # gradient reduce-scatter + param all-gather (or all-reduce)
        grad_bytes = 4 * (params[0] / tp + params[1])
        t += DP_EXPOSED * 2 * (dp - 1) / dp * grad_bytes / bw(tp * cp * dp)
    return t


def compute_seconds(layout, tp, pp, cp, ep):
    L = layout
    if None in (L.hidden_size, L.num_layers, L.seq_length):
        return 1.0
    gbs = D.global_batch_size(L) or (L.micro_batch_size or 1)
    tokens = gbs * L.seq_length
    h, layers = L.hidden_size, L.num_layers
    vocab = D.padded_vocab_size(L) or 0
    flops = 72 * tokens * layers * h * h * (1 + L.seq_length / (6 * h)
                                            + vocab / (12 * h * layers))
    return flops / (L.world_size * PEAK_FLOPS * 0.5)


def enumerate_layouts(layout, limit=None):
    """All valid layouts, ranked best first; each entry is JSON-ready."""
    plans = []
    base = _variant(layout, 1, 1, 1, 1, 1)
    if not check(base, rules=FIXED_RULES, with_memory=False).valid:
        return plans  # a size-independent rule fails: no layout can be valid
    budget = (layout.gpu_memory_gib or DEFAULT_GPU_MEMORY_GIB) * M.GIB
    for tp, pp, cp, ep, etp in candidates(layout):
        variant = _variant(layout, tp, pp, cp, ep, etp)
        result = check(variant, rules=PLAN_RULES, with_memory=True)
        if not result.valid:
            continue
        d = result.derived
        mem = result.memory or {}
        total = mem.get("total_bytes_per_gpu")
        bubble = bubble_fraction(pp, d["num_microbatches"], d["virtual_pipeline_model_parallel_size"])
        stage0 = mem["per_stage"][0]["parameters_per_gpu"] if mem else 0
        comm = comm_seconds(variant, tp, pp, cp, ep, d["data_parallel_size"],
                            first_stage_params=[stage0 * tp, 0, 0] if stage0 else None)
        compute = compute_seconds(variant, tp, pp, cp, ep)
        overhead = bubble + comm / (comm + compute) + cp_penalty(variant, cp)
        tp_in_node = tp <= layout.gpus_per_node and layout.gpus_per_node % tp == 0
        plans.append({
            "tensor_model_parallel_size": tp, "pipeline_model_parallel_size": pp,
            "context_parallel_size": cp, "expert_model_parallel_size": ep,
            "expert_tensor_parallel_size": etp,
            "data_parallel_size": d["data_parallel_size"],
            "expert_data_parallel_size": d["expert_data_parallel_size"],
            "num_microbatches": d["num_microbatches"],
            "fits_memory": None if total is None else total <= budget,
            "total_bytes_per_gpu": total,
            "pipeline_bubble_fraction": round(bubble, 4),
            "communication_share": round(comm / (comm + compute), 4),
            "tp_within_node": tp_in_node,
            "score": round(overhead, 4),
            "flags": _flags(tp, pp, cp, ep, etp),
        })
    plans.sort(key=lambda p: (p["fits_memory"] is False, not p["tp_within_node"], p["score"],
                              p["total_bytes_per_gpu"] or 0))
    return plans[:limit] if limit else plans


def _flags(tp, pp, cp, ep, etp):
    parts = [f"--tensor-model-parallel-size {tp}", f"--pipeline-model-parallel-size {pp}",
             f"--context-parallel-size {cp}"]
    if ep > 1:
        parts.append(f"--expert-model-parallel-size {ep}")
    if etp != tp:
        parts.append(f"--expert-tensor-parallel-size {etp}")
    if tp > 1:
        parts.append("--sequence-parallel")
    return " ".join(parts)


def rank_of(layout, plans):
    """1-based rank of the layout's own sizes (TP, PP, CP, EP, ETP) among
    ``plans``, or None when they are not among the valid layouts."""
    key = (layout.tensor_model_parallel_size, layout.pipeline_model_parallel_size,
           layout.context_parallel_size, layout.expert_model_parallel_size, D.etp(layout))
    for i, p in enumerate(plans, 1):
        if (p["tensor_model_parallel_size"], p["pipeline_model_parallel_size"],
                p["context_parallel_size"], p["expert_model_parallel_size"],
                p["expert_tensor_parallel_size"]) == key:
            return i
    return None

"""The pipeline schedule per pipeline rank (``--schedule``).

Warm-up, steady (one forward, one backward) and cool-down steps as
megatron-core 0.19.2's schedules compute them
(megatron/core/pipeline_parallel/schedules.py ``get_pp_rank_microbatches``,
the same arithmetic in 0.12.3 to 0.19.2):

* 1F1B (``forward_backward_pipelining_without_interleaving``): rank r of PP
  runs min(PP - r - 1, M) warm-up forwards, then M - warm-up 1F1B steps, then
  as many cool-down backwards as it had warm-up forwards;
* interleaved (VPP > 1): counted in (microbatch, model chunk) steps, M x VPP in
  all; warm-up = (PP - r - 1) x 2 + (VPP - 1) x the microbatch group size
  (--microbatch-group-size-per-virtual-pipeline-stage, default PP), + 1 with
  --overlap-moe-expert-parallel-comm, capped at M x VPP (then every step is
  warm-up and cool-down);
* PP = 1 (``forward_backward_no_pipelining``): M forward-backward steps.

The decoder layers of each virtual stage are global indices (0-based), from
the same split as ``transformer_block.get_num_layers_to_build`` and
``transformer_layer.get_transformer_layer_offset``: chunk v of every rank
before chunk v + 1.  tests/test_layout_schedule.py compares both with
Megatron's own functions on CPU.
"""

from __future__ import annotations

from . import derive as D

MAX_RANKS_LISTED = 256  # pipeline ranks in --json (the text lists fewer)


def rank_steps(pp, rank, m, vpp=None, group=None, overlap_moe=False):
    """(total, warmup, steady, cooldown) steps of one pipeline rank."""
    if pp == 1:
        return m, 0, m, 0
    if vpp is None:
        warmup = min(pp - rank - 1, m)
        return m, warmup, m - warmup, warmup
    total = m * vpp
    warmup = (pp - rank - 1) * 2 + (vpp - 1) * (group or pp) + (1 if overlap_moe else 0)
    warmup = min(warmup, total)
    return total, warmup, total - warmup, warmup


def layer_ranges(layout):
    """[pp_rank][vp_stage] -> (first, last) global decoder layer index, or None
    for a virtual stage without decoder layers; None when the split is invalid."""
    table = D.stage_table(layout)
    if table is None:
        return None
    layers = table["layers"]
    pp, vpp = len(layers), len(layers[0])
    out = [[None] * vpp for _ in range(pp)]
    start = 0
    for v in range(vpp):
        for r in range(pp):
            n = layers[r][v]
            out[r][v] = (start, start + n - 1) if n else None
            start += n
    return out


def schedule(layout):
    """JSON-ready schedule, or None when the microbatches or the split are unknown."""
    m = D.num_microbatches(layout)
    ranges = layer_ranges(layout)
    if m is None or ranges is None:
        return None
    pp = layout.pipeline_model_parallel_size
    vpp = D.virtual_pipeline_size(layout)
    group = layout.microbatch_group_size_per_vp_stage or pp if vpp else None
    overlap = bool(layout.overlap_moe_expert_parallel_comm)
    kind = "no pipelining" if pp == 1 else "interleaved 1F1B" if vpp else "1F1B"
    per_rank = []
    for r in range(min(pp, MAX_RANKS_LISTED)):
        total, warmup, steady, cooldown = rank_steps(pp, r, m, vpp, group, overlap)
        per_rank.append({
            "pp_rank": r, "steps": total, "warmup": warmup, "steady": steady,
            "cooldown": cooldown, "all_warmup": bool(pp > 1 and warmup == total),
            "virtual_stages": [{"vp_stage": v, "layers": list(rg) if rg else []}
                               for v, rg in enumerate(ranges[r])]})
    return {"kind": kind, "num_microbatches": m, "virtual_pipeline_size": vpp,
            "microbatch_group_size": group, "unit": "(microbatch, model chunk) steps"
            if vpp else "microbatches", "per_rank": per_rank,
            "ranks_listed": len(per_rank), "pipeline_ranks": pp}


def lines(sched, limit=16):
    """Text lines: one per pipeline rank (the first ``limit``)."""
    out = [f"Pipeline schedule ({sched['kind']}, {sched['num_microbatches']} microbatches"
           + (f", VPP {sched['virtual_pipeline_size']}, microbatch group "
              f"{sched['microbatch_group_size']}; steps are (microbatch, model chunk) pairs"
              if sched["virtual_pipeline_size"] else "") + "):"]
    for rank in sched["per_rank"][:limit]:
        stages = "; ".join(
            f"v{s['vp_stage']} " + (f"{s['layers'][0]}-{s['layers'][1]}" if s["layers"]
                                    else "no layers")
            for s in rank["virtual_stages"])
        out.append(f"  PP rank {rank['pp_rank']:>3}: warm-up {rank['warmup']}, 1F1B "
                   f"{rank['steady']}, cool-down {rank['cooldown']}"
                   + (" (all warm-up)" if rank["all_warmup"] else "")
                   + f" | layers {stages}")
    if sched["pipeline_ranks"] > limit:
        out.append(f"  ... {sched['pipeline_ranks'] - limit} more pipeline ranks (use --json)")
    return out

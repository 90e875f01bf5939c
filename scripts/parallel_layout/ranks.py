"""Rank groups, computed as megatron.core.parallel_state.RankGenerator does.

Pure Python, no torch.  The arithmetic mirrors
``generate_masked_orthogonal_rank_groups`` (megatron-core 0.19.2,
megatron/core/parallel_state.py): the order string lists the axes from the
fastest-varying (stride 1) to the slowest; a group for a set of axes holds the
ranks that differ only in those axes.  Two grids share one world:
the dense grid (tp, cp, dp, pp; ep = 1) and the expert grid
(etp in the "tp" slot, ep, edp in the "dp" slot, pp; cp = 1).
"""

from __future__ import annotations

DEFAULT_ORDER = "tp-cp-ep-dp-pp"
AXES = ("tp", "pp", "dp", "ep", "cp")

# Group name in our output -> (grid, axes as RankGenerator tokens).
# Names follow the tokens Megatron passes to RankGenerator.get_ranks();
# the expert grid's "tp"/"dp" are reported as etp/edp.
GROUPS = {
    "tp": ("dense", "tp"),
    "pp": ("dense", "pp"),
    "dp": ("dense", "dp"),
    "cp": ("dense", "cp"),
    "dp-cp": ("dense", "dp-cp"),
    "tp-cp": ("dense", "tp-cp"),
    "tp-dp": ("dense", "tp-dp"),
    "tp-dp-cp": ("dense", "tp-dp-cp"),
    "tp-pp": ("dense", "tp-pp"),
    "ep": ("expert", "ep"),
    "etp": ("expert", "tp"),
    "edp": ("expert", "dp"),
    "tp-ep": ("expert", "tp-ep"),
    "tp-ep-pp": ("expert", "tp-ep-pp"),
}


def _prefix_product(sizes):
    out = [1]
    for s in sizes:
        out.append(out[-1] * s)
    return out


def _full_order(order: str, sizes: dict) -> list:
    """Megatron appends axes missing from ``order`` (they must have size 1)."""
    tokens = order.lower().split("-")
    for name in AXES:
        if name not in tokens:
            if sizes.get(name, 1) != 1:
                raise ValueError(
                    f"The size of ({name}) is ({sizes[name]}), but you haven't"
                    f"specified the order ({order})."
                )
            tokens.append(name)
    return tokens


def masked_groups(world_size: int, parallel_size: list, mask: list) -> list:
    """Same result as generate_masked_orthogonal_rank_groups(world, sizes, mask)."""
    stride = _prefix_product(parallel_size)
    in_shape = [s for s, m in zip(parallel_size, mask) if m]
    in_stride = [d for d, m in zip(stride, mask) if m]
    out_shape = [s for s, m in zip(parallel_size, mask) if not m]
    out_stride = [d for d, m in zip(stride, mask) if not m]
    group_size = _prefix_product(in_shape)[-1]
    in_prefix = _prefix_product(in_shape)
    out_prefix = _prefix_product(out_shape)
    groups = []
    for g in range(world_size // group_size):
        base = sum(((g // p) % s) * d for s, p, d in zip(out_shape, out_prefix, out_stride))
        groups.append([
            base + sum(((r // p) % s) * d for s, p, d in zip(in_shape, in_prefix, in_stride))
            for r in range(group_size)
        ])
    return groups


def grid_groups(sizes: dict, order: str, token: str) -> list:
    """Groups for ``token`` ("tp-dp", ...) on a grid with axis ``sizes``."""
    tokens = _full_order(order, sizes)
    parallel_size = [sizes.get(t, 1) for t in tokens]
    world = _prefix_product(parallel_size)[-1]
    wanted = token.split("-")
    mask = [t in wanted for t in tokens]
    return masked_groups(world, parallel_size, mask)


def grids(tp, pp, cp, ep, etp, world_size):
    """(dense sizes, expert sizes) for a world; sizes must already divide."""
    dp = world_size // (tp * pp * cp)
    edp = world_size // (etp * ep * pp)
    dense = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1}
    expert = {"tp": etp, "pp": pp, "dp": edp, "cp": 1, "ep": ep}
    return dense, expert


def layout_grids(layout):
    """(dense, expert) axis sizes of a LayoutInput; ETP defaults to TP as in Megatron."""
    tp = layout.tensor_model_parallel_size
    etp = layout.expert_tensor_parallel_size or tp
    return grids(tp, layout.pipeline_model_parallel_size, layout.context_parallel_size,
                 layout.expert_model_parallel_size, etp, layout.world_size)


TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"


def layout_order(layout) -> str:
    """The order Megatron-LM passes to initialize_model_parallel
    (megatron/training/initialize.py): tp-cp-ep-pp-dp with
    --use-tp-pp-dp-mapping, else tp-cp-ep-dp-pp."""
    return TP_PP_DP_ORDER if getattr(layout, "use_tp_pp_dp_mapping", False) else DEFAULT_ORDER


def rank_groups(layout, order: str = DEFAULT_ORDER, names=None) -> dict:
    """``{group name: [[rank, ...], ...]}`` for a LayoutInput (or any object with
    the Megatron attribute names).  Requires a world that the sizes divide;
    call rules.check() first."""
    dense, expert = layout_grids(layout)
    sizes = {"dense": dense, "expert": expert}
    out = {}
    for name in names or GROUPS:
        grid, token = GROUPS[name]
        out[name] = grid_groups(sizes[grid], order, token)
    pp_groups = out.get("pp") or grid_groups(dense, order, "pp")
    out["embedding"] = [[g[0]] if len(g) == 1 else [g[0], g[-1]] for g in pp_groups]
    out["position-embedding"] = [[g[0]] for g in pp_groups]
    return out


def rank_coordinates(layout, order: str = DEFAULT_ORDER) -> list:
    """Per global rank: dict of its index along each axis of both grids."""
    dense, expert = layout_grids(layout)
    coords = []
    d_tokens = _full_order(order, dense)
    e_tokens = _full_order(order, expert)
    d_stride = _prefix_product([dense[t] for t in d_tokens])
    e_stride = _prefix_product([expert[t] for t in e_tokens])
    for rank in range(layout.world_size):
        c = {t: (rank // d_stride[i]) % dense[t] for i, t in enumerate(d_tokens) if t != "ep"}
        for i, t in enumerate(e_tokens):
            if t in ("tp", "dp", "ep"):
                c[{"tp": "etp", "dp": "edp", "ep": "ep"}[t]] = (rank // e_stride[i]) % expert[t]
        coords.append(c)
    return coords


# Above this many ranks, --ranks summarises (each kind of group: how many, their
# size, the first two and the last, written as runs); --ranks-all gives every group.
SUMMARY_ABOVE = 256
SHOWN_RUNS = 4


def runs(group):
    """A rank list as arithmetic runs [(start, stop, step)], in order."""
    out = []
    i = 0
    while i < len(group):
        j = i + 1
        step = group[j] - group[i] if j < len(group) else 1
        while j + 1 < len(group) and group[j + 1] - group[j] == step:
            j += 1
        if j == i + 1 and j < len(group) and len(group) > j + 1 \
                and group[j + 1] - group[j] != step:
            out.append((group[i], group[i], 1))  # a lone rank before another run
            i += 1
            continue
        if j >= len(group):
            out.append((group[i], group[i], 1))
            break
        out.append((group[i], group[j], step))
        i = j + 1
    return out


def compact(group):
    """'0..7' / '0..16376 step 8' / '0..7, 4096..4103, ... (32 ranks)'."""
    parts = []
    for start, stop, step in runs(group):
        if start == stop:
            parts.append(str(start))
        elif stop - start == step:
            parts.append(f"{start}, {stop}")
        else:
            parts.append(f"{start}..{stop}" + (f" step {step}" if step != 1 else ""))
    text = ", ".join(parts[:SHOWN_RUNS])
    if len(parts) > SHOWN_RUNS:
        text += f", ... ({len(group)} ranks)"
    return text


def summarise(groups):
    """{name: {"count", "size", "first", "second", "last"}}, groups written compactly."""
    out = {}
    for name, gs in groups.items():
        sizes = {len(g) for g in gs}
        out[name] = {"count": len(gs), "size": sizes.pop() if len(sizes) == 1 else None,
                     "first": compact(gs[0]) if gs else None,
                     "second": compact(gs[1]) if len(gs) > 1 else None,
                     "last": compact(gs[-1]) if gs else None}
    return out

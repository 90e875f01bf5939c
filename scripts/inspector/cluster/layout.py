"""Layout input of ``--layout``: the flags checked by ``parallel_layout``, turned into
``initialize_model_parallel`` keywords, and the layout section of the summary.

``parallel_layout`` is imported inside the functions, so an installation without it still
parses the command line (``--layout`` then fails with one line).
"""
from __future__ import annotations

from typing import List, Optional

# LayoutInput attribute -> initialize_model_parallel keyword (megatron-core 0.19.2,
# as megatron/training/initialize.py passes them).
INIT_KWARGS = (
    ("tensor_model_parallel_size", "tensor_model_parallel_size"),
    ("pipeline_model_parallel_size", "pipeline_model_parallel_size"),
    ("context_parallel_size", "context_parallel_size"),
    ("expert_model_parallel_size", "expert_model_parallel_size"),
    ("expert_tensor_parallel_size", "expert_tensor_parallel_size"),
    ("num_distributed_optimizer_instances", "num_distributed_optimizer_instances"),
)


class BadArguments(ValueError):
    pass


def _layout_api():
    """parallel_layout's flags/rules/ranks modules, or raise ImportError."""
    from parallel_layout import flags, ranks, rules

    return flags, rules, ranks


def _layout_defaults_changed(args, flags) -> List[str]:
    return [
        f.option
        for f in flags.FLAGS
        if hasattr(args, f.dest) and getattr(args, f.dest) != f.default
    ]


def build_layout(args, info):
    """(layout, result, init_kwargs) or None without --layout; BadArguments on bad flags."""
    try:
        flags, rules, _ = _layout_api()
    except ImportError as exc:
        if getattr(args, "layout", False):
            raise BadArguments(f"--layout needs scripts/parallel_layout ({exc})") from None
        return None
    if not getattr(args, "layout", False):
        changed = _layout_defaults_changed(args, flags)
        if changed:
            raise BadArguments(f"{', '.join(changed)}: only used with --layout")
        return None
    from parallel_layout.errors import BadInput

    ns = _namespace_for_world(args, info)
    try:
        layout = flags.layout_from_namespace(ns)
    except BadInput as exc:
        raise BadArguments(str(exc)) from None
    result = rules.check(layout, with_memory=False)
    kwargs = {dst: getattr(layout, src) for src, dst in INIT_KWARGS}
    vpp = _virtual_pipeline_size(layout, result)
    if vpp is not None:
        kwargs["virtual_pipeline_model_parallel_size"] = vpp
    return layout, result, kwargs


def _namespace_for_world(args, info):
    import argparse

    ns = argparse.Namespace(**vars(args))
    # The world is the launched one, not a flag.
    ns.world_size = info.world_size
    ns.nnodes = None
    ns.nproc_per_node = None
    ns.gpus_per_node = info.local_world_size
    return ns


def _virtual_pipeline_size(layout, result) -> Optional[int]:
    # parallel_layout.derive resolves both VPP spellings of Megatron-LM's flags.
    derived = getattr(result, "derived", None) or {}
    if derived.get("virtual_pipeline_model_parallel_size"):
        return int(derived["virtual_pipeline_model_parallel_size"])
    return getattr(layout, "num_virtual_stages_per_pipeline_rank", None)


def layout_summary(layout, result) -> dict:
    from parallel_layout import flags

    given = {f.dest: getattr(layout, f.dest) for f in flags.FLAGS if getattr(layout, f.dest) != f.default}
    out = {
        "input": dict(given, world_size=layout.world_size),
        "valid": bool(result.valid),
        "violations": [_as_dict(v) for v in getattr(result, "violations", [])],
        "warnings": [_as_dict(w) for w in getattr(result, "warnings", [])],
    }
    return out


def _as_dict(item) -> dict:
    import dataclasses

    if dataclasses.is_dataclass(item):
        return dataclasses.asdict(item)
    if isinstance(item, dict):
        return dict(item)
    return {"message": str(item)}


def mark_predictions(merged: dict, layout) -> None:
    """Add ``matches_prediction`` to each kind parallel_layout.ranks predicts.

    A mismatch means this bundle's rank arithmetic disagrees with the installed
    megatron-core; it is reported, and does not change the exit code.
    """
    try:
        _, _, ranks = _layout_api()
        predicted = ranks.rank_groups(layout)
    except Exception as exc:
        merged["prediction_error"] = f"{type(exc).__name__}: {exc}"
        return
    for kind in merged["kinds"]:
        want = predicted.get(kind["kind"])
        if want is not None and kind["groups"]:
            got = sorted(sorted(g["ranks"]) for g in kind["groups"])
            kind["matches_prediction"] = got == sorted(sorted(g) for g in want)


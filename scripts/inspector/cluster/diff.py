"""Compare the reports of all ranks and name every field that differs.

Pure data in, data out (standard library only), so it is unit-tested without
launching anything.  A report is flattened to ``dotted.path -> scalar``; a
field differs when two ranks hold different scalars (a missing field counts
as the value ``<absent>``).  Fields that are *meant* to differ per rank (the
rank itself, pids, timings, per-rank launcher variables) are skipped by the
patterns in ``PER_RANK_FIELDS``.
"""

from __future__ import annotations

import json
import re
from typing import Dict, Iterable, List, Mapping

ABSENT = "<absent>"

# (pattern on the dotted path, why it may differ between healthy ranks).
PER_RANK_FIELDS = (
    (r"(^|\.)(rank|local_rank|node_rank|global_rank|group_rank)$", "rank numbering"),
    (r"(^|\.)(pid|ppid|hostname|host|node|node_key)$", "process and host identity"),
    (r"(^|\.)[^.]*(seconds|elapsed|duration|timestamp|_time|_s|_ms)$", "timings"),
    (r"(^|\.)(generated_at|started_at|finished_at|time)$", "timings"),
    (r"(^|\.)(RANK|LOCAL_RANK|GROUP_RANK|ROLE_RANK|GLOBAL_RANK|LOCAL_WORLD_SIZE)$",
     "torchrun per-rank variables"),
    (r"(^|\.)TORCHELASTIC_[A-Z_]+$", "torchrun per-rank variables"),
    (r"(^|\.)(SLURM_PROCID|SLURM_LOCALID|SLURM_NODEID|SLURM_TASK_PID|SLURM_TOPOLOGY_ADDR"
     r"|SLURMD_NODENAME|SLURM_GTIDS|SLURM_STEP_GPUS|SLURM_JOB_GPUS)$",
     "Slurm per-task variables"),
    # One GPU per rank is the normal layout; the *count* of GPUs is compared instead.
    (r"(^|\.)(CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES)$",
     "per-rank device selection"),
    (r"(^|\.)OMPI_COMM_WORLD_(LOCAL_)?RANK$", "MPI per-rank variables"),
    (r"^report\.timing\.", "timings of the local probe"),
    # Copies of allow-listed variables that report.env.* already compares.
    (r"^cluster\.env\.", "duplicates report.env"),
)
_PER_RANK = [re.compile(p, re.IGNORECASE) for p, _ in PER_RANK_FIELDS]


def is_per_rank(path: str) -> bool:
    return any(p.search(path) for p in _PER_RANK)


def flatten(obj, prefix: str = "") -> Dict[str, object]:
    """Nested dicts/lists -> {dotted path: scalar}. Lists of scalars stay one value."""
    out: Dict[str, object] = {}
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(flatten(value, path))
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, (Mapping, list, tuple)) for v in obj):
        for i, value in enumerate(obj):
            out.update(flatten(value, f"{prefix}[{i}]"))
    elif isinstance(obj, (list, tuple)):
        out[prefix] = json.dumps(list(obj))
    else:
        out[prefix] = obj
    return out


def _display(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)


def differences(
    reports: Mapping[int, Mapping], node_of: Mapping[int, str]
) -> List[dict]:
    """Every compared field whose value is not the same on all ranks.

    Returns ``[{"field", "scope", "values": [{"value", "ranks", "nodes"}]}]`` sorted
    by field; within a field the value most ranks hold comes first.  ``scope`` is
    ``"node"`` when every node is uniform (the field differs between nodes only)
    and ``"rank"`` when ranks on the same node disagree.
    """
    flat = {rank: flatten(report) for rank, report in reports.items()}
    paths = sorted({p for f in flat.values() for p in f if not is_per_rank(p)})
    result = []
    for path in paths:
        holders: Dict[str, List[int]] = {}
        for rank in sorted(flat):
            holders.setdefault(_display(flat[rank].get(path, ABSENT)), []).append(rank)
        if len(holders) < 2:
            continue
        values = [
            {
                "value": value,
                "ranks": ranks,
                "nodes": sorted({node_of.get(r, "?") for r in ranks}),
            }
            for value, ranks in sorted(holders.items(), key=lambda kv: (-len(kv[1]), kv[1]))
        ]
        result.append({"field": path, "scope": _scope(values, node_of), "values": values})
    return result


def _scope(values: List[dict], node_of: Mapping[int, str]) -> str:
    value_of_node: Dict[str, str] = {}
    for entry in values:
        for rank in entry["ranks"]:
            node = node_of.get(rank, "?")
            if value_of_node.setdefault(node, entry["value"]) != entry["value"]:
                return "rank"
    return "node"


def rank_ranges(ranks: Iterable[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8' (for one-line summaries)."""
    ordered = sorted(set(ranks))
    parts = []
    start = prev = None
    for r in ordered + [None]:
        if start is not None and (r is None or r != prev + 1):
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = None
        if r is not None and start is None:
            start = r
        prev = r
    return ",".join(parts)

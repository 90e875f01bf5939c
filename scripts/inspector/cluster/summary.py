"""Rank 0's verdict: ``summarize`` turns every rank's post into the summary ``--json`` prints.

Pure data in, data out (no store, no torch), so it is unit-tested without launching anything.
"""
from __future__ import annotations

from typing import Dict, List

from . import diff as cluster_diff, env_rules as cluster_env_rules
from .layout import layout_summary, mark_predictions

SCHEMA_VERSION = 1


def summarize(info, args, posts, hello, layout_parts, records, skipped_layout=False,
              duplicates=()) -> dict:
    world = list(range(info.world_size))
    node_of = {r: posts[r]["cluster"].get("node_key", "?") for r in posts}
    silent = [r for r in world if r not in hello]
    no_report = [r for r in world if r in hello and r not in posts]
    reports = {r: {"cluster": p["cluster"], "report": p.get("report")} for r, p in posts.items()}
    diffs = cluster_diff.differences(reports, node_of)
    probe_errors = {
        str(r): p["report"]["error"]
        for r, p in posts.items()
        if isinstance(p.get("report"), dict) and p["report"].get("error")
    }
    unmet = {str(r): p["unmet"] for r, p in posts.items() if p.get("unmet")}
    gpu_problems = gpu_shortfalls(posts)
    summary = {
        "schema_version": SCHEMA_VERSION,
        "mode": "distributed",
        "launcher": info.launcher,
        "world_size": info.world_size,
        "timeout_s": args.dist_timeout,
        "nodes": _nodes(posts),
        "gpus_per_rank": {str(r): posts[r]["cluster"].get("gpus_visible") for r in sorted(posts)},
        "silent_ranks": silent,
        "unreported_ranks": no_report,
        "duplicate_ranks": list(duplicates),
        "probe_errors": probe_errors,
        "differences": diffs,
        "unmet_requirements": unmet,
        "gpu_problems": gpu_problems,
        "layout": None,
    }
    if layout_parts:
        layout, result, init_kwargs = layout_parts
        section = layout_summary(layout, result)
        section["initialize_model_parallel"] = init_kwargs
        if skipped_layout:
            section["skipped"] = ("not every rank reported exactly once; "
                                  "no group was built")
        if records is not None:
            from . import groups as cluster_groups

            section["backend"] = next((rec.get("backend") for rec in records.values()), None)
            section["groups"] = cluster_groups.merge(records, info.world_size)
            if not section["groups"]["silent_ranks"]:  # partial membership proves nothing
                mark_predictions(section["groups"], layout)
            section["ok"] = section["groups"]["ok"]
        else:
            section["ok"] = False
        section["env_problems"] = cluster_env_rules.check(layout, posts)
        if section["env_problems"]:
            section["ok"] = False
        summary["layout"] = section
    problems = bool(silent or no_report or duplicates or probe_errors or diffs or unmet
                    or gpu_problems)
    if summary["layout"] is not None and not summary["layout"]["ok"]:
        problems = True
    summary["ok"] = not problems
    summary["exit_code"] = 0 if summary["ok"] else 1
    return summary


def gpu_shortfalls(posts) -> Dict[str, str]:
    """Ranks whose LOCAL_RANK has no GPU, on a rank that sees some GPUs.

    One process per GPU is the Megatron convention (torch.cuda.set_device(LOCAL_RANK));
    a rank that sees no GPU at all is a CPU run or shows up in the differences.
    """
    out = {}
    for rank, post in sorted(posts.items()):
        c = post["cluster"]
        seen, local = c.get("gpus_visible"), c.get("local_rank", 0)
        if seen and local >= seen:
            out[str(rank)] = f"LOCAL_RANK {local} but only {seen} GPU(s) visible"
    return out


def _nodes(posts) -> List[dict]:
    nodes: Dict[str, dict] = {}
    for rank in sorted(posts):
        c = posts[rank]["cluster"]
        entry = nodes.setdefault(c.get("node_key", "?"), {"node": c.get("node_key"), "hostnames": [], "ranks": []})
        entry["ranks"].append(rank)
        if c.get("hostname") not in entry["hostnames"]:
            entry["hostnames"].append(c.get("hostname"))
    return [nodes[k] for k in sorted(nodes)]



"""Text form of the distributed summary (the dict ``--json`` prints)."""

from __future__ import annotations

from typing import List

from .diff import rank_ranges


def _ranks(ranks) -> str:
    ranks = list(ranks)
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {rank_ranges(ranks)}" if ranks else "none"


def _nodes(summary: dict) -> List[str]:
    gpus = summary.get("gpus_per_rank", {})
    lines = []
    for node in summary.get("nodes", []):
        counts = sorted({str(gpus.get(str(r))) for r in node["ranks"]})
        lines.append(
            f"  {node['node']} ({', '.join(node['hostnames'])}): {len(node['ranks'])} "
            f"{_ranks(node['ranks'])}; GPUs visible per rank: {'/'.join(counts)}"
        )
    return lines


def _differences(summary: dict) -> List[str]:
    diffs = summary.get("differences", [])
    if not diffs:
        return ["Differences: none"]
    lines = [f"Differences ({len(diffs)}):"]
    for diff in diffs:
        scope = "between nodes" if diff["scope"] == "node" else "between ranks"
        lines.append(f"  {diff['field']}  [{scope}]")
        for value in diff["values"]:
            lines.append(f"    {value['value']!s:<24} {_ranks(value['ranks'])} ({', '.join(value['nodes'])})")
    return lines


# Group row key -> words in the text summary.
BAD_MEMBERS = (
    ("hung_ranks", "no answer from"),
    ("failed_ranks", "failed on"),
    ("timed_out_ranks", "timed out waiting on"),
    ("skipped_ranks", "skipped after an earlier timeout on"),
)


def _groups(section: dict) -> List[str]:
    merged = section.get("groups")
    if merged is None:
        return []
    lines = [f"Groups (backend {section.get('backend')}): one all_reduce each"]
    if not any(kind["groups"] for kind in merged["kinds"]):
        lines.append("  no group was built")
    for kind in merged["kinds"] if any(k["groups"] for k in merged["kinds"]) else []:
        if not kind["groups"]:
            why = "; ".join(kind["ranks_without_group"]) or "not built"
            req = "MISSING" if kind["required"] else "n/a"
            lines.append(f"  {kind['kind']:<19} {req}: {why}")
            continue
        cells = []
        for g in kind["groups"]:
            members = ",".join(str(r) for r in g["ranks"])
            if g["ok"]:
                cells.append(f"[{members}] ok {g['seconds'] * 1000:.1f} ms")
            else:
                bad = [f"{label} {_ranks(g.get(key, []))}" for key, label in BAD_MEMBERS
                       if g.get(key)]
                cells.append(f"[{members}] FAIL ({'; '.join(bad)})")
        if kind.get("matches_prediction") is False:
            cells.append("(differs from scripts/check_parallel_layout.py --ranks)")
        lines.append(f"  {kind['kind']:<19} " + "  ".join(cells))
        for g in kind["groups"]:
            for rank, err in (g.get("errors") or {}).items():
                if int(rank) not in g.get("skipped_ranks", []):  # the row already says why
                    lines.append(f"      rank {rank}: {err}")
    for rank, err in merged.get("rank_errors", {}).items():
        lines.append(f"  rank {rank} stopped at {err['stage']}: {err['error']}")
    return lines


def _layout(section) -> List[str]:
    if not section:
        return []
    sizes = dict(section.get("input", {}))
    sizes.update({k: v for k, v in (section.get("initialize_model_parallel") or {}).items()
                  if v is not None})
    short = {
        "tensor_model_parallel_size": "TP",
        "pipeline_model_parallel_size": "PP",
        "context_parallel_size": "CP",
        "expert_model_parallel_size": "EP",
        "expert_tensor_parallel_size": "ETP",
        "virtual_pipeline_model_parallel_size": "VPP",
    }
    shape = " ".join(f"{v}={sizes[k]}" for k, v in short.items() if k in sizes)
    lines = [f"Layout {shape}: {'valid' if section.get('valid') else 'INVALID'}"]
    for v in section.get("violations", []):
        lines.append(f"  {v.get('rule', '')}: {v.get('message', '')}")
        if v.get("fix"):
            lines.append(f"    fix: {v['fix']}")
    for key in ("refused", "skipped"):
        if section.get(key):
            lines.append(f"  {key}: {section[key]}")
    for problem in section.get("env_problems", []):
        values = sorted({str(v) if v is not None else "<unset>" for v in problem["values"].values()})
        lines.append(
            f"  {problem['variable']}={'/'.join(values)} on {_ranks(problem['ranks'])}: "
            f"Megatron-LM asserts \"{problem['message']}\" ({problem['when']})"
        )
    return lines + _groups(section)


def render(summary: dict) -> str:
    lines = [
        f"Megatron Core cluster check: {summary['world_size']} "
        f"{'rank' if summary['world_size'] == 1 else 'ranks'} ({summary.get('launcher')})"
    ]
    if "nodes" in summary:
        lines.append(f"Nodes ({len(summary['nodes'])}):")
        lines += _nodes(summary)
        lines.append(f"Silent ranks (never reached the store): {_ranks(summary['silent_ranks'])}")
        if summary.get("duplicate_ranks"):
            lines.append("Ranks claimed by more than one process: "
                         f"{_ranks(summary['duplicate_ranks'])}")
        if summary.get("unreported_ranks"):
            lines.append(f"Ranks with no report before the deadline: {_ranks(summary['unreported_ranks'])}")
        for rank, err in summary.get("probe_errors", {}).items():
            lines.append(f"Local probe failed on rank {rank}: {err}")
        for rank, problem in summary.get("gpu_problems", {}).items():
            lines.append(f"GPU problem on rank {rank}: {problem}")
        for rank, names in summary.get("unmet_requirements", {}).items():
            lines.append(f"--require unmet on rank {rank}: {', '.join(names)}")
        lines += _differences(summary)
    lines += _layout(summary.get("layout"))
    lines.append(f"Result: {'OK' if summary['ok'] else 'FAIL'} (exit {summary['exit_code']})")
    return "\n".join(lines)

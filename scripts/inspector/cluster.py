"""Distributed mode of inspect_core_api.py: every rank probes, rank 0 compares.

Run under the launcher the job already uses::

    torchrun --nproc-per-node 8 --nnodes 2 ... scripts/inspect_core_api.py --distributed
    srun --ntasks-per-node 8 .venv/bin/python scripts/inspect_core_api.py --distributed

Phases (each rank; T = ``--dist-timeout``; no wait is without a timeout):

1. rendezvous   TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it, or torchrun's
                agent does); connecting gives up after T
2. report       post ``hello/<rank>``, run the local probe (its children have their own
                ``--timeout``), post ``report/<rank>``
3. plan         rank 0 gathers the reports for at most T after its own, names the silent
                ranks, and lets the layout smoke test run only if every rank reported
4. groups       (``--layout``) init_process_group + initialize_model_parallel (group
                timeout T), one all_reduce per group of every kind (T each; a rank stops
                after its first timeout), teardown; post ``groups/<rank>``; rank 0 waits
                at most T (+5 s) after its own for the others' results
5. verdict      rank 0 prints the summary and posts the exit code; others exit with it

Only rank 0 writes to stdout.  If rank 0 itself never comes, the other ranks say so
on stderr ("cannot reach the store" or "rank 0 gave no plan") and exit 1.

Hooks used by inspector.cli: ``add_arguments(parser)``, ``wants_cluster(args)``,
``main(args) -> int``.  Standard library only at import time.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Dict, List, Optional

from . import cluster_diff, cluster_env, cluster_env_rules, cluster_render
from .cluster_store import Deadline

SCHEMA_VERSION = 1
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 86400.0
# Rank 0 keeps the store alive this long for the other ranks to read the verdict.
ACK_WAIT_S = 5.0
# How long rank 0 waits for the other ranks' group results after its own deadline.
GRACE_S = 5.0
# Set when this rank skipped teardown (a collective hung): exit without joining
# torch's background threads, which could block interpreter shutdown.
_UNCLEAN: List[int] = []

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


def add_arguments(parser) -> None:
    group = parser.add_argument_group(
        "distributed mode (run under torchrun or srun; one process per GPU)"
    )
    group.add_argument(
        "--distributed",
        action="store_true",
        help="every rank runs the local probe; rank 0 prints one summary: ranks per node, "
        "GPUs per rank, every field that differs between ranks with the ranks holding each "
        "value, and silent ranks. Reads RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT "
        "(torchrun) or SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID/SLURM_NODEID (srun; MASTER_ADDR "
        f"defaults to the first host of SLURM_STEP_NODELIST/SLURM_JOB_NODELIST, MASTER_PORT to "
        f"{cluster_env.DEFAULT_MASTER_PORT}). Exit 0 if all ranks agree (and every group "
        "works), 1 otherwise, 2 on bad arguments",
    )
    group.add_argument(
        "--backend",
        choices=("auto", "nccl", "gloo"),
        default="auto",
        help="torch.distributed backend for --layout (auto: nccl if CUDA is available, else gloo)",
    )
    group.add_argument(
        "--dist-timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="limit of every wait in distributed mode: connecting to the store, rank 0's "
        "wait for the other ranks' reports, building the groups, each collective "
        f"(default {DEFAULT_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--layout",
        action="store_true",
        help="with --distributed: validate the Megatron-LM parallelism flags below against the "
        "world size, call parallel_state.initialize_model_parallel, run one all_reduce in every "
        "group of every kind and report each group (ok and seconds, or the failed/hung ranks). "
        "An invalid layout is refused before torch is imported: rank 0 prints why and exits 1, "
        "the other ranks exit 0 so that the launcher lets rank 0 finish",
    )
    try:
        from parallel_layout import flags
    except ImportError:
        return  # build_layout() turns --layout into a one-line error then
    taken = [f.option for f in flags.FLAGS if f.option in parser._option_string_actions]
    if taken:  # adding would raise argparse.ArgumentError and break the whole parser
        print(f"inspect_core_api.py: --layout flags clash with {taken}; --layout disabled",
              file=sys.stderr)
        return
    flags.add_layout_arguments(parser, world=False)


def wants_cluster(args) -> bool:
    return bool(getattr(args, "distributed", False))


def _error(message: str) -> None:
    print(f"inspect_core_api.py: error: {message}", file=sys.stderr)


def _say(info, message: str) -> None:
    print(f"[rank {info.rank}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- layout input


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


# ---------------------------------------------------------------- local facts


def cluster_facts(info) -> dict:
    """Facts about this rank that the generic local report does not know."""
    facts = {
        "rank": info.rank,
        "world_size": info.world_size,
        "local_rank": info.local_rank,
        "node_key": info.node_key,
        "hostname": info.hostname,
        "launcher": info.launcher,
        "pid": os.getpid(),
        "python": sys.executable,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        # Read here, not from the probe's report, so the rules work even if the probe failed.
        "env": {name: os.environ.get(name) for name in cluster_env_rules.VARIABLES},
    }
    try:
        import torch

        facts["gpus_visible"] = torch.cuda.device_count()
    except Exception as exc:  # a broken torch is a finding, not a crash
        facts["gpus_visible"] = None
        facts["torch_error"] = f"{type(exc).__name__}: {exc}"
    return facts


def local_report(args) -> dict:
    try:
        from . import report
    except ImportError as exc:
        return {"error": f"inspector.report is not available: {exc}"}
    try:
        return report.collect(args)
    except Exception as exc:
        return {"error": f"inspector.report.collect raised {type(exc).__name__}: {exc}"}


def unmet_requirements(report: dict, args) -> List[str]:
    """--require applied on this rank: 'name (status)' for each unmet component."""
    names = getattr(args, "require", None) or []
    if not names or "error" in report:
        return []
    try:
        from .cli import unmet
    except ImportError:
        return []
    return [f"{name} ({status})" for name, status, _ in unmet(report, names)]


def resolve_backend(requested: str) -> str:
    if requested != "auto":
        return requested
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


# ---------------------------------------------------------------- phases


def _coordinate(rdv, info, args, layout_parts, timeout: float) -> dict:
    world = range(info.world_size)
    start = time.monotonic()
    posts = rdv.collect("report", world, Deadline(timeout))
    timings = {"gather_wait_s": round(time.monotonic() - start, 3)}
    hello = {r for r in world if r in posts or rdv.has(f"hello/{r}")}
    duplicates = [r for r in sorted(hello) if rdv.count(f"claim/{r}") > 1]
    go = bool(layout_parts) and len(posts) == info.world_size and not duplicates
    rdv.post("plan", {"layout": go}, rank=0)
    records = None
    if go:
        start = time.monotonic()
        records = _groups_phase(rdv, info, args, layout_parts, timeout, collect=True)
        timings["groups_s"] = round(time.monotonic() - start, 3)
    summary = summarize(info, args, posts, hello, layout_parts, records,
                        skipped_layout=bool(layout_parts) and not go, duplicates=duplicates)
    summary["timings"] = timings
    return summary


def _groups_phase(rdv, info, args, layout_parts, timeout, collect=False):
    from . import cluster_groups

    _, _, init_kwargs = layout_parts
    phase = Deadline(cluster_groups.PHASE_TIMEOUTS * timeout)
    backend = args.backend
    try:
        backend = resolve_backend(args.backend)
    except Exception as exc:
        record = {"stage": "backend", "error": f"{type(exc).__name__}: {exc}", "kinds": {}}
    else:
        record = cluster_groups.run_bounded(rdv.sub_store("pg"), info, backend, init_kwargs,
                                            timeout)
    record["backend"] = backend
    if record.get("clean") is False:
        _UNCLEAN.append(info.rank)
    rdv.post("groups", record)
    if not collect:
        return record
    # Every rank is bounded by the same phase budget, started at about the same time.
    return rdv.collect("groups", range(info.world_size), Deadline(phase.left() + GRACE_S))


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
            from . import cluster_groups

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


def refuse_layout(info, args, layout_parts) -> int:
    """Invalid layout: every rank stops before any store or group exists.

    Only rank 0 reports, and only it exits 1 (so the job's exit status is 1).
    The others exit 0 at once: a launcher such as torchrun stops every rank as
    soon as one exits non-zero, which could kill rank 0 before it printed.
    """
    layout, result, init_kwargs = layout_parts
    if info.rank != 0:
        return 0
    summary = {
        "schema_version": SCHEMA_VERSION,
        "mode": "distributed",
        "launcher": info.launcher,
        "world_size": info.world_size,
        "ok": False,
        "exit_code": 1,
        "layout": dict(layout_summary(layout, result), refused="the layout is invalid for "
                       f"world size {info.world_size}; no process group was built"),
        # Evidence for the line above: without torch there is no process group.
        "torch_imported": "torch" in sys.modules,
    }
    _emit(summary, args)
    return 1


def _emit(summary: dict, args, out=None) -> None:
    text = (
        json.dumps(summary, indent=2, sort_keys=False, default=str)
        if getattr(args, "json", False)
        else cluster_render.render(summary)
    )
    out = out or sys.stdout
    out.write(text + "\n")
    out.flush()


def cluster_groups_budget(timeout: float) -> float:
    from .cluster_groups import PHASE_TIMEOUTS

    return PHASE_TIMEOUTS * timeout


def _probe_timeout(args) -> float:
    """Upper bound of the local probe (its children's --timeout)."""
    given = getattr(args, "timeout", None)
    if given:
        return float(given)
    try:
        from .report import DEFAULT_TIMEOUT
    except ImportError:
        return DEFAULT_TIMEOUT_S
    return float(DEFAULT_TIMEOUT)


def _worker(rdv, info, args, layout_parts, timeout: float) -> int:
    # Rank 0 starts its gather after its own probe, which may end up to one probe
    # timeout after ours; its gather then lasts at most ``timeout``.
    wait = timeout + _probe_timeout(args) + GRACE_S
    plan = rdv.wait_for("plan/0", Deadline(wait))
    if plan is None:
        _say(info, f"rank 0 gave no plan within {wait:g}s; stopping")
        return 1
    if plan.get("layout"):
        _groups_phase(rdv, info, args, layout_parts, timeout)
    # Rank 0 ends its group phase (and its wait for our results) at most one phase
    # budget after it began, which was no later than our start; then it prints.
    wait = cluster_groups_budget(timeout) + 3 * GRACE_S
    verdict = rdv.wait_for("verdict/0", Deadline(wait))
    if verdict is None:
        _say(info, f"rank 0 gave no verdict within {wait:g}s; stopping")
        return 1
    rdv.post("ack", True)
    return int(verdict.get("exit_code", 1))


def main(args) -> int:
    try:
        info = cluster_env.from_environment()
    except cluster_env.LaunchError as exc:
        _error(f"--distributed: {exc}")
        return 2
    timeout = float(args.dist_timeout)
    if not 0 < timeout <= MAX_TIMEOUT_S:
        _error(f"--dist-timeout must be positive and at most {MAX_TIMEOUT_S:g} seconds, "
               f"got {args.dist_timeout}")
        return 2
    try:
        layout_parts = build_layout(args, info)
    except BadArguments as exc:
        _error(str(exc))
        return 2
    except Exception as exc:  # a checker bug must still not print a traceback
        _error(f"cannot check the layout: {type(exc).__name__}: {exc}")
        return 2
    if layout_parts and not layout_parts[1].valid:
        return refuse_layout(info, args, layout_parts)
    try:
        # stdout carries rank 0's summary only (one JSON object with --json); anything
        # megatron or torch prints from Python goes to stderr instead.
        out = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            code = _run(info, args, layout_parts, timeout, out)
        if _UNCLEAN:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        return code
    except Exception as exc:  # never a traceback from a rank; say where and why
        _say(info, f"distributed check failed: {type(exc).__name__}: {exc}")
        return 1


def _run(info, args, layout_parts, timeout: float, out) -> int:
    from .cluster_store import Rendezvous

    try:
        rdv = Rendezvous(info, timeout)
    except Exception as exc:
        _say(info, f"cannot reach the store at {info.master_addr}:{info.master_port} "
             f"within {timeout:g}s: {type(exc).__name__}: {exc}")
        return 1
    # Two processes with the same rank (a launcher misconfiguration) overwrite each
    # other's keys; the claim counter is how rank 0 still notices.
    rdv.count(f"claim/{info.rank}", 1)
    rdv.post("hello", {"hostname": info.hostname})
    report = local_report(args)
    rdv.post("report", {"cluster": cluster_facts(info), "report": report,
                        "unmet": unmet_requirements(report, args)})
    if info.rank != 0:
        return _worker(rdv, info, args, layout_parts, timeout)
    summary = _coordinate(rdv, info, args, layout_parts, timeout)
    _emit(summary, args, out)
    rdv.post("verdict", {"exit_code": summary["exit_code"]}, rank=0)
    live = [r for r in range(1, info.world_size) if r not in summary["silent_ranks"]]
    rdv.collect("ack", live, Deadline(min(ACK_WAIT_S, timeout)))
    return summary["exit_code"]

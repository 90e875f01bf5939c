"""Cluster mode's phases on each rank: ``main(args) -> int`` (see the package docstring)."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import List

from . import env as cluster_env, env_rules as cluster_env_rules, render as cluster_render
from .layout import BadArguments, build_layout, layout_summary
from .options import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from .store import Deadline
from .summary import SCHEMA_VERSION, summarize

# Rank 0 keeps the store alive this long for the other ranks to read the verdict.
ACK_WAIT_S = 5.0
# How long rank 0 waits for the other ranks' group results after its own deadline.
GRACE_S = 5.0
# Set when this rank skipped teardown (a collective hung): exit without joining
# torch's background threads, which could block interpreter shutdown.
_UNCLEAN: List[int] = []


def _error(message: str) -> None:
    print(f"inspect_core_api.py: error: {message}", file=sys.stderr)


def _say(info, message: str) -> None:
    print(f"[rank {info.rank}] {message}", file=sys.stderr, flush=True)


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
        from inspector import report
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
        from inspector.report import unmet
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
    from . import groups as cluster_groups

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
    from .groups import PHASE_TIMEOUTS

    return PHASE_TIMEOUTS * timeout


def _probe_timeout(args) -> float:
    """Upper bound of the local probe (its children's --timeout)."""
    given = getattr(args, "timeout", None)
    if given:
        return float(given)
    try:
        from inspector.report import DEFAULT_TIMEOUT
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
    from .store import Rendezvous

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

"""Build the layout's real process groups and run one collective in each.

Runs inside every rank after the gather phase found all ranks alive.  Each
step is guarded and time-boxed: a rank records what happened to it (group
membership, ok/error/timeout/skipped, seconds) and never waits without a timeout.
Rank 0 merges the per-rank records with ``merge``.

torch and megatron are imported inside the functions, so the module itself
imports with the standard library only (rank 0's summary and the unit tests
use ``merge`` and ``GROUP_KINDS`` without torch).
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from datetime import timedelta
from typing import Dict, List, Mapping, Optional

# One row per kind of group megatron.core.parallel_state builds (0.19.2):
# (kind, getter in parallel_state, getter kwargs, required).
# ``kind`` is the key parallel_layout.ranks.rank_groups() uses for the same
# groups (RankGenerator tokens; the expert grid's tp-ep / tp-ep-pp are the
# expert-tensor x expert-model (x pipeline) groups).  Optional kinds exist only for some
# ranks or some settings (embedding groups only on first/last stages, Gloo
# groups only with create_gloo_process_groups=True).
GROUP_KINDS = (
    ("tp", "get_tensor_model_parallel_group", {}, True),
    ("pp", "get_pipeline_model_parallel_group", {}, True),
    ("dp", "get_data_parallel_group", {}, True),
    ("cp", "get_context_parallel_group", {}, True),
    ("dp-cp", "get_data_parallel_group", {"with_context_parallel": True}, True),
    ("tp-pp", "get_model_parallel_group", {}, True),
    ("tp-cp", "get_tensor_and_context_parallel_group", {}, True),
    ("tp-dp", "get_tensor_and_data_parallel_group", {}, True),
    ("tp-dp-cp", "get_tensor_and_data_parallel_group", {"with_context_parallel": True}, True),
    ("ep", "get_expert_model_parallel_group", {}, True),
    ("etp", "get_expert_tensor_parallel_group", {}, True),
    ("edp", "get_expert_data_parallel_group", {}, True),
    ("tp-ep", "get_expert_tensor_and_model_parallel_group", {}, True),
    ("tp-ep-pp", "get_expert_tensor_model_pipeline_parallel_group", {}, True),
    ("embedding", "get_embedding_group", {}, False),
    ("position-embedding", "get_position_embedding_group", {}, False),
    ("intra-dist-opt", "get_intra_distributed_optimizer_instance_group", {}, False),
    ("dp-gloo", "get_data_parallel_group_gloo", {}, False),
    ("dp-cp-gloo", "get_data_parallel_group_gloo", {"with_context_parallel": True}, False),
    ("edp-gloo", "get_expert_data_parallel_group_gloo", {}, False),
)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _device(backend: str, local_rank: int):
    import torch

    if backend == "nccl":
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _all_reduce(group, members: List[int], rank: int, device, timeout_s: float) -> dict:
    """Sum of (rank + 1) over the group; checks the value, not just completion."""
    import torch
    import torch.distributed as dist

    # Gloo groups only take CPU tensors, whatever the default backend is.
    if dist.get_backend(group) == "gloo":
        device = torch.device("cpu")
    tensor = torch.tensor([float(rank + 1)], device=device)
    start = time.perf_counter()
    end = time.monotonic() + timeout_s
    try:
        work = dist.all_reduce(tensor, group=group, async_op=True)
        work.wait(timeout=timedelta(seconds=timeout_s))
        # NCCL's wait() only orders streams; poll completion so a hang cannot block us.
        while not work.is_completed():
            if time.monotonic() >= end:
                return {"state": "timeout",
                        "error": f"all_reduce did not finish in {timeout_s:g}s"}
            time.sleep(0.005)
    except Exception as exc:  # gloo raises on its timeout and on a dead peer
        state = "timeout" if "timed out" in str(exc).lower() else "error"
        return {"state": state, "error": _short(exc), "seconds": time.perf_counter() - start}
    seconds = time.perf_counter() - start
    got = float(tensor.item())
    want = float(sum(r + 1 for r in members))
    if got != want:
        return {"state": "error", "error": f"all_reduce gave {got}, expected {want}", "seconds": seconds}
    return {"state": "ok", "seconds": seconds}


def _probe_kind(ps, getter: str, kwargs: dict, rank: int, device, timeout_s, skip=None) -> dict:
    import torch.distributed as dist

    try:
        group = getattr(ps, getter)(**kwargs)
    except Exception as exc:
        return {"state": "no-group", "error": _short(exc)}
    if group is None:
        return {"state": "no-group", "error": f"{getter} returned None"}
    try:
        members = list(dist.get_process_group_ranks(group))
    except Exception as exc:
        return {"state": "error", "error": _short(exc)}
    if skip:
        return {"state": "skipped", "error": skip, "ranks": members}
    result = _all_reduce(group, members, rank, device, timeout_s)
    result["ranks"] = members
    return result


# The whole phase on one rank: init_process_group and the first group barrier
# (T each at worst), the collectives (T at worst, since a rank stops after its
# first timeout), teardown (T).  run_bounded() stops waiting after this many T.
PHASE_TIMEOUTS = 4


def run_bounded(rdv_store, info, backend: str, init_kwargs: Mapping, timeout_s: float) -> dict:
    """run() in a daemon thread; give up after PHASE_TIMEOUTS * timeout_s.

    Waits inside NCCL or gloo can outlast their own timeouts (a destroy that
    blocks, a communicator that never forms); the caller must still report.
    A record given up on is marked unclean, so the process exits with os._exit.
    """
    record: Dict[str, object] = {"stage": "start", "kinds": {}, "clean": True}
    worker = threading.Thread(
        target=run, args=(rdv_store, info, backend, init_kwargs, timeout_s, record), daemon=True
    )
    worker.start()
    budget = PHASE_TIMEOUTS * timeout_s
    worker.join(budget)
    if worker.is_alive():
        snapshot = _snapshot(record)
        snapshot["error"] = f"stopped waiting after {budget:g}s, at stage {snapshot.get('stage')}"
        snapshot["clean"] = False
        return snapshot
    return record


def _snapshot(record: dict) -> dict:
    """A copy of a dict another thread may still be writing."""
    for _ in range(100):
        try:
            return json.loads(json.dumps(record, default=str))
        except RuntimeError:  # changed size during iteration: try again
            time.sleep(0.01)
    return {"stage": "unknown", "kinds": {}}


def run(rdv_store, info, backend: str, init_kwargs: Mapping, timeout_s: float,
        record: Optional[dict] = None) -> dict:
    """This rank's record: {"stage", "error"?, "kinds": {kind: {...}}, "clean"}.

    Building the groups gets ``timeout_s``; so does each collective.  After the
    first collective that times out, this rank runs no more: its peers are then
    out of step (a late peer would pair its next collective with the wrong one),
    and stopping keeps the whole phase near two timeouts instead of one per group.
    ``record`` (if given) is filled in place, so a caller that stops waiting
    still sees how far this got.
    """
    record = {"kinds": {}} if record is None else record
    record.update(stage="import", clean=True)
    try:
        import torch.distributed as dist
        from megatron.core import parallel_state as ps

        record["stage"] = "init_process_group"
        device = _device(backend, info.local_rank)
        dist.init_process_group(
            backend,
            store=rdv_store,
            rank=info.rank,
            world_size=info.world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        record["stage"] = "initialize_model_parallel"
        start = time.perf_counter()
        ps.initialize_model_parallel(
            **init_kwargs,
            # Every group's own timeout (gloo raises when it passes).  A float is
            # accepted: megatron only builds timedelta(minutes=...) from it.
            distributed_timeout_minutes=timeout_s / 60.0,
        )
        record["init_seconds"] = time.perf_counter() - start
        record["stage"] = "collectives"
        start = time.perf_counter()
        skip = None
        for name, getter, kwargs, _ in GROUP_KINDS:
            res = _probe_kind(ps, getter, kwargs, info.rank, device, timeout_s, skip)
            record["kinds"][name] = res
            if res["state"] == "timeout" and not skip:
                skip = f"not run: the {name} all_reduce timed out on this rank"
        record["collectives_seconds"] = time.perf_counter() - start
        record["stage"] = "done"
    except Exception as exc:
        record["error"] = _short(exc)
        record["traceback"] = traceback.format_exc(limit=4)
    record["clean"] = _teardown(record)
    return record


def _teardown(record: dict) -> bool:
    """Destroy the groups after a clean run only.

    After an error or a timeout the process is about to exit anyway, and
    destroying NCCL communicators whose peers are gone can block.
    """
    hung = any(k.get("state") == "timeout" for k in record["kinds"].values())
    if hung or record.get("error"):
        return False
    try:
        import torch.distributed as dist
        from megatron.core import parallel_state as ps

        ps.destroy_model_parallel()
        if dist.is_initialized():
            dist.destroy_process_group()
        return True
    except Exception as exc:
        record["teardown_error"] = _short(exc)
        return False


def merge(records: Mapping[int, dict], world_size: int) -> dict:
    """Per-group verdicts from all ranks' records.

    A group is identified by its member list as reported by its members.  A
    member that reported no record at all is ``hung``; one that reported an
    error or timeout is ``failed``/``hung`` accordingly.
    """
    groups: Dict[str, Dict[tuple, dict]] = {}
    unavailable: Dict[str, Dict[str, List[int]]] = {}
    for rank, record in sorted(records.items()):
        for kind, res in record.get("kinds", {}).items():
            if res.get("state") == "no-group":
                unavailable.setdefault(kind, {}).setdefault(res.get("error", ""), []).append(rank)
                continue
            members = tuple(res.get("ranks") or [rank])
            entry = groups.setdefault(kind, {}).setdefault(members, {"results": {}})
            entry["results"][rank] = res
    silent = [r for r in range(world_size) if r not in records]
    out_kinds = []
    for name, _, _, required in GROUP_KINDS:
        built = groups.get(name, {})
        rows = [_group_row(name, members, e["results"], records) for members, e in sorted(built.items())]
        out_kinds.append(
            {
                "kind": name,
                "required": required,
                "groups": rows,
                "ranks_without_group": unavailable.get(name, {}),
                "ok": all(r["ok"] for r in rows) and (bool(rows) or not required),
            }
        )
    stage_errors = {
        r: {"stage": rec.get("stage"), "error": rec.get("error")}
        for r, rec in records.items()
        if rec.get("error")
    }
    ok = not silent and not stage_errors and all(k["ok"] for k in out_kinds)
    return {"ok": ok, "silent_ranks": silent, "rank_errors": stage_errors, "kinds": out_kinds}


def _group_row(kind: str, members: tuple, results: Dict[int, dict], records) -> dict:
    """One group's verdict from its members' own results.

    failed: the member's collective raised; timed_out: it waited until its
    timeout (usually for a peer); skipped: it stopped after an earlier timeout;
    hung: it reported nothing for this group (still inside it, or dead).
    """
    failed, timed_out, skipped, hung, seconds = [], [], [], [], []
    errors = {}
    for member in members:
        res = results.get(member)
        if res is None:
            own = records.get(member, {}).get("kinds", {}).get(kind)
            if own is None:
                # The member never reported a result for this group.
                hung.append(member)
            else:
                # Its peers count it in, but it built no such group (or a different one).
                failed.append(member)
                errors[str(member)] = own.get("error") or f"reports members {own.get('ranks')}"
            continue
        state = res.get("state")
        if state == "ok":
            seconds.append(res.get("seconds", 0.0))
            continue
        {"timeout": timed_out, "skipped": skipped}.get(state, failed).append(member)
        errors[str(member)] = res.get("error")
    row = {
        "ranks": list(members),
        "ok": not (failed or timed_out or skipped or hung),
        "seconds": max(seconds) if seconds else None,
        "failed_ranks": failed,
        "timed_out_ranks": timed_out,
        "skipped_ranks": skipped,
        "hung_ranks": hung,
    }
    if errors:
        row["errors"] = errors
    return row

"""The group smoke test of cluster mode (scripts/inspector/cluster/groups.py) in two real
processes, without the local probe, so that the hang path is tested on every run.

One launch, two rounds in the same processes (imports are paid once):
1. a healthy TP=2 world: every group of every kind ok, teardown clean;
2. the same world built again, but rank 1 never enters its first collective:
   rank 0 times out in tp within one timeout, runs no further collective, and the
   merged verdict names rank 1 as silent in tp.

The hang is injected by the test driver below (it replaces torch.distributed.all_reduce
in rank 1's process for round 2); the production code has no hook for it.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
sys.path.insert(0, str(ROOT / "scripts"))

from inspector.cluster import groups as cluster_groups, render as cluster_render  # noqa: E402
from procutil import free_port  # noqa: E402

pytestmark = pytest.mark.slow

TIMEOUT_S = 4.0

DRIVER = r"""
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "scripts"))
from inspector.cluster import env as cluster_env, groups as cluster_groups
from inspector.cluster.store import Deadline, Rendezvous

info = cluster_env.from_environment()
timeout = float(sys.argv[2])
rdv = Rendezvous(info, 60)

def round_(name):
    record = cluster_groups.run(rdv.sub_store(name), info, "gloo",
                                {"tensor_model_parallel_size": 2}, timeout)
    print(json.dumps({"round": name, "record": record}), flush=True)

round_("healthy")
rdv.post("round1", True)
rdv.collect("round1", [0, 1], Deadline(60))  # both torn down before the second build
if info.rank == 1:
    import torch.distributed as dist
    def all_reduce(*args, **kwargs):  # never returns: a rank stuck before its collective
        time.sleep(3600)
    dist.all_reduce = all_reduce
round_("hang")
os._exit(0)
"""


def _env(rank, port):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in ("RANK", "WORLD_SIZE")}
    env.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return env


def _rounds(out):
    return {d["round"]: d["record"] for d in
            (json.loads(line) for line in out.splitlines() if line.startswith('{"round"'))}


@pytest.fixture(scope="module")
def two_rounds():
    port = free_port()
    procs = [subprocess.Popen([PY, "-c", DRIVER, str(ROOT), str(TIMEOUT_S)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(rank, port), start_new_session=True)
             for rank in range(2)]
    start = time.monotonic()
    try:
        out0, err0 = procs[0].communicate(timeout=180)
        rank1_stuck = procs[1].poll() is None
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    out1, _ = procs[1].communicate(timeout=30)
    print(f"2-rank group rounds wall {time.monotonic() - start:.1f}s", file=sys.stderr)
    rank0 = _rounds(out0)
    assert set(rank0) == {"healthy", "hang"}, err0[-3000:]
    return {"rank0": rank0, "rank1": _rounds(out1), "rank1_stuck": rank1_stuck}


def test_healthy_tp2_world_every_group_ok(two_rounds):
    records = {0: two_rounds["rank0"]["healthy"], 1: two_rounds["rank1"]["healthy"]}
    merged = cluster_groups.merge(records, 2)
    assert merged["ok"] is True, merged
    kinds = {k["kind"]: k for k in merged["kinds"]}
    assert [g["ranks"] for g in kinds["tp"]["groups"]] == [[0, 1]]
    assert [g["ranks"] for g in kinds["dp"]["groups"]] == [[0], [1]]
    assert all(rec["clean"] for rec in records.values())  # torn down


def test_rank_stuck_before_a_collective_is_named_and_the_rest_is_skipped(two_rounds):
    assert two_rounds["rank1_stuck"]  # rank 0 finished while rank 1 was still stuck
    assert "hang" not in two_rounds["rank1"]
    rank0 = two_rounds["rank0"]["hang"]
    kinds = rank0["kinds"]
    assert kinds["tp"]["state"] == "timeout"
    # Rank 0 waited about one timeout in all ...
    assert TIMEOUT_S - 0.5 <= rank0["collectives_seconds"] < TIMEOUT_S + 3
    # ... and attempted no further collective on an out-of-step world.
    after = [name for name, _, _, _ in cluster_groups.GROUP_KINDS][1:]
    assert {kinds[name]["state"] for name in after} <= {"skipped", "no-group"}
    assert kinds["pp"]["state"] == "skipped" and kinds["pp"]["ranks"] == [0]
    assert rank0["clean"] is False  # teardown skipped after a timeout
    merged = cluster_groups.merge({0: rank0}, 2)
    assert merged["ok"] is False and merged["silent_ranks"] == [1]
    tp = {k["kind"]: k for k in merged["kinds"]}["tp"]["groups"][0]
    assert tp["ranks"] == [0, 1] and tp["hung_ranks"] == [1] and tp["timed_out_ranks"] == [0]
    text = cluster_render.render({"world_size": 2, "launcher": "torchrun", "ok": False,
                                  "exit_code": 1, "layout": {"valid": True, "groups": merged,
                                                             "backend": "gloo"}})
    assert "[0,1] FAIL (no answer from rank 1; timed out waiting on rank 0)" in text

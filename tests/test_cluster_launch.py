"""Cluster mode in real multi-process runs on CPU (gloo): torchrun and a Slurm-like launch.

Each 4-rank run imports torch and megatron-core in every rank (and the local
probe's children), so the runs are few and each carries several scenarios:

* torchrun, TP=2 PP=2, identical ranks: exit 0, no difference, every group of
  every kind ok, membership equal to scripts/check_parallel_layout.py --ranks;
* torchrun, TP=3 on 4 ranks: refused before torch is even imported;
* Slurm variables, 2 "nodes": rank 1 has CUDA_DEVICE_MAX_CONNECTIONS=1, rank 2
  sees a fake causal_conv1d 9.9.9, rank 3 sleeps far past --dist-timeout (it
  is started under ``sh -c 'sleep ...; exec ...'``, no hook in the script):
  both differences name their rank, rank 3 is named silent, and ranks 0-2 end
  at the deadline while rank 3 is still asleep.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from procutil import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "inspect_core_api.py"
LAYOUT_SCRIPT = ROOT / "scripts" / "check_parallel_layout.py"
PY = sys.executable
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))  # the launcher of the same environment

pytestmark = pytest.mark.slow

LAYOUT_FLAGS = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"]
# Outer limit for one 4-rank run on a loaded 2-core machine; a hang fails the test, not CI.
RUN_LIMIT_S = 240


def _clean_env(**extra):
    drop = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
            "LOCAL_WORLD_SIZE", "CUDA_DEVICE_MAX_CONNECTIONS")
    env = {k: v for k, v in os.environ.items()
           if k not in drop and not k.startswith(("SLURM_", "TORCHELASTIC_"))}
    env.update(extra)
    return env


def _torchrun(args, timeout=RUN_LIMIT_S):
    start = time.monotonic()
    res = subprocess.run(
        [TORCHRUN, "--standalone", "--nproc-per-node", "4", str(SCRIPT), "--distributed", *args],
        capture_output=True, text=True, env=_clean_env(), timeout=timeout, cwd=ROOT)
    return res, time.monotonic() - start


def _groups_by_kind(summary):
    return {k["kind"]: k for k in summary["layout"]["groups"]["kinds"]}


@pytest.fixture(scope="module")
def torchrun_tp2_pp2():
    res, wall = _torchrun(["--json", "--layout", *LAYOUT_FLAGS, "--dist-timeout", "90"])
    print(f"torchrun 4 ranks TP=2 PP=2 wall {wall:.1f}s", file=sys.stderr)
    return res, wall


def test_torchrun_consistent_ranks_pass(torchrun_tp2_pp2):
    res, _ = torchrun_tp2_pp2
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout)  # stdout holds rank 0's one object, nothing else
    assert summary["ok"] is True and summary["exit_code"] == 0
    assert summary["world_size"] == 4 and summary["launcher"] == "torchrun"
    assert summary["differences"] == [] and summary["silent_ranks"] == []
    assert summary["probe_errors"] == {}
    assert [n["ranks"] for n in summary["nodes"]] == [[0, 1, 2, 3]]
    assert set(summary["gpus_per_rank"]) == {"0", "1", "2", "3"}


def test_torchrun_layout_every_group_works(torchrun_tp2_pp2):
    res, _ = torchrun_tp2_pp2
    layout = json.loads(res.stdout)["layout"]
    assert layout["valid"] is True and layout["ok"] is True
    assert layout["backend"] == "gloo"
    merged = layout["groups"]
    assert merged["rank_errors"] == {} and merged["silent_ranks"] == []
    kinds = _groups_by_kind(json.loads(res.stdout))
    for name, kind in kinds.items():
        if kind["required"]:
            assert kind["groups"], name
        for group in kind["groups"]:
            assert group["ok"] and group["seconds"] is not None, (name, group)
            assert group["failed_ranks"] == [] and group["hung_ranks"] == []
    # Every rank is in exactly one group of each dense/expert kind.
    for name in ("tp", "pp", "dp", "cp", "tp-pp", "ep", "etp", "edp"):
        members = sorted(r for g in kinds[name]["groups"] for r in g["ranks"])
        assert members == [0, 1, 2, 3], name


def test_torchrun_membership_equals_layout_checker(torchrun_tp2_pp2):
    res, _ = torchrun_tp2_pp2
    kinds = _groups_by_kind(json.loads(res.stdout))
    out = subprocess.run(
        [PY, str(LAYOUT_SCRIPT), "--json", "--ranks", "--world-size", "4", *LAYOUT_FLAGS],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    predicted = _predicted_groups(json.loads(out.stdout))
    assert len(predicted) >= 16 and set(predicted) <= set(kinds)
    for name, groups in predicted.items():
        actual = sorted(sorted(g["ranks"]) for g in kinds[name]["groups"])
        assert actual == sorted(sorted(g) for g in groups), name
        assert kinds[name].get("matches_prediction") is True, name


def _predicted_groups(doc):
    """The rank groups in check_parallel_layout.py --json --ranks output."""
    groups = doc.get("ranks")
    assert isinstance(groups, dict) and "tp" in groups, sorted(doc)
    return groups


def test_torchrun_invalid_layout_refused_before_any_group():
    res, wall = _torchrun(["--json", "--layout", "--tensor-model-parallel-size", "3"], timeout=120)
    print(f"torchrun 4 ranks invalid layout wall {wall:.1f}s", file=sys.stderr)
    assert res.returncode == 1
    summary = json.loads(res.stdout)
    assert summary["layout"]["valid"] is False and summary["ok"] is False
    assert "world-divisible" in {v["rule"] for v in summary["layout"]["violations"]}
    assert "no process group was built" in summary["layout"]["refused"]
    assert summary["torch_imported"] is False
    assert "groups" not in summary["layout"]


# ---------------------------------------------------------------- Slurm-like launch

FAKE_VERSION = "9.9.9"
SLEEP_S = 600
DIST_TIMEOUT = 25  # live ranks must report within this of rank 0; the sleeper never does


def _slurm_env(rank, world, port):
    return _clean_env(
        SLURM_PROCID=str(rank), SLURM_NTASKS=str(world), SLURM_LOCALID=str(rank % 2),
        SLURM_NODEID=str(rank // 2), SLURM_NNODES="2", SLURM_NTASKS_PER_NODE="2",
        SLURM_JOB_NODELIST="localhost", SLURM_JOB_ID="4242", MASTER_PORT=str(port))


@pytest.fixture(scope="module")
def slurm_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("slurm")
    fake = tmp / "fake_site" / "causal_conv1d"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(
        f'__version__ = "{FAKE_VERSION}"\n\n\ndef causal_conv1d_fn(*args, **kwargs):\n'
        '    raise NotImplementedError("test double")\n')
    port = free_port()
    args = [str(SCRIPT), "--distributed", "--json", "--dist-timeout", str(DIST_TIMEOUT)]
    procs, outs = [], []
    start = time.monotonic()
    for rank in range(4):
        env = _slurm_env(rank, 4, port)
        cmd = [PY, *args]
        if rank == 1:
            env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
        if rank == 2:
            env["PYTHONPATH"] = str(fake.parent)
        if rank == 3:
            cmd = ["sh", "-c", f'sleep {SLEEP_S}; exec "$@"', "sh", *cmd]
        out = open(tmp / f"rank{rank}.out", "w+")
        err = open(tmp / f"rank{rank}.err", "w+")
        outs.append((out, err))
        procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=ROOT,
                                      start_new_session=True))
    ends = {}
    try:
        for rank in range(3):
            procs[rank].wait(timeout=RUN_LIMIT_S)
            ends[rank] = time.monotonic() - start
        sleeper_alive = procs[3].poll() is None
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
    texts = []
    for out, err in outs:
        out.seek(0)
        err.seek(0)
        texts.append((out.read(), err.read()))
        out.close()
        err.close()
    print(f"slurm-like 4 ranks wall {max(ends.values()):.1f}s", file=sys.stderr)
    return {"codes": [p.returncode for p in procs], "texts": texts, "ends": ends,
            "sleeper_alive": sleeper_alive}


def _slurm_summary(run):
    return json.loads(run["texts"][0][0])


def _diff(summary, field):
    found = [d for d in summary["differences"] if d["field"] == field]
    assert found, [d["field"] for d in summary["differences"]]
    return {v["value"]: v["ranks"] for v in found[0]["values"]}


def test_slurm_layout_of_ranks_and_nodes(slurm_run):
    summary = _slurm_summary(slurm_run)
    assert summary["launcher"] == "slurm" and summary["world_size"] == 4
    assert [(n["node"], n["ranks"]) for n in summary["nodes"]] == [("node0", [0, 1]),
                                                                  ("node1", [2])]
    assert slurm_run["codes"][:3] == [1, 1, 1]  # every live rank exits with rank 0's verdict
    for rank in (1, 2):
        assert slurm_run["texts"][rank][0] == ""  # only rank 0 prints the summary


def test_slurm_env_difference_names_the_rank(slurm_run):
    values = _diff(_slurm_summary(slurm_run), "report.env.CUDA_DEVICE_MAX_CONNECTIONS")
    assert values == {"1": [1], "<absent>": [0, 2]}


def test_slurm_fake_package_version_names_the_rank(slurm_run):
    values = _diff(_slurm_summary(slurm_run), "report.kernels.causal_conv1d.version")
    assert values[FAKE_VERSION] == [2]
    assert sorted(r for v, ranks in values.items() if v != FAKE_VERSION for r in ranks) == [0, 1]


def test_slurm_sleeping_rank_is_named_and_run_ends_at_deadline(slurm_run):
    summary = _slurm_summary(slurm_run)
    assert summary["silent_ranks"] == [3]
    assert summary["ok"] is False and summary["exit_code"] == 1
    # Rank 0 gave up on rank 3 at the deadline, not later ...
    assert DIST_TIMEOUT <= summary["timings"]["gather_wait_s"] <= DIST_TIMEOUT + 3
    # ... and the live ranks ended while rank 3 was still asleep.
    assert slurm_run["sleeper_alive"] is True
    assert max(slurm_run["ends"].values()) < SLEEP_S

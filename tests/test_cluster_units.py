"""Cluster mode, the parts that need no launch: rank bootstrap, differences, group merge, text.

The multi-process runs are in test_cluster_launch.py.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "inspect_core_api.py"
sys.path.insert(0, str(ROOT / "scripts"))

from inspector import cluster  # noqa: E402
from inspector.cluster import diff as cluster_diff, env as cluster_env  # noqa: E402
from inspector.cluster import groups as cluster_groups, render as cluster_render  # noqa: E402

PY = sys.executable
# The installed megatron package, located without importing it (that takes seconds).
MEGATRON = Path(importlib.util.find_spec("megatron").submodule_search_locations[0])


# ---------------------------------------------------------------- bootstrap

TORCHRUN_ENV = {
    "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_RANK": "2",
    "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400",
    "TORCHELASTIC_USE_AGENT_STORE": "True", "TORCHELASTIC_RESTART_COUNT": "1",
}
SLURM_ENV = {
    "SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
    "SLURM_NTASKS_PER_NODE": "2(x2)", "SLURM_JOB_NODELIST": "gpu[007-008]",
}


def test_torchrun_variables():
    info = cluster_env.from_environment(TORCHRUN_ENV)
    assert (info.rank, info.world_size, info.local_rank, info.node_rank) == (5, 8, 1, 2)
    assert (info.master_addr, info.master_port, info.launcher) == ("10.0.0.1", 29400, "torchrun")
    assert info.agent_store and info.attempt == "1" and info.node_key == "node2"


def test_slurm_variables_and_master_from_nodelist():
    info = cluster_env.from_environment(SLURM_ENV)
    assert (info.rank, info.world_size, info.local_rank, info.node_rank) == (3, 4, 1, 1)
    assert info.local_world_size == 2
    assert info.master_addr == "gpu007"
    assert info.master_port == cluster_env.DEFAULT_MASTER_PORT
    assert info.launcher == "slurm" and not info.agent_store


def test_torchrun_wins_over_slurm():
    # srun ... torchrun ...: both sets exist; only torchrun's numbering matches the workers.
    info = cluster_env.from_environment({**SLURM_ENV, **TORCHRUN_ENV})
    assert info.launcher == "torchrun" and info.rank == 5


@pytest.mark.parametrize("nodelist, first", [
    ("node01", "node01"),
    ("gpu[003-010,012],cpu1", "gpu003"),
    ("a[1,3]-ib,b2", "a1-ib"),
    ("x1,y[2-3]", "x1"),
])
def test_first_host(nodelist, first):
    assert cluster_env.first_host(nodelist) == first


@pytest.mark.parametrize("env, fragment", [
    ({}, "no rank found"),
    ({"RANK": "4", "WORLD_SIZE": "4", "MASTER_ADDR": "h"}, "outside world size"),
    ({"RANK": "x", "WORLD_SIZE": "4", "MASTER_ADDR": "h"}, "is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": "4"}, "MASTER_ADDR is not set"),
    ({"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "h", "MASTER_PORT": "70000"}, "not a TCP port"),
])
def test_bad_launch_environment(env, fragment):
    with pytest.raises(cluster_env.LaunchError, match=fragment):
        cluster_env.from_environment(env)


# ---------------------------------------------------------------- differences

def _report(**env):
    return {"cluster": {"rank": 0, "pid": 1, "gpus_visible": 8},
            "report": {"torch": {"version": "2.14.1"}, "env": env,
                       "timing": {"total_s": 3.2, "children_s": {"torch": 1.0}}}}


def test_differences_name_the_ranks_and_the_scope():
    reports = {r: _report(RANK=str(r), CUDA_DEVICE_MAX_CONNECTIONS="1") for r in range(4)}
    reports[3]["report"]["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    reports[2]["report"]["torch"]["version"] = "2.13.0"
    reports[3]["report"]["torch"]["version"] = "2.13.0"
    for r in range(4):  # per-rank fields that must not count
        reports[r]["cluster"]["pid"] = 100 + r
        reports[r]["report"]["timing"]["total_s"] = float(r)
        reports[r]["report"]["timing"]["children_s"]["torch"] = float(r)
    node_of = {0: "node0", 1: "node0", 2: "node1", 3: "node1"}
    diffs = {d["field"]: d for d in cluster_diff.differences(reports, node_of)}
    assert set(diffs) == {"report.env.CUDA_DEVICE_MAX_CONNECTIONS", "report.torch.version"}
    env = diffs["report.env.CUDA_DEVICE_MAX_CONNECTIONS"]
    assert env["scope"] == "rank"  # node1 itself disagrees
    assert env["values"] == [{"value": "1", "ranks": [0, 1, 2], "nodes": ["node0", "node1"]},
                             {"value": "8", "ranks": [3], "nodes": ["node1"]}]
    torch_v = diffs["report.torch.version"]
    assert torch_v["scope"] == "node"
    assert [v["ranks"] for v in torch_v["values"]] == [[0, 1], [2, 3]]


def test_missing_field_counts_as_absent():
    reports = {0: _report(), 1: _report(NCCL_IB_DISABLE="1")}
    (diff,) = cluster_diff.differences(reports, {0: "n", 1: "n"})
    assert diff["field"] == "report.env.NCCL_IB_DISABLE"
    assert {v["value"]: v["ranks"] for v in diff["values"]} == {cluster_diff.ABSENT: [0], "1": [1]}


@pytest.mark.parametrize("path, per_rank", [
    ("report.env.RANK", True), ("report.env.LOCAL_RANK", True),
    ("report.env.CUDA_VISIBLE_DEVICES", True), ("report.gpus.cuda_visible_devices", True),
    ("report.timing.children_s.megatron", True), ("cluster.pid", True),
    ("report.env.CUDA_DEVICE_MAX_CONNECTIONS", False), ("report.torch.nccl", False),
    ("report.megatron_core.version", False), ("cluster.gpus_visible", False),
    ("report.kernels.transformer_engine.version", False), ("report.gpus.driver", False),
])
def test_per_rank_fields(path, per_rank):
    assert cluster_diff.is_per_rank(path) is per_rank


def test_rank_ranges():
    assert cluster_diff.rank_ranges([7, 0, 1, 2, 5, 8]) == "0-2,5,7-8"
    assert cluster_diff.rank_ranges([]) == ""


# ---------------------------------------------------------------- group merge

def _record(kinds):
    return {"stage": "done", "kinds": kinds, "clean": True}


def test_merge_names_failed_and_hung_members():
    ok = {"state": "ok", "seconds": 0.01}
    records = {
        0: _record({"tp": dict(ok, ranks=[0, 1]), "pp": dict(ok, ranks=[0, 2]),
                    "cp": dict(ok, ranks=[0, 1])}),
        1: _record({"tp": {"state": "error", "error": "boom", "ranks": [0, 1]},
                    "pp": dict(ok, ranks=[1, 3]),
                    "cp": {"state": "skipped", "error": "not run", "ranks": [0, 1]}}),
        2: _record({"tp": dict(ok, ranks=[2, 3]),
                    "pp": {"state": "timeout", "error": "Operation timed out!", "ranks": [0, 2]}}),
        # rank 3 sent nothing: every group it belongs to lists it as hung
    }
    merged = cluster_groups.merge(records, 4)
    assert merged["silent_ranks"] == [3] and merged["ok"] is False
    kinds = {k["kind"]: k for k in merged["kinds"]}
    tp = {tuple(g["ranks"]): g for g in kinds["tp"]["groups"]}
    assert tp[(0, 1)]["failed_ranks"] == [1] and tp[(0, 1)]["errors"] == {"1": "boom"}
    assert tp[(2, 3)]["hung_ranks"] == [3]
    pp = {tuple(g["ranks"]): g for g in kinds["pp"]["groups"]}
    assert pp[(0, 2)]["timed_out_ranks"] == [2] and pp[(0, 2)]["hung_ranks"] == []
    assert pp[(1, 3)]["hung_ranks"] == [3]
    cp = {tuple(g["ranks"]): g for g in kinds["cp"]["groups"]}
    assert cp[(0, 1)]["skipped_ranks"] == [1] and not cp[(0, 1)]["ok"]
    # A required kind nobody built is not ok; an optional one is.
    assert kinds["ep"]["ok"] is False and kinds["embedding"]["ok"] is True


def test_merge_all_ok():
    records = {r: _record({name: {"state": "ok", "seconds": 0.001, "ranks": [r]}
                           for name, _, _, _ in cluster_groups.GROUP_KINDS}) for r in range(2)}
    merged = cluster_groups.merge(records, 2)
    assert merged["ok"] is True
    assert all(len(k["groups"]) == 2 for k in merged["kinds"])


def test_member_without_the_group_is_failed():
    records = {0: _record({"tp": {"state": "ok", "seconds": 0.0, "ranks": [0, 1]}}),
               1: _record({"tp": {"state": "no-group", "error": "AssertionError: not initialized"}})}
    kinds = {k["kind"]: k for k in cluster_groups.merge(records, 2)["kinds"]}
    (group,) = kinds["tp"]["groups"]
    assert group["failed_ranks"] == [1]
    assert group["errors"] == {"1": "AssertionError: not initialized"}


def test_group_kinds_cover_the_layout_checker_names():
    from parallel_layout import ranks

    ours = {name for name, _, _, _ in cluster_groups.GROUP_KINDS}
    assert set(ranks.GROUPS) | {"embedding", "position-embedding"} <= ours


def test_group_getters_exist_in_installed_megatron():
    src = (MEGATRON / "core" / "parallel_state.py").read_text()
    for _, getter, _, _ in cluster_groups.GROUP_KINDS:
        assert f"\ndef {getter}(" in src, getter


# ---------------------------------------------------------------- text

def test_render_names_problems():
    summary = {
        "world_size": 4, "launcher": "slurm", "ok": False, "exit_code": 1,
        "nodes": [{"node": "node0", "hostnames": ["h0"], "ranks": [0, 1]},
                  {"node": "node1", "hostnames": ["h1"], "ranks": [2]}],
        "gpus_per_rank": {"0": 1, "1": 1, "2": 1}, "silent_ranks": [3],
        "unreported_ranks": [], "probe_errors": {}, "unmet_requirements": {},
        "differences": [{"field": "report.env.X", "scope": "rank", "values": [
            {"value": "1", "ranks": [0, 1], "nodes": ["node0"]},
            {"value": "2", "ranks": [2], "nodes": ["node1"]}]}],
        "layout": None,
    }
    text = cluster_render.render(summary)
    assert "Silent ranks (never reached the store): rank 3" in text
    assert "report.env.X  [between ranks]" in text
    assert "ranks 0-1 (node0)" in text and "rank 2 (node1)" in text
    assert text.endswith("Result: FAIL (exit 1)")


# ---------------------------------------------------------------- command line (no launch)

def _run(args, env_extra=None, timeout=60):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_")) and k not in ("RANK", "WORLD_SIZE")}
    env.update(env_extra or {})
    return subprocess.run([PY, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_help_lists_distributed_flags_without_importing_torch():
    code = ("import sys, runpy; sys.argv=['inspect_core_api.py','--help']\n"
            "try:\n runpy.run_path(%r, run_name='__main__')\n"
            "except SystemExit: pass\n"
            "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')" % str(SCRIPT))
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60).stdout
    for flag in ("--distributed", "--layout", "--backend", "--dist-timeout",
                 "--tensor-model-parallel-size", "--expert-model-parallel-size"):
        assert flag in out
    assert out.rstrip().endswith("NO-TORCH")


ONE_RANK = {"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "9"}


@pytest.mark.parametrize("args, env, fragment", [
    (["--distributed"], {}, "no rank found in the environment"),
    (["--distributed", "--tensor-model-parallel-size", "2"], ONE_RANK,
     "--tensor-model-parallel-size: only used with --layout"),
    (["--distributed", "--dist-timeout", "0"], ONE_RANK, "--dist-timeout must be positive"),
    (["--distributed", "--dist-timeout", "inf"], ONE_RANK, "at most 86400 seconds"),
    (["--distributed", "--layout", "--fp16", "--bf16"], ONE_RANK, "contradict each other"),
    (["--distributed", "--backend", "mpi"], ONE_RANK, "invalid choice"),
])
def test_bad_arguments_exit_2_with_one_line(args, env, fragment):
    res = _run(args, env)
    assert res.returncode == 2, res.stderr
    assert fragment in res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout == ""


def test_invalid_layout_is_refused_without_torch_or_store():
    # MASTER_PORT 9 has no store; reaching for one would stall until --dist-timeout.
    res = _run(["--distributed", "--json", "--layout", "--tensor-model-parallel-size", "3",
                "--dist-timeout", "600"], ONE_RANK, timeout=60)
    assert res.returncode == 1, res.stderr
    summary = json.loads(res.stdout)
    assert summary["schema_version"] == cluster.SCHEMA_VERSION
    assert summary["layout"]["valid"] is False
    assert "world-divisible" in {v["rule"] for v in summary["layout"]["violations"]}
    assert summary["torch_imported"] is False
    assert "no process group was built" in summary["layout"]["refused"]


# ---------------------------------------------------------------- summary and exit code

def _info(world=4):
    return cluster_env.from_environment(
        {"RANK": "0", "WORLD_SIZE": str(world), "MASTER_ADDR": "h", "LOCAL_WORLD_SIZE": "2"})


def _post(rank, gpus=2, **env):
    return {"cluster": {"rank": rank, "local_rank": rank % 2, "node_key": f"node{rank // 2}",
                        "hostname": f"h{rank // 2}", "gpus_visible": gpus},
            "report": {"torch": {"version": "2.14.1"}, "env": env}, "unmet": []}


class _Args:
    dist_timeout = 30.0
    json = False


def test_summary_all_agree_is_exit_0():
    posts = {r: _post(r) for r in range(4)}
    summary = cluster.summarize(_info(), _Args(), posts, set(range(4)), None, None)
    assert summary["ok"] is True and summary["exit_code"] == 0
    assert [(n["node"], n["ranks"]) for n in summary["nodes"]] == [("node0", [0, 1]),
                                                                  ("node1", [2, 3])]
    assert summary["gpus_per_rank"] == {"0": 2, "1": 2, "2": 2, "3": 2}
    assert "Result: OK (exit 0)" in cluster_render.render(summary)


def test_summary_names_silent_and_unreported_ranks():
    posts = {r: _post(r) for r in range(2)}
    summary = cluster.summarize(_info(), _Args(), posts, {0, 1, 2}, None, None)
    assert summary["silent_ranks"] == [3] and summary["unreported_ranks"] == [2]
    assert summary["exit_code"] == 1


def test_gpu_shortfall_is_a_problem():
    # Two ranks per node, but node1's second rank sees only one GPU.
    posts = {r: _post(r) for r in range(4)}
    posts[3]["cluster"]["gpus_visible"] = 1
    summary = cluster.summarize(_info(), _Args(), posts, set(range(4)), None, None)
    assert summary["gpu_problems"] == {"3": "LOCAL_RANK 1 but only 1 GPU(s) visible"}
    assert summary["exit_code"] == 1
    assert any(d["field"] == "cluster.gpus_visible" for d in summary["differences"])


def test_cpu_only_ranks_are_no_gpu_problem():
    posts = {r: _post(r, gpus=0) for r in range(4)}
    assert cluster.gpu_shortfalls(posts) == {}


def test_require_applies_on_every_rank():
    class Args:
        require = ["torch", "transformer_engine"]

    report = {"torch": {"status": "available"},
              "kernels": {"transformer_engine": {"status": "not_installed"}}}
    assert cluster.unmet_requirements(report, Args()) == ["transformer_engine (not_installed)"]


# ---------------------------------------------------------------- environment rules

from inspector.cluster import env_rules as cluster_env_rules  # noqa: E402

ARGUMENTS_PY = MEGATRON / "training" / "arguments.py"


def _layout(*flags, world=4):
    from parallel_layout.flags import parse_layout

    layout, unknown = parse_layout(["--world-size", str(world), *flags])
    assert unknown == []
    return layout


def _gpu_post(rank, cc, **env):
    devices = [{"index": i, "compute_capability": cc} for i in range(2)] if cc else []
    return {"cluster": {"rank": rank, "env": env, "CUDA_VISIBLE_DEVICES": None},
            "report": {"gpus": {"devices": devices}}}


def test_tp_on_hopper_needs_cuda_device_max_connections_1_on_every_rank():
    posts = {r: _gpu_post(r, "9.0") for r in range(4)}
    posts[1]["cluster"]["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    (problem,) = cluster_env_rules.check(_layout("--tensor-model-parallel-size", "2"), posts)
    assert problem["rule"] == "tp-cp-cuda-device-max-connections"
    assert problem["ranks"] == [0, 2, 3]
    assert problem["values"] == {"0": None, "2": None, "3": None}


@pytest.mark.parametrize("cc", ["10.0", None])  # Blackwell, or no GPU known (CPU run)
def test_tp_rule_skips_blackwell_and_unknown_gpus(cc):
    posts = {r: _gpu_post(r, cc) for r in range(4)}
    assert cluster_env_rules.check(_layout("--tensor-model-parallel-size", "2"), posts) == []


def test_rules_follow_the_layout():
    posts = {r: _gpu_post(r, "9.0", CUDA_DEVICE_MAX_CONNECTIONS="1") for r in range(4)}
    assert cluster_env_rules.check(_layout(), posts) == []  # TP = CP = 1
    assert cluster_env_rules.check(_layout("--context-parallel-size", "2"), posts) == []
    fsdp = _layout("--use-torch-fsdp2", "--tensor-model-parallel-size", "2")
    assert [p["rule"] for p in cluster_env_rules.check(fsdp, posts)] == [
        "torch-fsdp2-cuda-device-max-connections"]
    mfsdp = _layout("--use-megatron-fsdp")
    (problem,) = cluster_env_rules.check(mfsdp, {0: _gpu_post(0, None, CUDA_DEVICE_MAX_CONNECTIONS="1")})
    assert problem["rule"] == "megatron-fsdp-cuda-device-max-connections"


def test_rank_arch_follows_cuda_visible_devices():
    post = {"cluster": {"CUDA_VISIBLE_DEVICES": "1"},
            "report": {"gpus": {"devices": [{"index": 0, "compute_capability": "9.0"},
                                            {"index": 1, "compute_capability": "10.0"}]}}}
    assert cluster_env_rules.rank_arch(post) == 10


@pytest.mark.parametrize("rule", cluster_env_rules.RULES, ids=lambda r: r.id)
def test_env_rule_messages_are_megatron_assertions(rule):
    # Quoted exactly: the assertion text occurs in the installed source (split strings joined).
    import ast

    tree = ast.parse(ARGUMENTS_PY.read_text())
    texts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is not None:
            try:
                texts.add(ast.literal_eval(node.msg))
            except ValueError:
                pass
    assert rule.message in texts
    assert f"os.environ.get('{rule.variable}')" in ARGUMENTS_PY.read_text()


def test_render_env_problem():
    section = {"valid": True, "input": {"tensor_model_parallel_size": 2, "world_size": 4},
               "env_problems": [{"variable": "CUDA_DEVICE_MAX_CONNECTIONS", "ranks": [2, 3],
                                 "values": {"2": None, "3": "8"}, "message": "M", "when": "W"}]}
    text = cluster_render.render({"world_size": 4, "launcher": "slurm", "ok": False,
                                  "exit_code": 1, "layout": section})
    assert 'CUDA_DEVICE_MAX_CONNECTIONS=8/<unset> on ranks 2-3: Megatron-LM asserts "M" (W)' in text


def test_run_bounded_gives_up_and_keeps_what_was_done(monkeypatch):
    import threading

    release = threading.Event()

    def stuck_run(store, info, backend, init_kwargs, timeout_s, record):
        record["stage"] = "collectives"
        record["kinds"]["tp"] = {"state": "ok", "seconds": 0.1, "ranks": [0, 1]}
        release.wait(30)  # e.g. blocked inside a communicator that never forms

    monkeypatch.setattr(cluster_groups, "run", stuck_run)
    record = cluster_groups.run_bounded(None, _info(2), "gloo", {}, 0.05)
    release.set()
    assert record["clean"] is False
    assert record["error"] == "stopped waiting after 0.2s, at stage collectives"
    assert record["kinds"]["tp"]["state"] == "ok"


class _FakeRendezvous:
    """The store API of cluster_store.Rendezvous over a dict (rank 0's view)."""

    def __init__(self):
        self.keys, self.counters = {}, {}

    def post(self, phase, value, rank=0):
        self.keys[f"{phase}/{rank}"] = json.loads(json.dumps(value))

    def has(self, key):
        return key in self.keys

    def collect(self, phase, ranks, deadline):
        return {r: self.keys[f"{phase}/{r}"] for r in ranks if f"{phase}/{r}" in self.keys}

    def count(self, key, add=0):
        self.counters[key] = self.counters.get(key, 0) + add
        return self.counters[key]


def test_coordinator_names_a_rank_claimed_twice_and_builds_no_group():
    rdv = _FakeRendezvous()
    for rank in range(2):
        rdv.count(f"claim/{rank}", 1)
        rdv.post("hello", {}, rank)
        rdv.post("report", _post(rank), rank)
    rdv.count("claim/1", 1)  # a second process also says it is rank 1

    class Args(_Args):
        layout = True

    from parallel_layout import rules

    layout = _layout("--tensor-model-parallel-size", "2", world=2)
    layout_parts = (layout, rules.check(layout, with_memory=False), {})
    summary = cluster._coordinate(rdv, _info(2), Args(), layout_parts, 1.0)
    assert summary["duplicate_ranks"] == [1] and summary["exit_code"] == 1
    assert rdv.keys["plan/0"] == {"layout": False}  # no group is built
    assert "exactly once" in summary["layout"]["skipped"]
    assert "Ranks claimed by more than one process: rank 1" in cluster_render.render(summary)


def test_invalid_layout_other_ranks_exit_0_silently():
    # So that torchrun does not stop rank 0 before it prints (the job still exits 1).
    res = _run(["--distributed", "--layout", "--tensor-model-parallel-size", "3"],
               dict(ONE_RANK, RANK="2"))
    assert res.returncode == 0 and res.stdout == ""

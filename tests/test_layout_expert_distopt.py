"""expert-distributed-optimizer-instances, proven with Megatron's own initialize_model_parallel.

The layout checker's Megatron verdict (parallel_layout.verify) stops at the first process-group
creation, and this assertion comes after the dense and expert groups are built. So here one
process per release runs initialize_model_parallel for a 4-rank world with
torch.distributed.new_group, get_world_size, get_rank and create_hierarchical_groups stood in
for (group creation is the only thing replaced): TP=2, EP=2 and ETP left at TP give EDP=1, which two instances do not
divide, while DP x CP = 2 does. Megatron 0.13.1 and 0.19.2 raise the checker's message; with
ETP=1 (EDP=2) they accept. 0.12.3 has no such assertion (its absence in the tag is read from
the mirror when present).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import old_envs  # noqa: E402
import upstream_sources as up  # noqa: E402
from parallel_layout import flags, rules  # noqa: E402

MESSAGE = "Expert data parallel size should be divisible by partial DistOpt shard factor"
PROBE = r'''
import json, logging, os, sys, warnings
warnings.simplefilter("ignore"); logging.disable(logging.CRITICAL)
from unittest import mock
import torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
from megatron.core import parallel_state as ps
out = {}
for etp in json.loads(sys.argv[1]):
    with mock.patch.object(ps.torch.distributed, "new_group", lambda *a, **k: object()), \
         mock.patch.object(ps, "create_hierarchical_groups",
                           lambda *a, **k: ([object(), object()], [None, None])), \
         mock.patch.object(ps.torch.distributed, "get_world_size", lambda *a, **k: 4), \
         mock.patch.object(ps.torch.distributed, "get_rank", lambda *a, **k: 0):
        try:
            ps.initialize_model_parallel(tensor_model_parallel_size=2, expert_model_parallel_size=2,
                                         expert_tensor_parallel_size=etp,
                                         num_distributed_optimizer_instances=2,
                                         create_gloo_process_groups=False)
            out[str(etp)] = None
        except AssertionError as e:
            out[str(etp)] = str(e)
    ps.destroy_model_parallel()
print("RESULT " + json.dumps(out))
'''
ARGV = ("--world-size 4 --tensor-model-parallel-size 2 --expert-model-parallel-size 2 "
        "--num-experts 4 --disable-bias-linear --sequence-parallel --use-distributed-optimizer "
        "--num-distributed-optimizer-instances 2")


def _checker(version, extra=""):
    layout, _ = flags.parse_layout((ARGV + extra).split())
    layout.megatron_version = version
    flags.resolve_release_dependent(layout)
    return [v.rule for v in rules.check(layout, with_memory=False).violations]


@pytest.mark.slow
@pytest.mark.parametrize("release", ["0.13.1", "0.19.2"])
def test_megatron_asserts_what_the_checker_reports(release):
    from procutil import free_port
    py, why = old_envs.python_or_reason(release)
    if py is None:
        pytest.skip(why)
    proc = subprocess.run([str(py), "-c", PROBE, json.dumps([None, 1]), str(free_port())],
                          capture_output=True, text=True, timeout=300)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, proc.stderr[-2000:]
    got = json.loads(line[len("RESULT "):])
    assert got == {"None": MESSAGE, "1": None}
    assert _checker(release) == ["expert-distributed-optimizer-instances"]
    assert _checker(release, " --expert-tensor-parallel-size 1") == []


def test_not_reported_before_0131_nor_when_the_dense_rule_already_fires():
    assert "expert-distributed-optimizer-instances" not in _checker("0.12.3")
    # ETP*EP == TP*CP: EDP equals DP*CP, so only the dense rule speaks.
    layout, _ = flags.parse_layout("--world-size 4 --tensor-model-parallel-size 2 "
                                   "--use-distributed-optimizer "
                                   "--num-distributed-optimizer-instances 4".split())
    ids = [v.rule for v in rules.check(layout, with_memory=False).violations]
    assert "distributed-optimizer-instances" in ids
    assert "expert-distributed-optimizer-instances" not in ids


def test_the_assertion_first_appears_in_0131():
    repo = up.mirror()
    if repo is None:
        pytest.skip("reading the release tags needs the Megatron-LM git mirror (MEGATRON_LM_MIRROR)")
    has = {tag: MESSAGE in (up.mirror_source_at(repo, tag, "megatron/core/parallel_state.py") or "")
           for tag in ("core_v0.12.3", "core_v0.13.1", "core_v0.16.1")}
    assert has == {"core_v0.12.3": False, "core_v0.13.1": True, "core_v0.16.1": True}

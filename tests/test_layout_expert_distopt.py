"""expert-distributed-optimizer-instances, proven with Megatron's own initialize_model_parallel.

Megatron makes this assertion after building the dense and expert groups, so one process per
release runs initialize_model_parallel for a 4-rank world past group creation with stand-in
groups (tests/groups_probe.py; parallel_layout.verify does the same for the installed release,
and tests/test_layout_rules.py checks its verdict): TP=2, EP=2 and ETP left at TP give EDP=1, which two instances do not
divide, while DP x CP = 2 does. Megatron 0.13.1 and 0.19.2 raise the checker's message; with
ETP=1 (EDP=2) they accept. 0.12.3 has no such assertion (its absence in the tag is read from
the mirror when present).
"""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import old_envs  # noqa: E402
from groups_probe import initialize_errors  # noqa: E402
import upstream_sources as up  # noqa: E402
from parallel_layout import flags, rules  # noqa: E402

MESSAGE = "Expert data parallel size should be divisible by partial DistOpt shard factor"
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
    py, why = old_envs.python_or_reason(release)
    if py is None:
        pytest.skip(why)
    sizes = dict(tensor_model_parallel_size=2, expert_model_parallel_size=2,
                 num_distributed_optimizer_instances=2)
    got = initialize_errors(py, [[4, sizes], [4, dict(sizes, expert_tensor_parallel_size=1)]])
    assert got == ["AssertionError: " + MESSAGE, None]
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

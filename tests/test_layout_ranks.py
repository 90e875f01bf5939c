"""parallel_layout.ranks reproduces megatron.core.parallel_state.RankGenerator
(megatron-core 0.19.2) for randomized layouts and rank orders, on the dense
grid (tp, cp, dp, pp) and on the expert grid (etp, ep, edp, pp)."""

import itertools
import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import flags, ranks  # noqa: E402

pytestmark = pytest.mark.slow

DENSE_TOKENS = ["tp", "pp", "dp", "cp", "dp-cp", "tp-cp", "tp-dp", "tp-dp-cp", "tp-pp",
                "tp-cp-dp-pp", "pp-dp"]
EXPERT_TOKENS = ["tp", "ep", "dp", "pp", "tp-ep", "tp-ep-pp", "ep-dp"]
ORDERS = ["-".join(p) for p in itertools.permutations(["tp", "cp", "ep", "dp", "pp"])]


@pytest.fixture(scope="module")
def RankGenerator():
    from megatron.core.parallel_state import RankGenerator
    return RankGenerator


size = st.sampled_from([1, 1, 2, 3, 4])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tp=size, pp=size, dp=size, cp=size, order=st.sampled_from(ORDERS))
def test_dense_grid_matches_rank_generator(RankGenerator, tp, pp, dp, cp, order):
    rg = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
    sizes = {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": 1}
    for token in DENSE_TOKENS:
        assert ranks.grid_groups(sizes, order, token) == rg.get_ranks(token), token


@settings(max_examples=200, deadline=None, derandomize=True)
@given(etp=size, ep=size, edp=size, pp=size, order=st.sampled_from(ORDERS))
def test_expert_grid_matches_rank_generator(RankGenerator, etp, ep, edp, pp, order):
    rg = RankGenerator(tp=etp, ep=ep, dp=edp, pp=pp, cp=1, order=order)
    sizes = {"tp": etp, "pp": pp, "dp": edp, "cp": 1, "ep": ep}
    for token in EXPERT_TOKENS:
        assert ranks.grid_groups(sizes, order, token) == rg.get_ranks(token), token


@settings(max_examples=100, deadline=None, derandomize=True)
@given(tp=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 3]),
       cp=st.sampled_from([1, 2]), dp=st.sampled_from([1, 2, 4]),
       ep=st.sampled_from([1, 2, 4]), etp=st.sampled_from([1, 2]))
def test_rank_groups_match_initialize_model_parallel_generators(RankGenerator, tp, pp, cp, dp,
                                                                ep, etp):
    """The named groups of rank_groups() are the get_ranks() calls that
    initialize_model_parallel makes on its decoder and expert generators."""
    world = tp * pp * cp * dp
    if world % (etp * ep * pp):
        return
    argv = f"--world-size {world} --tensor-model-parallel-size {tp} " \
           f"--pipeline-model-parallel-size {pp} --context-parallel-size {cp} " \
           f"--expert-model-parallel-size {ep} --expert-tensor-parallel-size {etp}".split()
    layout, _ = flags.parse_layout(argv)
    groups = ranks.rank_groups(layout)
    order = ranks.DEFAULT_ORDER
    dense = RankGenerator(tp=tp, ep=1, dp=dp, pp=pp, cp=cp, order=order)
    expert = RankGenerator(tp=etp, ep=ep, dp=world // (etp * ep * pp), pp=pp, cp=1, order=order)
    for name, (grid, token) in ranks.GROUPS.items():
        gen = dense if grid == "dense" else expert
        assert groups[name] == gen.get_ranks(token), name
    from megatron.core.parallel_state import default_embedding_ranks
    assert groups["embedding"] == [default_embedding_ranks(g) for g in groups["pp"]]


def test_missing_axis_with_size_is_rejected_like_megatron(RankGenerator):
    with pytest.raises(RuntimeError) as theirs:
        RankGenerator(tp=2, ep=1, dp=1, pp=1, cp=2, order="tp-dp-pp")
    with pytest.raises(ValueError) as ours:
        ranks.grid_groups({"tp": 2, "cp": 2, "dp": 1, "pp": 1, "ep": 1}, "tp-dp-pp", "tp")
    assert str(ours.value) == str(theirs.value)


def test_rank_coordinates_agree_with_groups():
    layout, _ = flags.parse_layout("--world-size 16 --tensor-model-parallel-size 2 "
                                   "--pipeline-model-parallel-size 2 --context-parallel-size 2 "
                                   "--expert-model-parallel-size 4 --num-experts 8".split())
    coords = ranks.rank_coordinates(layout)
    groups = ranks.rank_groups(layout)
    for axis in ("tp", "pp", "dp", "cp", "ep", "etp", "edp"):
        for group in groups[axis]:
            assert [coords[r][axis] for r in group] == list(range(len(group))), axis

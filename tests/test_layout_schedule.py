"""--schedule against megatron-core 0.19.2's own schedule arithmetic, on CPU:
warm-up and 1F1B steps per pipeline rank from schedules.get_pp_rank_microbatches
(both schedules), the cool-down loops read from the schedule functions' source,
and the global decoder layers of each virtual stage from
transformer_layer.get_transformer_layer_offset and
transformer_block.get_num_layers_to_build."""

import contextlib
import io
import itertools
import json
import os
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import check_parallel_layout as cli  # noqa: E402
from parallel_layout import flags, schedule, verify  # noqa: E402

STEPS = [c for c in itertools.product([1, 2, 3, 4, 6], [None, 2, 3, 4], [1, 2, 3, 4, 8, 12, 24],
                                      [None, 3, 5], [False, True])
         if not (c[0] == 1 and c[1])]
# pp, vpp, microbatches, microbatch group (None: PP), overlap_moe_expert_parallel_comm


class _Group:
    def __init__(self, size, rank):
        self._size, self._rank = size, rank

    def size(self):
        return self._size

    def rank(self):
        return self._rank


class _P2P:
    """What get_pp_rank_microbatches reads from a P2P communicator."""

    def __init__(self, pp, rank, vpp):
        self.pp_group = _Group(pp, rank)
        self.virtual_pipeline_model_parallel_size = vpp


@pytest.mark.parametrize("case", STEPS, ids=lambda c: "-".join(map(str, c)))
def test_steps_per_rank_equal_megatrons(case):
    from megatron.core.pipeline_parallel.schedules import get_pp_rank_microbatches
    pp, vpp, m, group, overlap = case
    for rank in range(pp):
        ours = schedule.rank_steps(pp, rank, m, vpp, group, overlap)
        total, all_warmup, warmup, remaining = get_pp_rank_microbatches(
            m, vpp or 1, group or pp, overlap_moe_expert_parallel_comm=overlap,
            p2p_communicator=_P2P(pp, rank, vpp))
        if vpp is None and pp > 1:
            # forward_backward_pipelining_without_interleaving computes its own:
            # min(total_stages - current_stage - 1, num_microbatches)
            warmup = min(pp - rank - 1, m)
            remaining = m - warmup
        assert ours[:3] == (total, warmup, remaining), (rank, ours)
        assert ours[3] == (total - remaining if pp > 1 else 0)


def test_cooldown_runs_the_warmup_backwards():
    """The cool-down loops: range(num_warmup_microbatches) without interleaving,
    range(num_microbatches_remaining, total_num_microbatches) with it."""
    import inspect
    from megatron.core.pipeline_parallel import schedules
    plain = inspect.getsource(schedules.forward_backward_pipelining_without_interleaving)
    cool = plain.split("# Run cooldown backward passes.")[1]
    assert "for i in range(num_warmup_microbatches):" in cool[:400]
    inter = inspect.getsource(schedules.forward_backward_pipelining_with_interleaving)
    cool = inter.split("# Run cooldown backward passes (flush out pipeline)")[1]
    assert "for k in range(num_microbatches_remaining, total_num_microbatches):" in cool[:1500]


BASE = ("--world-size 64 --num-layers 16 --hidden-size 64 --num-attention-heads 8 "
        "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 "
        "--global-batch-size 64 ")
SPLITS = [
    "--pipeline-model-parallel-size 4",
    "--pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 2",
    "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2",
    "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2 "
    "--decoder-last-pipeline-num-layers 6",
    "--pipeline-model-parallel-size 4 --num-layers 14 --decoder-first-pipeline-num-layers 2 "
    "--decoder-last-pipeline-num-layers 4 --num-virtual-stages-per-pipeline-rank 2",
    "--pipeline-model-parallel-size 2 --num-layers 14 --account-for-embedding-in-pipeline-split "
    "--account-for-loss-in-pipeline-split",
    "--pipeline-model-parallel-size 2 --num-layers 14 --account-for-embedding-in-pipeline-split "
    "--account-for-loss-in-pipeline-split --num-virtual-stages-per-pipeline-rank 2",
    "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout Ettt|tt|ttttt|ttttttL",
]


@pytest.mark.parametrize("split", SPLITS)
def test_virtual_stage_layers_equal_megatrons(split):
    from unittest import mock
    from megatron.core import parallel_state as ps
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset
    from megatron.training.argument_utils import core_transformer_config_from_args
    layout, _ = flags.parse_layout((BASE + split).split())
    with warnings.catch_warnings(), verify._environment(layout):
        warnings.simplefilter("ignore")
        config = core_transformer_config_from_args(verify._validate(layout))
    vpp = config.virtual_pipeline_model_parallel_size
    ours = schedule.layer_ranges(layout)
    pp = config.pipeline_model_parallel_size
    with mock.patch.object(ps, "get_virtual_pipeline_model_parallel_world_size",
                           lambda *a, **k: vpp), \
            mock.patch.object(ps, "get_pipeline_model_parallel_world_size", lambda *a, **k: pp):
        for r in range(pp):
            # the layout-string path asks parallel_state for the rank
            with mock.patch.object(ps, "get_pipeline_model_parallel_rank", lambda *a, **k: r):
                for v in range(vpp or 1):
                    stage = v if vpp else None
                    n = get_num_layers_to_build(config, vp_stage=stage, pp_rank=r)
                    first = get_transformer_layer_offset(config, vp_stage=stage, pp_rank=r)
                    assert ours[r][v] == ((first, first + n - 1) if n else None), (r, v)


def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(argv)
    return rc, out.getvalue()


def test_schedule_flag_text_and_json():
    argv = (BASE + SPLITS[1] + " --schedule").split()
    rc, text = run(argv)
    assert rc == 0
    assert "Pipeline schedule (interleaved 1F1B, 4 microbatches, VPP 2" in text
    assert "  PP rank   0: warm-up 8, 1F1B 0, cool-down 8 (all warm-up) | layers v0 0-1; v1 8-9" \
        in text
    rc, out = run(argv + ["--json"])
    data = json.loads(out)["schedule"]
    assert data["kind"] == "interleaved 1F1B" and data["pipeline_ranks"] == 4
    assert data["per_rank"][3]["virtual_stages"][1]["layers"] == [14, 15]
    rc, out = run((BASE + "--pipeline-model-parallel-size 3 --schedule --json").split())
    assert rc == 1 and json.loads(out)["schedule"] is None  # 16 layers do not split over 3

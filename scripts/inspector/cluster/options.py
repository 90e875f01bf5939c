"""Cluster mode's command-line options: ``add_arguments(parser)`` and ``wants_cluster(args)``.

The layout flags themselves come from ``parallel_layout.flags`` (the layout checker's table), added
only when that package imports.  Standard library only at import time.
"""
from __future__ import annotations

import sys

from . import env as cluster_env

DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 86400.0


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


"""Cluster (distributed) mode of inspect_core_api.py: every rank probes, rank 0 compares.

Run under the launcher the job already uses::

    torchrun --nproc-per-node 8 --nnodes 2 ... scripts/inspect_core_api.py --distributed
    srun --ntasks-per-node 8 .venv/bin/python scripts/inspect_core_api.py --distributed

Phases (each rank; T = ``--dist-timeout``; no wait is without a timeout):

1. rendezvous   TCPStore at MASTER_ADDR:MASTER_PORT (rank 0 serves it, or torchrun's
                agent does); connecting gives up after T
2. report       post ``hello/<rank>``, run the local probe (its children have their own
                ``--timeout``), post ``report/<rank>``
3. plan         rank 0 gathers the reports for at most T after its own, names the silent
                ranks, and lets the layout smoke test run only if every rank reported
4. groups       (``--layout``) init_process_group + initialize_model_parallel (group
                timeout T), one all_reduce per group of every kind (T each; a rank stops
                after its first timeout), teardown; post ``groups/<rank>``; rank 0 waits
                at most T (+5 s) after its own for the others' results
5. verdict      rank 0 prints the summary and posts the exit code; others exit with it

Only rank 0 writes to stdout.  If rank 0 itself never comes, the other ranks say so
on stderr ("cannot reach the store" or "rank 0 gave no plan") and exit 1.

Hooks called by inspector.cli: ``add_arguments(parser)``, ``wants_cluster(args)``,
``main(args) -> int``; cluster mode never imports inspector.cli.  Standard library only at
import time (torch is imported inside the phases that need it).

Modules
    options    the command-line options of cluster mode (``add_arguments``, ``wants_cluster``)
    env        where this process sits in the job (rank, node, rendezvous) from launcher variables
    layout     ``--layout``: flags checked by parallel_layout -> initialize_model_parallel keywords
    store      per-rank keys in a TCPStore, read with deadlines
    groups     build the layout's process groups and run one collective in each (time-boxed)
    env_rules  environment variables Megatron-LM asserts, checked on every rank
    diff       fields that differ between ranks
    summary    rank 0's verdict: ``summarize`` (pure data)
    render     the text form of the summary
    run        the phases above on each rank: ``main``
"""


# The names inspector.cli and the tests use, importable from the package as before.
from .layout import (  # noqa: F401
    INIT_KWARGS, BadArguments, build_layout, layout_summary, mark_predictions)
from .options import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S, add_arguments, wants_cluster  # noqa: F401
from .run import (  # noqa: F401
    ACK_WAIT_S, GRACE_S, _coordinate, cluster_facts, cluster_groups_budget, local_report, main,
    refuse_layout, resolve_backend, unmet_requirements)
from .summary import SCHEMA_VERSION, gpu_shortfalls, summarize  # noqa: F401

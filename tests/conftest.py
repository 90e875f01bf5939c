"""Collection order for `make test` (pytest-xdist, --dist loadfile): the slowest files first.

xdist hands whole files to the workers in collection order; with the slow files last (as the
alphabet puts several), one worker finishes a long file while the other idles. Starting with
them lets the short files fill the gaps. Only the order changes; every file still runs whole on
one worker. The list is the files whose tests took longest in a 2-core run (pytest --durations).
"""

SLOW_FIRST = (
    "test_explain_error_sources.py",
    "test_release_index.py",
    "test_cluster_launch.py",
    "test_evals_contract.py",
    "test_review_downstream.py",
    "test_troubleshooting_repro.py",
    "test_plain_clone.py",
    "test_layout_perf.py",
    "test_release_index_installed.py",
    "test_layout_agreement.py",
    "test_review_parallel_sizes.py",
    "test_cluster_groups.py",
    "test_cli_sizes.py",
    "test_inspect_hostile.py",
    "test_inspect_report.py",
    "test_layout_activations.py",
    "test_inspect_drift.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept

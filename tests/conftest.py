"""Collection order for `make test` (pytest-xdist, --dist loadfile): the slowest files first.

xdist hands whole files to the workers in collection order; with the slow files last (as the
alphabet puts several), one worker finishes a long file while the other idles. Starting with
them lets the short files fill the gaps. Only the order changes; every file still runs whole on
one worker. The list is the 20 files whose tests took longest in a 2-core run (pytest --durations=0).
"""

SLOW_FIRST = (  # seconds of setup, call and teardown in a 2-worker run at bff058d
    "test_explain_error_sources.py",  # 176
    "test_evals_contract.py",  # 129
    "test_release_index.py",  # 123
    "test_contract_fences.py",  # 122
    "test_cluster_launch.py",  # 116
    "test_plain_clone.py",  # 88
    "test_cli_hostile.py",  # 87
    "test_troubleshooting_repro.py",  # 86
    "test_cli_sizes.py",  # 60
    "test_review_downstream.py",  # 53
    "test_inspect_report.py",  # 49
    "test_release_index_installed.py",  # 46
    "test_review_parallel_sizes.py",  # 46
    "test_cli_release.py",  # 41
    "test_layout_perf.py",  # 39
    "test_inspect_hostile.py",  # 39
    "test_field_report_texts.py",  # 38
    "test_layout_activations.py",  # 37
    "test_layout_agreement.py",  # 32
    "test_layout_catalog.py",  # 32
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: file order kept

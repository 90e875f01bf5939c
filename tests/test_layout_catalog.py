"""Every Megatron-LM flag: the checker's per-release flag sets, the renamed and
removed table, the sorting of a pasted command, and --verify on the whole
command."""

import argparse
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from parallel_layout import catalog, flags  # noqa: E402
from release_index import RELEASES  # noqa: E402

CLI = os.path.join(ROOT, "scripts", "check_parallel_layout.py")
BASE = ("--world-size 8 --num-layers 8 --hidden-size 64 --num-attention-heads 8 "
        "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 --vocab-size 100").split()


def run(*argv, python=sys.executable):
    return subprocess.run([python, CLI, *argv], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)


@pytest.mark.slow
def test_the_0_19_2_flag_set_is_add_megatron_arguments():
    """The checker's 0.19.2 flag set is exactly the real parser's (option
    strings), except the flags Megatron adds only when NVIDIA Kitchen is
    importable (``if HAVE_KITCHEN:`` in arguments.py), which this
    environment lacks."""
    import megatron.training.arguments as A
    parser = argparse.ArgumentParser(allow_abbrev=False)
    A.add_megatron_arguments(parser)
    real = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}
    ours = set(catalog.release_flags("0.19.2")) - {"-h", "--help"}
    kitchen = {"--kitchen-config-file", "--kitchen-recipe-number"}
    try:
        import nvidia_kitchen  # noqa: F401
        have_kitchen = True
    except ImportError:
        have_kitchen = False
    if not have_kitchen:
        assert kitchen <= ours and not kitchen & real
        assert "if HAVE_KITCHEN:" in open(A.__file__).read()
        ours -= kitchen
    assert ours == real, (sorted(ours - real)[:10], sorted(real - ours)[:10])


def test_every_checker_flag_is_a_0_19_2_flag():
    known = catalog.release_flags("0.19.2")
    assert [f.option for f in flags.FLAGS if f.option not in known] == []


@pytest.mark.parametrize("old", sorted(catalog.SUCCESSORS))
def test_successor_table_matches_the_index(old):
    """The old flag is in the release before 'removed in' and not in it; the
    successor (if any) exists in the release that removed the old flag."""
    h = catalog.history()[old]
    assert old in catalog.release_flags(h["last_in"])
    assert old not in catalog.release_flags(h["removed_in"])
    if h["successor"]:
        assert h["successor"] in catalog.release_flags(h["removed_in"])


def test_flags_removed_before_the_index_are_in_no_indexed_release():
    for old in catalog.REMOVED_BEFORE_INDEX:
        assert all(old not in catalog.release_flags(v) for v in RELEASES)


def test_deprecated_flags_are_still_accepted_with_their_successor():
    for old, (new, since, _) in catalog.DEPRECATED.items():
        assert old in catalog.release_flags(since) and new in catalog.release_flags(since)


def test_deprecation_text_is_in_the_released_source():
    import upstream_sources
    for old, (new, since, quote) in catalog.DEPRECATED.items():
        try:
            src = upstream_sources.source_at(since, "megatron/training/arguments.py")
        except upstream_sources.Unavailable as exc:
            pytest.skip(f"cannot read megatron-core {since} to check the deprecation of {old}: "
                        f"{exc}")
        assert quote.strip("'") in src


def test_the_reference_table_is_the_catalog():
    text = open(os.path.join(ROOT, "references", "parallelism-reference.md")).read()
    assert catalog.history_table() in text


def test_issue_flags_are_in_the_table():
    h = catalog.history()
    assert h["--use-custom-fsdp"]["successor"] == "--use-megatron-fsdp"
    assert h["--use-custom-fsdp"]["removed_in"] == "0.14.0"
    assert "--DDP-impl" in h


def test_a_pasted_command_is_sorted_into_three_groups():
    argv = BASE + ["--lr", "1e-4", "--DDP-impl", "local", "--use-custom-fsdp",
                   "--tensor-model-parallel-size", "2"]
    data = json.loads(run(*argv, "--json").stdout)
    assert data["flags"]["irrelevant"] == ["--lr"]
    assert [u["flag"] for u in data["flags"]["unknown"]] == ["--DDP-impl", "--use-custom-fsdp"]
    assert "--tensor-model-parallel-size" in data["flags"]["used"]
    custom = data["flags"]["unknown"][1]
    assert custom["successor"] == "--use-megatron-fsdp" and custom["removed_in"] == "0.14.0"
    violation = next(v for v in data["violations"] if v["rule"] == "unknown-flag")
    assert violation["message"] == ("unrecognized arguments: --DDP-impl local "
                                    "--use-custom-fsdp")
    assert "use --use-megatron-fsdp" in violation["fix"]
    assert data["valid"] is False


def test_a_flag_of_a_later_release_is_unknown_to_an_earlier_one():
    """--use-megatron-fsdp appeared in 0.14.0: on 0.13 Megatron-LM exits at parsing."""
    argv = BASE + ["--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor",
                   "--use-distributed-optimizer"]
    old = json.loads(run(*argv, "--json", "--megatron-version", "0.13").stdout)
    assert any(v["rule"] == "unknown-flag" and "exists from 0.14.0 on" in v["fix"]
               for v in old["violations"]), old["violations"]
    new = json.loads(run(*argv, "--json", "--megatron-version", "0.19").stdout)
    assert not any(v["rule"] == "unknown-flag" for v in new["violations"])


def test_text_report_lists_irrelevant_and_unknown_flags():
    out = run(*BASE, "--lr", "1e-4", "--DDP-impl", "local").stdout
    assert "Known to Megatron-LM, not used for the layout: --lr" in out
    assert "Unknown to this release (Megatron-LM exits at argument parsing): --DDP-impl" in out


@pytest.mark.slow
def test_verify_passes_the_whole_command_and_exits_1_on_disagreement():
    """--min-lr above --lr: Megatron's validate_args rejects the command; the
    checker has no such rule (not a layout matter), so the two disagree."""
    proc = run(*BASE, "--lr", "1e-4", "--min-lr", "1e-3", "--verify", "--json")
    data = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert data["valid"] is True and data["verify"]["agrees"] is False
    assert data["verify"]["megatron"]["accepted"] is False
    assert data["verify"]["checker"] == {"valid": True, "violations": []}
    text = run(*BASE, "--lr", "1e-4", "--min-lr", "1e-3", "--verify")
    assert text.returncode == 1 and "DISAGREEMENT with Megatron" in text.stdout


@pytest.mark.slow
def test_verify_agrees_on_an_unknown_flag():
    proc = run(*BASE, "--DDP-impl", "local", "--verify", "--json")
    data = json.loads(proc.stdout)
    assert data["verify"]["agrees"] is True
    assert data["verify"]["megatron"]["error"] == "unrecognized arguments: --DDP-impl local"
    assert proc.returncode == 1


HYBRID56 = ["--world-size", "24", "--pipeline-model-parallel-size", "3", "--hidden-size", "256",
                       "--num-attention-heads", "8", "--seq-length", "256",
                       "--max-position-embeddings", "256", "--micro-batch-size", "1",
                       "--vocab-size", "1000"]


def test_hybrid_layer_pattern_without_pipes_must_split_over_pp():
    """The issue's miss: 56 layers without '|' on PP 3 fail at model build."""
    data = json.loads(run(*HYBRID56, "--hybrid-layer-pattern", "M-" * 28, "--json").stdout)
    assert [v["rule"] for v in data["violations"]] == ["hybrid-pipeline-split"]
    assert data["derived"]["layers_per_stage"] is None
    piped = "|".join(["M-" * 7 + "M*" * 2] * 3)
    ok = json.loads(run(*HYBRID56, "--hybrid-layer-pattern", piped, "--json").stdout)
    assert ok["valid"] and ok["derived"]["layers_per_stage"] == [18, 18, 18]


@pytest.mark.parametrize("version,fires", [("0.19", True), ("0.17", True), ("0.16", False)])
def test_hybrid_override_pattern_is_an_alias_from_0_17(version, fires):
    data = json.loads(run(*HYBRID56, "--hybrid-override-pattern", "M-" * 28, "--num-layers", "56",
                          "--megatron-version", version, "--json").stdout)
    assert ("hybrid-pipeline-split" in [v["rule"] for v in data["violations"]]) is fires


@pytest.mark.slow
def test_verify_agrees_on_the_hybrid_override_alias():
    proc = run(*HYBRID56, "--hybrid-override-pattern", "M-" * 28, "--verify", "--json")
    data = json.loads(proc.stdout)
    assert data["verify"]["agrees"] and data["verify"]["megatron"]["stage"] == "hybrid_segments"

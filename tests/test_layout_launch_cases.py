"""The checker against Megatron-LM's own launch configurations.

tests/data/launch_cases.json.gz (dev/build_launch_cases.py) holds every
functional-test configuration and example launch script of Megatron-LM (tag and
commit in the file) that sets a parallel layout, the ModelOpt finetune.sh once
per model configuration, and two single-knob mutations of each; per case the
flags, the entry script, the world size, the source, and Megatron's verdict
(its parser with the entry's arguments, validate_args, TransformerConfig,
initialize_model_parallel and the later checks of parallel_layout.verify, run
on CPU).  Cases the CPU oracle cannot decide carry the reason (a checkpoint
supplies the model flags; Transformer Engine checks; an entry script the
checker does not know).

The checker must agree on every decided case and reject none that Megatron
accepts (its ``stricter`` rules included).
"""

import gzip
import json
import os
import subprocess
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import flags, rules  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data", "launch_cases.json.gz")
with gzip.open(DATA) as fh:
    CASES = json.load(fh)
DECIDED = [c for c in CASES["cases"] if c["megatron"]["accepted"] is not None]
MIRROR = os.environ.get("MEGATRON_LM_MIRROR", "/work/.mirror/NVIDIA+Megatron-LM/repo")


def checker(case):
    layout, _ = flags.parse_layout(case["argv"] + ["--world-size", str(case["world_size"])])
    layout.entry = case["entry"]
    layout.megatron_version = CASES["megatron_core"]
    return rules.check(layout, suggest=False, with_memory=False)


def test_cases_cover_the_real_launches():
    """Both sources, the entry scripts that add arguments, and both verdicts."""
    real = [c for c in CASES["cases"] if "mutation" not in c]
    entries = {c["entry"] for c in real}
    assert len([c for c in real if c["id"].startswith("functional/")]) >= 200
    assert len([c for c in real if c["id"].startswith("example/")]) >= 40
    assert {"examples/multimodal/train.py", "examples/post_training/modelopt/finetune.py",
            "examples/mimo/train.py", "pretrain_gpt.py"} <= entries
    verdicts = {c["megatron"]["accepted"] for c in DECIDED}
    assert verdicts == {True, False}
    assert len(DECIDED) >= 600


@pytest.mark.parametrize("case", DECIDED, ids=[c["id"] for c in DECIDED])
def test_checker_agrees_with_megatron(case):
    result = checker(case)
    found = [(v.rule, v.message) for v in result.violations]
    if case["megatron"]["accepted"]:
        assert found == [], found  # stricter rules included: none rejects what Megatron accepts
    else:
        ours = [v for v in result.violations if rules.RULES_BY_ID[v.rule].stricter is None]
        assert ours, (case["megatron"]["stage"], case["megatron"]["error"])


UNKNOWN_ENTRY = [c for c in CASES["cases"] if c["megatron"].get("undecided", "").startswith(
    "the entry script is not one")]


@pytest.mark.parametrize("case", UNKNOWN_ENTRY, ids=[c["id"] for c in UNKNOWN_ENTRY])
def test_unknown_entry_flags_are_a_warning_naming_the_entry(case):
    """Megatron's parser (without the unknown script's own arguments) stops at
    them; the checker warns and names the entry instead of calling it invalid."""
    result = checker(case)
    assert "unknown-flag" not in [v.rule for v in result.violations]
    warned = [w.message for w in result.warnings if w.rule == "unknown-flag-entry"]
    assert warned and case["entry"] in warned[0]
    flag = case["megatron"]["error"].split()[2]  # "unrecognized arguments: --x ..."
    assert flag in warned[0]


def test_without_entry_the_entry_flags_are_unknown():
    """The same real multimodal launch checked as pretrain_gpt.py (the default
    entry) is rejected for the multimodal arguments: --entry is what makes it legal."""
    case = next(c for c in DECIDED if c["entry"] == "examples/multimodal/train.py"
                and c["megatron"]["accepted"])
    result = checker(dict(case, entry=None))
    assert [v.rule for v in result.violations] == ["unknown-flag"]


@pytest.mark.skipif(not os.path.isdir(MIRROR), reason="needs the Megatron-LM git mirror")
def test_sources_exist_at_the_recorded_commit():
    paths = sorted({c["source"] for c in CASES["cases"]})
    listed = set(subprocess.run(["git", "-C", MIRROR, "ls-tree", "-r", "--name-only",
                                 CASES["commit"]], capture_output=True, text=True,
                                check=True).stdout.split("\n"))
    assert paths and set(paths) <= listed


@pytest.mark.slow
def test_recorded_verdicts_are_megatrons():
    """--verify's oracle, rerun over every case, gives the recorded verdict (the
    installed megatron-core must be the one recorded)."""
    import megatron.core
    from parallel_layout import verify
    if megatron.core.__version__.split("+")[0] != CASES["megatron_core"]:
        pytest.skip(f"recorded with megatron-core {CASES['megatron_core']}")
    wrong = []
    for case in CASES["cases"]:
        layout, _ = flags.parse_layout(case["argv"] + ["--world-size", str(case["world_size"])])
        layout.entry = case["entry"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            verdict = verify.megatron_verdict(layout)
        expected = case["megatron"]
        if (verdict["accepted"], verdict["stage"]) != (
                expected["accepted"] if expected["accepted"] is not None else False,
                expected["stage"]):
            wrong.append((case["id"], verdict["stage"], verdict["error"]))
    assert wrong == []


def test_grouped_gemm_launches_are_decided():
    """validate_args asks torch.cuda.get_device_capability for --moe-grouped-gemm;
    --verify answers it (as for get_device_arch_version), so those launches get
    Megatron's verdict instead of a CUDA error."""
    grouped = [c for c in DECIDED if "--moe-grouped-gemm" in c["argv"]]
    assert len(grouped) >= 20
    assert any(c["megatron"]["accepted"] for c in grouped)
    assert not any("CUDA" in c["megatron"]["error"] or "cuda" in c["megatron"]["error"]
                   for c in CASES["cases"])


@pytest.mark.slow
def test_verify_answers_every_cuda_query_of_validate_args():
    """Every GPU query in the installed validate_args is one verify stands in for."""
    import inspect
    import re
    import megatron.training.arguments as A
    source = inspect.getsource(A.validate_args)
    queries = set(re.findall(r"(torch\.cuda\.\w+|get_device_arch_version)\(", source))
    assert queries == {"torch.cuda.get_device_capability", "get_device_arch_version"}, queries
    verify_source = inspect.getsource(__import__("parallel_layout.verify",
                                                 fromlist=["_validate"])._validate)
    for query in queries:
        assert query.split(".")[-1] in verify_source

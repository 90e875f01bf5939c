"""--entry: the Megatron-LM entry scripts that add arguments, compiled from their
extra_args_provider (scripts/parallel_layout/entries.json, dev/build_layout_entries.py)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import entries, flags, rules  # noqa: E402
from parallel_layout.errors import BadInput  # noqa: E402

MIRROR = os.environ.get("MEGATRON_LM_MIRROR", "/work/.mirror/NVIDIA+Megatron-LM/repo")


@pytest.mark.skipif(not os.path.isdir(MIRROR), reason="needs the Megatron-LM git mirror")
def test_entries_json_is_what_the_sources_give():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "dev", "build_layout_entries.py"),
                        "--check"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "stale: run dev/build_layout_entries.py " + r.stderr[-500:]


def test_the_issue_entries_are_known_with_their_arguments():
    multimodal = entries.resolve("examples/multimodal/train.py")
    assert multimodal.provider.endswith("multimodal_args.py:add_multimodal_extra_args")
    assert {"--freeze-LM", "--freeze-ViT"} <= set(multimodal.flags)
    finetune = entries.resolve("./examples/post_training/modelopt/finetune.py")
    assert "--offline-distillation-data" in finetune.flags
    assert entries.resolve(None).path == "pretrain_gpt.py"
    assert entries.resolve(None).condition == "has_nvidia_modelopt"


@pytest.mark.parametrize("name,path", [
    ("finetune.py", "examples/post_training/modelopt/finetune.py"),
    ("/opt/megatron-lm/pretrain_vlm.py", "pretrain_vlm.py"),
    ("../../pretrain_hybrid.py", "pretrain_hybrid.py"),
])
def test_entry_names_as_launch_commands_spell_them(name, path):
    assert entries.resolve(name).path == path


def test_an_ambiguous_bare_name_is_bad_input():
    with pytest.raises(BadInput, match="examples/mimo/train.py, examples/multimodal/train.py"):
        entries.resolve("train.py")


def check(argv, entry):
    layout, _ = flags.parse_layout(("--world-size 8 --num-layers 4 " + argv).split())
    layout.entry = entry
    return rules.check(layout, suggest=False)


def test_entry_flags_are_legal_only_under_their_entry():
    assert check("--freeze-LM --img-h 336", "examples/multimodal/train.py").valid
    r = check("--freeze-LM --img-h 336", None)
    assert [v.rule for v in r.violations] == ["unknown-flag"]
    assert "--freeze-LM" in r.violations[0].message


def test_unknown_entry_turns_unknown_flags_into_a_warning_naming_it():
    r = check("--freeze-LM --my-flag 3", "my_train.py")
    assert r.valid
    w = next(w for w in r.warnings if w.rule == "unknown-flag-entry")
    assert "my_train.py" in w.message and "--my-flag 3" in w.message
    # flags that no release and no entry knows are still named with their history
    r = check("--DDP-impl local", "my_train.py")
    assert "removed in" in next(w for w in r.warnings if w.rule == "unknown-flag-entry").message


def _cli(argv):
    import contextlib
    import io
    import json
    import check_parallel_layout as cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = cli.main(argv + ["--json"])
    return rc, json.loads(out.getvalue())


VERIFY_BASE = ("--world-size 8 --tensor-model-parallel-size 2 --num-layers 4 --hidden-size 64 "
               "--num-attention-heads 8 --seq-length 64 --max-position-embeddings 64 "
               "--micro-batch-size 1 --sequence-parallel --freeze-LM").split()


@pytest.mark.slow
def test_verify_agrees_under_a_known_entry_and_is_undecided_under_an_unknown_one():
    rc, data = _cli(VERIFY_BASE + ["--verify", "--entry", "examples/multimodal/train.py"])
    assert rc == 0 and data["verify"]["agrees"] is True
    assert data["verify"]["megatron"]["accepted"] is True
    rc, data = _cli(VERIFY_BASE + ["--verify", "--entry", "my_train.py"])
    assert rc == 0 and data["verify"]["agrees"] is None
    assert "my_train.py" in data["verify"]["note"]
    rc, data = _cli(VERIFY_BASE + ["--verify"])  # pretrain_gpt.py: both reject --freeze-LM
    assert rc == 1 and data["verify"]["agrees"] is True
    assert data["verify"]["megatron"]["error"].startswith("unrecognized arguments: --freeze-LM")

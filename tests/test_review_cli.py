"""review_model_code.py's contract: flags, --json keys, exit codes 0/1/2, one-line bad input,
plain python3 (no torch) and never importing the reviewed code."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "review_model_code.py"
DATA = REPO / "tests" / "data" / "review"
PY3 = shutil.which("python3") or sys.executable


def cli(*args, stdin=None, python=PY3):
    return subprocess.run([python, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, input=stdin, timeout=120)


def test_json_keys_and_exit_1_on_error():
    r = cli(DATA / "layout.bad.py", "--json")
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    assert {"schema_version", "megatron_version", "findings", "summary"} <= set(out)
    assert set(out) - {"schema_version", "megatron_version", "findings", "summary"} <= \
        {"environment"}
    assert set(out["megatron_version"]) == {"version", "source"}
    f = out["findings"][0]
    assert set(f) == {"rule", "path", "line", "severity", "message", "fix", "versions", "reference"}
    assert out["summary"]["errors"] == 2


def test_exit_0_and_version_flag():
    r = cli(DATA / "layout.ok.py", "--json", "--megatron-version", "0.15")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["megatron_version"] == {"version": "0.15.3",
                                                        "source": "--megatron-version"}


@pytest.mark.parametrize("args,stdin,words", [
    (("/nonexistent.py",), None, "no such file"),
    (("-",), "x = (\n", "<stdin>:1: does not parse"),
    (("-", "--megatron-version", "0.9"), "x = 1\n", "is not indexed; supported: 0.12"),
    (("--bogus",), None, "unrecognized arguments"),
    ((), None, "give at least one PATH"),
    # issue 22: a bad --timeout and nothing to review are bad input, not a pass
    (("-", "--timeout", "-5"), "x = 1\n", "expected a finite number of seconds > 0"),
    (("-", "--timeout", "inf"), "x = 1\n", "expected a finite number of seconds > 0"),
    (("-", "--timeout", "nan"), "x = 1\n", "expected a finite number of seconds > 0"),
    (("-", "--timeout", "soon"), "x = 1\n", "expected seconds"),
    (("-",), "", "nothing to review: every given file is empty"),
    (("-",), "\n  \n", "nothing to review: every given file is empty"),
])
def test_bad_input_one_line_exit_2(args, stdin, words):
    r = cli(*args, stdin=stdin)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and words in r.stderr and "Traceback" not in r.stderr


def test_never_imports_reviewed_code(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\nimport megatron.core\n"
    (tmp_path / "evil.py").write_text(code)
    r = cli(tmp_path / "evil.py")
    assert r.returncode == 0 and not marker.exists()


def test_help_needs_no_torch():
    r = cli("--help")
    assert r.returncode == 0 and "--megatron-version" in r.stdout and "--build" in r.stdout


def test_directory_and_stdin():
    r = cli(DATA, "--json")
    out = json.loads(r.stdout)
    assert out["summary"]["files"] == len(list(DATA.rglob("*.py")))
    r = cli("-", "--json", stdin=(DATA / "layout.bad.py").read_text())
    assert json.loads(r.stdout)["findings"][0]["path"] == "<stdin>"


OLD_PY = Path(os.environ.get("OLD_VENV", REPO / ".venv-0161")) / "bin" / "python"


def _old_python() -> Path:
    # Built on first use, as the drift test does (a skipif at collection would skip it in a
    # fresh clone even when the suite builds the environment later).
    if not OLD_PY.exists():
        import subprocess
        r = subprocess.run(["bash", str(REPO / "tests" / "fixtures" / "make_old_env.sh")],
                           capture_output=True, text=True, timeout=900)
        if r.returncode == 3:
            pytest.skip("no Python 3.11 to build megatron-core 0.16.1 with: " + r.stderr.strip())
        assert r.returncode == 0, r.stderr[-3000:]
    return OLD_PY


@pytest.mark.slow
def test_installed_release_is_the_default():
    """Under megatron-core 0.16.1 the review checks against 0.16.1 (read with
    importlib.metadata): MLATransformerConfig's max_position_embeddings is gone there too."""
    _old_python()
    r = cli(DATA / "removed-keyword.bad.py", "--json", python=str(OLD_PY))
    out = json.loads(r.stdout)
    assert out["megatron_version"] == {"version": "0.16.1", "source": "installed megatron-core"}
    assert out["summary"]["by_rule"] == {"removed-keyword": 1}


def test_unreadable_index_is_one_line():
    import types
    sys.path.insert(0, str(REPO / "scripts"))
    from model_review.review import BadInput, review_paths

    def load(version):
        raise FileNotFoundError(f"release index file missing: {version}.json.gz\nsecond line")
    broken = types.SimpleNamespace(resolve_version=lambda v: ("0.19.2", "default"), load=load)
    with pytest.raises(BadInput) as exc:
        review_paths([str(DATA / "layout.ok.py")], index=broken)
    assert str(exc.value) == ("the release index cannot be read: release index file missing: "
                              "0.19.2.json.gz")


def test_empty_directory_is_bad_input(tmp_path):
    (tmp_path / "notes.txt").write_text("no python here")
    r = cli(tmp_path)
    assert r.returncode == 2 and "no .py files under this directory" in r.stderr
    assert "0 error(s)" not in r.stdout


def test_te_is_one_environment_note(tmp_path):
    """Without Transformer Engine here and no --target-te, TE-only imports are one note per
    run (JSON "environment"), not one finding per import; --target-te absent gives the
    per-import warnings, installed none."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    for p in (a, b):
        p.write_text("from megatron.core.extensions.transformer_engine import TENorm\n"
                     "from megatron.core.extensions.transformer_engine import TEDotProductAttention\n")
    r = cli(a, b, "--json", "--megatron-version", "0.19")
    out = json.loads(r.stdout)
    assert out["summary"]["by_rule"].get("te-placeholder") is None
    if out["environment"]:  # TE absent on this machine
        (note,) = out["environment"]
        assert note["fact"] == "transformer-engine-not-installed" and len(note["where"]) == 4
    absent = json.loads(cli(a, "--json", "--megatron-version", "0.19", "--target-te",
                            "absent").stdout)
    assert absent["summary"]["by_rule"]["te-placeholder"] == 2 and absent["environment"] == []
    installed = json.loads(cli(a, "--json", "--megatron-version", "0.19", "--target-te",
                               "installed").stdout)
    assert "te-placeholder" not in installed["summary"]["by_rule"]

"""The inspector in broken environments (fake packages on PYTHONPATH, no torch, no megatron):
it reports each failure with a reason, stays within its timeout, and never crashes."""
import glob
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "inspect_core_api.py")
HOSTILE = os.path.join(ROOT, "tests", "fixtures", "hostile")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from inspector import probes  # noqa: E402
import inspector_schema as schema  # noqa: E402

pytestmark = pytest.mark.slow
SECRET = "hf_hostileSecretValue42"
TIMEOUT = 25  # the hang costs exactly this; torch must still import within it under load


def run(python, *args, fakes=(), timeout=240):
    environ = dict(os.environ, HF_TOKEN=SECRET)
    environ.pop("PYTHONPATH", None)
    if fakes:
        environ["PYTHONPATH"] = os.pathsep.join(os.path.join(HOSTILE, f) for f in fakes)
    start = time.monotonic()
    r = subprocess.run([python, SCRIPT, *args], capture_output=True, text=True, timeout=timeout,
                       env=environ)
    r.seconds = time.monotonic() - start
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert SECRET not in r.stdout + r.stderr
    return r


def python_without_torch():
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-9]*/bin/python3.1[0-9]")))
    candidates += ["/usr/bin/python3", "/usr/local/bin/python3"]
    for c in candidates:
        if not os.path.exists(c):
            continue
        r = subprocess.run([c, "-c", "import sys, importlib.util as u; "
                            "assert sys.version_info >= (3, 10); "
                            "assert u.find_spec('torch') is None and u.find_spec('megatron') is None"],
                           capture_output=True, timeout=30)
        if r.returncode == 0:
            return c
    pytest.skip("no Python >= 3.10 without torch and megatron on this machine")


@pytest.fixture(scope="module")
def broken_te_and_hang():
    """transformer_engine raises OSError; grouped_gemm hangs; a probed module leaks a secret."""
    r = run(sys.executable, "--json", "--timeout", str(TIMEOUT), "--require", "transformer_engine",
            "--object", "leaky_module:anything", fakes=("te_oserror", "hang", "leaky"))
    return r, json.loads(r.stdout)


def test_broken_te_is_reported_for_te_and_for_megatron(broken_te_and_hang):
    r, report = broken_te_and_hang
    assert schema.validate(report, probes.KERNELS) == []
    te = report["kernels"]["transformer_engine"]
    assert te["status"] == "import_failed"
    assert te["reason"].startswith("OSError: libtransformer_engine.so: cannot open shared object file")
    core = report["megatron_core"]
    assert core["status"] == "import_failed"
    assert core["reason"].startswith("OSError: libtransformer_engine.so")
    assert "te_oserror/transformer_engine/__init__.py" in core["reason"]
    assert report["torch"]["status"] == "available"  # torch is probed apart from megatron


def test_hanging_package_is_a_timeout_and_the_run_is_bounded(broken_te_and_hang):
    r, report = broken_te_and_hang
    gg = report["kernels"]["grouped_gemm"]
    assert gg["status"] == "timeout"
    assert gg["reason"] == "no answer within %d s (last step: import grouped_gemm)" % TIMEOUT
    assert r.seconds < TIMEOUT + 20


def test_require_exits_1_and_names_the_component(broken_te_and_hang):
    r, _ = broken_te_and_hang
    assert r.returncode == 1
    assert "required transformer_engine is import_failed: OSError" in r.stderr


def test_secret_in_an_error_message_is_redacted(broken_te_and_hang):
    _, report = broken_te_and_hang
    entry = report["objects"]["leaky_module:anything"]
    assert entry["status"] == "import_failed"
    assert "could not log in with token <redacted>" in entry["reason"]


def test_no_torch_at_all():
    py = python_without_torch()
    r = run(py, "--json", "--require", "torch")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert schema.validate(report, probes.KERNELS) == []
    assert report["torch"]["status"] == "not_installed"
    assert report["torch"]["reason"].startswith("ModuleNotFoundError: No module named 'torch'")
    assert report["megatron_core"]["status"] == "not_installed"
    assert all(v["status"] in ("missing", "import_failed") for v in report["objects"].values())


def test_help_works_without_torch():
    r = run(python_without_torch(), "--help")
    assert r.returncode == 0 and "--require" in r.stdout


def test_no_megatron_and_a_module_raising_on_attribute_access_text_form():
    r = run(sys.executable, "--timeout", "120", fakes=("no_megatron", "attr_raises"))
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert len(lines) < 60, "text form should stay short"
    text = r.stdout
    assert any(l.startswith("megatron_core") and "not_installed" in l for l in lines)
    assert "No module named 'megatron.core'" in text
    fa = [l for l in lines if l.strip().startswith("flash_attn ")]
    assert fa and "error" in fa[0]
    assert "RuntimeError: flash_attn lazy loader failed" in text
    assert any(l.startswith("torch") and "available" in l for l in lines)


def test_torch_import_hangs_everything_is_a_bounded_timeout():
    r = run(sys.executable, "--json", "--timeout", "6", fakes=("torch_hangs",))
    assert r.returncode == 0 and r.seconds < 6 + 20
    report = json.loads(r.stdout)
    assert schema.validate(report, probes.KERNELS) == []
    assert report["torch"]["status"] == "timeout"
    assert report["torch"]["reason"] == "no answer within 6 s (last step: import torch)"
    assert report["megatron_core"]["status"] == "timeout"
    assert report["megatron_core"]["reason"] == "no answer within 6 s (last step: import torch)"


def test_cuda_flag_on_a_machine_without_gpus():
    r = run(sys.executable, "--json", "--cuda", "--timeout", "120", fakes=("no_megatron",))
    assert r.returncode == 0
    report = json.loads(r.stdout)
    assert schema.validate(report, probes.KERNELS) == []
    assert report["torch"]["status"] == "available"
    if report["torch"]["cuda_available"] is False:
        assert report["gpus"]["torch_view"] == []
    assert report["megatron_core"]["status"] == "not_installed"

"""Fast tests of the inspector's parts: no torch or megatron import anywhere in this file."""
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

from inspector import STATUSES, children, cli, env, gpus, objects, probes, render  # noqa: E402


def run_cli(*args, timeout=60):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=timeout)


# ------------------------------------------------------------------ env / redaction
def test_allow_list_keeps_listed_and_drops_others():
    out = env.collect({"NCCL_DEBUG": "INFO", "NVTE_FLASH_ATTN": "0", "TORCH_LOGS": "x",
                       "CUDA_DEVICE_MAX_CONNECTIONS": "1", "HOME": "/root", "AWS_REGION": "x"})
    assert out == {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_DEBUG": "INFO",
                   "NVTE_FLASH_ATTN": "0", "TORCH_LOGS": "x"}


@pytest.mark.parametrize("name", ["NCCL_IB_PASSWORD", "TORCH_HUB_TOKEN", "CUDA_API_KEY",
                                  "NVTE_SECRET", "NCCL_AUTH_HEADER"])
def test_secret_names_in_the_allow_list_are_redacted(name):
    assert env.collect({name: "s3cr3t-value"}) == {name: env.REDACTED}


def test_scrub_removes_secret_values_url_credentials_and_home():
    secrets = env.secret_values({"HF_TOKEN": "hf_abcdefgh123", "SHORT_KEY": "abc", "PATH": "/bin"})
    assert secrets == ["hf_abcdefgh123"]
    text = "token hf_abcdefgh123 at https://user:pw@example.com/x in /home/alice/venv and /home/alicex"
    out = env.scrub(text, secrets, home="/home/alice")
    assert "hf_abcdefgh123" not in out and "user:pw" not in out
    assert "~/venv" in out and "/home/alicex" in out  # only the home dir itself becomes ~


def test_scrub_tree_reaches_nested_keys_and_values():
    tree = {"a": ["x hf_abcdefgh123"], "hf_abcdefgh123": {"b": "hf_abcdefgh123"}}
    out = json.dumps(env.scrub_tree(tree, ["hf_abcdefgh123"], home=""))
    assert "hf_abcdefgh123" not in out


# ------------------------------------------------------------------ tables
def test_kernel_table_entries_are_complete():
    assert {"transformer_engine", "apex", "flash_attn", "mamba_ssm", "causal_conv1d"} <= set(probes.KERNELS)
    for name, spec in probes.KERNELS.items():
        assert spec["imports"] and spec["dist"], name
        assert spec["verdict"] is None or spec["verdict"] in probes.VERDICTS, name


def test_default_object_table_is_large_enough_and_well_formed():
    assert len(objects.DEFAULT_OBJECTS) >= 15
    assert len(set(objects.DEFAULT_OBJECTS)) == len(objects.DEFAULT_OBJECTS)
    assert all(objects.valid_object_key(k) for k in objects.DEFAULT_OBJECTS)


@pytest.mark.parametrize("text,ok", [("a.b:C", True), ("a:C.d", True), ("a.b", False),
                                     ("a:b:c", False), (":C", False), ("a.:C", False),
                                     ("1a:C", False), ("a b:C", False)])
def test_object_key_syntax(text, ok):
    assert objects.valid_object_key(text) is ok


def test_requirable_names_are_report_keys():
    assert set(cli.REQUIRABLE) == {"python", "torch", "gpus", "megatron_core"} | set(probes.KERNELS)


# ------------------------------------------------------------------ gpus
def test_nvidia_smi_rows_parse():
    rows = [{"index": "0", "name": "NVIDIA H200", "compute_cap": "9.0", "memory.total": "143771",
             "driver_version": "580.159.03"}]
    assert gpus.parse_rows(rows) == [{"index": 0, "name": "NVIDIA H200", "compute_capability": "9.0",
                                      "memory_total_mib": 143771, "driver": "580.159.03"}]


def test_gpu_entry_without_devices_has_count_zero_and_reason():
    entry = gpus.entry([], None, "nvidia-smi not found on PATH")
    assert entry["count"] == 0 and entry["status"] != "available" and entry["reason"]


# ------------------------------------------------------------------ children
def test_parse_lines_keeps_facts_before_garbage():
    text = '{"set": "a", "value": 1}\nnot json\n{"stage": "s"}\n{"set": "b", "value": [2]}\n{"set"'
    assert children.parse_lines(text) == ({"a": 1, "b": [2]}, "s")


def test_hanging_child_is_killed_at_the_timeout_and_keeps_its_last_stage():
    environ = dict(os.environ, PYTHONPATH=os.path.join(HOSTILE, "hang"))
    start = time.monotonic()
    res = children.run_child(sys.executable, "kernel", dict(probes.KERNELS["grouped_gemm"]), 2, environ)
    assert time.monotonic() - start < 8
    assert res["timed_out"] and res["stage"] == "import grouped_gemm"
    assert children.failure_reason(res, 2) == "no answer within 2 s (last step: import grouped_gemm)"


def test_attribute_access_that_raises_is_an_error_not_a_crash():
    environ = dict(os.environ, PYTHONPATH=os.path.join(HOSTILE, "attr_raises"))
    res = children.run_child(sys.executable, "kernel", dict(probes.KERNELS["flash_attn"]), 30, environ)
    assert res["returncode"] == 0
    facts = res["facts"]
    assert facts["status"] == "error"
    assert "RuntimeError: flash_attn lazy loader failed while resolving flash_attn_func" in facts["reason"]
    assert "RuntimeError" in facts["version"]["error"]


# ------------------------------------------------------------------ command line
@pytest.mark.parametrize("args,needle", [
    (["--object", "megatron.core.no_colon"], "give MODULE:ATTR"),
    (["--require", "bogus_kernel"], "unknown component bogus_kernel"),
    (["--require", ""], "unknown component"),
    (["--timeout", "-3"], "must be in (0, 3600]"),
    (["--timeout", "abc"], "not a number"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_bad_arguments_exit_2_with_one_message_and_no_traceback(args, needle):
    r = run_cli(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_help_lists_statuses_kernels_and_exit_codes():
    r = run_cli("--help")
    assert r.returncode == 0
    for word in STATUSES + tuple(probes.KERNELS) + ("--require", "--check-references", "--tiny-model"):
        assert word in r.stdout


def test_parent_modules_import_only_the_standard_library():
    code = ("import sys; sys.path.insert(0, %r); "
            "from inspector import cli, report, render, children, env, gpus, probes, objects; "
            "bad = [m for m in ('torch', 'megatron', 'numpy') if m in sys.modules]; "
            "print(bad)") % os.path.join(ROOT, "scripts")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r.stderr


def test_require_reports_each_unavailable_name():
    report = {"torch": {"status": "available"}, "gpus": {"status": "not_installed", "count": 0,
                                                          "reason": "no GPU"},
              "kernels": {"apex": {"status": "timeout", "reason": "r"}}}
    assert cli.unmet(report, ["torch"]) == []
    assert [m[0] for m in cli.unmet(report, ["torch", "gpus", "apex", "megatron_core"])] == \
        ["gpus", "apex", "megatron_core"]


def test_text_form_groups_identical_object_failures():
    objs = {"m:A%d" % i: {"status": "import_failed", "reason": "OSError: x"} for i in range(5)}
    lines = render._object_lines(objs)
    assert lines == ["objects: 0 of 5 available", "  import_failed 5 objects: OSError: x"]


def test_precision_checks_report_te_answers_with_reasons():
    environ = dict(os.environ, PYTHONPATH=os.path.join(HOSTILE, "te_fake"))
    params = dict(probes.KERNELS["transformer_engine"], precision=probes.PRECISION_CHECKS, cuda=True)
    res = children.run_child(sys.executable, "kernel", params, 30, environ)
    facts = res["facts"]
    assert facts["status"] == "available" and facts["version"] == "2.99.0"
    prec = facts["precision"]
    assert prec["fp8"] == {"status": "unsupported", "check": "transformer_engine.pytorch.fp8.check_fp8_support",
                           "reason": "Device compute capability 8.9 or higher required for FP8 execution."}
    assert prec["mxfp8"] == {"status": "available", "check": "transformer_engine.pytorch.fp8.check_mxfp8_support"}
    assert prec["nvfp4"]["status"] == "missing"


def test_precision_is_not_checked_without_cuda():
    environ = dict(os.environ, PYTHONPATH=os.path.join(HOSTILE, "te_fake"))
    params = dict(probes.KERNELS["transformer_engine"], precision=probes.PRECISION_CHECKS, cuda=False)
    prec = children.run_child(sys.executable, "kernel", params, 30, environ)["facts"]["precision"]
    assert {v["status"] for v in prec.values()} == {"not_checked"}


def test_a_kernel_megatron_rejects_is_unsupported():
    from inspector import report
    entry = {"status": "available", "version": "1.0"}
    verdicts = {"HAVE_FA4": {"module": "megatron.core.transformer.attention", "value": False}}
    report._apply_verdict(entry, probes.KERNELS["flash_attn_4"], verdicts)
    assert entry["status"] == "unsupported"
    assert entry["reason"] == "imports, but megatron.core.transformer.attention.HAVE_FA4 is False"
    assert entry["megatron_verdict"] == {"HAVE_FA4": False}


def test_a_crashing_import_is_an_error_with_the_signal_and_the_step():
    environ = dict(os.environ, PYTHONPATH=os.path.join(HOSTILE, "segfault"))
    from inspector import report
    res = children.run_child(sys.executable, "kernel", dict(probes.KERNELS["apex"]), 30, environ)
    assert res["signal"] == "SIGSEGV"
    entry = report.kernel_entry("apex", probes.KERNELS["apex"], res, 30, {})
    assert entry["status"] == "error"
    assert entry["reason"] == "child killed by SIGSEGV (last step: import apex)"

"""Assemble the local report: ``collect(options) -> dict`` (the object ``--json`` prints), and
``unmet(report, names)``, the ``--require`` check that the command line and cluster mode share.

Independent children (torch, megatron, each installed kernel, the optional tasks) run
concurrently, so the report costs about one import of megatron.core.
"""
import importlib.util
import os
import platform
import sys
import time

from inspector import SCHEMA_VERSION, dist_version, env, gpus, objects, probes
from inspector.children import SCRIPTS_DIR, failure_reason, last_line, run_children

DEFAULT_TIMEOUT = 90.0
REPO_DIR = os.path.dirname(SCRIPTS_DIR)
OPTION_DEFAULTS = {"timeout": DEFAULT_TIMEOUT, "cuda": False, "objects": None,
                   "config_fields": None, "tiny_model": False, "check_references": False,
                   "references_dir": os.path.join(REPO_DIR, "references"), "python": None}


def options_from(options):
    """Normalise None / dict / argparse.Namespace into a dict with every key of OPTION_DEFAULTS."""
    if options is None:
        given = {}
    elif isinstance(options, dict):
        given = options
    else:
        given = vars(options)
    opts = {k: given.get(k, v) if given.get(k) is not None else v
            for k, v in OPTION_DEFAULTS.items()}
    opts["config_fields"] = given.get("config_fields")
    opts["python"] = opts["python"] or sys.executable
    return opts


def _top_level_found(module):
    try:
        return importlib.util.find_spec(module.split(".")[0]) is not None
    except (ImportError, ValueError):
        return True  # let the child find out why


def _child_env(opts):
    environ = dict(os.environ)
    environ.setdefault("PYTHONUNBUFFERED", "1")
    return environ


def plan_jobs(opts):
    """{job name: (task, params)} for this run, and the kernels skipped as not installed."""
    object_keys = list(objects.DEFAULT_OBJECTS) + [
        k for k in (opts["objects"] or []) if k not in objects.DEFAULT_OBJECTS]
    # Without --cuda, torch's facts come from the megatron child (one torch import less);
    # with --cuda a separate child asks torch about devices so megatron's probe never waits on it.
    jobs = {"torch": ("torch", {"cuda": True})} if opts["cuda"] else {}
    jobs.update({"megatron": ("megatron", {"with_torch": not opts["cuda"], "objects": object_keys,
                                      "verdicts": {k: list(v) for k, v in probes.VERDICTS.items()},
                                      "te_module": probes.TE_EXTENSION_MODULE,
                                      "config_fields": opts["config_fields"]})})
    absent = {}
    for name, spec in probes.KERNELS.items():
        chains = [spec["imports"]] + spec.get("alternatives", [])
        if not any(_top_level_found(chain[0]) for chain in chains):
            absent[name] = spec
            continue
        params = dict(spec, cuda=opts["cuda"])
        params["precision"] = probes.PRECISION_CHECKS if name == "transformer_engine" else None
        jobs["kernel:" + name] = ("kernel", params)
    if opts["tiny_model"]:
        jobs["tiny_model"] = ("tiny_model", {"cuda": opts["cuda"]})
    if opts["check_references"]:
        jobs["references"] = ("references", {"scripts_dir": SCRIPTS_DIR,
                                             "paths": reference_paths(opts["references_dir"])})
    return jobs, absent, object_keys


def reference_paths(directory):
    if not os.path.isdir(directory):
        return []
    return sorted(os.path.join(directory, n) for n in os.listdir(directory) if n.endswith(".md"))


def python_entry():
    return {"status": "available", "version": platform.python_version(),
            "implementation": platform.python_implementation(), "executable": sys.executable}


def platform_entry():
    return {"system": platform.system(), "release": platform.release(),
            "machine": platform.machine(), "platform": platform.platform()}


def _child_failed(res, timeout):
    """(status, reason) when a child did not finish cleanly, else None."""
    reason = failure_reason(res, timeout)
    if reason:
        return ("timeout" if res["timed_out"] else "error"), reason
    if "__error__" in res["facts"]:
        return "error", "probe failed: " + res["facts"]["__error__"]
    return None


def torch_view(results):
    """The torch child's result, or the torch part of the megatron child's result."""
    if "torch" in results:
        return results["torch"]
    res = dict(results["megatron"])
    res["facts"] = {k[len("torch:"):]: v for k, v in res["facts"].items() if k.startswith("torch:")}
    if res["facts"].get("__done__"):  # torch finished before whatever happened to megatron
        res.update(timed_out=False, signal=None, returncode=0, spawn_error=None)
    return res


def torch_entry(res, timeout):
    facts = dict(res["facts"])
    facts.pop("__done__", None)
    failed = _child_failed(res, timeout)
    if failed and facts.get("status") in (None, "available"):
        facts["status"], facts["reason"] = failed
    facts.setdefault("status", "error")
    if facts["status"] != "available" and "reason" not in facts:
        facts["reason"] = last_line(res["stderr"]) or "unknown"
    return facts


def megatron_entries(res, object_keys, timeout, requested_fields=None):
    facts = res["facts"]
    failed = _child_failed(res, timeout)
    core = dict(facts.get("megatron_core") or {})
    if not core:
        status, reason = failed or ("error", "no answer from the megatron probe")
        core = {"status": status, "reason": reason,
                "version": dist_version(["megatron-core", "megatron_core"])}
    core["verdicts"] = {k[len("verdict:"):]: v for k, v in facts.items() if k.startswith("verdict:")}
    if "te_symbols" in facts:
        core["te_symbols"] = facts["te_symbols"]
    if "te_version" in facts:
        core["te_version"] = facts["te_version"]
    _flag_vcs_suffix(core)
    objs = {}
    for key in object_keys:
        entry = facts.get("object:" + key)
        if entry is None:
            status, reason = failed or ("error", "not reached by the probe")
            entry = {"status": status, "signature": None, "reason": reason}
        objs[key] = entry
    if failed:
        core["probe_incomplete"] = failed[1]
    extra = {}
    if "config_fields" in facts:
        extra["config_fields"] = facts["config_fields"]
    elif failed and requested_fields is not None:
        extra["config_fields"] = {"error": failed[1]}
    return core, objs, extra


def _flag_vcs_suffix(core):
    mv, v = core.get("module_version"), core.get("version")
    if mv and v and mv != v and "+" in mv and not core.get("source_checkout"):
        core["note"] = ("megatron.core.__version__ (%s) carries the HEAD of an enclosing git "
                        "repository, not a Megatron commit" % mv)
        if core.get("no_vcs_version_switch"):
            core["note"] += "; this package_info.py skips it when NO_VCS_VERSION=1"


def kernel_entry(name, spec, res, timeout, verdicts):
    if res is None:
        entry = {"status": "not_installed", "version": dist_version(spec["dist"]),
                 "reason": "no module named %s" % spec["imports"][0].split(".")[0]}
    else:
        entry = {k: v for k, v in res["facts"].items() if k != "__error__"}
        failed = _child_failed(res, timeout)
        if failed and entry.get("status") in (None, "available"):
            entry["status"], entry["reason"] = failed
        entry.setdefault("status", "error")
        if not entry.get("version") or isinstance(entry.get("version"), dict):
            entry["version_error"] = entry.get("version", {}).get("error") if isinstance(
                entry.get("version"), dict) else None
            entry["version"] = dist_version(spec["dist"])
            if entry["version_error"] is None:
                del entry["version_error"]
    _apply_verdict(entry, spec, verdicts)
    return entry


def _apply_verdict(entry, spec, verdicts):
    key = spec.get("verdict")
    if not key or key not in verdicts:
        return
    verdict = verdicts[key]
    entry["megatron_verdict"] = {key: verdict.get("value", verdict.get("error"))}
    if entry["status"] == "available" and verdict.get("value") is False:
        entry["status"] = "unsupported"
        entry["reason"] = "imports, but %s.%s is False" % (verdict["module"], key)


def precision_entry(te_entry):
    prec = te_entry.pop("precision", None) if isinstance(te_entry, dict) else None
    if prec:
        return prec
    status = te_entry.get("status", "error")
    reason = "transformer_engine: %s" % (te_entry.get("reason") or status)
    return {k: {"status": status if status != "available" else "error", "reason": reason}
            for k in probes.PRECISION_CHECKS}


def gpus_entry(opts, smi, nvml_res, torch_facts):
    """``smi`` = (devices, reason) from nvidia-smi; ``nvml_res`` = the NVML child's result or None."""
    devices, reason = smi
    source = "nvidia-smi" if devices is not None else None
    if devices is None and nvml_res is not None:
        facts = nvml_res["facts"]
        if facts.get("status") == "available":
            devices, source = facts.get("devices", []), "nvml"
            for d in devices:
                d["driver"] = facts.get("driver")
        else:
            reason = "%s; NVML: %s" % (reason, facts.get("reason") or
                                        failure_reason(nvml_res, opts["timeout"]) or "unavailable")
    out = gpus.entry(devices, source, reason)
    if opts["cuda"]:
        out["torch_view"] = torch_facts.get("cuda_devices", {"error": "torch did not answer"})
    return out


def tiny_model_entry(res, timeout):
    entry = dict(res["facts"])
    failed = _child_failed(res, timeout)
    if failed and entry.get("status") in (None, "available"):
        entry["status"], entry["reason"] = failed
    entry.setdefault("status", "error")
    return entry


DOES_NOT_HOLD = ("mismatch", "missing")  # reference_facts.check_fact statuses


def _relative_source(result):
    """Sources inside the bundle are shown relative to its root (references/x.md:12)."""
    src = result.get("source") if isinstance(result, dict) else None
    if isinstance(src, str) and src.startswith(REPO_DIR + os.sep):
        result = dict(result, source=src[len(REPO_DIR) + 1:])
    return result


def references_entry(res, timeout, opts, core=None):
    """Drift check: facts from references/*.md that do not hold in this installation. Without an
    importable megatron-core there is nothing to check against: one status, not a list of every fact."""
    entry = {"references_dir": opts["references_dir"]}
    if core is not None and core.get("status") not in (None, "available"):
        entry["status"] = core["status"]
        entry["reason"] = ("megatron-core is %s in this Python (%s): the facts in references/ are not "
                           "checked" % (core["status"].replace("_", " "), sys.executable))
        return entry
    failed = _child_failed(res, timeout)
    if failed:
        entry["status"], entry["reason"] = failed
        return entry
    results = [_relative_source(r) for r in res["facts"].get("results", [])]
    entry.update({"status": "available", "checked": len(results),
                  "does_not_hold": [r for r in results if r.get("status") in DOES_NOT_HOLD],
                  "could_not_check": [r for r in results if r.get("status") == "error"]})
    entry["does_not_hold_count"] = len(entry["does_not_hold"])
    entry["could_not_check_count"] = len(entry["could_not_check"])
    if not results:
        entry["reason"] = "no checkable facts found under %s" % opts["references_dir"]
    return entry


def collect(options=None):
    """The whole local report as a dict (see the package docstring for ``options``)."""
    opts = options_from(options)
    started = time.monotonic()
    jobs, absent, object_keys = plan_jobs(opts)
    smi = gpus.from_nvidia_smi(min(opts["timeout"], 20))
    if smi[0] is None:
        jobs["nvml"] = ("nvml", {})
    results = run_children(jobs, opts["python"], opts["timeout"], _child_env(opts))
    torch_facts = torch_entry(torch_view(results), opts["timeout"])
    core, objs, extra = megatron_entries(results["megatron"], object_keys, opts["timeout"],
                                         opts["config_fields"])
    kernels = {}
    for name, spec in probes.KERNELS.items():
        kernels[name] = kernel_entry(name, spec, results.get("kernel:" + name),
                                     opts["timeout"], core.get("verdicts", {}))
    report = {"schema_version": SCHEMA_VERSION, "tool": "scripts/inspect_core_api.py",
              "python": python_entry(), "platform": platform_entry(), "torch": torch_facts,
              "gpus": gpus_entry(opts, smi, results.get("nvml"), torch_facts), "megatron_core": core,
              "kernels": kernels, "precision": precision_entry(kernels["transformer_engine"]),
              "objects": objs, "env": env.collect()}
    torch_facts.pop("cuda_devices", None)
    report.update(extra)
    if "tiny_model" in results:
        report["tiny_model"] = tiny_model_entry(results["tiny_model"], opts["timeout"])
    if "references" in results:
        report["references"] = references_entry(results["references"], opts["timeout"], opts, core)
    report["timing"] = {"total_s": round(time.monotonic() - started, 3),
                        "children_s": {k: v["seconds"] for k, v in results.items()},
                        "timeout_s": opts["timeout"]}
    return env.scrub_tree(report, env.secret_values())


def trim_signatures(report, keep=()):
    """The default objects' signatures out of the report, except those in ``keep`` (the --object keys):
    they are most of its size (TransformerConfig alone is 14 KB). --full keeps all."""
    for key, entry in report.get("objects", {}).items():
        sig = entry.get("signature")
        if sig and key not in keep:
            entry["signature"] = None
            entry["signature_omitted"] = len(sig)
    return report


def unmet(report, names):
    """Names whose entry is not available (gpus also needs count > 0)."""
    missing = []
    for name in names:
        entry = report.get(name) if name in ("python", "torch", "gpus", "megatron_core") \
            else report.get("kernels", {}).get(name)
        ok = isinstance(entry, dict) and entry.get("status") == "available"
        if name == "gpus":
            ok = ok and entry.get("count", 0) > 0
        if not ok:
            missing.append((name, (entry or {}).get("status", "absent"), (entry or {}).get("reason")))
    return missing

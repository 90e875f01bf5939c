"""The tasks of every default run: torch facts, megatron.core (version, verdict flags, the object
table, config fields) and one optional kernel.  torch, megatron.core and the kernels are imported
inside the tasks, in the child process only.
"""
import importlib
import os
import sys
import subprocess

from inspector import dist_version
from inspector.child.protocol import _PREFIX, describe, emit, import_status, is_mock, resolve, stage


# ---------------------------------------------------------------- torch
def task_torch(params):
    stage("import torch")
    try:
        import torch
    except BaseException as exc:
        emit("status", import_status(exc, "torch"))
        emit("reason", describe(exc))
        emit("version", dist_version(["torch"]))
        return
    emit("status", "available")
    emit("version", str(torch.__version__))
    emit("path", os.path.dirname(torch.__file__))
    emit("cuda_built", getattr(torch.version, "cuda", None))
    emit("hip_built", getattr(torch.version, "hip", None))
    emit("git_version", getattr(torch.version, "git_version", None))
    for key, fn in (("cudnn", _cudnn_version), ("nccl", _nccl_version),
                    ("distributed", _dist_backends)):
        stage("torch " + key)
        try:
            emit(key, fn(torch))
        except BaseException as exc:
            emit(key, {"error": describe(exc)})
    stage("torch.cuda.is_available")
    try:
        emit("cuda_available", bool(torch.cuda.is_available()))
    except BaseException as exc:
        emit("cuda_available", False)
        emit("cuda_error", describe(exc))
    if params.get("cuda"):
        stage("torch cuda devices")
        try:
            emit("cuda_devices", _cuda_devices(torch))
        except BaseException as exc:
            emit("cuda_devices", {"error": describe(exc)})
    emit("__done__", True)


def _cudnn_version(torch):
    v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return None if v is None else str(v)


def _nccl_version(torch):
    if not (getattr(torch.version, "cuda", None) and hasattr(torch.cuda, "nccl")):
        return None
    v = torch.cuda.nccl.version()
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def _dist_backends(torch):
    d = torch.distributed
    if not d.is_available():
        return {"available": False}
    return {"available": True, "gloo": bool(d.is_gloo_available()),
            "nccl": bool(d.is_nccl_available()), "mpi": bool(d.is_mpi_available())}


def _cuda_devices(torch):
    devices = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        devices.append({"index": i, "name": p.name,
                        "compute_capability": "%d.%d" % (p.major, p.minor),
                        "memory_total_mib": int(p.total_memory // (1 << 20)),
                        "multi_processor_count": p.multi_processor_count,
                        "bf16_supported": bool(torch.cuda.is_bf16_supported())})
    if devices:
        x = torch.ones(64, 64, device="cuda")
        devices[0]["matmul_check"] = bool(((x @ x) == 64).all().item())
    return devices


# ---------------------------------------------------------------- megatron
def task_megatron(params):
    if params.get("with_torch"):
        # torch's facts first, from this same process: one torch import instead of two, and they
        # are already out if megatron.core later fails or hangs.
        _PREFIX[0] = "torch:"
        try:
            task_torch({})
        finally:
            _PREFIX[0] = ""
    stage("import megatron.core")
    try:
        import megatron.core as mc
    except BaseException as exc:
        emit("megatron_core", {"status": import_status(exc, "megatron.core"),
                               "reason": describe(exc),
                               "version": dist_version(["megatron-core", "megatron_core"])})
        mc = None
    if mc is not None:
        emit("megatron_core", _megatron_info(mc))
        for key, (module, attr) in params.get("verdicts", {}).items():
            stage("verdict %s.%s" % (module, attr))
            emit("verdict:" + key, _verdict(module, attr))
        stage("transformer_engine placeholders")
        emit("te_symbols", _te_symbols(params.get("te_module")))
        emit("te_version", _safe(lambda: str(importlib.import_module(
            "megatron.core.utils").get_te_version())))
    for key in params.get("objects", []):
        stage("object " + key)
        emit("object:" + key, describe_object(key))
    if params.get("config_fields") is not None:
        stage("config fields")
        emit("config_fields", _safe(lambda: config_fields(params["config_fields"])))


def _safe(fn):
    try:
        return fn()
    except BaseException as exc:
        return {"error": describe(exc)}


def _megatron_info(mc):
    path = os.path.dirname(os.path.abspath(mc.__file__))
    info = {"status": "available",
            "version": dist_version(["megatron-core", "megatron_core"]),
            "module_version": str(getattr(mc, "__version__", "")) or None,
            "path": path}
    if not info["version"]:
        info["version"] = _safe(lambda: importlib.import_module(
            "megatron.core.package_info").__shortversion__)
    info.update(_git_checkout(os.path.dirname(os.path.dirname(path))))
    info["no_vcs_version_switch"] = _mentions(os.path.join(path, "package_info.py"), "NO_VCS_VERSION")
    return info


def _mentions(path, word):
    try:
        with open(path, encoding="utf-8") as f:
            return word in f.read()
    except OSError:
        return False


def _git_checkout(root):
    """Commit of a Megatron-LM source checkout whose top level holds megatron/core, else None.

    A site-packages that merely lies inside some other git repository is not a checkout (megatron's
    own __version__ appends that repository's HEAD in that case, which the report flags).
    """
    def git(*args):
        r = subprocess.run(["git", "-C", root] + list(args), capture_output=True, text=True,
                           timeout=5, stdin=subprocess.DEVNULL)
        return r.stdout.strip() if r.returncode == 0 else None
    try:
        top = git("rev-parse", "--show-toplevel")
        if top and os.path.realpath(top) == os.path.realpath(root):
            return {"source_checkout": True, "git_commit": git("rev-parse", "HEAD")}
        return {"source_checkout": False, "git_commit": None, "enclosing_git_repo": top}
    except (OSError, subprocess.SubprocessError):
        return {"source_checkout": False, "git_commit": None}


def _verdict(module, attr):
    try:
        mod = importlib.import_module(module)
    except BaseException as exc:
        return {"module": module, "error": describe(exc)}
    if not hasattr(mod, attr):
        return {"module": module, "error": "no attribute %s" % attr}
    value = getattr(mod, attr)
    return {"module": module, "value": value if isinstance(value, (bool, int, str)) else repr(value)}


def _te_symbols(module):
    if not module:
        return None
    try:
        mod = importlib.import_module(module)
    except BaseException as exc:
        return {"error": describe(exc)}
    names = sorted(n for n in vars(mod) if n.startswith("TE") or n == "te")
    return {"module": module,
            "magicmock": [n for n in names if is_mock(getattr(mod, n))],
            "none": [n for n in names if getattr(mod, n) is None]}


def describe_object(key):
    try:
        obj = resolve(key)
    except BaseException as exc:
        status = "missing" if isinstance(exc, AttributeError) else import_status(
            exc, key.split(":")[0])
        if status == "not_installed":
            status = "missing"
        return {"status": status, "signature": None, "reason": describe(exc)}
    if obj is None:
        return {"status": "missing", "signature": None,
                "reason": "%s is None in this installation" % key}
    if is_mock(obj):
        return {"status": "missing", "signature": None, "kind": "MagicMock",
                "reason": "a unittest.mock.MagicMock placeholder (megatron installs these when "
                          "transformer_engine is not importable), not a real object"}
    import inspect
    entry = {"status": "available", "kind": _kind(obj, inspect), "signature": None}
    if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismethod(obj):
        try:
            entry["signature"] = str(inspect.signature(obj))
        except (TypeError, ValueError) as exc:
            entry["reason"] = "no signature: " + describe(exc)
    else:
        entry["value"] = repr(obj)[:300]
    return entry


def _kind(obj, inspect):
    import dataclasses
    if inspect.isclass(obj):
        if dataclasses.is_dataclass(obj):
            return "dataclass"
        import enum
        return "enum" if issubclass(obj, enum.Enum) else "class"
    if inspect.isroutine(obj) or inspect.ismethod(obj):
        return "function"
    return "instance of " + type(obj).__name__


def config_fields(filter_text):
    import dataclasses
    mpc = importlib.import_module("megatron.core.model_parallel_config").ModelParallelConfig
    tc = importlib.import_module("megatron.core.transformer.transformer_config").TransformerConfig
    base = {f.name for f in dataclasses.fields(mpc)}
    needle = (filter_text or "").lower()
    rows = []
    for f in dataclasses.fields(tc):
        if needle and needle not in f.name.lower():
            continue
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = "<factory %s>" % getattr(f.default_factory, "__name__", "?")
        else:
            default = "<required>"
        rows.append({"name": f.name, "type": f.type if isinstance(f.type, str) else
                     _type_name(f.type), "default": default,
                     "defined_in": "ModelParallelConfig" if f.name in base else "TransformerConfig"})
    return rows


def _type_name(tp):
    text = repr(tp) if not isinstance(tp, type) else tp.__name__
    return text.replace("typing.", "")


# ---------------------------------------------------------------- kernels
def task_kernel(params):
    chains = [params["imports"]] + params.get("alternatives", [])
    last_exc, module = None, None
    for chain in chains:
        try:
            for name in chain:
                stage("import " + name)
                module = importlib.import_module(name)
            emit("module", chain[-1])
            last_exc = None
            break
        except BaseException as exc:
            last_exc, module = (exc, name), None
    if last_exc is not None:
        exc, name = last_exc
        emit("status", import_status(exc, name))
        emit("reason", describe(exc))
        return
    emit("status", "available")
    emit("version", _kernel_version(params.get("version_attr")))
    for sym in params.get("symbols", []):
        stage("attribute " + sym)
        try:
            value = getattr(module, sym)
        except AttributeError:
            emit("status", "missing")
            emit("reason", "%s has no attribute %s" % (module.__name__, sym))
            return
        except BaseException as exc:
            emit("status", "error")
            emit("reason", "reading %s.%s raised %s" % (module.__name__, sym, describe(exc)))
            return
        if value is None or is_mock(value):
            emit("status", "missing")
            emit("reason", "%s.%s is %r" % (module.__name__, sym, value))
            return
    if params.get("precision") is not None:
        emit("precision", precision(params["precision"], params.get("cuda")))


def _kernel_version(attr_path):
    if not attr_path:
        return None
    module_name, attr = attr_path.rsplit(".", 1)
    try:
        value = getattr(sys.modules.get(module_name) or importlib.import_module(module_name), attr)
        return str(value)
    except BaseException as exc:
        return {"error": describe(exc)}


def precision(checks, cuda):
    out = {}
    for name, candidates in checks.items():
        if not cuda:
            out[name] = {"status": "not_checked", "reason": "needs --cuda (TE asks the GPU)"}
            continue
        out[name] = _run_precision_check(candidates)
    return out


def _run_precision_check(candidates):
    for module_name, fn_name in candidates:
        try:
            fn = getattr(importlib.import_module(module_name), fn_name)
        except BaseException:
            continue
        try:
            result = fn(return_reason=True) if fn_name.startswith("is_") else fn()
        except TypeError:
            result = fn()
        except BaseException as exc:
            return {"status": "error", "reason": describe(exc), "check": module_name + "." + fn_name}
        ok, reason = (result if isinstance(result, tuple) else (bool(result), ""))
        entry = {"status": "available" if ok else "unsupported",
                 "check": module_name + "." + fn_name}
        if not ok:
            entry["reason"] = str(reason) or "transformer_engine says unsupported"
        return entry
    return {"status": "missing", "reason": "no TE support check found (tried %s)"
            % ", ".join(m + "." + f for m, f in candidates)}


TASKS = {"torch": task_torch, "megatron": task_megatron, "kernel": task_kernel}

"""The report's documented shape, as data, and a checker (used by the tests; it lives here, not in scripts/, because only tests check it)."""
from inspector import SCHEMA_VERSION, STATUSES

TOP_KEYS = ("schema_version", "python", "platform", "torch", "gpus", "megatron_core", "kernels",
            "precision", "objects", "env", "timing")
COMPONENTS = ("python", "torch", "gpus", "megatron_core")
PRECISION_STATUSES = STATUSES + ("not_checked",)
GPU_DEVICE_KEYS = ("index", "name", "compute_capability", "memory_total_mib")


def _entry_problems(where, entry, statuses=STATUSES):
    if not isinstance(entry, dict):
        return ["%s is not an object" % where]
    problems = []
    if entry.get("status") not in statuses:
        problems.append("%s.status %r not in the vocabulary" % (where, entry.get("status")))
    elif entry["status"] != "available" and not entry.get("reason"):
        problems.append("%s is %s without a reason" % (where, entry["status"]))
    return problems


def validate(report, kernel_names=None):
    """Return a list of problems (empty when the report has the documented shape)."""
    problems = ["missing key %s" % k for k in TOP_KEYS if k not in report]
    if problems:
        return problems
    if report["schema_version"] != SCHEMA_VERSION:
        problems.append("schema_version %r != %r" % (report["schema_version"], SCHEMA_VERSION))
    for name in COMPONENTS:
        problems += _entry_problems(name, report[name])
    for key in ("torch", "megatron_core"):
        if report[key].get("status") == "available" and not report[key].get("version"):
            problems.append("%s is available without a version" % key)
    gpus = report["gpus"]
    if not isinstance(gpus.get("count"), int) or gpus["count"] != len(gpus.get("devices", [])):
        problems.append("gpus.count does not match gpus.devices")
    for d in gpus.get("devices", []):
        problems += ["gpus device lacks %s" % k for k in GPU_DEVICE_KEYS if k not in d]
    names = set(report["kernels"])
    if kernel_names is not None and names != set(kernel_names):
        problems.append("kernels keys %s != %s" % (sorted(names), sorted(kernel_names)))
    for name, entry in report["kernels"].items():
        problems += _entry_problems("kernels." + name, entry)
        if "version" not in entry:
            problems.append("kernels.%s has no version key" % name)
    for name, entry in report["precision"].items():
        problems += _entry_problems("precision." + name, entry, PRECISION_STATUSES)
    for key, entry in report["objects"].items():
        problems += _entry_problems("objects." + key, entry)
        if "signature" not in entry:
            problems.append("objects.%s has no signature key" % key)
    if not isinstance(report["env"], dict):
        problems.append("env is not an object")
    return problems

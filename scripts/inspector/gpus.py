"""GPU facts without a CUDA context: ``nvidia-smi`` (argv list, timeout), else NVML in a child."""
import os
import shutil
import subprocess

QUERY = ("index", "name", "compute_cap", "memory.total", "driver_version")
QUERY_OLD = ("index", "name", "memory.total", "driver_version")  # drivers before compute_cap


def _run_smi(exe, fields, timeout):
    r = subprocess.run([exe, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"],
                       capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError((r.stderr or r.stdout).strip().splitlines()[-1:] or
                           ["nvidia-smi exited %d" % r.returncode])
    return [dict(zip(fields, (c.strip() for c in line.split(","))))
            for line in r.stdout.splitlines() if line.strip()]


def parse_rows(rows):
    devices = []
    for row in rows:
        mem = row.get("memory.total", "")
        devices.append({"index": int(row["index"]) if row.get("index", "").isdigit() else row.get("index"),
                        "name": row.get("name"),
                        "compute_capability": row.get("compute_cap"),
                        "memory_total_mib": int(mem) if mem.isdigit() else None,
                        "driver": row.get("driver_version")})
    return devices


def from_nvidia_smi(timeout):
    """Return (devices, reason); devices is None when nvidia-smi is absent or failed."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None, "nvidia-smi not found on PATH"
    last = None
    for fields in (QUERY, QUERY_OLD):
        try:
            return parse_rows(_run_smi(exe, fields, timeout)), None
        except subprocess.TimeoutExpired:
            return None, "nvidia-smi gave no answer within %g s" % timeout
        except (OSError, RuntimeError) as exc:
            last = "nvidia-smi failed: %s" % (exc.args[0][0] if isinstance(exc, RuntimeError)
                                              and exc.args[0] else exc)
    return None, last


def entry(devices, source, reason):
    """The report's ``gpus`` entry."""
    devices = devices or []
    out = {"status": "available" if devices else "not_installed",
           "count": len(devices), "devices": devices, "source": source,
           "driver": devices[0].get("driver") if devices else None,
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if not devices:
        out["reason"] = reason or "no GPU found"
    return out

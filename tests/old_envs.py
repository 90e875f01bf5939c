"""The old-release environments, built on first use (Python 3.11, CPU torch, a real megatron-core).

``python_for(release)`` returns the interpreter that has ``release`` installed: the test venv for
0.19.2, else ``.venv-0161`` (0.16.1, tests/fixtures/make_old_env.sh) or ``.venv-0131`` (0.13.1,
tests/fixtures/make_older_env.sh), built when missing. A skip decided at collection would skip the
test in a fresh clone, where nothing has built them yet; here only a machine without Python 3.11
(the build script's exit 3) skips, with its reason.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# release -> (build script, venv directory, environment variable overriding the directory)
ENVS = {
    "0.16.1": ("make_old_env.sh", ".venv-0161", "OLD_VENV"),
    "0.13.1": ("make_older_env.sh", ".venv-0131", "OLDER_VENV"),
}
RELEASES = ("0.19.2", *ENVS)  # every release with an environment here
BUILD_TIMEOUT_S = 1500


def venv_python(release: str) -> Path:
    """Where the interpreter of ``release`` is (built or not)."""
    if release == "0.19.2":
        return Path(sys.executable)
    _, venv, var = ENVS[release]
    return Path(os.environ.get(var, str(REPO / venv))) / "bin" / "python"


def built(release: str) -> bool:
    """Whether the environment is complete: its build script writes the stamp last (an
    interpreter alone exists from the build's first step on)."""
    py = venv_python(release)
    if os.environ.get(ENVS[release][2]):  # a directory the user gave: theirs, used as it is
        return py.exists()
    return py.exists() and (py.parent.parent / f".built-{release.replace('.', '')}").exists()


def python_for(release: str) -> Path:
    """The interpreter with ``release`` installed, building its environment on first use.
    Parallel test workers (pytest-xdist) build it once: the build holds a file lock, and a worker
    that waited finds the stamp and builds nothing."""
    py = venv_python(release)
    if release == "0.19.2" or built(release):
        return py
    lock_dir = REPO / ".cache"
    lock_dir.mkdir(exist_ok=True)
    with open(lock_dir / f"old-env-{release}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if built(release):
            return py
        script = ENVS[release][0]
        proc = subprocess.run(["bash", str(REPO / "tests" / "fixtures" / script)],
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if proc.returncode == 3:
        pytest.skip(f"cannot build megatron-core {release}: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return py


def python_or_reason(release: str) -> tuple[Path | None, str | None]:
    """(interpreter, None), or (None, why) where this machine cannot build the environment."""
    try:
        return python_for(release), None
    except pytest.skip.Exception as exc:
        return None, str(exc)

"""Megatron-LM source files at a release or on main, for the tests that check version claims.

``source_at(ref, path)`` returns the text of ``path`` (e.g. ``megatron/core/parallel_state.py``)
at ``ref``: a git tag (``core_v0.17.0``), a version (``0.17.0``, or ``0.17`` for the newest
patch of that line) or ``main`` (also ``0.20 dev``); ``None`` when the file does not exist there.

Where the files come from:
- the git mirror (``$MEGATRON_LM_MIRROR``, default ``/work/.mirror/NVIDIA+Megatron-LM/repo``)
  when it exists and has the tag (or ``main``);
- otherwise, for a released version, the megatron-core wheel from PyPI, downloaded once into
  ``<repo>/.cache/wheels/`` (``$MEGATRON_WHEEL_CACHE`` overrides) with this interpreter's pip.
  A wheel is a zip of ``megatron/core/`` (and ``megatron/training/`` from 0.17 on); it is read
  with ``zipfile``, never installed. A wheel can only answer for the ``.py`` files of the
  packages it ships: it is the same tree as the git tag there (tests/test_api_version_notes.py
  compares them), but for any other path the answer is :class:`Unavailable`, not ``None``.

``main`` without the mirror, a failed download, or a path no wheel covers raise
:class:`Unavailable` (tests turn it into a skip that names the claim). A version that was never
released raises :class:`UnknownVersion`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"
DIST = "megatron-core"
# Every final megatron-core release from 0.12 on (PyPI, 2026-11); a minor line ("0.17") means
# its newest patch here. tests/test_api_version_notes.py checks this against the mirror's tags.
RELEASES = ("0.12.0", "0.12.1", "0.12.2", "0.12.3", "0.13.0", "0.13.1", "0.14.0", "0.15.0", "0.15.1", "0.15.2", "0.15.3", "0.16.0", "0.16.1", "0.17.0", "0.17.1",
            "0.18.0", "0.18.2", "0.19.0", "0.19.2")
# Wheels are per platform; these flags fetch the same Linux cp312 wheel on any machine.
PIP_TARGET = ("--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
              "--abi", "cp312", "--platform", "manylinux_2_28_x86_64")
DOWNLOAD_TIMEOUT_S = 180
GIT_TIMEOUT_S = 60


class Unavailable(RuntimeError):
    """The file cannot be read here (main without the mirror, no network, a path no wheel ships)."""


class UnknownVersion(LookupError):
    """No megatron-core release matches the version."""


def mirror() -> Path | None:
    p = Path(os.environ.get("MEGATRON_LM_MIRROR", DEFAULT_MIRROR))
    return p if p.is_dir() else None


def cache_dir() -> Path:
    return Path(os.environ.get("MEGATRON_WHEEL_CACHE", REPO / ".cache" / "wheels"))


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def is_main(ref: str) -> bool:
    ref = ref.strip()
    return ref in ("main", "HEAD") or ref.endswith("dev")


def version_of(ref: str) -> str:
    """'core_v0.17.0' / '0.17.0' -> '0.17.0'; '0.17' -> its newest patch in RELEASES."""
    v = ref.strip().removeprefix("core_v")
    if not re.fullmatch(r"\d+\.\d+(\.\d+)?", v):
        raise UnknownVersion(f"not a release version: {ref!r}")
    if v.count(".") == 1:
        patches = [r for r in RELEASES if r.rsplit(".", 1)[0] == v]
        if not patches:
            raise UnknownVersion(f"no megatron-core release {v}.x in {RELEASES}")
        return max(patches, key=_vtuple)
    if v not in RELEASES:
        raise UnknownVersion(f"no megatron-core release {v} in {RELEASES}")
    return v


# -- git mirror ---------------------------------------------------------------------------------

def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S)


@functools.lru_cache(maxsize=None)
def _mirror_ref(repo: Path, ref: str) -> str | None:
    """The mirror's name for ref, or None when it lacks it (e.g. core_v0.19.2, never tagged)."""
    name = ("main" if _git(repo, "rev-parse", "--verify", "-q", "main").returncode == 0 else "HEAD") \
        if is_main(ref) else f"core_v{version_of(ref)}"
    return name if _git(repo, "rev-parse", "--verify", "-q", name).returncode == 0 else None


@functools.lru_cache(maxsize=None)
def mirror_source_at(repo: Path, gitref: str, path: str) -> str | None:
    proc = _git(repo, "show", f"{gitref}:{path}")
    return proc.stdout if proc.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def mirror_files(repo: Path, gitref: str) -> tuple[str, ...]:
    proc = _git(repo, "ls-tree", "-r", "--name-only", gitref)
    if proc.returncode != 0:
        raise Unavailable(f"git ls-tree {gitref} failed in {repo}: {proc.stderr.strip()}")
    return tuple(proc.stdout.split())


# -- PyPI wheels --------------------------------------------------------------------------------

def _cached_wheel(version: str) -> Path | None:
    hits = sorted(cache_dir().glob(f"megatron_core-{version}-*.whl"))
    return hits[0] if hits else None


def wheel_path(version: str) -> Path:
    """The cached wheel of a release, downloaded with pip on first use."""
    hit = _cached_wheel(version)
    if hit is not None:
        return hit
    cache_dir().mkdir(parents=True, exist_ok=True)
    # Download into a private directory and move the file in, so a concurrent run never reads
    # a half-written wheel.
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "-q", *PIP_TARGET, "-d", tmp, f"{DIST}=={version}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"pip download {DIST}=={version} failed: {exc}") from None
        got = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or len(got) != 1:
            last = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise Unavailable(f"pip download {DIST}=={version} failed (rc {proc.returncode}): {last}")
        os.replace(got[0], cache_dir() / got[0].name)
    return _cached_wheel(version)


@functools.lru_cache(maxsize=None)
def _wheel(version: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel_path(version))


@functools.lru_cache(maxsize=None)
def wheel_files(version: str) -> tuple[str, ...]:
    return tuple(n for n in _wheel(version).namelist() if n.startswith("megatron/") and not n.endswith("/"))


def _packages(version: str) -> set[str]:
    """The shipped package directories: 'megatron/core', 'megatron/training'."""
    return {"/".join(n.split("/")[:2]) for n in wheel_files(version) if n.count("/") >= 2}


def _covered(version: str, path: str) -> bool:
    return path.endswith(".py") and "/".join(path.split("/")[:2]) in _packages(version)


@functools.lru_cache(maxsize=None)
def wheel_source_at(version: str, path: str) -> str | None:
    if not _covered(version, path):
        raise Unavailable(f"the {DIST} {version} wheel does not ship {path} (only the .py files of "
                          f"{sorted(_packages(version))}); it needs the git mirror")
    if path not in wheel_files(version):
        return None
    return _wheel(version).read(path).decode("utf-8")


# -- public -------------------------------------------------------------------------------------

def _where(ref: str) -> tuple[str, Path | None, str]:
    """('git', mirror, gitref) or ('wheel', None, version) for ref."""
    repo = mirror()
    if repo is not None:
        gitref = _mirror_ref(repo, ref)
        if gitref is not None:
            return "git", repo, gitref
    if is_main(ref):
        raise Unavailable("main (the 0.20 dev branch) is not released; checking it needs the "
                          "Megatron-LM git mirror (set MEGATRON_LM_MIRROR)")
    return "wheel", None, version_of(ref)


def source_at(ref: str, path: str) -> str | None:
    kind, repo, name = _where(ref)
    return mirror_source_at(repo, name, path) if kind == "git" else wheel_source_at(name, path)


def exists_at(ref: str, path: str) -> bool:
    return source_at(ref, path) is not None


def files_at(ref: str, prefix: str = "megatron/") -> list[str]:
    """Files under prefix at ref (for a wheel: the files it ships)."""
    kind, repo, name = _where(ref)
    files = mirror_files(repo, name) if kind == "git" else wheel_files(name)
    return sorted(f for f in files if f.startswith(prefix))


def describe(ref: str) -> str:
    """Where source_at(ref, ...) reads from, for messages."""
    kind, repo, name = _where(ref)
    return f"git {repo}@{name}" if kind == "git" else f"PyPI wheel {DIST}=={name}"

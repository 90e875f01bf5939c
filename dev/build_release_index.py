#!/usr/bin/env python3
"""Build the release index (references/index/releases/) from released Megatron Core sources.

    python dev/build_release_index.py [--out DIR] [--only 0.19.2 ...] [--check]

Each release is read without installing it: from the Megatron-LM git mirror's tag
(``$MEGATRON_LM_MIRROR``, tags ``core_v0.X.Y``: they also carry ``megatron/training``, which the
0.15 and 0.16 wheels lack) or, for 0.19.2 (never tagged), from its PyPI wheel
(``tests/upstream_sources.py`` downloads it once into ``$MEGATRON_WHEEL_CACHE``). Only
``megatron/core`` and ``megatron/training`` are read, with ``ast`` (dev/release_ast.py, and
dev/release_behaviour.py for function bodies and flag reads); events
are derived from the compiled releases (scripts/release_index/derive.py).

The output is deterministic (sorted JSON, gzip without a timestamp): rebuilding gives the same
bytes. ``--check`` rebuilds into a temporary directory and exits 1 when a shipped file differs;
``--check --only V ...`` recompiles only those releases and checks their files and their entries
of the patch data (the test suite's sample: a full check compiles about 20 tags).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests"), str(REPO / "dev")]

import release_ast  # noqa: E402
import release_behaviour  # noqa: E402
from release_index import data, derive, patches  # noqa: E402
from release_index.versions import RELEASES  # noqa: E402

PREFIXES = release_ast.CORE_PREFIXES
# Where each release is read from: a git tag of the mirror, or the PyPI wheel (no tag exists).
SOURCES = {v: ("wheel", v) if v == "0.19.2" else ("git", f"core_v{v}") for v in RELEASES}
SIZE_BUDGET = 8_000_000  # bytes, all shipped files together (tests/test_release_index.py)


def git_files(repo: Path, tag: str) -> dict[str, str]:
    """{path: text} of the .py files under megatron/core and megatron/training at tag (one cat-file)."""
    ls = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", tag, "--", *[p.rstrip("/") for p in PREFIXES]],
                        capture_output=True, text=True, check=True)
    entries = [line.split("\t", 1) for line in ls.stdout.splitlines()]
    blobs = [(meta.split()[2], path) for meta, path in entries
             if path.endswith(".py") and meta.split()[1] == "blob"]
    proc = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch"], input="".join(f"{sha}\n" for sha, _ in blobs).encode(),
                          capture_output=True, check=True)
    out, pos, raw = {}, 0, proc.stdout
    for sha, path in blobs:
        header_end = raw.index(b"\n", pos)
        size = int(raw[pos:header_end].split()[2])
        out[path] = raw[header_end + 1: header_end + 1 + size].decode("utf-8", "replace")
        pos = header_end + 1 + size + 1
    return out


def wheel_files(version: str) -> dict[str, str]:
    import upstream_sources as up
    with zipfile.ZipFile(up.wheel_path(version)) as zf:
        return {n: zf.read(n).decode("utf-8", "replace") for n in zf.namelist()
                if n.endswith(".py") and n.startswith(PREFIXES)}


def installed_files(site: Path) -> dict[str, str]:
    """The same tree from an installed package (site-packages), for the staleness test."""
    out = {}
    for prefix in PREFIXES:
        root = site / prefix
        for p in sorted(root.rglob("*.py")):
            if "__pycache__" not in p.parts:
                out[p.relative_to(site).as_posix()] = p.read_text(encoding="utf-8", errors="replace")
    return out


def read_release(version: str) -> tuple[dict[str, str], str]:
    kind, ref = SOURCES[version]
    if kind == "git":
        import upstream_sources as up
        repo = up.mirror()
        if repo is None:
            raise SystemExit(f"build_release_index: {version} needs the git mirror (tag {ref}); "
                             "set MEGATRON_LM_MIRROR")
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", f"{ref}^{{commit}}"],
                             capture_output=True, text=True, check=True).stdout.strip()
        return git_files(repo, ref), f"git tag {ref} ({sha[:12]})"
    return wheel_files(ref), f"PyPI wheel megatron-core=={ref}"


def compile_files(version: str, files: dict[str, str], source: str) -> dict:
    """One release's data: names, signatures, fields, flags and messages (dev/release_ast.py), and
    the behaviour facts (dev/release_behaviour.py: watched function bodies, flag reads)."""
    rel = release_ast.compile_release(version, files, source)
    rel.update(release_behaviour.extract(files, rel["flags"]))
    return rel


def compile_version(version: str) -> dict:
    files, source = read_release(version)
    return compile_files(version, files, source)


def build(out: Path, only: list[str] | None = None) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    times = {}
    releases = []
    for v in RELEASES:
        t0 = time.perf_counter()
        if only and v not in only and data.release_file(v, out).exists():
            rel = data.read(data.release_file(v, out))
        else:
            rel = compile_version(v)
            data.release_file(v, out).write_bytes(data.dumps(rel))
        times[v] = time.perf_counter() - t0
        releases.append(rel)
    t0 = time.perf_counter()
    ev = derive.derive(releases)
    data.events_file(out).write_bytes(data.dumps({"schema": data.SCHEMA, "releases": list(RELEASES), **ev}))
    times["events"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    patches.patches_file(out).write_bytes(data.dumps(build_patches(releases, ev["events"])))
    times["patches"] = time.perf_counter() - t0
    return times


def earlier_tags(repo: Path, version: str) -> list[str]:
    """The released (not rc) tags of version's minor line before it, oldest first: core_v0.15.0 ... 0.15.2."""
    major, minor, patch = (int(x) for x in version.split("."))
    tags = subprocess.run(["git", "-C", str(repo), "tag", "-l", f"core_v{major}.{minor}.*"],
                          capture_output=True, text=True, check=True).stdout.split()
    out = []
    for t in tags:
        rest = t[len("core_v"):].split(".")
        if len(rest) == 3 and rest[2].isdigit() and int(rest[2]) < patch:
            out.append((int(rest[2]), t))
    return [t for _, t in sorted(out)]


def build_patches(releases: list[dict], events: dict, only: list[str] | None = None) -> dict:
    """For each event of a tracked kind at an indexed release X.Y.Z, the earliest tag X.Y.k (k <= Z)
    from which every tag up to X.Y.Z has the same state of the name (release_index.patches)."""
    import upstream_sources as up
    repo = up.mirror()
    if repo is None:
        raise SystemExit("build_release_index: the patch data needs the git mirror; set MEGATRON_LM_MIRROR")
    since: dict[str, dict[str, str]] = {}
    tags: dict[str, list[str]] = {}
    for rel in releases[1:]:
        v = rel["version"]
        if only and v not in only:
            continue
        keys = [k for k, evs in events.items() if any(e[0] == v and e[1] in patches.TRACKED for e in evs)]
        earlier = earlier_tags(repo, v)
        if not earlier or not keys:
            continue
        tags[v] = [t[len("core_v"):] for t in earlier]
        cat, tg = derive._catalog(rel), derive._targets(rel)
        want = {k: patches.state(rel, cat, tg, k) for k in keys}
        first = {k: v for k in keys}
        open_keys = set(keys)  # still the same state in every tag after the one being compared
        for tag in reversed(earlier):
            old = release_ast.compile_release(tag[len("core_v"):], git_files(repo, tag), f"git tag {tag}")
            ocat, otg = derive._catalog(old), derive._targets(old)
            for k in list(open_keys):
                if patches.state(old, ocat, otg, k) == want[k]:
                    first[k] = tag[len("core_v"):]
                else:
                    open_keys.discard(k)
        for k, t in first.items():
            if t != v:
                since.setdefault(k, {})[v] = t
    return {"schema": data.SCHEMA, "since": since, "tags": tags}


def _patch_entries(pdata: dict, versions: list[str]) -> dict:
    return {v: ({k: s[v] for k, s in sorted(pdata["since"].items()) if v in s}, pdata["tags"].get(v))
            for v in versions}


def check_sample(versions: list[str], shipped: Path) -> list[str]:
    """Names of the shipped data that differ from a fresh compile of ``versions``: their release
    files and their entries of the patch data (derived against the shipped events)."""
    stale, fresh = [], {}
    for v in versions:
        fresh[v] = compile_version(v)
        if data.dumps(fresh[v]) != data.release_file(v, shipped).read_bytes():
            stale.append(data.release_file(v, shipped).name)
    releases = [fresh.get(v) or data.read(data.release_file(v, shipped)) for v in RELEASES]
    events = data.read(data.events_file(shipped))["events"]
    got = _patch_entries(build_patches(releases, events, only=versions), versions)
    want = _patch_entries(data.read(patches.patches_file(shipped)), versions)
    stale += [f"{patches.patches_file(shipped).name} ({v})" for v in versions if got[v] != want[v]]
    return stale


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=data.DATA_DIR)
    ap.add_argument("--only", nargs="*", help="recompile only these releases (others are read from --out)")
    ap.add_argument("--check", action="store_true", help="rebuild in a temp dir; exit 1 if shipped files differ")
    args = ap.parse_args(argv)
    os.environ.setdefault("MEGATRON_WHEEL_CACHE", str(REPO / ".cache" / "wheels"))
    if args.check and args.only:
        unknown = [v for v in args.only if v not in RELEASES]
        if unknown:
            ap.error(f"--only: not an indexed release: {', '.join(unknown)} (releases: {', '.join(RELEASES)})")
        stale = check_sample(args.only, args.out)
        print("stale: " + ", ".join(stale) if stale else f"release index is up to date for {', '.join(args.only)}")
        return 1 if stale else 0
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp))
            stale = [p.name for p in sorted(Path(tmp).iterdir())
                     if not (args.out / p.name).is_file() or (args.out / p.name).read_bytes() != p.read_bytes()]
        print("stale: " + ", ".join(stale) if stale else "release index is up to date")
        return 1 if stale else 0
    t0 = time.perf_counter()
    times = build(args.out, args.only)
    total = sum(p.stat().st_size for p in args.out.glob("*.json.gz"))
    print(" ".join(f"{k}={t:.1f}s" for k, t in times.items()))
    print(f"built {args.out} in {time.perf_counter() - t0:.1f}s, {total / 1e6:.2f} MB "
          f"(budget {SIZE_BUDGET / 1e6:.1f} MB)")
    return 0 if total <= SIZE_BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())

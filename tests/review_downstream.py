"""The reviewer on real downstream code (issue 20): the frozen corpus
(tests/data/review_downstream_corpus.json: repository, commit, path, target release) read
from the fetch mirrors, reviewed at each file's target release and at 0.19.2, and checked
against an oracle that imports and binds signatures for real in the release's environment
(tests/review_oracle_child.py run by .venv, .venv-0161 or .venv-0131).

  .venv/bin/python tests/review_downstream.py [--oracle] [--json OUT]

Nothing here is committed from the downstream projects: files are read with ``git show``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

CORPUS = REPO / "tests" / "data" / "review_downstream_corpus.json"
MIRRORS = Path(os.environ.get("DOWNSTREAM_MIRRORS", "/work/.mirror"))
AT = "0.19.2"


def python_of(release):
    """The interpreter of ``release`` (a real megatron-core, CPU, no TE; built on first use, once
    across parallel workers), or None where this machine cannot build it."""
    import old_envs
    return old_envs.python_or_reason(release)[0] if release in old_envs.RELEASES else None


CHILD = REPO / "tests" / "review_oracle_child.py"


def all_fields():
    """TransformerConfig's fields in every indexed release (the release index): a read of one
    of these that a release lacks is a removed or not-yet-added field."""
    import release_index
    out = set()
    for version in release_index.RELEASES:
        rel = release_index.load(version)
        out |= {f["name"] for f in rel.fields(
            "megatron.core.transformer.transformer_config:TransformerConfig") or []}
    return out


def corpus():
    return json.loads(CORPUS.read_text())["files"]


def key(entry):
    return f"{entry['repo']}@{entry['commit'][:10]}:{entry['path']}"


def read(entry):
    """The file's text at its commit, or None without the mirror."""
    git = MIRRORS / entry["repo"].replace("/", "+") / "repo"
    if not git.is_dir():
        return None
    out = subprocess.run(["git", "-C", str(git), "show", f"{entry['commit']}:{entry['path']}"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout if out.returncode == 0 else None


def releases_of(entry):
    import release_index
    target, _ = release_index.resolve_version(entry["target"])
    return [target] + ([AT] if target != AT else [])


def review_all(entries=None, has_te=False):
    """{(key, release): [finding dict]} for every readable corpus file."""
    import release_index
    from model_review import releases, source
    from model_review.review import review_sources
    views, out = {}, {}
    for entry in entries or corpus():
        text = read(entry)
        if text is None:
            continue
        src = source.parse(text, key(entry))
        for rel in releases_of(entry):
            if rel not in views:
                views[rel] = releases.View(release_index, rel)
            found = review_sources([src], rel, views[rel], release_index, has_te=has_te)
            out[(key(entry), rel)] = [f.to_dict() for f in found]
    return out


def oracle_all(entries=None):
    """{(key, release): [break dict]} from the real environments that exist here."""
    by_rel = collections.defaultdict(list)
    for entry in entries or corpus():
        text = read(entry)
        if text is None:
            continue
        for rel in releases_of(entry):
            if python_of(rel):
                by_rel[rel].append({"key": key(entry), "text": text})
    child = REPO / "tests" / "review_oracle_child.py"
    # TransformerConfig's attributes in every environment: a read of one that another release
    # has is a removed (or not yet added) field, not some other object's attribute.
    fields = {}
    import old_envs
    for rel in old_envs.RELEASES:
        py = python_of(rel)
        if py:
            proc = subprocess.run([str(py), str(child)], input=json.dumps({"fields_only": True}),
                                  capture_output=True, text=True, timeout=300)
            fields[rel] = set(json.loads(proc.stdout))
    elsewhere = sorted(set().union(*fields.values()))
    out = {}
    for rel, items in by_rel.items():
        proc = subprocess.run([str(python_of(rel)), str(child)],
                              input=json.dumps({"items": items, "elsewhere": elsewhere}),
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"oracle at {rel}: {proc.stderr[-2000:]}")
        for k, breaks in json.loads(proc.stdout).items():
            out[(k, rel)] = breaks
    return out


KIND_RULES = {  # oracle kind -> reviewer rules that report it
    "import": ("unresolved-import",),
    "attribute": ("removed-attribute", "unresolved-import"),
    "signature": ("unknown-keyword", "removed-keyword", "missing-required", "too-many-positional"),
    "config-field": ("config-field",),
    "positional": ("positional-mismatch",),
    "global-group": ("global-process-group",),
    "deprecated-module": ("deprecated-module",),
    "deprecated": ("deprecated-keyword", "gptmodel-deprecated", "mambamodel-deprecated",
                   "deprecated-subclass"),
}


def _on(finding, brk):
    """The finding sits on the break: within the call, or on the line of a ** dict's key."""
    return brk["line"] <= finding["line"] <= brk.get("end", brk["line"]) or \
        finding["line"] in brk.get("also", [])


def match(findings, breaks):
    """(reported breaks, missed breaks): a break is reported when a finding of a rule for its
    kind sits on its line (an error or warning)."""
    hit, missed = [], []
    for (k, rel), bs in breaks.items():
        fs = findings.get((k, rel), [])
        for b in bs:
            rules = KIND_RULES[b["kind"]]
            ok = any(_on(f, b) and f["rule"].split(".")[0] in rules and
                     f["severity"] in ("error", "warning") for f in fs)
            (hit if ok else missed).append((k, rel, b))
    return hit, missed


def precision(found, breaks):
    """Counter of (rule, severity, verdict) for error and warning findings: 'confirmed' when an
    oracle break of its kind lies on its line at the same release, else 'unconfirmed' (a rule
    the oracle cannot judge, or a false finding: classified by hand in the closing note)."""
    out = collections.Counter()
    for (k, rel), fs in found.items():
        bs = breaks.get((k, rel))
        for f in fs:
            if f["severity"] not in ("error", "warning"):
                continue
            if bs is None:
                verdict = "no-oracle"
            else:
                rule = f["rule"].split(".")[0]
                verdict = "confirmed" if any(
                    rule in KIND_RULES[b["kind"]] and _on(f, b)
                    for b in bs) else "unconfirmed"
            out[(f["rule"], f["severity"], verdict)] += 1
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle", action="store_true", help="also run the real-import oracle")
    ap.add_argument("--json", metavar="OUT", help="write the findings (and breaks) here")
    args = ap.parse_args(argv)
    found = review_all()
    by = collections.Counter()
    for (k, rel), fs in found.items():
        for f in fs:
            by[(rel == AT and "at 0.19.2" or "at target", f["severity"], f["rule"])] += 1
    files = {k for k, _ in found}
    print(f"{len(files)} files, {len({k.split('@')[0] for k in files})} projects")
    for (where, sev, rule), n in sorted(by.items()):
        print(f"  {where:10} {sev:8} {rule:28} {n}")
    data = {"findings": {f"{k}|{rel}": v for (k, rel), v in found.items()}}
    if args.oracle:
        breaks = oracle_all()
        data["breaks"] = {f"{k}|{rel}": v for (k, rel), v in breaks.items()}
        hit, missed = match(found, breaks)
        print(f"oracle: {len(hit) + len(missed)} breaks, {len(hit)} reported, {len(missed)} missed")
        for (rule, sev, verdict), n in sorted(precision(found, breaks).items()):
            print(f"  {sev:8} {rule:28} {verdict:12} {n}")
        for k, rel, b in missed:
            print(f"  missed {k} {rel}:{b['line']} {b['kind']} {b['name']} ({b['detail'][:80]})")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))


if __name__ == "__main__":
    main()

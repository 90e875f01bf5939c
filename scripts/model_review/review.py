"""Run every rule over files and assemble the ``--json`` object."""

from __future__ import annotations

import os
import sys

from . import SCHEMA_VERSION, checks_imports, releases, source
from .context import Ctx
from .rules import RULES

MAX_FILE_BYTES = 5_000_000
SUFFIX = ".py"


class BadInput(Exception):
    """One line for the user: an unreadable path, a file that does not parse, a bad version."""


def _files(paths):
    for p in paths:
        if p == "-":
            yield "-"
        elif os.path.isdir(p):
            found = False
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in sorted(names):
                    if n.endswith(SUFFIX):
                        found = True
                        yield os.path.join(root, n)
            if not found:
                raise BadInput(f"{p}: no {SUFFIX} files under this directory (nothing to review)")
        elif os.path.exists(p):
            yield p
        else:
            raise BadInput(f"{p}: no such file or directory")


def _read(path):
    if path == "-":
        return sys.stdin.read()
    try:
        if os.path.getsize(path) > MAX_FILE_BYTES:
            raise BadInput(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read: {exc}") from None


def review_sources(sources, version, view, index, rule_ids=None, has_te=None, target_te=None):
    findings = []
    for rule in RULES:
        if rule_ids is not None and rule.id not in rule_ids:
            continue
        for src in sources:
            ctx = Ctx(src, version, view, index, has_te, target_te)
            ctx.rule = rule
            findings.extend(rule.check(ctx))
    findings.sort(key=lambda f: (f.path, f.line, f.rule))
    return findings


def summary(findings, n_files):
    by_rule = {}
    for f in findings:
        by_rule[f.rule] = by_rule.get(f.rule, 0) + 1
    count = lambda sev: sum(1 for f in findings if f.severity == sev)  # noqa: E731
    return {"files": n_files, "errors": count("error"), "warnings": count("warning"),
            "infos": count("info"), "by_rule": dict(sorted(by_rule.items()))}


def environment(sources, version, view, index, has_te=None, target_te=None):
    """Facts about this machine that bear on the code, once per run (not findings about the
    code): Transformer Engine absent while the code uses TE-only names.  Nothing when the
    user declared the target (--target-te)."""
    if target_te is not None:
        return []
    ctx = Ctx(sources[0], version, view, index, has_te) if sources else None
    if ctx is None or ctx.has_te:
        return []
    uses = []
    for src in sources:
        c = Ctx(src, version, view, index, has_te)
        uses += [f"{src.path}:{line}" for line in checks_imports.te_uses(c)]
    if not uses:
        return []
    return [{
        "fact": "transformer-engine-not-installed",
        "message": f"Transformer Engine is not installed on this machine; {len(uses)} import(s) "
                   f"of TE-only names (first: {uses[0]}) import here but their modules fail "
                   f"when built (te is a MagicMock from 0.13.1 on)",
        "fix": "declare the target with --target-te installed or --target-te absent (absent: "
               "one te-placeholder warning per import); " + checks_imports.LOCAL_FIX,
        "where": uses[:20],
    }]


def review_paths(paths, version=None, index=None, rule_ids=None, has_te=None, target_te=None):
    if index is None:
        index = releases.load_index()
    try:
        chosen, how = releases.resolve(version, index)
    except ValueError as exc:
        raise BadInput(str(exc).splitlines()[0]) from None
    try:
        view = releases.View(index, chosen)
    except Exception as exc:  # noqa: BLE001 (a broken or missing index file: one line, exit 2)
        raise BadInput(f"the release index cannot be read: {exc}".splitlines()[0]) from None
    sources = []
    for path in _files(paths):
        try:
            sources.append(source.parse(_read(path), "<stdin>" if path == "-" else path))
        except source.ParseError as exc:
            raise BadInput(str(exc)) from None
    if sources and not any(src.text.strip() for src in sources):
        raise BadInput("nothing to review: every given file is empty ("
                       + ", ".join(src.path for src in sources[:3])
                       + (", ..." if len(sources) > 3 else "") + ")")
    findings = review_sources(sources, chosen, view, index, rule_ids, has_te, target_te)
    return {
        "schema_version": SCHEMA_VERSION,
        "megatron_version": {"version": chosen, "source": how},
        "findings": [f.to_dict() for f in findings],
        "summary": summary(findings, len(sources)),
        "environment": environment(sources, chosen, view, index, has_te, target_te)
        if rule_ids is None or "te-placeholder" in rule_ids else [],
    }

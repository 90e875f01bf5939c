#!/usr/bin/env python3
"""Compile the Megatron-LM entry scripts that add their own arguments into
scripts/parallel_layout/entries.json (read by check_parallel_layout.py --entry).

For each script at the given tag of the Megatron-LM git mirror that passes an
``extra_args_provider`` to ``pretrain``/``parse_and_validate_args``/``parse_args``,
the provider function is found (in the script, or in the module it imports it
from) and every ``add_argument`` option string it reaches (following calls to
functions of the same modules) is recorded.  Read with ``git show``, parsed
with ``ast``; nothing is imported or run.

  .venv/bin/python dev/build_layout_entries.py [--repo DIR] [--tag core_v0.19.0] [--check]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import posixpath
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "scripts", "parallel_layout", "entries.json")
MIRROR = os.environ.get("MEGATRON_LM_MIRROR", "/work/.mirror/NVIDIA+Megatron-LM/repo")
TAG = "core_v0.19.0"
CALLERS = {"pretrain", "parse_and_validate_args", "parse_args", "initialize_megatron"}
VALUELESS = {"store_true", "store_false", "store_const", "count", "help", "version"}


class Repo:
    def __init__(self, path, tag):
        self.path, self.tag = path, tag
        self.commit = self.git("rev-parse", f"{tag}^{{commit}}").strip()
        self.files = set(self.git("ls-tree", "-r", "--name-only", self.commit).split("\n"))
        self._trees = {}

    def git(self, *args):
        return subprocess.run(["git", "-C", self.path, *args], capture_output=True, text=True,
                              check=True).stdout

    def tree(self, path):
        if path not in self._trees:
            self._trees[path] = ast.parse(self.git("show", f"{self.commit}:{path}"))
        return self._trees[path]


def _name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def provider_names(tree):
    """Names passed as extra_args_provider= (either branch of a conditional);
    (None, None) for a ``pretrain(...)`` call without one."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "pretrain" and not any(
                kw.arg == "extra_args_provider" for kw in node.keywords):
            out.append((None, None))
        if isinstance(node, ast.Call) and _name(node.func) in CALLERS:
            for kw in node.keywords:
                if kw.arg != "extra_args_provider":
                    continue
                value, condition = kw.value, None
                if isinstance(value, ast.IfExp):
                    condition = ast.unparse(value.test)
                    value = value.body
                if isinstance(value, ast.Name):
                    out.append((value.id, condition))
    return out


def resolve(repo, path, name, seen=None):
    """(module path, FunctionDef) for ``name`` as seen from ``path``."""
    tree = repo.tree(path)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return path, node
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and \
                any((a.asname or a.name) == name for a in node.names):
            real = next(a.name for a in node.names if (a.asname or a.name) == name)
            base = node.module.replace(".", "/")
            here = posixpath.dirname(path)
            for candidate in (posixpath.join(here, base + ".py"), base + ".py",
                              posixpath.join(here, base, "__init__.py"), base + "/__init__.py"):
                if candidate in repo.files:
                    return resolve(repo, candidate, real)
    return None


def options(repo, path, func, seen):
    """{option: takes_value} of every add_argument reachable from ``func``."""
    key = (path, func.name)
    if key in seen:
        return {}
    seen.add(key)
    out = {}
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        if _name(node.func) == "add_argument":
            action = next((kw.value.value for kw in node.keywords if kw.arg == "action"
                           and isinstance(kw.value, ast.Constant)), None)
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                        and arg.value.startswith("-"):
                    out[arg.value] = action not in VALUELESS
        elif isinstance(node.func, ast.Name):
            found = resolve(repo, path, node.func.id)
            if found:
                out.update(options(repo, found[0], found[1], seen))
    return out


def build(repo):
    entries = {}
    for path in sorted(p for p in repo.files if p.endswith(".py") and
                       not p.startswith(("megatron/training/", "tests/unit_tests/"))):
        try:
            source = repo.git("show", f"{repo.commit}:{path}")
        except subprocess.CalledProcessError:
            continue
        if "extra_args_provider" not in source and "pretrain(" not in source:
            continue
        try:
            tree = repo.tree(path)
        except SyntaxError:
            continue
        for name, condition in provider_names(tree):
            if name is None:
                entries.setdefault(path, {"provider": None, "condition": None, "flags": {}})
                continue
            found = resolve(repo, path, name)
            if found is None:
                continue
            flags = options(repo, found[0], found[1], set())
            entries[path] = {"provider": f"{found[0]}:{name}", "condition": condition,
                             "flags": dict(sorted(flags.items()))}
    return {"schema_version": 1, "repo": "NVIDIA/Megatron-LM", "tag": repo.tag,
            "commit": repo.commit, "generator": "dev/build_layout_entries.py",
            "entries": entries}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=MIRROR)
    parser.add_argument("--tag", default=TAG)
    parser.add_argument("--check", action="store_true", help="exit 1 if the JSON is stale")
    args = parser.parse_args(argv)
    text = json.dumps(build(Repo(args.repo, args.tag)), indent=1) + "\n"
    if args.check:
        with open(OUT) as fh:
            return 0 if fh.read() == text else 1
    with open(OUT, "w") as fh:
        fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

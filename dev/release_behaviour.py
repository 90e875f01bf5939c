"""Behaviour facts of one release, read with ``ast`` beside dev/release_ast.py's names and messages.

- ``bodies``: for each function and method of the watched modules (``release_index.derive.BODY_WATCH``:
  the memory estimator, the microbatch calculator, the pipeline layout parser), one short hash per
  line of its body as ``ast.unparse`` prints it (docstring dropped, so only code counts; comments
  and formatting never do). Two releases' lists give which lines changed.
- ``reads``: for each Megatron-LM flag's ``dest``, how many places in megatron/core and
  megatron/training may read it: an attribute load ``x.dest``, or the name as a string constant
  anywhere (``getattr(x, "dest")``, ``x["dest"]``, a tuple of names looped over). Counting every string
  errs towards "read": a deprecated flag whose count falls to 0 is parsed and then ignored.
"""

from __future__ import annotations

import ast
import hashlib
import warnings

from release_index.derive import BODY_WATCH


def _module(path: str) -> str:
    mod = path[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def _line_hashes(fn: ast.AST) -> list[str]:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    out = []
    for st in body:
        for line in ast.unparse(st).splitlines():
            out.append(hashlib.sha1(line.strip().encode("utf-8")).hexdigest()[:8])
    return out


def _defs(tree: ast.Module):
    """(qualname, node) of top-level functions and of methods of top-level classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{st.name}", st


def bodies(files: dict[str, str]) -> dict[str, list[str]]:
    out = {}
    for path in sorted(BODY_WATCH):
        text = files.get(path)
        if text is None:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for qual, node in _defs(tree):
            out[f"{_module(path)}:{qual}"] = _line_hashes(node)
    return out


def reads(files: dict[str, str], dests: set[str]) -> dict[str, int]:
    counts = dict.fromkeys(sorted(dests), 0)
    for path in sorted(files):
        if not path.endswith(".py"):
            continue
        with warnings.catch_warnings():  # invalid escapes in Megatron's strings are not ours to report
            warnings.simplefilter("ignore")
            try:
                tree = ast.parse(files[path])
            except SyntaxError:
                continue
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                name = node.attr
            elif isinstance(node, ast.Constant):
                name = node.value
            if isinstance(name, str) and name in counts:
                counts[name] += 1
    return counts


def extract(files: dict[str, str], flags: dict | None) -> dict:
    dests = {rec.get("dest") for rec in (flags or {}).values() if rec.get("dest")}
    return {"bodies": bodies(files), "reads": reads(files, dests)}

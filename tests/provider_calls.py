"""Which keywords Megatron-LM's get_model passes to a model provider, and which a provider file cannot take.

Standard library only (ast): the installed megatron/training/training.py is parsed, never imported, so
the fast contract tests can check a provider's signature against the release that calls it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

TRAINING = "megatron/training/training.py"


def installed(path: str = TRAINING) -> Path | None:
    """The installed file at `path` (relative to site-packages), found on sys.path without importing it."""
    for entry in sys.path:
        candidate = Path(entry or ".") / path
        if candidate.is_file():
            return candidate
    return None


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    found = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    if len(found) != 1:
        raise LookupError(f"expected one def {name}, found {len(found)}")
    return found[0]


def call_keywords(source: str, function: str = "get_model", callee: str = "model_provider_func") -> list[str]:
    """Every keyword passed in calls `callee(...)` anywhere inside `function` (nested defs included)."""
    body = _function(ast.parse(source), function)
    calls = [n for n in ast.walk(body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == callee]
    if not calls:
        raise LookupError(f"no call to {callee} in {function}")
    if any(k.arg is None for c in calls for k in c.keywords):
        raise LookupError(f"{function} passes **kwargs to {callee}: the keywords cannot be read statically")
    return sorted({k.arg for c in calls for k in c.keywords})


def unaccepted(source: str, keywords: list[str], function: str = "model_provider") -> list[str]:
    """The keywords that `function` (defined in `source`) cannot accept; [] when it takes **kwargs."""
    args = _function(ast.parse(source), function).args
    if args.kwarg is not None:
        return []
    named = {a.arg for a in args.args + args.kwonlyargs}  # positional-only parameters cannot take keywords
    return sorted(set(keywords) - named)

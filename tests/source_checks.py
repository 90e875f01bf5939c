"""The checks in Megatron source, found with ``ast``: every raise, assert, warning and logged error.

A :class:`Check` records where it is (file, function, line), its kind (``raise``,
``assert``, ``warn``, ``log`` or ``call`` for a call to a checking helper such as
``ensure_divisibility``), its message template (fixed text, ``{}`` for each variable part)
and the names it reads: attribute names (``self.config.sequence_parallel`` reads
``sequence_parallel``), plain names, and environment-variable names (string constants in
upper case, e.g. ``os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")``). A check reads what its
own expressions read plus the tests of every ``if``/``while`` around it in its function, so
``if not sp: warnings.warn("...")`` reads ``sp``.

Used by tests/test_troubleshooting_absence.py (claims that Megatron does not check
something) and tests/test_troubleshooting.py (older wordings of a message).
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

# Method names that emit a warning or an error through logging or warnings.
WARN_METHODS = {"warn", "warning", "error", "critical", "exception", "warn_once"}
# Rank-0 relays: their message argument index.
RELAY_FUNCTIONS = {"warn_rank_0": 0, "log_single_rank": 2, "log_on_each_pipeline_stage": 2,
                   "print_rank_0": None}
LOG_LEVELS = {"WARNING", "ERROR", "CRITICAL", "WARN"}
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{3,}$")
# An environment variable named inside a message ("set CUDA_DEVICE_MAX_CONNECTIONS to 1") makes
# the check about that variable even when its condition reads something else.
ENV_IN_TEXT = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")


@dataclass(frozen=True)
class Check:
    file: str
    function: str
    line: int
    kind: str
    message: str
    reads: frozenset

    def where(self) -> str:
        return f"{self.file}:{self.function}:{self.line}"


def template(node: ast.AST | None) -> str:
    """Fixed text of a message expression, '{}' where it varies."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(template(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left) + template(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return re.sub(r"%[-#0 +]*\d*(?:\.\d+)?[sdrfige]", "{}", template(node.left))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"):
        return re.sub(r"\{[^{}]*\}", "{}", template(node.func.value))
    return "{}"


def names_read(node: ast.AST | None) -> set[str]:
    out: set[str] = set()
    if node is None:
        return out
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            if ENV_NAME.match(n.value):
                out.add(n.value)
            out.update(ENV_IN_TEXT.findall(n.value))
    return out


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _emitting_call(call: ast.Call) -> tuple[str, ast.AST | None] | None:
    """('warn'|'log', message node) when the call emits a warning or error, else None."""
    name = _callee(call)
    if name in RELAY_FUNCTIONS:
        idx = RELAY_FUNCTIONS[name]
        if name in ("log_single_rank", "log_on_each_pipeline_stage"):
            level = call.args[1] if len(call.args) > 1 else None
            if not (isinstance(level, ast.Attribute) and level.attr in LOG_LEVELS):
                return None
        elif idx is None:
            return None
        return "log", call.args[idx] if idx is not None and len(call.args) > idx else None
    if isinstance(call.func, ast.Attribute) and name in WARN_METHODS:
        recv = call.func.value
        recv_name = recv.id if isinstance(recv, ast.Name) else recv.attr if isinstance(recv, ast.Attribute) else ""
        kind = "warn" if recv_name == "warnings" else "log"
        if kind == "log" and not re.search(r"log|LOG", recv_name):
            return None
        return kind, call.args[0] if call.args else None
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, file: str, helpers: frozenset[str]):
        self.file, self.helpers = file, helpers
        self.func: list[str] = []
        self.guards: list[ast.AST] = []
        self.checks: list[Check] = []

    def _add(self, node, kind, message_node, *exprs):
        reads = set()
        for e in (*exprs, *self.guards):
            reads |= names_read(e)
        self.checks.append(Check(self.file, ".".join(self.func) or "<module>", node.lineno, kind,
                                 template(message_node), frozenset(reads)))

    def _scoped(self, node):
        self.func.append(node.name)
        saved, self.guards = self.guards, []
        self.generic_visit(node)
        self.guards = saved
        self.func.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scoped

    def _guarded(self, node):
        self.visit(node.test)
        self.guards.append(node.test)
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        self.guards.pop()

    visit_If = visit_While = _guarded

    def visit_Raise(self, node):
        msg = None
        if isinstance(node.exc, ast.Call) and node.exc.args:
            msg = node.exc.args[0]
        self._add(node, "raise", msg, node.exc)
        self.generic_visit(node)

    def visit_Assert(self, node):
        self._add(node, "assert", node.msg, node.test, node.msg)
        self.generic_visit(node)

    def visit_Call(self, node):
        emitting = _emitting_call(node)
        if emitting:
            self._add(node, emitting[0], emitting[1], *node.args, *[k.value for k in node.keywords])
        elif _callee(node) in self.helpers:
            self._add(node, "call:" + _callee(node), None, *node.args)
        self.generic_visit(node)


def checks_in_source(src: str, file: str, helpers: frozenset[str] = frozenset()) -> list[Check]:
    v = _Visitor(file, helpers)
    v.visit(ast.parse(src))
    return v.checks


@functools.lru_cache(maxsize=None)
def installed_checks(site: Path, packages: tuple[str, ...], helpers: frozenset[str]) -> tuple[Check, ...]:
    out: list[Check] = []
    for pkg in packages:
        for path in sorted((site / pkg).rglob("*.py")):
            rel = path.relative_to(site).as_posix()
            out.extend(checks_in_source(path.read_text(encoding="utf-8"), rel, helpers))
    return tuple(out)


def messages(src: str) -> list[str]:
    """Message templates of every check in a source text (for older wordings)."""
    return [c.message for c in checks_in_source(src, "") if c.message.strip("{} ")]

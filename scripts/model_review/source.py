"""What a reviewed file contains, read with ``ast`` (the code is never imported or run).

``parse(text, path)`` returns a ``Source``: the file's imports (local name -> dotted
origin), every call with the dotted name it resolves to through those imports, its
literal keyword values and the enclosing class and function, and the classes and
functions themselves.  Rules read only this record.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Optional


class ParseError(Exception):
    """The file is not Python this interpreter can parse (message names the line)."""


@dataclasses.dataclass
class Import:
    local: str        # name bound in the file ("GPTModel", "mpu")
    origin: str       # "megatron.core.models.gpt:GPTModel" or "megatron.core.parallel_state" (module)
    module: str       # the module named in the statement
    name: Optional[str]  # the imported name (None for "import a.b")
    line: int


@dataclasses.dataclass
class Call:
    target: Optional[str]   # resolved dotted name: "megatron.core.models.gpt:GPTModel" / "mod.attr"
    text: str               # the callee as written ("GPTModel", "parallel_state.get_tp_group")
    line: int
    col: int
    kwargs: dict            # keyword -> ast node
    kw_lines: dict          # keyword -> line
    n_positional: int
    has_star_args: bool
    has_star_kwargs: bool
    func: Optional["Function"]
    cls: Optional["Class"]
    node: ast.Call

    def literal(self, name, default=None):
        """The keyword's value when it is a literal (number, string, bool, None, tuple...)."""
        node = self.kwargs.get(name)
        return default if node is None else literal(node, default)

    def literal_kwargs(self):
        out = {}
        for name in self.kwargs:
            sentinel = object()
            value = self.literal(name, sentinel)
            if value is not sentinel:
                out[name] = value
        return out


@dataclasses.dataclass
class Function:
    name: str
    params: list
    line: int
    cls: Optional["Class"]


@dataclasses.dataclass
class Class:
    name: str
    bases: list   # resolved dotted names (or the text when unresolved)
    line: int


@dataclasses.dataclass
class Source:
    path: str
    text: str
    imports: list
    calls: list
    functions: list
    classes: list
    tree: ast.AST = dataclasses.field(repr=False, default=None)
    cache: dict = dataclasses.field(repr=False, default_factory=dict)  # per-file results rules share

    def calls_to(self, *targets):
        wanted = set(targets)
        return [c for c in self.calls if c.target in wanted]


def parse(text: str, path: str) -> Source:
    try:
        tree = ast.parse(text, filename=path)
    except SyntaxError as exc:
        raise ParseError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        raise ParseError(f"{path}: does not parse: {exc}") from None
    v = _Visitor()
    v.visit(tree)
    return Source(path, text, v.imports, v.calls, v.functions, v.classes, tree)


def literal(node_or_text, default=None):
    """ast.literal_eval of a node or source text, or ``default`` when it is not a literal."""
    try:
        return ast.literal_eval(node_or_text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return default


def dotted(node) -> Optional[str]:
    """'a.b.c' for Name/Attribute chains, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self):
        self.imports, self.calls, self.functions, self.classes = [], [], [], []
        self.scope = {}          # local name -> origin (file-wide; later imports win)
        self.func = None
        self.cls = None

    # Imports bind names for the rest of the file; function-local imports are common in
    # providers, so they are file-wide here too.
    def visit_Import(self, node):
        for a in node.names:
            local = a.asname or a.name.split(".")[0]
            origin = a.name if a.asname else a.name.split(".")[0]
            self.imports.append(Import(local, a.name if a.asname else origin, a.name, None,
                                       node.lineno))
            self.scope[local] = a.name if a.asname else origin

    def visit_ImportFrom(self, node):
        if node.level:  # relative imports belong to the user's own package
            return
        for a in node.names:
            if a.name == "*":
                continue
            origin = f"{node.module}:{a.name}"
            self.imports.append(Import(a.asname or a.name, origin, node.module, a.name,
                                       node.lineno))
            self.scope[a.asname or a.name] = origin

    def resolve(self, node) -> Optional[str]:
        text = dotted(node)
        if text is None:
            return None
        head, _, rest = text.partition(".")
        origin = self.scope.get(head)
        if origin is None:
            return None
        if not rest:
            return origin
        if ":" in origin:  # an imported object's attribute, or a submodule of an imported name
            return origin.replace(":", ".") + "." + rest
        return origin + "." + rest

    def visit_ClassDef(self, node):
        bases = [self.resolve(b) or dotted(b) or "" for b in node.bases]
        cls = Class(node.name, bases, node.lineno)
        self.classes.append(cls)
        outer, self.cls = self.cls, cls
        outer_func, self.func = self.func, None
        self.generic_visit(node)
        self.cls, self.func = outer, outer_func

    def _function(self, node):
        a = node.args
        params = [p.arg for p in a.posonlyargs + a.args + a.kwonlyargs]
        fn = Function(node.name, params, node.lineno, self.cls)
        self.functions.append(fn)
        outer, self.func = self.func, fn
        self.generic_visit(node)
        self.func = outer

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_Call(self, node):
        kwargs, kw_lines, star_kw = {}, {}, False
        for k in node.keywords:
            if k.arg is None:
                star_kw = True
            else:
                kwargs[k.arg] = k.value
                kw_lines[k.arg] = k.value.lineno
        star_args = any(isinstance(a, ast.Starred) for a in node.args)
        n_pos = sum(1 for a in node.args if not isinstance(a, ast.Starred))
        self.calls.append(Call(_canonical(self.resolve(node.func)), dotted(node.func) or "",
                               node.lineno, node.col_offset, kwargs, kw_lines, n_pos,
                               star_args, star_kw, self.func, self.cls, node))
        self.generic_visit(node)


def _canonical(target):
    """'a.b.C' (module attribute) -> 'a.b:C' when the last part looks like an object
    (the release index names objects 'module:Name')."""
    if target is None or ":" in target:
        if target and target.count(":") == 1:
            mod, _, rest = target.partition(":")
            if "." in rest:  # "pkg:mod.Name" from "from pkg import mod; mod.Name(...)"
                head, _, tail = rest.rpartition(".")
                return f"{mod}.{head}:{tail}"
        return target
    mod, _, name = target.rpartition(".")
    return f"{mod}:{name}" if mod else target

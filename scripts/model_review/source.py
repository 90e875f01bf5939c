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
    # Keywords that reach the call through ``**name`` where ``name`` is a dict built in the
    # same function (or module): keyword -> line of the key.  splat_known: every ``**`` was
    # read that way, so the call's keywords are all known.
    splat: dict = dataclasses.field(default_factory=dict)
    splat_values: dict = dataclasses.field(default_factory=dict)  # keyword -> ast value node
    splat_known: bool = True
    via_super: bool = False  # super().__init__(...) inside a class with a megatron base

    def all_values(self):
        """keyword -> ast node, the written ones and those read from a ``**`` dict."""
        out = dict(self.splat_values)
        out.update(self.kwargs)
        return out

    def all_kwargs(self):
        """keyword -> line, the written ones and those read from a ``**`` dict."""
        out = dict(self.splat)
        out.update(self.kw_lines)
        return out

    def literal(self, name, default=None):
        """The keyword's value when it is a literal (number, string, bool, None, tuple...)."""
        node = self.kwargs.get(name)
        return default if node is None else literal(node, default)

    def literal_kwargs(self):
        """The literal keywords, the written ones and those of a ``**`` dict."""
        out = {}
        for name, node in self.all_values().items():
            sentinel = object()
            value = literal(node, sentinel)
            if value is not sentinel:
                out[name] = value
        return out


@dataclasses.dataclass
class Function:
    name: str
    params: list
    line: int
    cls: Optional["Class"]
    annotations: dict = dataclasses.field(default_factory=dict)  # param -> annotation text


@dataclasses.dataclass
class Class:
    name: str
    bases: list   # resolved dotted names (or the text when unresolved)
    line: int
    self_attrs: dict = dataclasses.field(default_factory=dict)  # self.X = <name> in any method
    fields: set = dataclasses.field(default_factory=set)        # class-level (annotated) names


@dataclasses.dataclass
class AttrRead:
    base: str     # "config", "self.config"
    attr: str
    line: int
    func: Optional["Function"]


@dataclasses.dataclass
class Source:
    path: str
    text: str
    imports: list
    calls: list
    functions: list
    classes: list
    attr_reads: list = dataclasses.field(default_factory=list)  # reads of config-like names
    stored_attrs: set = dataclasses.field(default_factory=set)  # x.NAME = ... anywhere
    guarded_lines: set = dataclasses.field(default_factory=set)  # in try/except ImportError
    # (line, name): under an if whose test names it ("x" in signature(f).parameters,
    # hasattr(mod, "x")): the code uses the name only where the release has it
    feature_checked: set = dataclasses.field(default_factory=set)
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
    checked = _feature_checked(v.ifs)
    _read_splats(v.calls, v.scope_stmts, checked)
    return Source(path, text, v.imports, v.calls, v.functions, v.classes, v.attr_reads,
                  v.stored, _guarded(v.tries), checked, tree)


# Names a TransformerConfig usually goes by in model code (``config.x``, ``self.config.x``).
CONFIG_NAMES = frozenset(("config", "transformer_config", "tf_config", "tfconfig",
                          "mcore_config", "megatron_config"))
CATCHES_IMPORT = frozenset(("*", "ImportError", "ModuleNotFoundError", "Exception",
                            "BaseException"))


def _guarded(tries):
    """Lines inside a ``try`` body whose handlers catch ImportError (or everything): an import
    there is optional, the code falls back."""
    out = set()
    for node in tries:
        caught = set()
        for h in node.handlers:
            types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
            caught |= {"*" if t is None else (dotted(t) or "") for t in types}
        if caught & CATCHES_IMPORT:
            for stmt in node.body:
                out.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return out


def _dict_values(value):
    """{key: value node} of the same dict forms as _dict_keys."""
    if isinstance(value, ast.Dict):
        return {k.value: v for k, v in zip(value.keys, value.values)
                if isinstance(k, ast.Constant)}
    if isinstance(value, ast.Call):
        return {k.arg: k.value for k in value.keywords if k.arg}
    return {}


def _dict_keys(value):
    """{key: line} of a dict literal with string keys or dict(k=...), else None."""
    if isinstance(value, ast.Dict):
        if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in value.keys):
            return {k.value: k.lineno for k in value.keys}
        return None
    if isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args and \
            all(k.arg for k in value.keywords):
        return {k.arg: k.value.lineno for k in value.keywords}
    return None


def _reaching_keys(assigns, name, line):
    """({keyword: line}, {keyword: value node}) of ``**name`` at ``line``: the last
    ``name = {...}``/``dict(...)`` above it in the same scope, plus ``name["k"] = ...``
    between the two.  None when the last binding of the name above the line is something
    else, or the dict is changed another way (not readable)."""
    last, keys, values = None, None, {}
    for a in assigns:
        if a.lineno >= line or not isinstance(a, ast.Assign):
            continue
        for t in a.targets:
            if isinstance(t, ast.Name) and t.id == name and (last is None or a.lineno > last):
                last, keys, values = a.lineno, _dict_keys(a.value), _dict_values(a.value)
    if last is None or keys is None:
        return None
    keys = dict(keys)
    keys_values = dict(values)
    for a in assigns:
        if not last < a.lineno < line:
            continue
        if isinstance(a, ast.Attribute) or isinstance(a, ast.AugAssign):
            # name.update(...), name |= ...: keys added some other way, not readable
            if (isinstance(a, ast.Attribute) and a.value.id == name) or \
                    (isinstance(a, ast.AugAssign) and dotted(a.target) == name):
                return None
            continue
        for t in a.targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                    t.value.id == name and isinstance(t.slice, ast.Constant) and \
                    isinstance(t.slice.value, str):
                keys[t.slice.value] = a.lineno
                keys_values[t.slice.value] = a.value
    return keys, keys_values


def _feature_checked(ifs):
    """{(line, key)}: statements under an ``if`` whose test names ``key`` as a string
    (``if "dense_grouped_gemm" in inspect.signature(f).parameters: kwargs[...] = ...``): the
    code sets the key only where the release has it."""
    out = set()
    for node in ifs:
        keys = {c.value for c in ast.walk(node.test)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)}
        body = node.body if isinstance(node, ast.If) else [node.body]
        for stmt in body:
            for line in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                out.update((line, k) for k in keys)
    return out


def _read_splats(calls, scopes, checked):
    """Fill Call.splat from dicts built in the same function, else the module.  scopes:
    {id(function node) or 0: [Assign, AugAssign, name.attr nodes]} from the visitor."""
    if not any(c.has_star_kwargs for c in calls):
        return
    for call in calls:
        if not call.has_star_kwargs:
            continue
        for k in call.node.keywords:
            if k.arg is not None:
                continue
            keys = None
            values = {}
            if isinstance(k.value, ast.Dict) or isinstance(k.value, ast.Call):
                keys = _dict_keys(k.value)
                values = _dict_values(k.value)
            elif isinstance(k.value, ast.Name):
                owner = id(call.func.node) if call.func is not None else 0
                got = _reaching_keys(scopes.get(owner, []), k.value.id, call.line)
                if got is None and owner:
                    got = _reaching_keys(scopes.get(0, []), k.value.id, call.line)
                keys, values = got if got is not None else (None, {})
            if keys is None:
                call.splat_known = False
            else:
                for kw, line in keys.items():
                    if (line, kw) not in checked:
                        call.splat.setdefault(kw, line)
                        if kw in values:
                            call.splat_values.setdefault(kw, values[kw])


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
        self.attr_reads, self.stored = [], set()
        # One pass collects what the file-wide passes read: try blocks (guarded imports),
        # ifs with a string in their test (feature checks), assignments per function (**).
        self.tries, self.ifs, self.scope_stmts = [], [], {}
        self.scope = {}          # local name -> origin (file-wide; later imports win)
        self.func = None
        self.cls = None

    # Leaves: nothing below them to visit (NodeVisitor's own visit_Constant shim and the walk
    # into a Name's ctx cost a tenth of a 2,000-line review).
    def visit_Constant(self, node):
        pass

    def visit_Name(self, node):
        pass

    def _owner(self):
        return id(self.func.node) if self.func is not None else 0

    def visit_Try(self, node):
        self.tries.append(node)
        self.generic_visit(node)

    visit_TryStar = visit_Try

    def visit_If(self, node):
        if any(isinstance(c, ast.Constant) and isinstance(c.value, str)
               for c in ast.walk(node.test)):
            self.ifs.append(node)
        self.generic_visit(node)

    visit_IfExp = visit_If

    def visit_AugAssign(self, node):
        self.scope_stmts.setdefault(self._owner(), []).append(node)
        self.generic_visit(node)

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
        cls.fields = {s.target.id for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        self.classes.append(cls)
        outer, self.cls = self.cls, cls
        outer_func, self.func = self.func, None
        self.generic_visit(node)
        self.cls, self.func = outer, outer_func

    def _function(self, node):
        a = node.args
        every = a.posonlyargs + a.args + a.kwonlyargs
        params = [p.arg for p in every]
        notes = {p.arg: ast.unparse(p.annotation) for p in every if p.annotation is not None}
        fn = Function(node.name, params, node.lineno, self.cls, notes)
        fn.node = node
        fn.outer = self.func  # the enclosing function (a closure sees its ``self``)
        fn.static = any(dotted(d) == "staticmethod" for d in node.decorator_list)
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
        target, text, via_super = _canonical(self.resolve(node.func)), dotted(node.func) or "", False
        if self._is_super_init(node.func):
            base = next((b for b in self.cls.bases if b.startswith("megatron.")), None)
            if base is not None:
                target, text, via_super = _canonical(base), "super().__init__", True
        call = Call(target, text, node.lineno, node.col_offset, kwargs, kw_lines, n_pos,
                    star_args, star_kw, self.func, self.cls, node)
        call.via_super = via_super
        self.calls.append(call)
        self.generic_visit(node)

    def _is_super_init(self, func):
        # super().__init__ or super(ThisClass, self).__init__; super(Base, self) skips a level.
        if not (self.cls is not None and isinstance(func, ast.Attribute) and
                func.attr == "__init__" and isinstance(func.value, ast.Call) and
                dotted(func.value.func) == "super"):
            return False
        args = func.value.args
        return not args or dotted(args[0]) == self.cls.name

    def visit_Attribute(self, node):
        base = node.value
        if isinstance(base, ast.Name):
            self.scope_stmts.setdefault(self._owner(), []).append(node)
        if isinstance(node.ctx, ast.Store):
            self.stored.add(node.attr)
            if self.cls is not None and isinstance(base, ast.Name) and base.id == "self":
                self.cls.self_attrs.setdefault(node.attr, None)
        elif (isinstance(base, ast.Name) and base.id in CONFIG_NAMES) or \
                (isinstance(base, ast.Attribute) and base.attr in CONFIG_NAMES):
            self.attr_reads.append(AttrRead(dotted(base) or "", node.attr, node.lineno, self.func))
        self.generic_visit(node)

    def visit_Assign(self, node):
        self.scope_stmts.setdefault(self._owner(), []).append(node)
        # self.X = name: remembered so a rule can tell which names a class keeps (pg_collection).
        if self.cls is not None and isinstance(node.value, ast.Name):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and \
                        t.value.id == "self":
                    self.cls.self_attrs[t.attr] = node.value.id
        self.generic_visit(node)


# Module aliases megatron binds in a package __init__ (megatron/core/__init__.py:
# ``mpu = parallel_state``, every indexed release).
MODULE_ALIASES = {"megatron.core.mpu": "megatron.core.parallel_state"}


def _canonical(target):
    target = _unalias(target)
    return _canonical_name(target)


def _unalias(target):
    if target:
        for alias, real in MODULE_ALIASES.items():
            if target == alias or target.startswith((alias + ".", alias + ":")):
                return real + target[len(alias):]
            if target == alias.replace(".mpu", ":mpu") or target.startswith(
                    alias.replace(".mpu", ":mpu") + "."):
                return real + target[len(alias):]
    return target


def _canonical_name(target):
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

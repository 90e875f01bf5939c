"""Compile one Megatron Core release's source tree into the release index's data, with `ast` only.

Input: ``{path: text}`` for the ``.py`` files under ``megatron/core/`` and ``megatron/training/``
of one release (read from a git tag, a wheel or an installed package; the code is never run).
Output: one JSON-ready dict (the shape ``scripts/release_index`` reads, see ``compile_release``).

What is read, and why it is enough for the questions the bundle answers:
- public modules (no path component starting with ``_`` other than ``__init__``) and their
  top-level names; imports are kept only when they point into ``megatron`` (re-exports);
- signatures of public functions, classes (their ``__init__``; dataclasses synthesized from their
  fields, inherited fields first, like ``dataclasses`` does) and public methods of public classes,
  with a short hash of each body (renames are found by identical bodies);
- dataclass fields with type, default and the literal a ``__post_init__`` assigns;
- the members of enum classes (public names their bodies assign);
- Megatron-LM's argparse flags: ``add_argument`` calls in ``megatron/training/arguments.py`` and the
  groups ``ArgumentGroupFactory`` derives from config dataclasses (from 0.17 on);
- the fixed text of ``raise``, ``assert``, ``warnings.warn`` and logger warning/error calls.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
import warnings

CORE_PREFIXES = ("megatron/core/", "megatron/training/")
ARGUMENTS = "megatron/training/arguments.py"
KINDS = {"positional_only": "po", "positional_or_keyword": "pk", "var_positional": "vp",
         "keyword_only": "ko", "var_keyword": "vk"}
LOG_METHODS = {"warning", "warn", "error", "critical", "exception", "fatal"}
LOG_LEVELS = {"WARNING", "WARN", "ERROR", "CRITICAL", "FATAL"}
PERCENT_SPEC = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(\.(\*|\d+))?[hlL]?[sdifrucoxXeEgGa]")
FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
MIN_BODY_NODES = 12  # ast nodes below which a body hash is left empty (never matched)


def module_name(path: str) -> str:
    mod = path[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def is_public_module(path: str) -> bool:
    parts = path[:-3].split("/")
    return all(not p.startswith("_") or p == "__init__" for p in parts)


def _public(name: str) -> bool:
    return not name.startswith("_")


def _text(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _body_hash(node: ast.AST) -> str:
    """A short hash of a definition's body without its docstring and name: equal for a pure rename."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    # A body of a few nodes (pass, raise NotImplementedError, return x) says nothing about identity.
    if sum(1 for b in body for _ in ast.walk(b)) < MIN_BODY_NODES:
        return ""
    args = ast.dump(node.args) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
        ast.dump(ast.Tuple(elts=node.bases, ctx=ast.Load()))
    dumped = args + "".join(ast.dump(b) for b in body)
    return hashlib.sha1(dumped.encode()).hexdigest()[:10]


def _resolve_from(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _top_statements(body):
    """Top-level statements, looking inside if/try/with blocks (optional-dependency imports)."""
    for st in body:
        if isinstance(st, (ast.If, ast.With)):
            yield from _top_statements(st.body)
            yield from _top_statements(getattr(st, "orelse", []))
        elif isinstance(st, ast.Try) or type(st).__name__ == "TryStar":
            yield from _top_statements(st.body)
            for h in st.handlers:
                yield from _top_statements(h.body)
            yield from _top_statements(st.orelse)
            yield from _top_statements(st.finalbody)
        else:
            yield st


def _decorator_names(node) -> list[str]:
    out = []
    for d in node.decorator_list:
        f = d.func if isinstance(d, ast.Call) else d
        out.append(ast.unparse(f))
    return out


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any(n.split(".")[-1] == "dataclass" for n in _decorator_names(node))


def _dataclass_kw_only(node: ast.ClassDef) -> bool:
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "dataclass":
            for kw in d.keywords:
                if kw.arg == "kw_only" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                    return True
    return False


# -- per-module scan ---------------------------------------------------------------------------

class Module:
    """What one file defines: names (all, for resolution), classes and functions."""

    def __init__(self, path: str, text: str):
        self.path = path
        self.name = module_name(path)
        self.is_pkg = path.endswith("__init__.py")
        with warnings.catch_warnings():  # old escape sequences in upstream strings
            warnings.simplefilter("ignore", SyntaxWarning)
            self.tree = ast.parse(text)
        self.names: dict[str, tuple[str, str | None]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.functions: dict[str, ast.FunctionDef] = {}
        self.stars: list[str] = []
        for st in _top_statements(self.tree.body):
            self._add(st)

    def _set(self, name, kind, target=None):
        old = self.names.get(name)
        if old is not None and old[0] in ("class", "function") and kind not in ("class", "function"):
            return  # a definition wins over a fallback assignment in an except branch
        if old is not None and kind in ("import", "variable") and old[0] in ("import", "variable"):
            return  # the first binding (usually the try branch) is the one the release means
        self.names[name] = (kind, target)

    def _add(self, st):
        if isinstance(st, ast.ClassDef):
            self.classes.setdefault(st.name, st)
            self._set(st.name, "class")
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.functions.setdefault(st.name, st)
            self._set(st.name, "function")
        elif isinstance(st, ast.Assign):
            for t in st.targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        target = None
                        if isinstance(st.value, (ast.Name, ast.Attribute)) and isinstance(t, ast.Name):
                            target = "=" + ast.unparse(st.value)  # an alias, resolved later
                        self._set(n.id, "variable", target)
        elif isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            self._set(st.target.id, "variable")
        elif isinstance(st, ast.ImportFrom):
            src = _resolve_from(self.name, self.is_pkg, st)
            for a in st.names:
                if a.name == "*":
                    self.stars.append(src)  # expanded once every module is read (Tree)
                else:
                    self._set(a.asname or a.name, "import", f"{src}:{a.name}")
        elif isinstance(st, ast.Import):
            for a in st.names:
                self._set(a.asname or a.name.split(".")[0], "import", a.name if a.asname else a.name.split(".")[0])


class Tree:
    """All modules of one release, with cross-module resolution of names."""

    def __init__(self, files: dict[str, str]):
        self.modules: dict[str, Module] = {}
        self.unparsed: list[str] = []
        for path in sorted(files):
            if not (path.endswith(".py") and path.startswith(CORE_PREFIXES)):
                continue
            try:
                m = Module(path, files[path])
            except (SyntaxError, ValueError):
                self.unparsed.append(path)
                continue
            self.modules[m.name] = m
        done: set[str] = set()
        for name in sorted(self.modules):
            self._expand_stars(name, done, 0)

    def _expand_stars(self, name: str, done: set[str], depth: int) -> None:
        """`from x import *`: the module also binds x's public names (as imports from x)."""
        m = self.modules.get(name)
        if m is None or name in done or depth > 12:
            return
        done.add(name)
        for src in m.stars:
            self._expand_stars(src, done, depth + 1)
            for n in sorted(self.modules[src].names if src in self.modules else []):
                if _public(n) and n not in m.names:
                    m.names[n] = ("import", f"{src}:{n}")

    def resolve(self, mod: str, name: str, depth: int = 0):
        """(module, kind, node) where mod's name is defined, following imports; None if outside."""
        m = self.modules.get(mod)
        if m is None or depth > 12:
            return None
        entry = m.names.get(name)
        if entry is None:
            if f"{mod}.{name}" in self.modules:
                return (f"{mod}.{name}", "module", None)
            return None
        kind, target = entry
        if kind == "class":
            return (mod, "class", m.classes[name])
        if kind == "function":
            return (mod, "function", m.functions[name])
        if kind == "import" and target and ":" in target:
            tmod, tname = target.split(":", 1)
            if f"{tmod}.{tname}" in self.modules and tname not in self.modules.get(tmod, m).names:
                return (f"{tmod}.{tname}", "module", None)
            return self.resolve(tmod, tname, depth + 1)
        if kind == "variable" and target and target.startswith("=") and "." not in target:
            return self.resolve(mod, target[1:], depth + 1)
        return None

    def resolve_expr(self, mod: str, expr: ast.AST):
        """Resolve a Name or dotted Attribute (module.attr) used in mod."""
        if isinstance(expr, ast.Name):
            return self.resolve(mod, expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.resolve_expr(mod, expr.value)
            if base is not None and base[1] == "module":
                return self.resolve(base[0], expr.attr)
            if isinstance(expr.value, (ast.Name, ast.Attribute)):
                dotted = ast.unparse(expr.value)
                if dotted in self.modules:
                    return self.resolve(dotted, expr.attr)
        return None

    def base_classes(self, mod: str, node: ast.ClassDef):
        for b in node.bases:
            r = self.resolve_expr(mod, b)
            if r is not None and r[1] == "class":
                yield r[0], r[2]


# -- signatures and fields ---------------------------------------------------------------------

def _params(args: ast.arguments) -> list[list]:
    out = []
    pos = args.posonlyargs + args.args
    defaults = [None] * (len(pos) - len(args.defaults)) + list(args.defaults)
    for i, (a, d) in enumerate(zip(pos, defaults)):
        out.append([a.arg, "po" if i < len(args.posonlyargs) else "pk", _text(d), _text(a.annotation)])
    if args.vararg:
        out.append([args.vararg.arg, "vp", None, _text(args.vararg.annotation)])
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        out.append([a.arg, "ko", _text(d), _text(a.annotation)])
    if args.kwarg:
        out.append([args.kwarg.arg, "vk", None, _text(args.kwarg.annotation)])
    return out


def _field_call(value):
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] == "field":
        return {kw.arg: kw.value for kw in value.keywords if kw.arg}
    return None


def _post_init_literals(node: ast.ClassDef) -> dict[str, list[str]]:
    """self.<name> = <literal> anywhere in __post_init__ -> the literals' source texts."""
    out: dict[str, list[str]] = {}
    for f in node.body:
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__post_init__":
            for n in ast.walk(f):
                if isinstance(n, ast.Assign) and len(n.targets) == 1:
                    t = n.targets[0]
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        try:
                            ast.literal_eval(n.value)
                        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                            continue
                        lits = out.setdefault(t.attr, [])
                        txt = ast.unparse(n.value)
                        if txt not in lits:
                            lits.append(txt)
    return out


def _fills_none(test: ast.AST, name: str) -> bool:
    """Whether the test is exactly `self.<name> is None`."""
    return (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
            and isinstance(test.left, ast.Attribute) and isinstance(test.left.value, ast.Name)
            and test.left.value.id == "self" and test.left.attr == name
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None)


def _assigned_in_post_init(node: ast.ClassDef) -> dict[str, str]:
    """Every self.<name> that __post_init__ (or a self.method() it calls, transitively) assigns:
    self.x = ..., self.x += ..., setattr(self, "x", ...), object.__setattr__(self, "x", ...).
    "if_none" when each assignment sits right under `if self.x is None:` (a value the caller gave
    is kept), else "any"."""
    methods = {f.name: f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo, seen, out = ["__post_init__"], set(), {}

    def note(name: str, mode: str) -> None:
        out[name] = "any" if out.get(name, mode) == "any" or mode == "any" else "if_none"

    def walk(n: ast.AST, guard: ast.AST | None) -> None:
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            for e in ast.walk(t):
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                    note(e.attr, "if_none" if isinstance(n, ast.Assign) and guard is not None
                         and _fills_none(guard, e.attr) else "any")
        if isinstance(n, ast.Call):
            fn = ast.unparse(n.func)
            if fn.split(".")[-1] in ("setattr", "__setattr__") and n.args:
                rest = [a for a in n.args if not (isinstance(a, ast.Name) and a.id == "self")]
                if rest and isinstance(rest[0], ast.Constant) and isinstance(rest[0].value, str):
                    note(rest[0].value, "any")
            if isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "self":
                todo.append(n.func.attr)
        if isinstance(n, ast.If):
            walk(n.test, None)
            for st in n.body:
                walk(st, n.test)
            for st in n.orelse:
                walk(st, None)
            return
        for child in ast.iter_child_nodes(n):
            walk(child, None)  # only a statement right under the `if` is guarded by it

    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        for st in methods[name].body:
            walk(st, None)
    return out


class Compiler:
    def __init__(self, tree: Tree):
        self.tree = tree
        self._fields_cache: dict[tuple[str, str], list | None] = {}

    def own_fields(self, node: ast.ClassDef, kw_only: bool, mod: str = "") -> list[dict]:
        out = []
        post = _post_init_literals(node)
        for st in node.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            ann = ast.unparse(st.annotation)
            if ann.split("[")[0].split(".")[-1] in ("ClassVar", "InitVar") or ann == "KW_ONLY":
                continue
            init, fkw = True, kw_only
            fc = _field_call(st.value) if st.value is not None else None
            if st.value is None:
                default = None
            elif fc is not None:
                default = _text(fc["default"]) if "default" in fc else \
                    (ast.unparse(st.value) if "default_factory" in fc else None)
                if isinstance(fc.get("init"), ast.Constant) and fc["init"].value is False:
                    init = False
                if isinstance(fc.get("kw_only"), ast.Constant):
                    fkw = bool(fc["kw_only"].value)
            else:
                default = ast.unparse(st.value)
            lits = post.get(st.target.id, [])
            out.append({"name": st.target.id, "type": ann, "default": default,
                        "post_init": lits[0] if len(lits) == 1 else None,
                        "init": init, "kw_only": fkw, "line": st.lineno, "owner": (mod, node.name),
                        **({"post_init_values": lits} if len(lits) > 1 else {})})
        return out

    def post_init_assigns(self, mod: str, node: ast.ClassDef, depth: int = 0) -> dict[str, str]:
        """The fields the __post_init__ chain of a class (its own and its bases') may assign."""
        out = _assigned_in_post_init(node)
        if depth < 12:
            for bmod, bnode in self.tree.base_classes(mod, node):
                for name, mode in self.post_init_assigns(bmod, bnode, depth + 1).items():
                    out[name] = "any" if "any" in (mode, out.get(name, mode)) else "if_none"
        return out

    def fields(self, mod: str, node: ast.ClassDef, depth: int = 0) -> list[dict] | None:
        """Dataclass fields including inherited ones, in dataclasses' order; None if not a dataclass."""
        key = (mod, node.name)
        if key in self._fields_cache:
            return self._fields_cache[key]
        self._fields_cache[key] = None  # cycle guard
        merged: dict[str, dict] = {}
        any_dc = False
        if depth < 12:
            for bmod, bnode in reversed(list(self.tree.base_classes(mod, node))):
                bf = self.fields(bmod, bnode, depth + 1)
                if bf is not None:
                    any_dc = True
                    for f in bf:
                        merged[f["name"]] = f
        if _is_dataclass(node):
            any_dc = True
            post = _post_init_literals(node)
            for f in self.own_fields(node, _dataclass_kw_only(node), mod):
                merged[f["name"]] = f  # a redefinition keeps the inherited position (dict order)
            # A subclass's __post_init__ may set an inherited field.
            for name, lits in post.items():
                if name in merged and name not in {f["name"] for f in self.own_fields(node, False)}:
                    merged[name] = dict(merged[name], post_init=lits[0] if len(lits) == 1 else None)
        result = list(merged.values()) if any_dc else None
        self._fields_cache[key] = result
        return result

    def class_signature(self, mod: str, node: ast.ClassDef, depth: int = 0):
        """(params without self, 'file:line') of calling the class, or None when unknown."""
        init = next((f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and f.name == "__init__"), None)
        path = self.tree.modules[mod].path
        if init is not None:
            return _params(init.args)[1:], f"{path}:{init.lineno}"
        flds = self.fields(mod, node)
        if flds is not None and _is_dataclass(node):
            params = [[f["name"], "ko" if f["kw_only"] else "pk", f["default"], f["type"]]
                      for f in flds if f["init"]]
            # dataclasses puts keyword-only fields last
            params = [p for p in params if p[1] == "pk"] + [p for p in params if p[1] == "ko"]
            return params, f"{path}:{node.lineno}"
        if depth < 12:
            for bmod, bnode in self.tree.base_classes(mod, node):
                sig = self.class_signature(bmod, bnode, depth + 1)
                if sig is not None:
                    return sig
        if not node.bases:
            return [], f"{path}:{node.lineno}"
        return None

    def copied_signature(self, mod: str, fn):
        """@copy_signature(other): inspect.signature shows other's parameters."""
        for d in fn.decorator_list:
            if isinstance(d, ast.Call) and ast.unparse(d.func).split(".")[-1] == "copy_signature" and d.args:
                r = self.tree.resolve_expr(mod, d.args[0])
                if r is not None and r[1] == "function":
                    return r
        return None


def _message_text(node: ast.AST | None) -> str | None:
    """The fixed text of a message expression, '{}' for each variable part; None if no text."""
    if node is None:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message_text(node.left), _message_text(node.right)
        if left is None and right is None:
            return None
        return (left if left is not None else "{}") + (right if right is not None else "{}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _message_text(node.left)
        return None if left is None else PERCENT_SPEC.sub("{}", left).replace("%%", "%")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = _message_text(node.func.value)
        if base is None:
            return None
        return FORMAT_FIELD.sub("{}", base.replace("{{", "\0").replace("}}", "\1")) \
            .replace("\0", "{").replace("\1", "}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        return _message_text(node.args[0])
    if isinstance(node, (ast.Tuple, ast.List)) and node.elts:
        return _message_text(node.elts[0])
    return None


def _meaningful(text: str | None) -> bool:
    return bool(text) and bool(re.search(r"[A-Za-z]{2}", text.replace("{}", "")))


MAX_CONDITION = 300  # characters of a guarding condition kept (a long one is cut with "…")


def _and_part(text: str) -> str:
    """A test as an operand of `and`: an `or`, a conditional expression or a lambda gets
    parentheses (`if a:` around `if b or c:` is `a and (b or c)`, not `a and b or c`)."""
    try:
        body = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text  # "except ValueError": not an expression
    if isinstance(body, (ast.IfExp, ast.Lambda, ast.NamedExpr)) or (
            isinstance(body, ast.BoolOp) and isinstance(body.op, ast.Or)):
        return f"({text})"
    return text


def _condition_text(conds: list[str]) -> str:
    text = " and ".join(_and_part(c) for c in conds) if len(conds) > 1 else "".join(conds)
    return text if len(text) <= MAX_CONDITION else text[: MAX_CONDITION - 1] + "…"


_OPPOSITE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
             ast.NotIn: ast.In, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}


def _negated(test: ast.AST) -> str:
    """Source text of `not test`, simplified where Python allows (`not x` -> x, `a == b` -> `a != b`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.unparse(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPPOSITE:
        return ast.unparse(ast.Compare(test.left, [_OPPOSITE[type(test.ops[0])]()], test.comparators))
    if isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
        return f"not {ast.unparse(test)}"
    return f"not ({ast.unparse(test)})"


def _names_read(nodes, known: frozenset) -> list[str]:
    """Config fields / argparse dests the expressions read: `x.<field>` attributes and bare names."""
    out = set()
    for node in nodes:
        if node is None:
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and n.attr in known:
                out.add(n.attr)
            elif isinstance(n, ast.Name) and n.id in known:
                out.add(n.id)
    return sorted(out)


def _messages(m: Module, known: frozenset = frozenset(), flags_of: dict | None = None,
              bare: list | None = None) -> list[list]:
    """[kind, exc, text, file, function, line, condition, fields, flags] of each message.

    An assert without a text of its own (``assert x``, ``assert a == b, (a, b)``) prints no
    message to match; with ``bare`` given, it is recorded there as [file, function, line,
    condition, fields, flags, test], so a traceback frame (or the code line under it) can place it.

    condition: when the message is printed, as source text: the enclosing ``if`` tests of its
    function (``not (...)`` in an ``else``), ``except <type>`` for a handler, and for an assert
    ``not (<test>)``. fields: the names in ``known`` (config dataclass fields and Megatron-LM
    argparse dests) that the condition and the message read; flags: the flags setting them.
    """
    out = []
    flags_of = flags_of or {}

    def emit(node, qual, conds, locals_):
        rec = _message_of(node, locals_)
        if rec is None or not _meaningful(rec[2]):
            if bare is not None and isinstance(node, ast.Assert):
                fields = _names_read([c for _, c in conds] + [node.test, node.msg], known)
                bare.append([m.path, qual, node.lineno,
                             _condition_text([t for t, _ in conds] + [_negated(node.test)]), fields,
                             sorted({f for name in fields for f in flags_of.get(name, ())}),
                             ast.unparse(node.test)])
            return
        exprs = list(conds)
        read = [c for _, c in conds]
        if isinstance(node, ast.Assert):
            exprs.append((_negated(node.test), node.test))
            read.append(node.test)
        read.append(node.msg if isinstance(node, ast.Assert) else
                    (node.exc if isinstance(node, ast.Raise) else node))
        fields = _names_read(read, known)
        flags = sorted({f for name in fields for f in flags_of.get(name, ())})
        out.append([rec[0], rec[1], rec[2], m.path, qual, node.lineno,
                    _condition_text([t for t, _ in exprs]), fields, flags])

    def visit(node, qual, conds, locals_):
        for child in ast.iter_child_nodes(node):
            step(child, qual, conds, locals_)

    def step(child, qual, conds, locals_):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = _local_texts(child) if not isinstance(child, ast.ClassDef) else {}
            visit(child, f"{qual}.{child.name}" if qual != "<module>" else child.name, [], inner)
            return
        emit(child, qual, conds, locals_)
        if isinstance(child, (ast.If, ast.While)):
            test = ast.unparse(child.test)
            step(child.test, qual, conds, locals_)
            for st in child.body:
                step(st, qual, conds + [(test, child.test)], locals_)
            for st in child.orelse:
                step(st, qual, conds + [(_negated(child.test), child.test)], locals_)
        elif isinstance(child, ast.ExceptHandler):
            exc = f"except {ast.unparse(child.type)}" if child.type is not None else "except"
            for st in child.body:
                step(st, qual, conds + [(exc, None)], locals_)
        else:
            visit(child, qual, conds, locals_)

    visit(m.tree, "<module>", [], {})
    return out


def _local_texts(func: ast.AST) -> dict[str, list[tuple[int, ast.AST]]]:
    """{name: [(line, value)]} of the function's plain ``name = <expr>`` statements (its nested
    functions and classes left out): ``_msg = f"..."; raise X(_msg)`` raises that text."""
    out: dict[str, list[tuple[int, ast.AST]]] = {}
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.setdefault(node.targets[0].id, []).append((node.lineno, node.value))
        todo.extend(ast.iter_child_nodes(node))
    return out


def _bound(arg, locals_: dict, line: int):
    """A Name argument's value: the function's last assignment to it before ``line``."""
    if isinstance(arg, ast.Name) and arg.id in locals_:
        before = [(ln, v) for ln, v in locals_[arg.id] if ln < line]
        if before:
            return max(before, key=lambda lv: lv[0])[1]
    return arg


def _message_of(node, locals_: dict | None = None):
    """(kind, exc, text) for a raise/assert/warn/log node, else None. A message passed as a local
    name is the text the function last bound to it (``locals_``, from _local_texts)."""
    def text(arg):
        return _message_text(_bound(arg, locals_ or {}, node.lineno))

    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
        exc = ast.unparse(node.exc.func).split(".")[-1]
        arg = node.exc.args[0] if node.exc.args else None
        return "raise", exc, text(arg)
    if isinstance(node, ast.Assert) and node.msg is not None:
        return "assert", "AssertionError", text(node.msg)
    if isinstance(node, ast.Call):
        fname = ast.unparse(node.func)
        last = fname.split(".")[-1]
        if fname in ("warnings.warn", "warn") and node.args:
            cat = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "category"), None)
            return "warn", (ast.unparse(cat).split(".")[-1] if cat is not None else "UserWarning"), \
                text(node.args[0])
        if isinstance(node.func, ast.Attribute) and last in LOG_METHODS and node.args and \
                re.search(r"log", ast.unparse(node.func.value), re.I):
            return "log", None, text(node.args[0])
        if last in ("log_single_rank", "log_on_each_pipeline_stage") and len(node.args) >= 3:
            lvl = ast.unparse(node.args[1]).split(".")[-1]
            if lvl in LOG_LEVELS:
                return "log", None, text(node.args[2])
    return None


# -- flags -------------------------------------------------------------------------------------

def _kw(call: ast.Call) -> dict[str, ast.AST]:
    return {k.arg: k.value for k in call.keywords if k.arg}


def _help_text(node):
    if node is None:
        return None
    t = _message_text(node)
    return " ".join(t.split()) if t is not None else ast.unparse(node)


def _flag_record(names: list[str], kw: dict[str, ast.AST], dest_default: str) -> dict:
    dest = kw.get("dest")
    action = kw["action"].value if isinstance(kw.get("action"), ast.Constant) else _text(kw.get("action"))
    default = _text(kw.get("default"))
    if default is None:  # argparse's implicit defaults
        default = {"store_true": "False", "store_false": "True"}.get(action, "None")
    return {"dest": dest.value if isinstance(dest, ast.Constant) else (_text(dest) or dest_default),
            "default": default, "type": _text(kw.get("type")),
            "action": action,
            "choices": _text(kw.get("choices")), "help": _help_text(kw.get("help")),
            "aliases": names[1:]}


def _field_docstrings(node: ast.ClassDef) -> dict[str, str]:
    out = {}
    body = node.body
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) \
                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            out[a.target.id] = " ".join(inspect.cleandoc(b.value.value).split())
    return out


def _factory_flags(comp: Compiler, r, exclude: set[str]) -> dict[str, dict]:
    """The flags ArgumentGroupFactory(cls, exclude=...).build_group adds, derived like it does."""
    if r is None or r[1] != "class":
        return {}
    cmod, _, cnode = r
    flds = comp.fields(cmod, cnode) or []
    docs: dict[str, str] = {}
    chain = [(cmod, cnode)]
    while True:  # first bases, like the factory's docstring lookup
        bases = list(comp.tree.base_classes(*chain[-1]))
        if not bases or len(chain) > 12:
            break
        chain.append(bases[0])
    for bmod, bnode in reversed(chain):
        docs.update(_field_docstrings(bnode))
    out = {}
    for f in flds:
        if f["name"] in exclude or not f["init"]:
            continue
        names = ["--" + f["name"].replace("_", "-")]
        rec = {"dest": f["name"], "default": f["default"], "type": f["type"], "action": None,
               "choices": None, "help": docs.get(f["name"], ""), "aliases": []}
        if f["type"] in ("bool", "Optional[bool]", "bool | None"):
            rec["type"] = None
            if f["default"] == "False":
                rec["action"] = "store_true"
            else:
                rec["action"] = "store_false"
                names = ["--no-" + f["name"].replace("_", "-"), "--disable-" + f["name"].replace("_", "-")]
        meta = comp._meta_by_field.get(f["owner"] + (f["name"],))
        if meta:
            if "arg_names" in meta and isinstance(meta["arg_names"], (ast.List, ast.Tuple)):
                names = [e.value for e in meta["arg_names"].elts if isinstance(e, ast.Constant)]
            for k, v in meta.items():
                if k in ("default", "type", "choices"):
                    rec[k] = _text(v)
                elif k == "action":
                    rec[k] = v.value if isinstance(v, ast.Constant) else _text(v)
                elif k == "help":
                    rec[k] = _help_text(v)
                elif k == "dest" and isinstance(v, ast.Constant):
                    rec[k] = v.value
        rec["aliases"] = names[1:]
        out[names[0]] = rec
    return out


def _build_meta_index(comp: Compiler):
    idx = {}
    for m in comp.tree.modules.values():
        if not m.path.startswith(CORE_PREFIXES):
            continue
        for node in m.classes.values():
            if not _is_dataclass(node):
                continue
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    fc = _field_call(st.value)
                    md = fc.get("metadata") if fc else None
                    if isinstance(md, ast.Dict):
                        for k, v in zip(md.keys, md.values):
                            if isinstance(k, ast.Constant) and k.value == "argparse_meta" and isinstance(v, ast.Dict):
                                idx[(m.name, node.name, st.target.id)] = {
                                    kk.value: vv for kk, vv in zip(v.keys, v.values) if isinstance(kk, ast.Constant)}
    comp._meta_by_field = idx


def _string_set(node) -> set[str]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _flags(comp: Compiler) -> dict[str, dict] | None:
    m = comp.tree.modules.get(module_name(ARGUMENTS))
    if m is None:
        return None
    flags: dict[str, dict] = {}
    scopes = [m.tree] + [n for n in ast.walk(m.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        # Names bound in this function: local imports of config classes, exclude lists, factories.
        local_imports: dict[str, str] = {}
        lists: dict[str, set[str]] = {}
        factories: dict[str, ast.Call] = {}
        body_nodes = [n for n in ast.walk(scope) if scope is not m.tree or not isinstance(n, ast.FunctionDef)]
        for node in body_nodes:
            if isinstance(node, ast.ImportFrom) and scope is not m.tree:
                src = _resolve_from(m.name, m.is_pkg, node)
                for a in node.names:
                    local_imports[a.asname or a.name] = f"{src}:{a.name}"
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                t = node.targets[0].id
                if isinstance(node.value, ast.Call) and \
                        ast.unparse(node.value.func).split(".")[-1] == "ArgumentGroupFactory":
                    factories[t] = node.value
                elif isinstance(node.value, (ast.List, ast.Tuple, ast.Set)):
                    lists[t] = _string_set(node.value)
        direct = scope.body if scope is m.tree else list(ast.walk(scope))
        for node in direct:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr == "add_argument":
                names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                longs = [n for n in names if n.startswith("--")]
                if not longs:
                    continue
                kw = _kw(node)
                rec = _flag_record(longs + [n for n in names if not n.startswith("--")], kw,
                                   longs[0][2:].replace("-", "_"))
                if (rec["action"] or "").endswith("BooleanOptionalAction"):
                    rec["aliases"] = rec["aliases"] + ["--no-" + n[2:] for n in longs]
                flags.setdefault(longs[0], rec)
            elif node.func.attr == "build_group":
                recv = node.func.value
                call = factories.get(recv.id) if isinstance(recv, ast.Name) else \
                    (recv if isinstance(recv, ast.Call) else None)
                if call is None or not call.args:
                    continue
                exc = _kw(call).get("exclude")
                exclude = lists.get(exc.id, set()) if isinstance(exc, ast.Name) else _string_set(exc)
                cls = call.args[0]
                if isinstance(cls, ast.Name) and cls.id in local_imports:
                    tmod, tname = local_imports[cls.id].split(":", 1)
                    r = comp.tree.resolve(tmod, tname)
                else:
                    r = comp.tree.resolve_expr(m.name, cls)
                for flag, rec in _factory_flags(comp, r, exclude).items():
                    flags.setdefault(flag, rec)
    return {k: flags[k] for k in sorted(flags)}


def _known_names(comp: Compiler, flags: dict | None) -> tuple[frozenset, dict[str, list[str]]]:
    """Names a message's condition can read that a user sets: the fields of the release's config
    dataclasses (classes named ``*Config``) and Megatron-LM's argparse dests; with the flags that
    set each name (a flag's dest is the args field, which is the config field of the same name)."""
    known: set[str] = set()
    for mod, m in comp.tree.modules.items():
        for cname, node in m.classes.items():
            if cname.endswith("Config") and _is_dataclass(node):
                known |= {f["name"] for f in comp.fields(mod, node) or []}
    flags_of: dict[str, list[str]] = {}
    for flag, rec in (flags or {}).items():
        if isinstance(rec.get("dest"), str) and rec["dest"].isidentifier():
            flags_of.setdefault(rec["dest"], []).append(flag)
    known |= set(flags_of)
    return frozenset(known), flags_of


# -- one release -------------------------------------------------------------------------------

ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"}


def _is_enum(tree: "Tree", mod: str, node: ast.ClassDef, depth: int = 0) -> bool:
    """An enum class: a base named like the ``enum`` module's classes, or a Megatron class that is
    one (``class AttnBackend(enum.Enum)``, ``class Fp8Recipe(str, enum.Enum)``)."""
    if any(ast.unparse(b).rsplit(".", 1)[-1] in ENUM_BASES for b in node.bases):
        return True
    return depth < 5 and any(_is_enum(tree, bmod, bnode, depth + 1)
                             for bmod, bnode in tree.base_classes(mod, node))


def _enum_members(node: ast.ClassDef) -> list[str]:
    """Public names an enum class body assigns (its members), in source order: what
    ``ModelType.encoder_and_decoder`` looks up."""
    out = []
    for st in node.body:
        targets = st.targets if isinstance(st, ast.Assign) else []
        for t in targets:
            if isinstance(t, ast.Name) and _public(t.id) and t.id not in out:
                out.append(t.id)
    return out


def compile_release(version: str, files: dict[str, str], source: str) -> dict:
    """The release index data of one release (JSON-ready, deterministic)."""
    tree = Tree(files)
    comp = Compiler(tree)
    _build_meta_index(comp)
    modules: dict[str, dict] = {}
    sigs: dict[str, list] = {}
    fields: dict[str, list] = {}
    assigned: dict[str, dict] = {}  # dataclass -> {field its __post_init__ chain assigns: "if_none" | "any"}
    members: dict[str, list] = {}
    messages: list[list] = []
    bare: list[list] = []
    flags = _flags(comp)
    known, flags_of = _known_names(comp, flags)
    for name in sorted(tree.modules):
        m = tree.modules[name]
        messages.extend(_messages(m, known, flags_of, bare))
        if not is_public_module(m.path):
            continue
        names = {}
        for n, (kind, target) in sorted(m.names.items()):
            if not _public(n):
                continue
            if kind == "import":
                if not (target or "").startswith("megatron"):
                    continue
            elif kind == "variable":
                target = None
                r = tree.resolve(name, n)
                if r is not None and r[1] in ("class", "function") and (r[0], r[2].name) != (name, n):
                    target = f"{r[0]}:{r[2].name}"
            names[n] = [kind, target]
        modules[name] = names
        for n, node in sorted(m.functions.items()):
            if not _public(n) or names.get(n, [""])[0] != "function":
                continue
            src = comp.copied_signature(name, node)
            params = _params(src[2].args) if src is not None else _params(node.args)
            rec = [params, f"{m.path}:{node.lineno}", _body_hash(node)]
            if src is not None:
                rec.append(f"{src[0]}:{src[2].name}")
            sigs[f"{name}:{n}"] = rec
        for n, node in sorted(m.classes.items()):
            if not _public(n) or names.get(n, [""])[0] != "class":
                continue
            sig = comp.class_signature(name, node)
            if sig is not None:
                sigs[f"{name}:{n}"] = [sig[0], sig[1], _body_hash(node)]
            if _is_enum(tree, name, node):
                members[f"{name}:{n}"] = _enum_members(node)
            flds = comp.fields(name, node)
            if flds is not None:
                fields[f"{name}:{n}"] = [[f["name"], f["type"], f["default"], f["post_init"],
                                          int(f["init"]), f.get("post_init_values"),
                                          ":".join(f["owner"])] for f in flds]
                names_ = {f["name"] for f in flds}
                assigned[f"{name}:{n}"] = {k: v for k, v in sorted(comp.post_init_assigns(name, node).items())
                                           if k in names_}
            for st in node.body:
                if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)) and _public(st.name) and \
                        not any(d.split(".")[-1] in ("property", "setter", "getter", "deleter", "cached_property")
                                for d in _decorator_names(st)):
                    src = comp.copied_signature(name, st)
                    params = _params(src[2].args) if src is not None else _params(st.args)
                    sigs[f"{name}:{n}.{st.name}"] = [params, f"{m.path}:{st.lineno}", _body_hash(st)]
            # "step = step_legacy" in a class body: the alias is a method with the target's signature.
            methods = {f.name: f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for st in node.body:
                if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                        and _public(st.targets[0].id) and isinstance(st.value, ast.Name) and st.value.id in methods:
                    tgt = methods[st.value.id]
                    sigs[f"{name}:{n}.{st.targets[0].id}"] = [_params(tgt.args), f"{m.path}:{st.lineno}",
                                                              _body_hash(tgt), f"{name}:{n}.{tgt.name}"]
    return {
        "schema": 1,
        "version": version,
        "source": source,
        "unparsed": tree.unparsed,
        "modules": modules,
        "signatures": sigs,
        "fields": fields,
        "post_init_assigns": assigned,
        "members": members,
        "flags": flags,
        "messages": sorted(messages, key=lambda r: (r[3], r[5], r[0], r[2])),
        "bare_asserts": sorted(bare, key=lambda r: (r[0], r[2])),
    }

"""The oracle for tests/review_downstream.py, run by a release's own Python (.venv,
.venv-0161, .venv-0131): what real imports, real attribute lookups and
``inspect.signature(...).bind`` say about each file's use of megatron.core at that release.
Independent of the reviewer: it never reads the release index.

stdin: [{"key", "text"}]; stdout: {key: [{"line", "kind", "name", "severity", "detail"}]}.
Kinds: import (a from-import or module that fails), attribute (``mod.name`` missing),
signature (bind raises TypeError), config-field (``config.X`` where TransformerConfig has
no X here but another release has it: FIELDS_ELSEWHERE from stdin "fields"), deprecated
(the callee's own source logs or warns "deprecat" naming the keyword or the class).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import json
import logging
import re
import sys
import warnings

logging.disable(logging.CRITICAL)
warnings.simplefilter("ignore")

ENV = object()
# The packages megatron-core ships (megatron.training from 0.17 on); megatron.bridge is
# another project.
MEGATRON = ("megatron.core", "megatron.training")
CONFIG_NAMES = ("config", "transformer_config", "tf_config", "tfconfig", "mcore_config")


def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def imports(tree):
    scope, stmts = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for a in node.names:
                if a.name != "*":
                    scope[a.asname or a.name] = (node.module, a.name)
                    stmts.append((node.lineno, node.module, a.name))
        elif isinstance(node, ast.Import):
            for a in node.names:
                scope[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
                stmts.append((node.lineno, a.name, None))
    return scope, stmts


def load(module, name):
    """(object, None) or (None, exception)."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001
        return None, exc
    if name is None:
        return mod, None
    if hasattr(mod, name):
        value = getattr(mod, name)
        # A TE wrapper bound to None without Transformer Engine: the machine, not the release.
        return (value, None) if value is not None else (ENV, None)
    try:
        return importlib.import_module(f"{module}.{name}"), None
    except Exception as exc:  # noqa: BLE001
        return None, exc


def module_deprecation(module):
    """The text of a module-level call in the module's own source that says 'deprecat'
    (warnings.warn at import time), or ''."""
    mod = sys.modules.get(module)
    if mod is None:
        return ""
    try:
        tree = ast.parse(inspect.getsource(mod))
    except (OSError, TypeError, SyntaxError):
        return ""
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            text = " ".join(c.value for a in stmt.value.args for c in ast.walk(a)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str))
            if "deprecat" in text.lower():
                return " ".join(text.split())
    return ""


def guarded_lines(tree):
    """Lines inside a ``try`` whose handlers catch ImportError (or everything): an import
    there is an optional one the code falls back from."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            names = {dotted(h.type) if h.type is not None else "*" for h in node.handlers}
            if names & {"*", "ImportError", "ModuleNotFoundError", "Exception", "BaseException"}:
                for stmt in node.body:
                    out.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return out


def env_failure(exc):
    """An import that fails for a package other than megatron (TE, flash-attn, HF): the
    machine, not the release."""
    name = getattr(exc, "name", None) or ""
    # megatron.training is absent from the wheels before 0.17: no verdict there either
    return isinstance(exc, ImportError) and name and (
        not name.startswith("megatron") or name == "megatron.training")


def resolve(scope, text):
    head, _, rest = text.partition(".")
    if head not in scope:
        return None
    module, name = scope[head]
    if not module.startswith(MEGATRON):
        return None
    obj, exc = load(module, name)
    if obj is None or obj is ENV:
        return ("unloadable", exc)
    for part in rest.split(".") if rest else []:
        if inspect.ismodule(obj) and not hasattr(obj, part):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
                continue
            except Exception:  # noqa: BLE001
                return ("missing", f"{obj.__name__}.{part}")
        if obj is None or part.startswith("_") or not (inspect.ismodule(obj) or inspect.isclass(obj)):
            return None  # an instance (set at run time) or a private name: no verdict
        if not hasattr(obj, part):
            return ("missing", f"{getattr(obj, '__name__', text)}.{part}")
        obj = getattr(obj, part)
    return ("ok", obj)


def enclosing(node, parents):
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def splat_keywords(scope_node, name, line):
    """Keywords in ``**name`` at ``line``: the last ``name = {...}`` / ``dict(...)`` before
    the line in the same function (or module), plus ``name["k"] = ...`` after it."""
    last, keys = -1, {}
    for node in ast.walk(scope_node):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and node.lineno < line:
            t, v = node.targets[0], node.value
            if isinstance(t, ast.Name) and t.id == name and node.lineno > last:
                got = None
                if isinstance(v, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in v.keys):
                    got = {k.value: k.lineno for k in v.keys}
                elif isinstance(v, ast.Call) and dotted(v.func) == "dict" and not v.args:
                    got = {k.arg: k.value.lineno for k in v.keywords if k.arg}
                if got is not None:
                    last, keys = node.lineno, got
    if last < 0:
        return {}
    for node in ast.walk(scope_node):
        if isinstance(node, ast.Assign) and last < node.lineno < line:
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id == name \
                        and isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                    keys[t.slice.value] = node.lineno
    return keys


def dict_keywords(tree):
    """unused (kept for reference): module-wide union."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t, v = node.targets[0], node.value
            if isinstance(t, ast.Name):
                if isinstance(v, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in v.keys):
                    out.setdefault(t.id, set()).update(k.value for k in v.keys)
                elif isinstance(v, ast.Call) and dotted(v.func) == "dict" and not v.args:
                    out.setdefault(t.id, set()).update(k.arg for k in v.keywords if k.arg)
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                    isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                out.setdefault(t.value.id, set()).add(t.slice.value)
    return out


def deprecation_texts(obj, depth=0):
    """deprecation_texts_own(obj), plus those of the same module's functions it calls
    (one level: get_gpt_layer_with_transformer_engine_spec hands its keywords to
    get_gpt_layer_with_transformer_engine_submodules in 0.19.2, which warns)."""
    out = deprecation_texts_own(obj)
    if depth or inspect.isclass(obj):
        return out
    try:
        tree = ast.parse(__import__("textwrap").dedent(inspect.getsource(obj)))
    except (OSError, TypeError, SyntaxError):
        return out
    module = sys.modules.get(getattr(obj, "__module__", ""), None)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and module is not None:
            callee = getattr(module, node.func.id, None)
            if inspect.isfunction(callee) and callee is not obj and \
                    callee.__module__ == obj.__module__:
                out += deprecation_texts_own(callee)
    return out


def deprecation_texts_own(obj):
    """The text of every call in the callee's own source whose string arguments say
    'deprecat' (warnings.warn, logger.warning, log_single_rank...), the pieces of a
    concatenated or f-string message joined."""
    try:
        src = inspect.getsource(obj.__init__ if inspect.isclass(obj) else obj)
        tree = ast.parse(__import__("textwrap").dedent(src))
    except (OSError, TypeError, SyntaxError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            text = " ".join(c.value for a in node.args for c in ast.walk(a)
                            if isinstance(c, ast.Constant) and isinstance(c.value, str))
            if "deprecat" in text.lower():
                out.append(text)
    return out


def check_file(text, tc_fields, elsewhere):
    tree = ast.parse(text)
    scope, stmts = imports(tree)
    guarded = guarded_lines(tree)
    warned = set()
    # (line, name) under an if whose test names it as a string (getattr(config, "x", None),
    # hasattr): the read happens only where the attribute exists
    checked = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.If):
            names = {c.value for c in ast.walk(n.test) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            for stmt in n.body:
                for ln in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1):
                    checked.update((ln, x) for x in names)
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    out = []
    for line, module, name in stmts:
        if not module.startswith(MEGATRON):
            continue
        if line in guarded:
            continue
        obj, exc = load(module, name)
        if (line, module) not in warned and module_deprecation(module):
            warned.add((line, module))
            out.append(dict(line=line, kind="deprecated-module", name=module, severity="warning",
                            detail=module_deprecation(module)[:200]))
        if obj is None and not env_failure(exc):
            out.append(dict(line=line, kind="import", name=f"{module}:{name}", severity="error",
                            detail=f"{type(exc).__name__}: {exc}"[:200]))
    assigned = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            text_ = dotted(node.func)
            if not text_:
                continue
            got = resolve(scope, text_)
            if got is None or got[0] == "unloadable":
                continue
            if got[0] == "missing":
                out.append(dict(line=node.lineno, kind="attribute", name=text_, severity="error",
                                detail=f"no attribute {got[1]}"))
                continue
            obj = got[1]
            if not callable(obj):
                continue
            try:
                sig = inspect.signature(obj)
            except (TypeError, ValueError):
                continue
            kws = {k.arg for k in node.keywords if k.arg}
            key_lines = {}
            for k in node.keywords:
                if k.arg is None and isinstance(k.value, ast.Name):
                    got = splat_keywords(enclosing(node, parents) or tree, k.value.id, node.lineno)
                    key_lines.update(got)
                    kws |= set(got)
                elif k.arg is None and isinstance(k.value, ast.Dict):
                    kws |= {x.value for x in k.value.keys if isinstance(x, ast.Constant)}
            star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
            npos = sum(1 for a in node.args if not isinstance(a, ast.Starred))
            ps = sig.parameters.values()
            if not any(p.kind is p.VAR_KEYWORD for p in ps):
                named = {p.name for p in ps if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
                for k in sorted(kws - named):
                    out.append(dict(line=node.lineno, end=node.end_lineno, kind="signature", name=f"{text_}:{k}",
                                    severity="error", detail=f"got an unexpected keyword argument {k!r}",
                                    also=[key_lines[k]] if k in key_lines else []))
                kws &= named
            try:
                (sig.bind_partial if star else sig.bind)(*([None] * npos), **{k: None for k in kws})
            except TypeError as exc:
                out.append(dict(line=node.lineno, end=node.end_lineno, kind="signature", name=text_, severity="error",
                                detail=str(exc)[:200]))
            params = set(sig.parameters)
            slots = [p for p in sig.parameters.values()
                     if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            for arg, slot in zip(node.args, slots):
                said = arg.attr if isinstance(arg, ast.Attribute) else None
                if said and said in params and said != slot.name and \
                        (inspect.isfunction(obj) and obj.__name__.startswith("get_")):
                    out.append(dict(line=arg.lineno, kind="positional", name=f"{text_}:{said}",
                                    severity="warning",
                                    detail=f"{said} lands in parameter {slot.name!r}"))
            for msg in deprecation_texts(obj):
                low = msg.lower()
                cls = getattr(obj, "__name__", "")
                head = low.partition("deprecat")[0]
                hit = [k for k in kws if k in params and re.search(rf"(?<![\w-]){re.escape(k.lower())}(?![\w-])", head)]
                if cls and cls.lower() in head and inspect.isclass(obj):
                    hit.append("<class>")
                for k in hit:
                    out.append(dict(line=node.lineno, end=node.end_lineno, kind="deprecated", name=f"{text_}:{k}",
                                    severity="warning", detail=msg[:200],
                                    also=[key_lines[k]] if k in key_lines else []))
        elif isinstance(node, ast.ClassDef):
            for b in node.bases:
                bt = dotted(b)
                got = resolve(scope, bt) if bt else None
                if got and got[0] == "ok" and inspect.isclass(got[1]):
                    for msg in deprecation_texts(got[1]):
                        if got[1].__name__.lower() in msg.lower().partition("deprecat")[0]:
                            out.append(dict(line=node.lineno, kind="deprecated", name=f"{bt}:<subclass>",
                                            severity="warning", detail=msg[:200]))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            base = node.value
            is_cfg = (isinstance(base, ast.Name) and base.id in CONFIG_NAMES) or \
                     (isinstance(base, ast.Attribute) and base.attr in CONFIG_NAMES)
            if is_cfg and node.attr not in tc_fields and node.attr in elsewhere and \
                    node.attr not in assigned and (node.lineno, node.attr) not in checked:
                out.append(dict(line=node.lineno, kind="config-field", name=node.attr, severity="error",
                                detail="TransformerConfig has no such field here"))
    out += global_reads(tree, scope, parents)
    for b in out:
        b.setdefault("end", b["line"])
    seen, uniq = set(), []
    for b in out:
        k = (b["line"], b["kind"], b["name"])
        if k not in seen:
            seen.add(k)
            uniq.append(b)
    return uniq


GETTER = re.compile(r"^get_(\w+?)_(group|rank|world_size)$")


def _keeps_collection(cls):
    """The real class takes pg_collection and some class of its MRO assigns
    self.pg_collection in its source."""
    try:
        if "pg_collection" not in inspect.signature(cls).parameters:
            return False
    except (TypeError, ValueError):
        return False
    for klass in cls.__mro__:
        try:
            if "self.pg_collection = " in inspect.getsource(klass):
                return True
        except (OSError, TypeError):
            continue
    return False


def global_reads(tree, scope, parents):
    """parallel_state getters (get_*_group/rank/world_size with a ProcessGroupCollection
    field for the group) called where ``self`` is a Megatron subclass that keeps
    self.pg_collection: in its methods and their closures, not staticmethods, and not above
    super().__init__ in __init__."""
    if not MPU_FIELDS:
        return []  # no ProcessGroupCollection in this release (0.13: ModelCommProcessGroups)
    local = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    keeps = {}

    def class_keeps(cdef, depth=0):
        if cdef.name in keeps or depth > 4:
            return keeps.get(cdef.name, False)
        ok = False
        for b in cdef.bases:
            bt = dotted(b)
            if bt in local and local[bt] is not cdef:
                ok = ok or class_keeps(local[bt], depth + 1)
                continue
            got = resolve(scope, bt) if bt else None
            if got and got[0] == "ok" and inspect.isclass(got[1]) and _keeps_collection(got[1]):
                ok = True
        keeps[cdef.name] = ok
        return ok

    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        text_ = dotted(node.func) or ""
        name = text_.rpartition(".")[2]
        m = GETTER.match(name)
        if not m:
            continue
        got = resolve(scope, text_)
        if not got or got[0] != "ok" or getattr(got[1], "__module__", "") != "megatron.core.parallel_state":
            continue
        group = name if m.group(2) == "group" else f"get_{m.group(1)}_group"
        # the getters whose group a collection holds (ProcessGroupCollection's own map)
        if group not in MPU_FIELDS:
            continue
        # walk out: functions up to the class
        funcs, n, cdef = [], node, None
        while n in parents:
            n = parents[n]
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.append(n)
            elif isinstance(n, ast.ClassDef):
                cdef = n
                break
        if cdef is None or not funcs or not class_keeps(cdef):
            continue
        method = funcs[-1]
        static = any(dotted(d) == "staticmethod" for d in method.decorator_list)
        first = method.args.args[0].arg if method.args.args else None
        if static or first != "self":
            continue
        if method.name == "__init__" and any(
                isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
                c.func.attr == "__init__" and isinstance(c.func.value, ast.Call) and
                dotted(c.func.value.func) == "super" and c.lineno > node.lineno
                for c in ast.walk(method)):
            continue
        out.append(dict(line=node.lineno, kind="global-group", name=text_, severity="warning",
                        detail=f"self.pg_collection is in reach in {cdef.name}.{method.name}"))
    return out


def tc_attributes():
    from megatron.core.transformer.transformer_config import TransformerConfig
    import dataclasses
    return {f.name for f in dataclasses.fields(TransformerConfig)} | set(dir(TransformerConfig))


def _mpu_fields():
    """getter name -> collection field, read from ProcessGroupCollection.use_mpu_process_groups'
    source (the release's own map), or {} where the release has none."""
    try:
        from megatron.core.process_groups_config import ProcessGroupCollection
        src = inspect.getsource(ProcessGroupCollection.use_mpu_process_groups)
    except Exception:  # noqa: BLE001
        return {}
    return dict((g, f) for f, g in re.findall(r"['\"](\w+)['\"]\s*:\s*(?:partial\(\s*)?"
                                             r"(?:parallel_state|mpu)\.(get_\w+_group)", src))


MPU_FIELDS = {}


def main():
    MPU_FIELDS.update(_mpu_fields())
    req = json.load(sys.stdin)
    if isinstance(req, dict) and req.get("fields_only"):
        print(json.dumps(sorted(tc_attributes())))
        return
    items, elsewhere = req["items"], set(req["elsewhere"])
    real_stdout, sys.stdout = sys.stdout, io.StringIO()  # imports that print stay out of the JSON
    try:
        fields = tc_attributes()
        res = {it["key"]: check_file(it["text"], fields, elsewhere - fields) for it in items}
    finally:
        sys.stdout = real_stdout
    print(json.dumps(res))


if __name__ == "__main__":
    main()

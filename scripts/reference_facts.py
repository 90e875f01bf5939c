"""Checkable facts in the bundle's Markdown, and their check against an installed megatron-core.

This module is a library, not a command: ``scripts/inspect_core_api.py --check-references``
and ``tests/test_api_*.py`` import it. It imports only the standard library at module level;
megatron-core is imported lazily, inside :func:`check_fact`. Python >= 3.10.

Public API (stable)
-------------------
``extract_facts(paths, index=None) -> list[Fact]``
    Returns every checkable fact of these Markdown files, deduplicated by ``(id, versions)``
    (``Fact.sources`` lists every ``path:line`` where it is stated; ``Fact.source`` is the first).
    The facts are read from ``references/index/facts.json``, compiled from the Markdown with
    markdown-it-py by ``dev/build_reference_index.py`` (``make index-references``); a file is
    found there by its SHA-256, and one that is not (edited since the build) raises
    ``StaleIndex``. Nothing here parses Markdown.
``check_fact(fact, source_at=None) -> dict``
    ``{"id", "kind", "source", "versions", "status", "detail"}``; ``status`` is one of
    ``ok``, ``mismatch`` (the installation disagrees; ``detail`` says what it has instead),
    ``missing`` (the name does not resolve) or ``error`` (the check itself failed, e.g. the
    upstream source cannot tell; ``mirror_missing`` is then True). ``source_at`` reads
    Megatron-LM's files at a version for version-tagged names (default: the git mirror,
    :func:`mirror_source`); see ``UpstreamSource``.
``check_facts(facts, source_at=None) -> list[dict]``
    :func:`check_fact` for each fact; a broken fact never aborts the rest.
``installed_version() -> str | None``, ``render_stub(target) -> str`` (a signature stub for a
live object, handy when writing a document).

Fact syntax in Markdown
-----------------------
The compiler reads the Markdown as CommonMark with GFM tables (markdown-it-py, the tests'
configuration in ``tests/mdtools.py``): code spans are those of paragraphs, headings and table
cells; fences and HTML comments hold no code spans.

``name`` facts -- id ``name:<target>``
    Every dotted ``megatron.<...>`` name and every ``megatron.<module>:<attr>`` in an inline
    code span or in any fence, plus every ``from megatron.x import A, B`` in a ``python``
    fence (as ``megatron.x:A``). Each must resolve in the installed package: the longest
    importable module prefix is imported and the rest is looked up with ``getattr``.
    Version escape, for names that do not exist in 0.19.2: put a version tag right after the
    code span -- ``(0.16)``, ``(0.16.1)``, ``(0.16-0.18)``, ``(0.16, 0.17)``, ``(main)`` or
    ``(0.20 dev)``, optionally with a leading word ``in``, ``only in``, ``until``, ``up to`` or
    ``since``, e.g. `` `megatron.core.ssm.mamba_block` (0.16-0.17) ``. A fence takes the tag
    as ``versions=0.16-0.18`` in its info string (no spaces; ``main`` for the main branch).
    A tagged name is checked twice: it must resolve in Megatron-LM's git history at every
    stated version (``core_vX.Y.*`` tags, newest patch; ``main`` = the mirror's main branch;
    ranges check both ends), and it must NOT resolve in the installed package unless the
    installed version is inside the tag. The mirror path comes from ``$MEGATRON_LM_MIRROR``
    (default ``/work/.mirror/NVIDIA+Megatron-LM/repo``); a caller may pass another
    ``source_at`` (the tests read released versions from PyPI wheels when there is no mirror).
    Bare identifiers: after a marker line ``<!-- names-in: megatron.core.parallel_state -->``,
    every code span of the next paragraph that is an identifier (optionally followed by ``()``)
    is the name ``<module>:<identifier>``.

``signature`` facts -- id ``signature:<module>:<Attr>``
    A fence whose info string is ``python signature <module>:<Attr>`` and whose body is one
    ``def`` stub that parses with :mod:`ast`. For a class the stub is ``def __init__(self, ...)``
    and is compared with ``inspect.signature(cls.__init__)``; for a function the stub carries
    the function's name. Compared: parameter names, kinds (positional-only, ``*args``,
    keyword-only, ``**kwargs``), order and defaults; annotations and the return annotation
    only where the stub gives one. Defaults compare by value (``ast.literal_eval``) or, for
    non-literals, by source text against the dotted name / ``repr`` of the live default.
    Annotations are normalized on both sides: module prefixes dropped (``a.b.C`` -> ``C``),
    string forward references parsed, ``Optional[X]`` and ``Union[...]`` written as sorted
    ``X | None`` unions, ``List/Dict/Tuple/Type`` lower-cased, spaces ignored.

``default`` facts -- id ``default:<Class>.<field>``
    A Markdown table after the marker ``<!-- defaults: <module>:<Class> -->`` (the marker
    line, then optional blank/text lines, then the table). Every row whose first cell is
    `` `field` `` and whose second cell is `` `value` `` states the dataclass field's default
    (``default`` or ``default_factory()``; for a class that is not a dataclass, the class
    attribute). ``value`` is a Python literal, a dotted name
    (``torch.float32``, ``init.normal_``), or ``<required>`` for a field without default.

``derived`` facts -- id ``derived:<Class>(<kwargs>).<field>``
    A table after ``<!-- derived: <module>:<Class> <kwargs> -->`` where ``<kwargs>`` are Python
    keyword arguments with literal values (``num_layers=2, hidden_size=64``). The class is
    built with those arguments (so ``__post_init__`` runs) and each row's field is compared
    with the value as above.

``quote`` facts -- id ``quote:<path>:<first 60 characters>``
    A code span followed by `` (quoted from `megatron/<path>.py`)`` on the same line: the span's
    text occurs verbatim in that file of the installed package (for fixed parts of messages).

``fieldcount`` facts -- id ``fieldcount:<module>:<Class>``
    ``<!-- fieldcount: <module>:<Class> <N> -->``: ``len(dataclasses.fields(Class)) == N``.

Facts without a version tag are stated for megatron-core 0.19.2, the bundle's release.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib
import json
import inspect
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

BUNDLE_VERSION = "0.19.2"
DEFAULT_MIRROR = "/work/.mirror/NVIDIA+Megatron-LM/repo"

__all__ = [
    "BUNDLE_VERSION", "Fact", "StaleIndex", "UpstreamSource", "check_fact", "check_facts",
    "extract_facts", "installed_version", "mirror_source", "render_stub",
    "version_in_spec",
]


@dataclass
class Fact:
    id: str
    kind: str
    target: str
    expected: str
    source: str
    versions: str | None = None
    sources: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Extraction: the facts come from the compiled index, never from parsing Markdown here

INDEX = Path(__file__).resolve().parent.parent / "references" / "index" / "facts.json"


class StaleIndex(LookupError):
    """A Markdown file is not in the facts index (edited since the index was built, or foreign)."""


@functools.lru_cache(maxsize=4)
def _load_index(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _by_hash(index: dict) -> dict[str, list[dict]]:
    return {entry["sha256"]: entry["facts"] for entry in index["files"].values()}


def extract_facts(paths: Iterable[str | os.PathLike], index: dict | None = None) -> list[Fact]:
    """The facts stated in these Markdown files, read from the compiled index.

    A file is found in the index by the SHA-256 of its bytes, so a copy of a bundle document
    anywhere is found too; ``index`` defaults to ``references/index/facts.json``. A file that
    is not in it raises :class:`StaleIndex` (rebuild with ``make index-references``)."""
    if index is None:
        try:
            index = _load_index(str(INDEX))
        except (OSError, ValueError) as exc:
            raise StaleIndex(f"cannot read {INDEX}: {exc}; rebuild it with `make index-references`") from None
    known = _by_hash(index)
    col = _Collector()
    for p in paths:
        digest = hashlib.sha256(Path(p).read_bytes()).hexdigest()
        if digest not in known:
            raise StaleIndex(f"{p} is not in {INDEX.name} (edited since the index was built, or not a bundle "
                             f"document): rebuild it with `{index.get('rebuild', 'make index-references')}`")
        for rec in known[digest]:
            col.add(Fact(rec["id"], rec["kind"], rec["target"], rec["expected"], f"{p}:{rec['line']}",
                         rec["versions"], extra=dict(rec["extra"])))
    return list(col.facts.values())


class _Collector:
    def __init__(self) -> None:
        self.facts: dict[tuple[str, str | None], Fact] = {}

    def add(self, fact: Fact) -> None:
        key = (fact.id, fact.versions)
        if key in self.facts:
            self.facts[key].sources.append(fact.source)
        else:
            fact.sources = [fact.source]
            self.facts[key] = fact


# ---------------------------------------------------------------------------------------------
# Versions

def installed_version() -> str | None:
    from importlib import metadata
    for dist in ("megatron-core", "megatron_core"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


# The release the main branch is developing; "main" and "X.Y dev" tags mean this version.
MAIN_VERSION = (0, 20)


def _vtuple(v: str) -> tuple[int, ...]:
    v = v.strip()
    if v.startswith("main") or v.endswith("dev"):
        return MAIN_VERSION
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def _vmatch(item: tuple[int, ...], installed: tuple[int, ...]) -> bool:
    return installed[:len(item)] == item


def _spec_items(spec: str) -> list[list[str]]:
    """'0.16-0.18, main' -> [['0.16', '0.18'], ['main']]"""
    return [[p.strip() for p in part.split("-")] for part in spec.split(",")]


def version_in_spec(version: str, spec: str) -> bool:
    inst = _vtuple(version)
    if re.search(r"(rc|dev|a|b)\d*$", version) and inst[:2] >= MAIN_VERSION:
        inst = inst[:2]
    for item in _spec_items(spec):
        if len(item) == 1 and _vmatch(_vtuple(item[0]), inst):
            return True
        if len(item) == 2:
            lo, hi = _vtuple(item[0]), _vtuple(item[1])
            if lo <= inst[:len(lo)] and inst[:len(hi)] <= hi:
                return True
    return False


# ---------------------------------------------------------------------------------------------
# Resolution in the installed package and in the git mirror

_MISSING = object()


def _resolve(target: str) -> Any:
    """Import `a.b.c:D.e` or the dotted `a.b.c.D.e`; raise LookupError with a reason."""
    if ":" in target:
        mod_name, attr = target.split(":", 1)
        try:
            obj = importlib.import_module(mod_name)
        except ImportError as exc:
            raise LookupError(f"module {mod_name} does not import: {exc}") from None
        parts = attr.split(".")
    else:
        parts = target.split(".")
        obj, mod_name = None, ""
        for k in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:k]))
            except ModuleNotFoundError as exc:
                if exc.name and not ".".join(parts[:k]).startswith(exc.name):
                    raise LookupError(f"{'.'.join(parts[:k])} needs missing {exc.name}") from None
                continue
            mod_name, parts = ".".join(parts[:k]), parts[k:]
            break
        if obj is None:
            raise LookupError(f"no importable prefix of {target}")
    for i, p in enumerate(parts):
        nxt = getattr(obj, p, _MISSING)
        if nxt is _MISSING:
            try:  # a submodule not imported by its package
                nxt = importlib.import_module(f"{mod_name}.{'.'.join(parts[:i + 1])}")
            except ImportError:
                raise LookupError(f"{mod_name}{''.join('.' + x for x in parts[:i])} has no attribute {p}") from None
        obj = nxt
    return obj


# A reader of Megatron-LM's files: source_at(version, path) -> text, or None when the file does
# not exist at that version. ``version`` is one item of a tag as written in the Markdown
# ("0.16", "0.16.1", "main", "0.20 dev"; a minor line means its newest patch). It raises
# LookupError when there is no such version, and any other exception when it cannot tell here
# (no mirror, no network); the fact is then reported as an error, not as a mismatch.
UpstreamSource = Callable[[str, str], "str | None"]


def _mirror() -> Path | None:
    p = Path(os.environ.get("MEGATRON_LM_MIRROR", DEFAULT_MIRROR))
    return p if p.exists() else None


def _git(mirror: Path, *args: str) -> str | None:
    r = subprocess.run(["git", "-C", str(mirror), *args], capture_output=True, text=True, timeout=60)
    return r.stdout if r.returncode == 0 else None


@functools.lru_cache(maxsize=None)
def _ref_for(mirror: Path, version: str) -> str | None:
    if version.startswith("main") or version.endswith("dev"):
        return "main" if _git(mirror, "rev-parse", "--verify", "-q", "main") else "HEAD"
    tags = (_git(mirror, "tag", "-l", f"core_v{version}*") or "").split()
    exact = [t for t in tags if re.fullmatch(rf"core_v{re.escape(version)}(\.\d+)?", t)]
    return sorted(exact, key=_vtuple)[-1] if exact else None


def mirror_source(mirror: Path) -> UpstreamSource:
    """The UpstreamSource of a Megatron-LM git clone (``core_vX.Y.Z`` tags, ``main``)."""
    def source_at(version: str, path: str) -> str | None:
        ref = _ref_for(mirror, version)
        if ref is None:
            raise LookupError(f"no tag for {version} in {mirror}")
        return _git(mirror, "show", f"{ref}:{path}")
    return source_at


def _module_file(source_at: UpstreamSource, version: str, module: str) -> str | None:
    base = module.replace(".", "/")
    for path in (f"{base}.py", f"{base}/__init__.py"):
        text = source_at(version, path)
        if text is not None:
            return text
    return None


def _defined_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names[n.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try)):
            for sub in (node.body, node.orelse, getattr(node, "handlers", []), getattr(node, "finalbody", [])):
                for s in sub:
                    names.update(_defined_names(s.body if isinstance(s, ast.ExceptHandler) else [s]))
    return names


def _resolves_upstream(source_at: UpstreamSource, version: str, target: str) -> bool:
    if ":" in target:
        module, attrs = target.split(":", 1)
        candidates = [(module, attrs.split("."))]
    else:
        parts = target.split(".")
        candidates = [(".".join(parts[:k]), parts[k:]) for k in range(len(parts), 0, -1)]
    for module, attrs in candidates:
        text = _module_file(source_at, version, module)
        if text is None:
            continue
        if not attrs:
            return True
        try:
            body = ast.parse(text).body
        except SyntaxError:
            return False
        if _module_file(source_at, version, f"{module}.{attrs[0]}") is not None:
            return True
        for a in attrs:
            node = _defined_names(body).get(a)
            if node is None:
                return False
            body = node.body if isinstance(node, ast.ClassDef) else []
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Checks

def _result(fact: Fact, status: str, detail: str = "", **extra: Any) -> dict:
    return {"id": fact.id, "kind": fact.kind, "source": fact.source, "versions": fact.versions,
            "status": status, "detail": detail, **extra}


def _check_name(fact: Fact, source_at: UpstreamSource | None = None) -> dict:
    try:
        _resolve(fact.target)
        found, why = True, ""
    except LookupError as exc:
        found, why = False, str(exc)
    if fact.versions is None:
        return _result(fact, "ok" if found else "missing", why)
    inst = installed_version() or "unknown"
    if version_in_spec(inst, fact.versions):
        return _result(fact, "ok" if found else "missing", why)
    if found:
        return _result(fact, "mismatch",
                       f"tagged ({fact.versions}) but it resolves in the installed {inst}")
    if source_at is None:
        mirror = _mirror()
        if mirror is None:
            return _result(fact, "error", "git mirror not found; set MEGATRON_LM_MIRROR", mirror_missing=True)
        source_at = mirror_source(mirror)
    bad, unknown = [], []
    for item in _spec_items(fact.versions):
        for v in item:
            try:
                if not _resolves_upstream(source_at, v, fact.target):
                    bad.append(f"not in {v}")
            except LookupError as exc:
                bad.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - the source cannot tell: not a mismatch
                unknown.append(f"cannot check {v}: {exc}")
    if unknown and not bad:
        return _result(fact, "error", "; ".join(unknown), mirror_missing=True)
    return _result(fact, "mismatch" if bad else "ok",
                   "; ".join(bad) or f"absent from installed {inst}, present upstream at {fact.versions}")


# -- annotations ------------------------------------------------------------------------------

_LOWER = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Type": "type", "Set": "set"}


def _ann_node(node: ast.AST) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _ann_node(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return node.value
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    if isinstance(node, ast.Attribute):
        return _LOWER.get(node.attr, node.attr)
    if isinstance(node, ast.Name):
        return _LOWER.get(node.id, node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union([node.left, node.right])
    if isinstance(node, ast.Subscript):
        head = _ann_node(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _union([args[0], ast.Constant(None)])
        if head == "Union":
            return _union(args)
        if head == "Literal":  # literal strings are values, not forward references
            return f"Literal[{','.join(repr(a.value) if isinstance(a, ast.Constant) else _ann_node(a) for a in args)}]"
        return f"{head}[{','.join(_ann_node(a) for a in args)}]"
    if isinstance(node, (ast.List, ast.Tuple)):
        return "[" + ",".join(_ann_node(a) for a in node.elts) + "]"
    return ast.unparse(node).replace(" ", "")


def _union(nodes: list[ast.AST]) -> str:
    parts: set[str] = set()
    for n in nodes:
        parts.update(x.strip() for x in _ann_node(n).split("|"))
    return " | ".join(sorted(parts, key=lambda x: (x == "None", x)))


def normalize_annotation(ann: Any) -> str:
    if ann is inspect.Parameter.empty:
        return ""
    text = ann if isinstance(ann, str) else inspect.formatannotation(ann)
    try:
        return _ann_node(ast.parse(text, mode="eval").body)
    except SyntaxError:
        return re.sub(r"\s+", "", text)


# -- defaults ---------------------------------------------------------------------------------

def _default_texts(value: Any) -> set[str]:
    texts = {repr(value), str(value)}
    qual = getattr(value, "__qualname__", None)
    mod = getattr(value, "__module__", None)
    if qual:
        texts |= {qual, f"{mod}.{qual}"}
        if mod:
            texts.add(f"{mod.rsplit('.', 1)[-1]}.{qual}")
    return texts


def _same_object(dotted: str, value: Any) -> bool:
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", dotted):
        return False
    try:
        return _resolve(dotted) is value
    except LookupError:
        return False


def default_matches(expected_src: str, value: Any) -> bool:
    expected_src = expected_src.strip()
    try:
        lit = ast.literal_eval(expected_src)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return expected_src in _default_texts(value) or _same_object(expected_src, value)
    if isinstance(lit, bool) or isinstance(value, bool):
        return type(lit) is type(value) and lit == value
    try:
        if lit == value and (type(lit) is type(value) or isinstance(value, (int, float))):
            return True
    except Exception:  # noqa: BLE001 - a tensor or odd __eq__ is simply not equal
        return False
    return expected_src in _default_texts(value)


# -- signatures -------------------------------------------------------------------------------

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional-or-keyword",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.KEYWORD_ONLY: "keyword-only",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


def _stub_params(stub: str) -> tuple[str, list[tuple[str, str, str | None, str | None]], str | None]:
    """Parse a `def` stub into (name, [(param, kind, annotation, default source)], return ann)."""
    tree = ast.parse(stub)
    fns = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(fns) != 1:
        raise ValueError("a signature block must hold exactly one def stub")
    a = fns[0].args
    out: list[tuple[str, str, str | None, str | None]] = []

    def add(arg: ast.arg, kind: str, default: ast.AST | None) -> None:
        ann = _ann_node(arg.annotation) if arg.annotation is not None else None
        out.append((arg.arg, kind, ann, ast.unparse(default) if default is not None else None))

    positional = a.posonlyargs + a.args
    pad = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, arg in enumerate(positional):
        add(arg, "positional-only" if i < len(a.posonlyargs) else "positional-or-keyword", pad[i])
    if a.vararg:
        add(a.vararg, "*args", None)
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        add(arg, "keyword-only", d)
    if a.kwarg:
        add(a.kwarg, "**kwargs", None)
    ret = _ann_node(fns[0].returns) if fns[0].returns is not None else None
    return fns[0].name, out, ret


def _live_signature(obj: Any) -> tuple[str, inspect.Signature]:
    if inspect.isclass(obj):
        return "__init__", inspect.signature(obj.__init__)
    return getattr(obj, "__name__", ""), inspect.signature(obj)


def _param_text(p: inspect.Parameter) -> str:
    prefix = {"*args": "*", "**kwargs": "**"}.get(_KINDS[p.kind], "")
    ann = normalize_annotation(p.annotation)
    text = prefix + p.name + (f": {ann}" if ann else "")
    if p.default is not inspect.Parameter.empty:
        d = p.default
        text += (" = " if ann else "=") + (repr(d) if isinstance(d, (int, float, str, bool, type(None))) else sorted(_default_texts(d), key=len)[-1])
    return text


def _stub_lines(sig: inspect.Signature) -> list[str]:
    """Parameter texts with the `/` and `*` markers Python needs between kinds."""
    out: list[str] = []
    prev = None
    for p in sig.parameters.values():
        if prev is inspect.Parameter.POSITIONAL_ONLY and p.kind is not prev:
            out.append("/")
        if p.kind is inspect.Parameter.KEYWORD_ONLY and prev not in (
                inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_POSITIONAL):
            out.append("*")
        out.append(_param_text(p))
        prev = p.kind
    if prev is inspect.Parameter.POSITIONAL_ONLY:
        out.append("/")
    return out


def render_stub(target: str) -> str:
    """A `def` stub for the live object, in the syntax of signature blocks."""
    name, sig = _live_signature(_resolve(target))
    params = _stub_lines(sig)
    ret = normalize_annotation(sig.return_annotation)
    inner = "".join(f"\n    {p}," for p in params) + ("\n" if params else "")
    return f"def {name}({inner}){' -> ' + ret if ret else ''}: ..."


def _compare_signature(fact: Fact, obj: Any) -> list[str]:
    want_name, want, want_ret = _stub_params(fact.expected)
    name, sig = _live_signature(obj)
    diffs = []
    if want_name != name:
        diffs.append(f"stub is named {want_name}, the installed callable is {name}")
    have = list(sig.parameters.values())
    if [w[0] for w in want] != [p.name for p in have]:
        diffs.append(f"parameters {[w[0] for w in want]} != installed {[p.name for p in have]}")
    by_name = {p.name: p for p in have}
    for pname, kind, ann, dflt in want:
        p = by_name.get(pname)
        if p is None:
            continue
        if _KINDS[p.kind] != kind:
            diffs.append(f"{pname}: kind {kind} != installed {_KINDS[p.kind]}")
        if ann is not None and ann != normalize_annotation(p.annotation):
            diffs.append(f"{pname}: annotation {ann} != installed {normalize_annotation(p.annotation) or '(none)'}")
        if (dflt is None) != (p.default is inspect.Parameter.empty):
            diffs.append(f"{pname}: default {dflt or '(none)'} != installed "
                         f"{'(none)' if p.default is inspect.Parameter.empty else repr(p.default)}")
        elif dflt is not None and not default_matches(dflt, p.default):
            diffs.append(f"{pname}: default {dflt} != installed {p.default!r}")
    if want_ret is not None and want_ret != normalize_annotation(sig.return_annotation):
        diffs.append(f"return annotation {want_ret} != installed {normalize_annotation(sig.return_annotation)}")
    return diffs


def _check_signature(fact: Fact) -> dict:
    try:
        obj = _resolve(fact.target)
    except LookupError as exc:
        return _result(fact, "missing", str(exc))
    diffs = _compare_signature(fact, obj)
    if diffs:
        return _result(fact, "mismatch", "; ".join(diffs) + "\ninstalled:\n" + render_stub(fact.target))
    return _result(fact, "ok")


# -- dataclass fields -------------------------------------------------------------------------

def _field_default(cls: Any, name: str) -> Any:
    if not dataclasses.is_dataclass(cls):  # a plain class: its class attribute
        if not hasattr(cls, name):
            raise LookupError(f"{cls.__name__} has no attribute {name}")
        return getattr(cls, name)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if name not in fields:
        raise LookupError(f"{cls.__name__} has no field {name}")
    f = fields[name]
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return _MISSING


def _check_default(fact: Fact) -> dict:
    try:
        cls = _resolve(fact.target)
        value = _field_default(cls, fact.extra["field"])
    except LookupError as exc:
        return _result(fact, "missing", str(exc))
    if fact.expected.strip() == "<required>":
        ok = value is _MISSING
    else:
        ok = value is not _MISSING and default_matches(fact.expected, value)
    return _result(fact, "ok" if ok else "mismatch",
                   "" if ok else f"installed default: {'<required>' if value is _MISSING else repr(value)}")


def _kwarg_value(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _resolve(ast.unparse(node))  # a dotted name such as torch.float32


def _kwargs(text: str) -> dict:
    call = ast.parse(f"f({text})", mode="eval").body
    return {k.arg: _kwarg_value(k.value) for k in call.keywords}


def _check_derived(fact: Fact) -> dict:
    try:
        cls = _resolve(fact.target)
    except LookupError as exc:
        return _result(fact, "missing", str(exc))
    obj = cls(**_kwargs(fact.extra["kwargs"]))
    value = getattr(obj, fact.extra["field"], _MISSING)
    if value is _MISSING:
        return _result(fact, "missing", f"{cls.__name__} has no attribute {fact.extra['field']}")
    ok = default_matches(fact.expected, value)
    return _result(fact, "ok" if ok else "mismatch", "" if ok else f"installed value: {value!r}")


def _check_fieldcount(fact: Fact) -> dict:
    try:
        cls = _resolve(fact.target)
    except LookupError as exc:
        return _result(fact, "missing", str(exc))
    n = len(dataclasses.fields(cls))
    ok = str(n) == fact.expected.strip()
    return _result(fact, "ok" if ok else "mismatch", "" if ok else f"installed: {n} fields")


def _check_quote(fact: Fact) -> dict:
    import megatron  # the installed package's root, wherever it lives

    root = Path(next(iter(megatron.__path__))).parent
    path = root / fact.target
    if not path.is_file():
        return _result(fact, "missing", f"no file {fact.target} in the installed package")
    text = path.read_text(encoding="utf-8")
    if fact.expected in text:
        return _result(fact, "ok")
    return _result(fact, "mismatch", f"text not found verbatim in installed {fact.target}")


_CHECKERS = {
    "quote": _check_quote,
    "name": _check_name,
    "signature": _check_signature,
    "default": _check_default,
    "derived": _check_derived,
    "fieldcount": _check_fieldcount,
}


def check_fact(fact: Fact, source_at: UpstreamSource | None = None) -> dict:
    try:
        if fact.kind == "name":
            return _check_name(fact, source_at)
        return _CHECKERS[fact.kind](fact)
    except Exception as exc:  # noqa: BLE001 - one broken fact must not abort the others
        return _result(fact, "error", f"{type(exc).__name__}: {exc}")


def check_facts(facts: Iterable[Fact], source_at: UpstreamSource | None = None) -> list[dict]:
    return [check_fact(f, source_at) for f in facts]

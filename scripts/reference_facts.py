"""Checkable facts in the bundle's Markdown, and their check against an installed megatron-core.

This module is a library, not a command: ``scripts/inspect_core_api.py --check-references``
and ``tests/test_api_*.py`` import it. It imports only the standard library at module level;
megatron-core is imported lazily, inside :func:`check_fact`. Python >= 3.10.

Public API (stable)
-------------------
``extract_facts(paths) -> list[Fact]``
    Reads Markdown files and returns every checkable fact, deduplicated by ``(id, versions)``
    (``Fact.sources`` lists every ``path:line`` where it is stated; ``Fact.source`` is the first).
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
live object, handy when writing a document), ``scan_markdown(text) -> Markdown`` (the
line-based fence / code-span scanner, exposed so tests can compare it with markdown-it-py).

Fact syntax in Markdown
-----------------------
The scanner is line based (no Markdown library): fences open with three or more backticks or
tildes (indented at most 3 spaces) and close with the same character, at least as long; code
spans are matched within a paragraph (consecutive non-blank lines; headings, table rows, list
items and block quotes start a new one), so a span may wrap onto the next line; lines inside
fences and inside HTML comments hold no code spans. tests/test_api_extract.py proves that this
finds the same fences and code spans as markdown-it-py on every document of the bundle.

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
import importlib
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
    "BUNDLE_VERSION", "Fact", "Markdown", "UpstreamSource", "check_fact", "check_facts",
    "extract_facts", "installed_version", "mirror_source", "render_stub", "scan_markdown",
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
# Line-based Markdown scanning

@dataclass
class Fence:
    info: str
    body: str
    line: int  # 1-based line of the opening fence


@dataclass
class Markdown:
    fences: list[Fence]
    spans: list[tuple[int, str, str]]  # (line, content, text after the span on that line)
    lines: list[str]


_FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")


def _fence_close(line: str, char: str, length: int) -> bool:
    m = re.match(r"^ {0,3}(`{3,}|~{3,})\s*$", line)
    return bool(m) and m.group(1)[0] == char and len(m.group(1)) >= length


def _strip_indent(line: str, indent: int) -> str:
    n = len(line) - len(line.lstrip(" "))
    return line[min(n, indent):]


def _text_spans(text: str) -> list[tuple[int, str, str]]:
    """CommonMark code spans in one paragraph: (offset, content, rest of the closing line)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text[i] == "\\" and i + 1 < n:
            i += 2
            continue
        if text[i] != "`":
            i += 1
            continue
        j = i
        while j < n and text[j] == "`":
            j += 1
        run = j - i
        k = j
        while True:
            k = text.find("`" * run, k)
            if k < 0:
                break
            e = k
            while e < n and text[e] == "`":
                e += 1
            if e - k == run:
                break
            k = e
        if k < 0:
            i = j  # an unmatched run is literal text
            continue
        content = text[j:k].replace("\n", " ")
        if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
            content = content[1:-1]
        out.append((i, content, text[k + run:].split("\n", 1)[0]))
        i = k + run
    return out


# Lines that start a block of their own: a code span never continues across them.
_BLOCK_START = re.compile(r"^\s{0,3}(#{1,6}(\s|$)|[-*+]\s+\S|1[.)]\s+\S)")
_QUOTE = re.compile(r"^\s{0,3}>\s?")
_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def _cells(row: str) -> list[str]:
    """A table row's cells, split at pipes that are not backslash-escaped (GFM)."""
    row = row.strip()
    row = row[1:] if row.startswith("|") else row
    row = row[:-1] if row.endswith("|") and not row.endswith("\\|") else row
    return [cell.replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", row)]


_LIST_ITEM = re.compile(r"^(\s{0,3}(?:[-*+]|\d{1,9}[.)])\s+)\S")


def _lazy_line(lines: list[str], skip: set[int], i: int) -> bool:
    """Line i lazily continues a list item's or block quote's paragraph (no table starts there)."""
    j = i - 1
    while j >= 0 and j not in skip and lines[j].strip() and not _LIST_ITEM.match(lines[j]):
        j -= 1
    if j >= 0 and j not in skip and _LIST_ITEM.match(lines[j]):
        indent = len(_LIST_ITEM.match(lines[j]).group(1))
        if len(lines[i]) - len(lines[i].lstrip()) < indent:
            return True
    k = i - 1
    while k >= 0 and k not in skip and lines[k].strip():
        if _QUOTE.match(lines[k]) and not _QUOTE.match(lines[i]):
            return True
        k -= 1
    return False


def _table_lines(lines: list[str], skip: set[int]) -> set[int]:
    """Indexes of table rows (header + delimiter + body): each cell is its own inline context."""
    rows: set[int] = set()
    for i in range(len(lines) - 1):
        if i in skip or i in rows or "|" not in lines[i] or not _TABLE_DELIMITER.match(lines[i + 1]):
            continue
        if "|" not in lines[i + 1] or len(_cells(lines[i])) != len(_cells(lines[i + 1])):
            continue
        if _lazy_line(lines, skip, i):
            continue
        j = i
        # GFM: rows run to the first blank line or the start of another block, pipes or not.
        while j < len(lines) and j not in skip and lines[j].strip() and (
                j <= i + 1 or not (_BLOCK_START.match(lines[j]) or _QUOTE.match(lines[j]))):
            rows.add(j)
            j += 1
    return rows


def _paragraphs(lines: list[str], skip: set[int]) -> list[tuple[int, list[str]]]:
    """Groups of consecutive lines that form one inline context (paragraph, table row, heading)."""
    table = _table_lines(lines, skip)
    out: list[tuple[int, list[str]]] = []
    cur: list[str] = []
    start = 0
    quoted = False  # the previous line was inside a block quote
    for idx, line in enumerate(lines):
        in_quote = bool(_QUOTE.match(line)) and idx not in skip
        if in_quote:  # a quote's paragraph continues over its "> " lines
            if cur and not quoted:
                out.append((start, cur))
                cur = []
            quoted, line = True, _QUOTE.sub("", line, count=1)
        elif not line.strip() or _BLOCK_START.match(line):
            quoted = False
        if idx in skip or not line.strip():
            if cur:
                out.append((start, cur))
            cur = []
            continue
        if idx in table:
            if cur:
                out.append((start, cur))
            out += [(idx, [cell]) for cell in _cells(line)]
            cur = []
            continue
        if cur and (_BLOCK_START.match(line) or cur[-1].lstrip().startswith("#")):
            out.append((start, cur))
            cur = []
        if not cur:
            start = idx
            cur = [line]
        else:
            cur.append(line.lstrip())
    if cur:
        out.append((start, cur))
    return out


def scan_markdown(text: str) -> Markdown:
    lines = text.splitlines()
    fences: list[Fence] = []
    skip: set[int] = set()  # lines inside fences and HTML comments: no code spans there
    i, in_comment = 0, False
    while i < len(lines):
        line = lines[i]
        m = _FENCE_OPEN.match(line)
        if not in_comment and m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
            indent, marker = len(m.group(1)), m.group(2)
            body, j = [], i + 1
            while j < len(lines) and not _fence_close(lines[j], marker[0], len(marker)):
                body.append(_strip_indent(lines[j], indent))
                j += 1
            fences.append(Fence(m.group(3).strip(), "\n".join(body), i + 1))
            skip.update(range(i, j + 1))
            i = j + 1
            continue
        if in_comment or line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line.split("<!--", 1)[-1] if not in_comment else "-->" not in line
            skip.add(i)
        i += 1
    spans: list[tuple[int, str, str]] = []
    for start, group in _paragraphs(lines, skip):
        text_ = "\n".join(group)
        for offset, content, rest in _text_spans(text_):
            spans.append((start + 1 + text_.count("\n", 0, offset), content, rest))
    return Markdown(fences, spans, lines)


# ---------------------------------------------------------------------------------------------
# Extraction

_NAME = re.compile(r"(?<![\w./-])megatron(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?")
_VER = r"(?:\d+\.\d+(?:\.\d+)?(?:\s*dev)?|main)"
_SPEC = rf"{_VER}(?:\s*(?:-|–|,|and|to)\s*{_VER})*"
_TAG_AFTER = re.compile(rf"^\s*\((?:(?:only|in|until|up|to|since)\s+)*(?P<spec>{_SPEC})\)")
_MARKER = re.compile(r"<!--\s*(defaults|derived|fieldcount):\s*(\S+)\s*(.*?)\s*-->")
_QUOTED_FROM = re.compile(r"^\s*\(quoted from `(megatron/[\w/]+\.py)`\)")
_ROW = re.compile(r"^\s*\|\s*`([A-Za-z_]\w*)`\s*\|\s*`([^`]+)`\s*\|")


def _norm_spec(spec: str) -> str:
    return re.sub(r"\s*(-|–|to)\s*", "-", re.sub(r"\s*(,|and)\s*", ", ", spec.strip())).replace("–", "-")


def _names_in(text: str) -> list[str]:
    return [m.group(0).rstrip(".") for m in _NAME.finditer(text)]


def _python_imports(body: str) -> list[str]:
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("megatron") and not node.level:
            out += [f"{node.module}:{a.name}" for a in node.names if a.name != "*"]
    return out


def _fence_versions(info: str) -> str | None:
    m = re.search(r"\bversions=(\S+)", info)
    return _norm_spec(m.group(1)) if m else None


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


def _name_fact(name: str, src: str, versions: str | None) -> Fact:
    return Fact(f"name:{name}", "name", name, "resolves", src, versions)


def _extract_names(md: Markdown, path: str, col: _Collector) -> None:
    for line, content, rest in md.spans:
        tag = _TAG_AFTER.match(rest)
        versions = _norm_spec(tag.group("spec")) if tag else None
        for name in _names_in(content):
            col.add(_name_fact(name, f"{path}:{line}", versions))
    for fence in md.fences:
        versions = _fence_versions(fence.info)
        for k, text in enumerate(fence.body.splitlines()):
            for name in _names_in(text):
                col.add(_name_fact(name, f"{path}:{fence.line + 1 + k}", versions))
        if fence.info.split()[:1] == ["python"]:
            for name in _python_imports(fence.body):
                col.add(_name_fact(name, f"{path}:{fence.line}", versions))


_NAMES_IN = re.compile(r"<!--\s*names-in:\s*(megatron[\w.]*)\s*-->")
_IDENT = re.compile(r"[A-Za-z_]\w*(\(\))?")


def _paragraph_after(lines: list[str], idx: int) -> range:
    """Line numbers (1-based) of the first paragraph after line index idx."""
    start = idx + 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    return range(start + 1, end + 1)


def _extract_names_in(md: Markdown, path: str, col: _Collector) -> None:
    for idx, line in enumerate(md.lines):
        m = _NAMES_IN.search(line)
        if not m:
            continue
        where = _paragraph_after(md.lines, idx)
        for span_line, content, _ in md.spans:
            if span_line in where and _IDENT.fullmatch(content):
                col.add(_name_fact(f"{m.group(1)}:{content.rstrip('()')}", f"{path}:{span_line}", None))


def _extract_quotes(md: Markdown, path: str, col: _Collector) -> None:
    for line, content, rest in md.spans:
        m = _QUOTED_FROM.match(rest)
        if m:
            col.add(Fact(f"quote:{m.group(1)}:{content[:60]}", "quote", m.group(1), content, f"{path}:{line}"))


def _extract_signatures(md: Markdown, path: str, col: _Collector) -> None:
    for fence in md.fences:
        words = fence.info.split()
        if words[:2] == ["python", "signature"] and len(words) >= 3:
            col.add(Fact(f"signature:{words[2]}", "signature", words[2], fence.body.strip(),
                         f"{path}:{fence.line}", _fence_versions(fence.info)))


def _table_rows(lines: list[str], start: int) -> Iterable[tuple[int, str, str]]:
    i, seen_table = start, False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("|"):
            seen_table = True
            m = _ROW.match(line)
            if m:
                yield i + 1, m.group(1), m.group(2)
        elif seen_table or _MARKER.search(line) or line.startswith("#"):
            return
        i += 1


def _extract_tables(md: Markdown, path: str, col: _Collector) -> None:
    for idx, line in enumerate(md.lines):
        m = _MARKER.search(line)
        if not m:
            continue
        kind, target, rest = m.groups()
        src = f"{path}:{idx + 1}"
        cls = target.rsplit(":", 1)[-1]
        if kind == "fieldcount":
            col.add(Fact(f"fieldcount:{target}", kind, target, rest.strip(), src))
            continue
        for row_line, fname, value in _table_rows(md.lines, idx + 1):
            fid = f"default:{cls}.{fname}" if kind == "defaults" else f"derived:{cls}({rest}).{fname}"
            col.add(Fact(fid, "default" if kind == "defaults" else "derived", target, value,
                         f"{path}:{row_line}", extra={"field": fname, "kwargs": rest}))


_EXTRACTORS = (_extract_names, _extract_names_in, _extract_quotes, _extract_signatures, _extract_tables)


def extract_facts(paths: Iterable[str | os.PathLike]) -> list[Fact]:
    col = _Collector()
    for p in paths:
        text = Path(p).read_text(encoding="utf-8")
        md = scan_markdown(text)
        for extractor in _EXTRACTORS:
            extractor(md, str(p), col)
    return list(col.facts.values())


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

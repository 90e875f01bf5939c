"""Checkable facts of one Markdown document, read from markdown-it-py tokens.

The fact syntax is defined in the docstring of ``scripts/reference_facts.py`` (the module that
checks the facts); this module only finds them. A fact is a plain record::

    {"id", "kind", "target", "expected", "line", "versions", "extra"}

with ``line`` 1-based in the file (front matter included), so that ``reference_facts`` can
name ``path:line`` as the fact's source.
"""

from __future__ import annotations

import ast
import re

from .markdown import Document

_NAME = re.compile(r"(?<![\w./-])megatron(?:\.[A-Za-z_]\w*)+(?::[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?")
_VER = r"(?:\d+\.\d+(?:\.\d+)?(?:\s*dev)?|main)"
_SPEC = rf"{_VER}(?:\s*(?:-|–|,|and|to)\s*{_VER})*"
_TAG_AFTER = re.compile(rf"^\s*\((?:(?:only|in|until|up|to|since)\s+)*(?P<spec>{_SPEC})\)")
_MARKER = re.compile(r"<!--\s*(defaults|derived|fieldcount):\s*(\S+)\s*(.*?)\s*-->")
_NAMES_IN = re.compile(r"<!--\s*names-in:\s*(megatron[\w.]*)\s*-->")
_QUOTED_FROM = re.compile(r"^\s*\(quoted from `(megatron/[\w/]+\.py)`\)")
_IDENT = re.compile(r"[A-Za-z_]\w*(\(\))?")
_FIELD_CELL = re.compile(r"`([A-Za-z_]\w*)`")
_VALUE_CELL = re.compile(r"`([^`]+)`")


def norm_spec(spec: str) -> str:
    """'0.16 to 0.18' -> '0.16-0.18'; '0.16 and 0.17' -> '0.16, 0.17'."""
    return re.sub(r"\s*(-|–|to)\s*", "-", re.sub(r"\s*(,|and)\s*", ", ", spec.strip())).replace("–", "-")


def _fence_versions(info: str) -> str | None:
    m = re.search(r"\bversions=(\S+)", info)
    return norm_spec(m.group(1)) if m else None


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


def _fact(kind: str, fid: str, target: str, expected: str, line: int, versions: str | None = None,
          **extra: str) -> dict:
    return {"id": fid, "kind": kind, "target": target, "expected": expected, "line": line,
            "versions": versions, "extra": extra}


def _name(name: str, line: int, versions: str | None) -> dict:
    return _fact("name", f"name:{name}", name, "resolves", line, versions)


def _names(doc: Document) -> list[dict]:
    out = []
    for span in doc.spans:
        tag = _TAG_AFTER.match(span.rest)
        versions = norm_spec(tag.group("spec")) if tag else None
        out += [_name(n, span.line, versions) for n in _names_in(span.content)]
    for fence in doc.fences:
        versions = _fence_versions(fence.info)
        for k, text in enumerate(fence.content.splitlines()):
            out += [_name(n, fence.line + 1 + k, versions) for n in _names_in(text)]
        if fence.info.split()[:1] == ["python"]:
            out += [_name(n, fence.line, versions) for n in _python_imports(fence.content)]
    return out


def _paragraph_after(lines: list[str], idx: int) -> range:
    """1-based line numbers of the first run of non-blank lines after line index idx."""
    start = idx + 1
    while start < len(lines) and not lines[start].strip():
        start += 1
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    return range(start + 1, end + 1)


def _names_in_markers(doc: Document) -> list[dict]:
    out = []
    for block in doc.html_blocks:
        m = _NAMES_IN.search(block.content)
        if not m:
            continue
        where = _paragraph_after(doc.lines, block.end_line - 1)
        out += [_name(f"{m.group(1)}:{s.content.rstrip('()')}", s.line, None)
                for s in doc.spans if s.line in where and _IDENT.fullmatch(s.content)]
    return out


def _quotes(doc: Document) -> list[dict]:
    out = []
    for span in doc.spans:
        m = _QUOTED_FROM.match(span.rest)
        if m:
            out.append(_fact("quote", f"quote:{m.group(1)}:{span.content[:60]}", m.group(1), span.content,
                             span.line))
    return out


def _signatures(doc: Document) -> list[dict]:
    out = []
    for fence in doc.fences:
        words = fence.info.split()
        if words[:2] == ["python", "signature"] and len(words) >= 3:
            out.append(_fact("signature", f"signature:{words[2]}", words[2], fence.content.strip(), fence.line,
                             _fence_versions(fence.info)))
    return out


def _tables(doc: Document) -> list[dict]:
    """Rows of the first table after each defaults/derived marker (before the next heading or marker)."""
    out = []
    for block in doc.html_blocks:
        m = _MARKER.search(block.content)
        if not m:
            continue
        kind, target, rest = m.groups()
        cls = target.rsplit(":", 1)[-1]
        if kind == "fieldcount":
            out.append(_fact("fieldcount", f"fieldcount:{target}", target, rest.strip(), block.line))
            continue
        table = doc.table_after(block)
        for row in table.rows if table else []:
            if len(row.cells) < 2:
                continue
            f, v = _FIELD_CELL.fullmatch(row.cells[0].strip()), _VALUE_CELL.fullmatch(row.cells[1].strip())
            if not (f and v):
                continue
            fid = f"default:{cls}.{f.group(1)}" if kind == "defaults" else f"derived:{cls}({rest}).{f.group(1)}"
            out.append(_fact("default" if kind == "defaults" else "derived", fid, target, v.group(1), row.line,
                             field=f.group(1), kwargs=rest))
    return out


_EXTRACTORS = (_names, _names_in_markers, _quotes, _signatures, _tables)


def document_facts(doc: Document) -> list[dict]:
    """Every fact of one document, in extractor order then document order (duplicates kept)."""
    return [fact for extractor in _EXTRACTORS for fact in extractor(doc)]

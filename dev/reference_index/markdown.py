"""A Markdown document as the index compiler sees it: markdown-it-py tokens in plain records.

The parser is the tests' one configuration (``tests/mdtools.parser``: CommonMark + GFM tables),
so the shipped indexes and the contract tests read the same Markdown the same way.
Line numbers are 1-based in the file, front matter included.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

import mdtools  # noqa: E402


@dataclass(frozen=True)
class Span:
    line: int
    content: str
    rest: str  # the rest of the span's source line, code spans re-wrapped in backticks


@dataclass(frozen=True)
class Fence:
    line: int  # the opening fence
    info: str
    content: str  # with its final newline, as markdown-it gives it


@dataclass(frozen=True)
class Html:
    line: int
    end_line: int  # last line of the block
    content: str


@dataclass
class Row:
    line: int
    cells: list[str]  # raw inline source of each cell


@dataclass
class Table:
    line: int
    rows: list[Row] = field(default_factory=list)  # body rows


@dataclass
class Document:
    text: str
    tokens: list
    offset: int  # lines of front matter before the Markdown body
    lines: list[str]
    spans: list[Span]
    fences: list[Fence]
    html_blocks: list[Html]

    def line_of(self, tok) -> int:
        return tok.map[0] + 1 + self.offset

    def table_after(self, block: Html) -> Table | None:
        """The first table after an HTML block, unless a heading or another marker comes first."""
        start = next(i for i, t in enumerate(self.tokens) if t.type == "html_block" and self.line_of(t) == block.line)
        for i in range(start + 1, len(self.tokens)):
            t = self.tokens[i]
            if t.type == "heading_open" or (t.type == "html_block" and "<!--" in t.content):
                return None
            if t.type == "table_open":
                return self._table(i)
        return None

    def _table(self, i: int) -> Table:
        table = Table(self.line_of(self.tokens[i]))
        in_body, row = False, None
        for t in self.tokens[i + 1:]:
            if t.type == "table_close":
                break
            if t.type == "tbody_open":
                in_body = True
            elif t.type == "tr_open" and in_body:
                row = Row(self.line_of(t), [])
                table.rows.append(row)
            elif t.type == "inline" and in_body and row is not None:
                row.cells.append(t.content)
        return table


def _span_lines(source: str, kids) -> list[int]:
    """Line offset (within the inline source) of each code span's opening backticks.

    markdown-it gives a span's content with its line breaks turned into spaces, so the offset
    is found in the raw source: the next backtick run of the span's length whose body, so
    normalized, is the content."""
    out, cursor = [], 0
    for child in kids:
        if child.type != "code_inline":
            continue
        tick = re.escape(child.markup)
        opening = re.compile(rf"(?<![`\\]){tick}(?!`)(.*?)(?<!`){tick}(?!`)", re.S)
        m = opening.search(source, cursor)
        while m:
            body = m.group(1).replace("\n", " ")
            if body.startswith(" ") and body.endswith(" ") and body.strip(" "):
                body = body[1:-1]
            if body == child.content:
                break
            m = opening.search(source, m.start() + 1)
        pos = m.start() if m else cursor
        out.append(source.count("\n", 0, pos))
        cursor = m.end() if m else cursor
    return out


def _spans(tokens, offset: int) -> list[Span]:
    out = []
    for tok in tokens:
        if tok.type != "inline" or not tok.children or not tok.map:
            continue
        kids = tok.children
        lines = iter(_span_lines(tok.content, kids))
        for k, child in enumerate(kids):
            if child.type == "code_inline":
                rest = []
                for nxt in kids[k + 1:]:
                    if nxt.type in ("softbreak", "hardbreak"):
                        break
                    rest.append(f"`{nxt.content}`" if nxt.type == "code_inline" else nxt.content)
                out.append(Span(tok.map[0] + 1 + offset + next(lines), child.content, "".join(rest)))
    return out


def parse(text: str) -> Document:
    _, body, offset = mdtools.split_frontmatter(text)
    tokens = mdtools.parser().parse(body)
    fences = [Fence(t.map[0] + 1 + offset, t.info.strip(), t.content) for t in tokens if t.type == "fence"]
    html = [Html(t.map[0] + 1 + offset, t.map[1] + offset, t.content) for t in tokens if t.type == "html_block"]
    return Document(text, tokens, offset, text.splitlines(), _spans(tokens, offset), fences, html)


def plain(inline_source: str) -> str:
    """Inline Markdown source on one line (soft breaks become spaces)."""
    return re.sub(r"\s*\n\s*", " ", inline_source).strip()

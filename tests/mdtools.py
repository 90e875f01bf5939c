"""Markdown facts for the contract tests, read through markdown-it-py tokens (never regex over raw text).

Everything returns plain records with 1-based line numbers so that a failing check can name the place.
"""

from __future__ import annotations

import html.parser
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from markdown_it import MarkdownIt

REPO = Path(__file__).resolve().parent.parent

# Directories that are not part of the bundle: environments, caches, and the deliberately broken fixtures.
_EXCLUDED_PARTS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "node_modules"}


@dataclass(frozen=True)
class Fence:
    path: Path
    line: int  # line of the opening ``` (1-based)
    info: str  # the whole info string, e.g. "python run timeout=120"
    content: str

    @property
    def lang(self) -> str:
        return self.info.split()[0].lower() if self.info.split() else ""

    @property
    def words(self) -> list[str]:
        return self.info.split()[1:]

    def option(self, key: str, default: str | None = None) -> str | None:
        for word in self.words:
            if word.startswith(key + "="):
                return word.split("=", 1)[1]
        return default


@dataclass(frozen=True)
class Link:
    path: Path
    line: int
    target: str


@dataclass(frozen=True)
class CodeSpan:
    path: Path
    line: int
    text: str


def bundle_markdown(root: Path = REPO) -> list[Path]:
    """Every Markdown file of the bundle under ``root``; fixtures below tests/fixtures and the agents' files of
    archived benchmark runs (evals/runs/NAME/answers, rubric, tasks) are not the bundle."""
    out = []
    for p in sorted(root.rglob("*.md")):
        rel = p.relative_to(root).parts
        if any(part in _EXCLUDED_PARTS or part.startswith(".venv") for part in rel):
            continue
        if rel[:2] == ("tests", "fixtures"):
            continue
        if rel[:2] == ("evals", "runs") and len(rel) > 4:
            continue  # an archived run's answers, tasks and rubric files: agents' text, kept as data
        out.append(p)
    return out


def split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """Return (frontmatter or None, body, number of lines before the body)."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return None, text, 0
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :]), i + 1
    return None, text, 0


def parser() -> MarkdownIt:
    """The one markdown-it configuration every test reads Markdown with (CommonMark + GFM tables)."""
    return MarkdownIt("commonmark").enable("table").enable("strikethrough")


@lru_cache(maxsize=None)
def _tokens_cached(path: str, mtime: float):
    text = Path(path).read_text(encoding="utf-8")
    _, body, offset = split_frontmatter(text)
    return parser().parse(body), offset


def tokens(path: Path):
    """(tokens, line offset) of the file's body; frontmatter is not Markdown."""
    return _tokens_cached(str(path), path.stat().st_mtime)


def _line(tok, offset: int) -> int:
    return (tok.map[0] if tok.map else 0) + 1 + offset


def fences(path: Path) -> list[Fence]:
    toks, off = tokens(path)
    return [Fence(path, _line(t, off), t.info.strip(), t.content) for t in toks if t.type == "fence"]


def _inline_children(path: Path):
    toks, off = tokens(path)
    for t in toks:
        if t.type == "inline" and t.children:
            for child in t.children:
                yield child, _line(t, off)


def code_spans(path: Path) -> list[CodeSpan]:
    return [CodeSpan(path, line, c.content) for c, line in _inline_children(path) if c.type == "code_inline"]


class _AnchorCollector(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.append(v)
            if k in ("href", "src") and v:
                self.hrefs.append(v)


def _html_fragments(path: Path):
    toks, off = tokens(path)
    for t in toks:
        if t.type == "html_block":
            yield t.content, _line(t, off)
    for c, line in _inline_children(path):
        if c.type == "html_inline":
            yield c.content, line


def links(path: Path) -> list[Link]:
    out = []
    for c, line in _inline_children(path):
        if c.type == "link_open":
            out.append(Link(path, line, c.attrGet("href") or ""))
        elif c.type == "image":
            out.append(Link(path, line, c.attrGet("src") or ""))
    for frag, line in _html_fragments(path):
        collector = _AnchorCollector()
        collector.feed(frag)
        out.extend(Link(path, line, h) for h in collector.hrefs)
    return out


def heading_texts(path: Path) -> list[tuple[int, int, str]]:
    """(level, line, plain text) of every heading, in order."""
    toks, off = tokens(path)
    out = []
    for i, t in enumerate(toks):
        if t.type == "heading_open":
            inline = toks[i + 1]
            text = "".join(
                c.content for c in (inline.children or []) if c.type in ("text", "code_inline", "html_inline")
            )
            out.append((int(t.tag[1]), _line(t, off), text))
    return out


def github_slug(text: str) -> str:
    """GitHub's heading anchor: lowercase, drop punctuation except '-' and '_', spaces become '-'."""
    text = text.strip().lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in ("L", "N") or cat == "Mn" or cat == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a link may target in this file: heading slugs (duplicates get -1, -2, ...) and HTML ids."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for _, _, text in heading_texts(path):
        slug = github_slug(text)
        if slug in seen:
            seen[slug] += 1
            candidate = f"{slug}-{seen[slug]}"
            while candidate in seen:  # GitHub skips suffixes that collide with real headings
                seen[slug] += 1
                candidate = f"{slug}-{seen[slug]}"
            seen[candidate] = 0
            out.add(candidate)
        else:
            seen[slug] = 0
            out.add(slug)
    for frag, _ in _html_fragments(path):
        collector = _AnchorCollector()
        collector.feed(frag)
        out.update(collector.ids)
    return out


TOC_HEADINGS = {"contents", "table-of-contents", "index"}  # headings over the table of contents itself


def toc_links(path: Path) -> list[str]:
    """Anchors linked before the first level-2 section that is not the table of contents itself."""
    toks, off = tokens(path)
    out = []
    for i, t in enumerate(toks):
        if t.type == "heading_open" and t.tag == "h2":
            text = "".join(c.content for c in (toks[i + 1].children or []) if c.type in ("text", "code_inline"))
            if github_slug(text) not in TOC_HEADINGS:
                break
        if t.type == "inline":
            for c in t.children or []:
                href = c.attrGet("href") if c.type == "link_open" else None
                if href and href.startswith("#"):
                    out.append(href[1:])
    return out


_URL_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def is_external(target: str) -> bool:
    """A link with a scheme (https:, mailto:) leaves the bundle on purpose and is not resolved offline."""
    return bool(_URL_SCHEME.match(target))

"""The troubleshooting catalogue (references/troubleshooting.md) as records for scripts/triage.

An entry is a level-3 heading ``### <ID> <title>`` up to the next level-2/3 heading; its
fields are the bold-labelled bullets (``**Status:**``, ``**Raised in:**``, ``**Versions:**``,
``**Text history:**``, ``**Symptoms:**``, ``**Stuck in:**``, ``**Core users get:**``, ...),
its messages the ``text error`` / ``text symptom`` fences and the older wordings in
``text alias versions=X-Y`` fences, and its ``**Cause.**`` / ``**Fix.**`` paragraphs.

What matching needs is compiled here, once, so the script does no Markdown work:

* ``templates``: each message line as a regular expression whose variable parts (numbers,
  ``<placeholders>``, ``…``) are groups, with a name for each group read from the message
  itself (``num_query_groups (3)`` -> ``num_query_groups``) or from the entry's ``Varies:``
  line (``TP (2)`` -> ``tensor_model_parallel_size``);
* ``frames``: where the installed megatron-core 0.19.2 raises it (file, function, line range),
  from the **Raised in** file: the statement that carries the message's fixed text, the
  ``assert ...`` the bullet quotes, or the whole named function;
* ``object``: the class the **Raised in** bullet names, for the inspector's ``--object``.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

from .markdown import REPO, Document, mdtools, parse, plain

ID_RE = re.compile(r"^([A-Z]+-\d{2}) (.+)$")
LABEL = re.compile(r"^\*\*([^*]+?):\*\*\s*(.*)$", re.S)
MESSAGE_KINDS = {"text error": "error", "text symptom": "symptom"}
# A variable part of a message: a placeholder, an ellipsis, or a number not inside an identifier.
VARIABLE = re.compile(r"<[^<>\n]*>|…|\.\.\.|(?<![A-Za-z_\d.])\d+(?:\.\d+)*(?![\d])")
# Words that name a parallel size in prose ("TP (2)") and the config field they stand for.
SIZE_WORDS = {
    "TP": "tensor_model_parallel_size", "PP": "pipeline_model_parallel_size",
    "CP": "context_parallel_size", "EP": "expert_model_parallel_size",
    "ETP": "expert_tensor_parallel_size", "DP": "data_parallel_size",
    "VPP": "virtual_pipeline_model_parallel_size", "M": "num_microbatches",
}
_LEFT_NAME = re.compile(r"(?:self\.|config\.|args\.)?([A-Za-z_][\w]*(?:\([\w.]*\))?)\s*(?:=|==|:)?\s*\(?\s*$")
_VARIES_PAIR = re.compile(r"`?([A-Za-z_][\w]*)`?\s*\((\d+)\)")


def _site_packages() -> Path | None:
    found = sorted((REPO / ".venv" / "lib").glob("python3*/site-packages"))
    return found[0] if found else None


def _layout_dests() -> set[str]:
    sys.path.insert(0, str(REPO / "scripts"))
    from parallel_layout.flags import FLAGS, WORLD_FLAGS

    return {f.dest for f in (*FLAGS, *WORLD_FLAGS)}


def _variable_name(before: str, value: str, varies: dict[str, str], dests: set[str]) -> str | None:
    """A name for a variable from the words before it in the message, or from Varies: pairs."""
    words = re.findall(r"[A-Za-z_][\w.]*", before)
    for k in (4, 3, 2):  # "global batch size (10)" -> global_batch_size when that is a config field
        joined = "_".join(w.lower() for w in words[-k:])
        if len(words) >= k and joined in dests:
            return joined
    m = _LEFT_NAME.search(before)
    if m and ("_" in m.group(1) or m.group(1).startswith("len(")) and not before.rstrip().endswith(":"):
        return m.group(1)
    if m and before.rstrip().endswith(("=", "(")) and m.group(1) in SIZE_WORDS:
        return SIZE_WORDS[m.group(1)]
    if value in varies:
        return varies[value]
    return None


def template(line: str, varies: dict[str, str], dests: set[str]) -> dict:
    """One message line -> {"regex", "fixed", "names"} (fixed: its words outside variables)."""
    parts, names, fixed, pos = [], [], [], 0
    for m in VARIABLE.finditer(line):
        literal = line[pos:m.start()]
        parts.append(_literal(literal))
        fixed.append(literal)
        token = m.group(0)
        if token.startswith("<"):
            parts.append("(.+?)")
            inner = token[1:-1]
            if re.fullmatch(r"[\w\s-]+", inner):  # <group description> -> group_description
                name = re.sub(r"\W+", "_", inner).strip("_").lower() or None
            else:  # <WorkNCCL(SeqNum=..., ...)> -> worknccl
                first = re.match(r"[A-Za-z_]\w*", inner)
                name = first.group(0).lower() if first else None
        elif token in ("…", "..."):
            parts.append("(.*?)")
            name = None
        elif _fixed_in_megatron(line[:m.start()], token, line[m.end():]):
            # A number Megatron prints as part of its own text ("only supported when ETP==1") is
            # not a value of the user's run: it stays literal, and no value is read from it.
            parts[-1] = _literal(literal + token)
            fixed[-1] = literal + token
            pos = m.end()
            continue
        else:
            parts.append(r"(-?\d+(?:\.\d+)*)")
            name = _variable_name(line[:m.start()], token, varies, dests)
        names.append(name)
        pos = m.end()
    parts.append(_literal(line[pos:]))
    fixed.append(line[pos:])
    return {"regex": "".join(parts), "fixed": " ".join(" ".join(fixed).split()), "names": names}


@functools.lru_cache(maxsize=1)
def _megatron_texts() -> str:
    """The fixed text of every message Megatron prints in the indexed releases, one per line."""
    sys.path.insert(0, str(REPO / "scripts"))
    import release_index as ri

    return "\n".join({m["text"] for v in ri.RELEASES for m in ri.load(v).messages()})


def _fixed_in_megatron(before: str, token: str, after: str) -> bool:
    """Whether a released Megatron message has this number as literal text, with the words
    around it (at least FIXED_CONTEXT characters before it, the next character after it)."""
    before = " ".join(before.split(":", 1)[-1].split())  # without the exception type
    if len(before) < FIXED_CONTEXT:
        return False
    probe = before[-FIXED_CONTEXT:] + token + (after[:1] if after[:1] not in ("", " ") else "")
    texts = _megatron_texts()
    at = texts.find(probe)
    while at >= 0:
        nxt = texts[at + len(probe) - (1 if after[:1] not in ("", " ") else 0):][:1]
        if not nxt.isdigit():
            return True
        at = texts.find(probe, at + 1)
    return False


FIXED_CONTEXT = 16


def _literal(text: str) -> str:
    """Literal text; any run of spaces matches any run (logs re-wrap, upstream doubles spaces)."""
    return r"\s*".join(re.escape(chunk) for chunk in re.split(r"\s+", text)) if text.strip() else (
        r"\s*" if text else "")


def _varies(paragraph: str) -> dict[str, str]:
    return {value: SIZE_WORDS.get(name, name) for name, value in _VARIES_PAIR.findall(paragraph)}


class _Entry:
    def __init__(self, eid: str, title: str, anchor: str, section: str, line: int):
        self.record = {"id": eid, "title": title, "anchor": anchor, "section": section, "line": line,
                       "fields": {}, "messages": [], "cause": "", "fix": "", "varies": ""}
        self.part: str | None = None  # the **Cause.** / **Fix.** part being read

    def paragraph(self, text: str) -> None:
        rec = self.record
        m = LABEL.match(text)
        if m and self.part is None:
            rec["fields"][m.group(1).strip()] = plain(m.group(2))
            return
        if text.startswith("**Cause.**"):
            self.part, text = "cause", text[len("**Cause.**"):]
        elif text.startswith("**Fix.**"):
            self.part, text = "fix", text[len("**Fix.**"):]
        elif text.startswith("Varies") and self.part is None:
            rec["varies"] = plain(text)
            return
        if self.part:
            rec[self.part] = (rec[self.part] + " " + plain(text)).strip()

    def fence(self, info: str, content: str) -> None:
        words = info.split()
        kind = MESSAGE_KINDS.get(" ".join(words[:2]))
        if words[:2] == ["text", "alias"]:
            kind = "alias"
        if kind is None:
            return
        versions = next((w.split("=", 1)[1] for w in words if w.startswith("versions=")), None)
        self.record["messages"].append({"kind": kind, "text": content.rstrip("\n"), "versions": versions})


def _heading_text(inline) -> str:
    return "".join(c.content for c in (inline.children or []) if c.type in ("text", "code_inline", "html_inline"))


def parse_entries(doc: Document) -> list[dict]:
    entries: list[_Entry] = []
    current: _Entry | None = None
    section = ""
    toks = doc.tokens
    for i, tok in enumerate(toks):
        if tok.type == "heading_open" and tok.tag in ("h1", "h2", "h3"):
            text = _heading_text(toks[i + 1])
            current = None
            if tok.tag == "h2":
                section = text
            m = ID_RE.match(toks[i + 1].content) if tok.tag == "h3" else None
            if m:
                current = _Entry(m.group(1), m.group(2), mdtools.github_slug(text), section, doc.line_of(tok))
                entries.append(current)
        elif current is None:
            continue
        elif tok.type == "fence":
            current.fence(tok.info.strip(), tok.content)
        elif tok.type == "inline" and toks[i - 1].type == "paragraph_open":
            current.paragraph(tok.content)
    return [e.record for e in entries]


# -- where 0.19.2 raises it --------------------------------------------------------------------

def _normalized(src: str) -> str:
    """Source with adjacent string literals joined and whitespace collapsed."""
    src = re.sub(r"([\"'])\s*(?:\\\s*)?\n?\s*[rfbu]*\1", "", src)
    return re.sub(r"\s+", " ", src)


def _functions(tree: ast.AST) -> list[tuple[str, ast.AST]]:
    """(qualified name, node) of every function, methods as Class.method."""
    out = []

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((prefix + child.name, child))
                walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, prefix + child.name + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def _enclosing(functions, node) -> str:
    inside = [(q, f) for q, f in functions if f.lineno <= node.lineno <= f.end_lineno]
    return min(inside, key=lambda qf: qf[1].end_lineno - qf[1].lineno)[0] if inside else "<module>"


def _fixed_segments(message: str) -> list[str]:
    body = re.sub(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|WARNING): ?", "", message.splitlines()[0])
    return sorted((s.strip() for s in VARIABLE.split(body)), key=len, reverse=True)


@functools.lru_cache(maxsize=None)
def _module(path: Path) -> tuple[ast.AST, list, list[tuple[ast.AST, str]]]:
    """(tree, functions, [(statement, normalized source)]) of the statements that can raise or warn."""
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    tree = ast.parse(src)
    statements = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Raise, ast.Assert, ast.Expr, ast.Assign)):
            text = _normalized("\n".join(lines[node.lineno - 1:node.end_lineno]))
            if isinstance(node, (ast.Raise, ast.Assert)) or "warn" in text or "log" in text:
                statements.append((node, text))
    return tree, _functions(tree), statements


def frames(rec: dict, site: Path | None) -> list[dict]:
    spans = re.findall(r"`([^`]+)`", rec["fields"].get("Raised in", ""))
    if not spans or site is None or not spans[0].endswith(".py") or not (site / spans[0]).is_file():
        return []
    path = spans[0]
    tree, functions, statements = _module(site / path)
    out: list[dict] = []

    def add(kind: str, node: ast.AST, function: str | None = None) -> None:
        frame = {"file": path, "function": function or _enclosing(functions, node),
                 "lines": [node.lineno, node.end_lineno], "kind": kind}
        if frame not in out:
            out.append(frame)

    for stmt in (s for s in spans[1:] if s.startswith("assert ")):
        try:
            want = ast.unparse(ast.parse(stmt))
        except SyntaxError:
            continue
        for node, _ in statements:
            if isinstance(node, ast.Assert) and ast.unparse(node) == want:
                add("statement", node)
    error = next((m["text"] for m in rec["messages"] if m["kind"] == "error"), None)
    segment = next(iter(_fixed_segments(error)), "") if error else ""
    if len(segment) >= 12:
        for node, text in statements:
            if segment in text:
                add("statement", node)
    for name in spans[1:]:
        if re.fullmatch(r"[A-Za-z_][\w.]*(\(\))?", name):
            name = name.rstrip("()")
            for qual, node in functions:
                if qual == name or qual.endswith("." + name):
                    add("function", node, qual)
    return out


def inspector_object(rec: dict, site: Path | None) -> str | None:
    """module:Class when the Raised in bullet names a class (or Class.method) of its file."""
    spans = re.findall(r"`([^`]+)`", rec["fields"].get("Raised in", ""))
    if len(spans) < 2 or site is None or not spans[0].startswith("megatron/") or not (site / spans[0]).is_file():
        return None
    classes = {n.name for n in _module(site / spans[0])[0].body if isinstance(n, ast.ClassDef)}
    for span in spans[1:]:
        head = span.split(".")[0].rstrip("()")
        if head in classes:
            module = spans[0][:-3].replace("/", ".").removesuffix(".__init__")
            return f"{module}:{head}"
    return None


def compile_catalogue(path: Path) -> dict:
    doc = parse(path.read_text(encoding="utf-8"))
    site, dests = _site_packages(), _layout_dests()
    entries = parse_entries(doc)
    for rec in entries:
        varies = _varies(rec["varies"])
        for msg in rec["messages"]:
            msg["templates"] = [template(line, varies, dests) for line in msg["text"].splitlines() if line.strip()]
        f = rec["fields"]
        rec["symptoms"] = [w.strip() for w in f.get("Symptoms", "").split(",") if w.strip()]
        rec["stuck_in"] = [dict(zip(("file", "function"), s.strip(" `").rsplit(":", 1)))
                           for s in f.get("Stuck in", "").split(";") if ":" in s]
        rec["frames"] = frames(rec, site)
        rec["object"] = inspector_object(rec, site)
    return {"entries": entries}

"""The troubleshooting catalogue, read from its compiled index (references/index/catalogue.json).

The index is built from references/troubleshooting.md by ``make index-references``; this module
only loads it and compiles each message template's regular expression on first use.
"""

from __future__ import annotations

import functools
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INDEX = os.path.join(ROOT, "references", "index", "catalogue.json")
DOC = "references/troubleshooting.md"
WORD = re.compile(r"[a-z_][a-z0-9_]*(?:[.-][a-z0-9_]+)*")
# Words too common in messages and logs to say which entry a line is about.
STOP = frozenset("""a an and are as at be been but by can for from has have if in into is it its not
of on or should that the this to use used using was when with must only error warning assertionerror
valueerror runtimeerror typeerror importerror userwarning size set please instead""".split())


class IndexMissing(Exception):
    pass


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) > 2 and w not in STOP}


def entries() -> tuple[dict, ...]:
    """The catalogue's entries (INDEX is read once; tests point INDEX at a fixture's index)."""
    return _entries(INDEX)


@functools.lru_cache(maxsize=4)
def _entries(path: str) -> tuple[dict, ...]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as exc:
        raise IndexMissing(f"cannot read the catalogue index {path}: {exc}; rebuild it with "
                           f"`make index-references`") from None
    out = []
    for rec in data["entries"]:
        for msg in rec["messages"]:
            for t in msg.get("templates", ()):
                t["words"] = words(t["fixed"])
        rec["words"] = words(" ".join([rec["title"], *rec["symptoms"],
                                       *(t["fixed"] for m in rec["messages"] for t in m.get("templates", ()))]))
        out.append(rec)
    return tuple(out)


@functools.lru_cache(maxsize=None)
def regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def link(rec: dict) -> str:
    return f"{DOC}#{rec['anchor']}"

"""Compile the bundle's Markdown into the JSON indexes the scripts read (standard library only there).

Outputs (deterministic: sorted keys, one layout, no timestamps):

* ``references/index/facts.json``: the checkable facts of SKILL.md, references/*.md and the
  Markdown fixtures that tests pass to ``inspect_core_api.py --check-references``, per file with
  the file's SHA-256 (read by ``scripts/reference_facts.py``);
* ``references/index/catalogue.json``: the troubleshooting entries (read by ``scripts/triage``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .catalogue import compile_catalogue
from .facts import document_facts
from .markdown import REPO, parse

SCHEMA_VERSION = 1
INDEX_DIR = Path("references") / "index"
CATALOGUE_SOURCE = Path("references") / "troubleshooting.md"
# Markdown outside the bundle that tests check with --check-references (a copy is found by its hash).
FACT_FIXTURES = (Path("tests") / "fixtures" / "hostile" / "drift" / "reference.md",)
REBUILD = "make index-references"


def fact_sources(root: Path = REPO) -> list[Path]:
    docs = [Path("SKILL.md"), *sorted(p.relative_to(root) for p in (root / "references").glob("*.md"))]
    return [p for p in (*docs, *FACT_FIXTURES) if (root / p).is_file()]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def compile_facts(paths: list[Path], root: Path = REPO) -> dict:
    """{"schema_version", "rebuild", "files": {relative path: {"sha256", "facts"}}}."""
    files = {}
    for rel in paths:
        path = root / rel
        files[rel.as_posix()] = {"sha256": sha256(path), "facts": document_facts(parse(path.read_text(encoding="utf-8")))}
    return {"schema_version": SCHEMA_VERSION, "rebuild": REBUILD, "files": files}


def build(root: Path = REPO) -> dict[str, str]:
    """{relative output path: file text} for every index."""
    facts = compile_facts(fact_sources(root), root)
    catalogue = compile_catalogue(root / CATALOGUE_SOURCE)
    catalogue = {"schema_version": SCHEMA_VERSION, "rebuild": REBUILD, "source": CATALOGUE_SOURCE.as_posix(),
                 "sha256": sha256(root / CATALOGUE_SOURCE), **catalogue}
    return {(INDEX_DIR / "facts.json").as_posix(): dump(facts),
            (INDEX_DIR / "catalogue.json").as_posix(): dump(catalogue)}


def dump(obj: dict) -> str:
    return json.dumps(obj, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def stale(root: Path = REPO) -> list[str]:
    """Index files that differ from a fresh build (missing ones included)."""
    out = []
    for rel, text in build(root).items():
        path = root / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(rel)
    return out

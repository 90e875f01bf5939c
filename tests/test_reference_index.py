"""The JSON indexes compiled from the bundle's Markdown (references/index/) are current.

Markdown is the single source people edit; the scripts read only the compiled JSON (standard
library). This test rebuilds every index in memory with dev/build_reference_index.py's
compiler (markdown-it-py, and the installed megatron-core 0.19.2 for the catalogue's raising
frames) and fails when a shipped file differs: rebuild it with `make index-references`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "dev"))

from reference_index import build  # noqa: E402


def test_every_index_is_current():
    stale = build.stale()
    assert not stale, f"stale index files {stale}: run `{build.REBUILD}` and commit the result"


def test_build_is_deterministic():
    assert build.build() == build.build()


def test_facts_index_covers_every_bundle_document():
    shipped = json.loads((REPO / build.INDEX_DIR / "facts.json").read_text(encoding="utf-8"))
    docs = {"SKILL.md", *(p.relative_to(REPO).as_posix() for p in (REPO / "references").glob("*.md"))}
    assert docs <= set(shipped["files"])
    assert sum(len(f["facts"]) for f in shipped["files"].values()) >= 200

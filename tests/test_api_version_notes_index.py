"""The API reference's version notes for 0.12 to 0.16 are events of the release index, all of them.

Rows of the table after `<!-- release-index-notes -->` in references/api-reference.md:
| `object` | change | detail | first indexed release |
- change is an event kind (release_index.EVENT_KINDS) or `fields` (field counts per release);
- signature_changed: the code spans after "added" / "removed" are exactly the event's parameters;
- default_changed, and signature_changed of a field ("type ..."): each `old` → `new` pair is in the
  event as "old -> new", and every code span appears in it;
- renamed/moved: the successor ends with a code span of the detail; added: each span appears in
  the event (e.g. the names a class replaces).
Completeness: every event of the rows' objects (and of the fields of TransformerConfig and
ModelParallelConfig) from 0.13.1 to 0.16.1 has a row, so the table says everything the index knows
about them (message changes excepted; a class's own signature events are its fields' rows).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import release_index as ri  # noqa: E402

DOC = ROOT / "references" / "api-reference.md"
MARKER = "<!-- release-index-notes -->"
SCOPE = ("0.13.1", "0.14.0", "0.15.3", "0.16.1")
CONFIGS = ("megatron.core.transformer.transformer_config:TransformerConfig",
           "megatron.core.model_parallel_config:ModelParallelConfig")
SPAN = re.compile(r"`([^`]+)`")
ARROW = re.compile(r"`([^`]+)` → `([^`]+)`")


def rows(text: str | None = None) -> list[tuple[str, str, str, str]]:
    lines = (text or DOC.read_text(encoding="utf-8")).splitlines()
    start = lines.index(MARKER) + 3  # marker, header, separator
    out = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, line
        out.append(tuple(cells))
    return out


def _key(obj_cell: str) -> str | None:
    spans = SPAN.findall(obj_cell)
    keys = ri.find(spans[0]) if spans else []
    return keys[0] if keys and keys[0].startswith("megatron.core") else None


def _params(detail: str) -> dict[str, set[str]]:
    """'added a, b; removed c' (event) or 'added `a`, removed `c`' (row) -> {"added": {...}, ...}."""
    out = {"added": set(), "removed": set()}
    for part in re.split(r"(?=\b(?:added|removed)\b)", detail):
        for word in out:
            if part.strip().startswith(word):
                names = SPAN.findall(part) or [n.strip() for n in part.strip()[len(word):].split(";")[0].split(",")]
                out[word] |= {n for n in names if n}
    return out


def check_row(row: tuple[str, str, str, str]) -> list[str]:
    obj, change, detail, release = row
    key = _key(obj)
    if key is None:
        return [f"{obj} is not a megatron.core name of the index"]
    if change == "fields":
        got = [(int(n), v) for n, v in re.findall(r"`(\d+)` \((\d+\.\d+\.\d+)\)", detail)]
        bad = [f"{v}: {n} stated, index has {len(ri.load(v).fields(key) or [])}" for n, v in got
               if len(ri.load(v).fields(key) or []) != n]
        return bad if got else ["no counts"]
    if change not in ri.EVENT_KINDS:
        return [f"unknown change {change!r}"]
    evs = [e for e in ri.events(key) if e["version"] == release and e["change"] == change]
    if not evs:
        return [f"the index has no {change} event of {key} in {release}: {ri.events(key)}"]
    spans = SPAN.findall(detail)
    problems = []
    for ev in evs:
        text = (ev["detail"] or "") + " " + (ev["successor"] or "")
        arrows = ARROW.findall(detail)
        if change == "signature_changed" and not detail.startswith("type"):
            problems = [] if _params(detail) == _params(ev["detail"]) else \
                [f"parameters {_params(detail)} != index {_params(ev['detail'])}"]
        elif change in ("default_changed", "signature_changed"):  # `old` → `new` pairs, other spans
            ok = all(f"{a} -> {b}" in text for a, b in arrows) and all(s in text for s in spans) and spans
            problems = [] if ok else [f"{arrows or spans} not in {ev['detail']!r}"]
        elif change in ("renamed", "moved"):
            ok = any((ev["successor"] or "").endswith((":" + s, "." + s)) for s in spans)
            problems = [] if ok else [f"successor {ev['successor']} is none of {spans}"]
        else:
            missing = [s for s in spans if s not in text]
            problems = [f"{missing} not in {text!r}"] if missing else []
        if not problems:
            return []
    return problems


def test_table_is_there():
    assert len(rows()) >= 40


@pytest.mark.parametrize("row", rows(), ids=lambda r: f"{r[0]} {r[1]} {r[3]}")
def test_each_note_is_an_event_of_the_index(row):
    assert check_row(row) == []


def test_every_event_of_the_noted_objects_has_a_note():
    stated = {(_key(o), c, v) for o, c, _, v in rows()}
    keys = {k for k, c, _ in stated if c != "fields"}
    missing = []
    for key in sorted(keys):
        for ev in ri.events(key):
            if ev["version"] in SCOPE and ev["change"] != "message_changed" and key not in CONFIGS \
                    and (key, ev["change"], ev["version"]) not in stated:
                missing.append((key, ev["change"], ev["version"], ev["detail"]))
    for key, evs in ri.all_events().items():
        if key.rsplit(".", 1)[0] in CONFIGS and ri.catalog().get(key, {}).get("kind") == "field":
            for ev in evs:
                if ev["version"] in SCOPE and ev["change"] in ("removed", "renamed", "moved", "default_changed") \
                        and (key, ev["change"], ev["version"]) not in stated:
                    missing.append((key, ev["change"], ev["version"], ev["detail"]))
    assert not missing, "events the version notes do not state:\n" + "\n".join(map(str, missing))


def test_the_check_rejects_wrong_notes():
    assert check_row(("`GPTModel`", "signature_changed", "added `vp_stage`", "0.14.0"))
    assert check_row(("`GPTModel`", "signature_changed", "added `vp_stage`, `pg_collection`", "0.13.1"))
    assert check_row(("`TransformerConfig.moe_aux_loss_coeff`", "default_changed", "`0.0` → `0`", "0.14.0"))
    assert check_row(("`ModelCommProcessGroups`", "renamed", "to `HyperCommGrid`", "0.15.3"))
    assert check_row(("`TransformerConfig`", "fields", "`175` (0.12.3)", "0.12.3"))
    assert check_row(("`HyperCommGrid`", "added", "", "0.13.1"))
    assert check_row(("`NoSuchObject`", "added", "", "0.13.1"))

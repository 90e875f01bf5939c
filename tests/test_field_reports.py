"""The harvested public reports (tests/data/troubleshooting/field_reports.json) against the catalogue.

Each record is one public thread: link, repo, title, message or symptom, verdict, entry
(catalogue id, or the sibling skill for `routed`), and what the maintainers or the reporter
found. The closing note of references/troubleshooting.md states the counts and the coverage
figure; this file recomputes them from the data so neither can drift.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_troubleshooting import DOC, ENTRIES  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "troubleshooting" / "field_reports.json"
VERDICTS = ("covered", "routed", "not_reproducible", "out_of_scope")
FIELDS = ("link", "repo", "title", "message", "verdict", "entry", "finding")
# the pasted text, where it came from and why it is not matched (tests/test_field_report_texts.py)
OPTIONAL_FIELDS = ("text", "text_source", "unmatched")
LINK_RE = re.compile(r"^https://github\.com/([\w.-]+/[\w.-]+)/(issues|pull)/\d+$")
SIBLINGS = {"data", "checkpointing", "checkpoint conversion", "serving", "launch scripts"}
MIN_REPORTS = 80

REPORTS = json.loads(DATA.read_text(encoding="utf-8"))["reports"]
BY_ID = {e.id: e for e in ENTRIES}


def _links(text: str) -> set[str]:
    return set(re.findall(r"<(https://[^>\s]+)>", text))


def coverage(reports: list[dict]) -> tuple[Counter, int, int]:
    """Counts by verdict, covered, and the in-scope total (covered + not reproducible)."""
    c = Counter(r["verdict"] for r in reports)
    return c, c["covered"], c["covered"] + c["not_reproducible"]


def test_enough_distinct_reports():
    links = [r["link"] for r in REPORTS]
    assert len(links) == len(set(links)), "duplicate report links"
    assert len(links) >= MIN_REPORTS


@pytest.mark.parametrize("report", REPORTS, ids=lambda r: r["link"].split("github.com/")[1])
def test_report_record_is_complete(report):
    assert set(FIELDS) <= set(report) <= set(FIELDS + OPTIONAL_FIELDS), sorted(report)
    m = LINK_RE.match(report["link"])
    assert m, report["link"]
    assert m.group(1) == report["repo"], (m.group(1), report["repo"])
    assert report["verdict"] in VERDICTS
    assert report["title"].strip() and report["message"].strip() and report["finding"].strip()
    if report["verdict"] == "routed":
        assert report["entry"] in SIBLINGS, report["entry"]
    elif report["verdict"] == "out_of_scope":
        assert report["entry"] == ""
    else:
        assert report["entry"] in BY_ID, f"{report['entry']} is not a catalogue entry"


@pytest.mark.parametrize(
    "report", [r for r in REPORTS if r["verdict"] == "covered"],
    ids=lambda r: r["link"].split("github.com/")[1],
)
def test_covered_report_is_linked_from_its_entry(report):
    entry = BY_ID[report["entry"]]
    assert report["link"] in _links(entry.bullet("Upstream")), (
        f"{report['link']} not in the Upstream field of {entry.id}"
    )


def test_closing_note_states_the_recomputed_coverage():
    c, covered, in_scope = coverage(REPORTS)
    text = DOC.read_text(encoding="utf-8")
    note = text.split("\n## Closing note", 1)[1]
    flat = re.sub(r"\s+", " ", note)
    expected = (
        f"{len(REPORTS)} public reports harvested",
        f"{c['covered']} covered, {c['routed']} routed to a sibling skill, "
        f"{c['not_reproducible']} not reproducible, {c['out_of_scope']} out of scope",
        f"{covered} of {in_scope}, {round(100 * covered / in_scope)}%",
    )
    for part in expected:
        assert part in flat, f"closing note lacks {part!r}"


def test_coverage_helper():
    sample = [{"verdict": v} for v in ("covered", "covered", "not_reproducible", "routed")]
    c, covered, in_scope = coverage(sample)
    assert (covered, in_scope, c["routed"]) == (2, 3, 1)


# Sections added for the field reports (runtime/hangs, Transformer Engine, Apex, FP8, dist-checkpointing).
FIELD_PREFIXES = ("HANG", "RT", "TE", "APEX", "FP", "CKPT")


def test_closing_note_counts_the_field_entries_by_status():
    mine = [e for e in ENTRIES if e.id.split("-")[0] in FIELD_PREFIXES]
    c = Counter(e.status for e in mine)
    reproduced = ", ".join(e.id for e in mine if e.status == "reproduced")
    flat = re.sub(r"\s+", " ", DOC.read_text(encoding="utf-8").split("\n## Closing note", 1)[1])
    expected = (
        f"{c['reproduced']} reproduced ({reproduced}), {c['source-checked']} source-checked, "
        f"{c['external']} external, {c['reported']} reported."
    )
    assert expected in flat, f"closing note lacks {expected!r}"

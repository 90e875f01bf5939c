"""Each covered field report's text, as its reporter pasted it, run through explain_error.py.

tests/data/troubleshooting/field_reports.json keeps, per report, ``text`` (the pasted
output exactly as it stands in the thread: rank prefixes, truncation and all; or the
title / sentence when the thread pastes nothing) and ``text_source`` (which part of the
thread it is). For every covered report with a text this file runs
``scripts/explain_error.py --json`` on it (its main(), in this process) and requires the claimed entry as the first
match, unless the record carries ``unmatched``: the reason the text cannot be matched,
beginning with one of the REASONS below. An ``unmatched`` report that the script now
matches fails too, so stale reasons are removed as the matcher or the catalogue improves.

The closing note of references/troubleshooting.md states the counts computed here by
running the script; nothing in it is typed from memory.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from test_field_reports import REPORTS  # noqa: E402
from test_troubleshooting import DOC  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "explain_error.py"
# prose: the thread pastes no output (a question, a PR, a silent failure in words);
# cut:   the stored text stops before the exception line;
# format: the pasted line is another face of the entry than its one message fence;
# matcher: the text holds the entry's message in a form the matcher does not accept yet.
REASONS = ("prose", "cut", "format", "matcher")

COVERED = [r for r in REPORTS if r["verdict"] == "covered"]
WITH_TEXT = [r for r in COVERED if "text" in r]


def _id(r: dict) -> str:
    return r["link"].split("github.com/")[1]


@functools.lru_cache(maxsize=None)
def first_match(text: str) -> str | None:
    """The id explain_error.py --json puts first for ``text`` (None when nothing matched).

    The script's main() runs in this process on a file holding the text: the code path of
    ``explain_error.py --json FILE`` without an interpreter start per report (about 0.4 s each);
    test_one_report_in_a_child_process_agrees runs the script itself for comparison."""
    import tempfile

    import explain_error

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pasted.log"
        path.write_text(text, encoding="utf-8")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = explain_error.main(["--json", str(path)])
    assert rc in (0, 1), err.getvalue()[-2000:]  # 1: nothing matched
    matches = json.loads(out.getvalue())["matches"]
    return matches[0]["id"] if matches else None


def test_one_report_in_a_child_process_agrees():
    for r in WITH_TEXT[:3]:
        out = subprocess.run([sys.executable, str(SCRIPT), "--json", "-"], input=r["text"], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        assert out.returncode in (0, 1), out.stderr[-2000:]
        matches = json.loads(out.stdout)["matches"]
        assert (matches[0]["id"] if matches else None) == first_match(r["text"]), r["link"]


def counts() -> Counter:
    """first: claimed entry first; plus one key per unmatched reason."""
    c = Counter()
    for r in WITH_TEXT:
        if first_match(r["text"]) == r["entry"]:
            c["first"] += 1
        else:
            c[r.get("unmatched", "none:").split(":", 1)[0]] += 1
    return c


@pytest.mark.parametrize("report", REPORTS, ids=_id)
def test_optional_text_fields_are_well_formed(report):
    if "text" in report:
        assert report["text"].strip() and report["text_source"].strip()
    if "unmatched" in report:
        assert "text" in report, "unmatched needs the text it is about"
        reason = report["unmatched"]
        assert reason.split(":", 1)[0] in REASONS and reason.split(":", 1)[1].strip(), reason


@pytest.mark.parametrize("report", WITH_TEXT, ids=_id)
def test_pasted_text_puts_the_claimed_entry_first(report):
    got = first_match(report["text"])
    if "unmatched" in report:
        assert got != report["entry"], (
            f"{report['entry']} now comes first: drop the unmatched reason ({report['unmatched']})"
        )
    else:
        assert got == report["entry"], (
            f"explain_error.py puts {got} first, not {report['entry']}; "
            "fix the catalogue or record why under 'unmatched'"
        )


def test_covered_reports_keep_their_text_or_say_why_not():
    assert len(WITH_TEXT) >= 88
    for r in COVERED:
        if "text" not in r:
            assert r.get("text_source", "").startswith("not retrieved: "), r["link"]


def test_closing_note_states_the_matched_counts():
    c = counts()
    flat = re.sub(r"\s+", " ", DOC.read_text(encoding="utf-8").split("\n## Closing note", 1)[1])
    expected = (
        f"{len(WITH_TEXT)} of the {len(COVERED)} covered reports keep the text as pasted; "
        f"`scripts/explain_error.py` puts the claimed entry first for {c['first']} of them. "
        f"The other {len(WITH_TEXT) - c['first']} carry the reason: {c['prose']} paste no output, "
        f"{c['cut']} stop before the exception line, {c['format']} show another face of the "
        f"entry than its message, {c['matcher']} need the matcher to accept the form pasted."
    )
    assert expected in flat, f"closing note lacks {expected!r}"

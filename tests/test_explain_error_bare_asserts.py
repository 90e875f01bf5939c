"""Asserts without a text of their own, placed from the traceback (issue 19 item 2: every assert).

``assert x`` prints a bare ``AssertionError``; ``assert a == b, (a, b)`` prints values only.
The release index records each such assert (file, function, line, its test and the condition
as source text), and explain_error places a pasted one by the innermost Megatron frame: its line
in the user's release, else the code line the traceback prints under the frame, else the only
such assert in that function. The traceback here is raised by the installed 0.19.2 itself.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import release_index as ri  # noqa: E402
import triage  # noqa: E402
import triage_logs as tl  # noqa: E402

SITE = Path(sysconfig.get_paths()["purelib"])
RAISE = "from megatron.core import parallel_state as ps; ps.get_hierarchical_context_parallel_groups()"


@pytest.fixture(scope="module")
def traceback_text() -> str:
    r = subprocess.run([sys.executable, "-c", RAISE], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode != 0 and r.stderr.rstrip().endswith("AssertionError"), r.stderr[-2000:]
    return r.stderr[r.stderr.index("Traceback"):]


def _site(text: str, version: str | None = None) -> dict:
    result = triage.match_log(tl.multi_rank_log(text, ranks=(0, 3)) if "\n" not in text.strip() else text,
                              megatron_version=version)
    assert result["sources"], text
    return result["sources"][0]


def test_the_installed_bare_asserts_are_indexed():
    """Every assert without a message in the installed files is in the index at its line, and every
    indexed one is an assert at that line whose message (if any) is not a text."""
    indexed = {(s["file"], s["line"]): s for s in ri.load("0.19.2").bare_asserts()}
    texts = {(m["file"], m["line"]) for m in ri.load("0.19.2").messages() if m["kind"] == "assert"}
    asserts = {}  # (file, line) -> the installed assert statement, each file parsed once
    for path in sorted((SITE / "megatron").rglob("*.py")):
        rel = path.relative_to(SITE).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert):
                asserts[(rel, node.lineno)] = node
    seen = {k for k, node in asserts.items() if node.msg is None}
    missing = seen - set(indexed)
    assert len(seen) > 500 and not missing, sorted(missing)[:10]
    for (rel, line), s in indexed.items():
        assert ast.unparse(asserts[(rel, line)].test) == s["test"]
        assert (rel, line) not in texts, (rel, line)  # its message, if any, gave the index no text


def test_a_real_bare_assert_is_placed_at_its_line(traceback_text):
    s = _site(traceback_text)
    assert (s["file"], s["function"], s["line"]) == (
        "megatron/core/parallel_state.py", "get_hierarchical_context_parallel_groups", 1847)
    assert s["how"] == "frame" and s["kind"] == "assert" and s["note"] == ""
    assert s["condition"] == "check_initialized and _HIERARCHICAL_CONTEXT_PARALLEL_GROUPS is None"


def test_another_release_line_is_placed_by_the_code_line(traceback_text):
    moved = traceback_text.replace("line 1847,", "line 1790,")
    s = _site(moved)
    assert s["line"] == 1847 and "code line under the frame" in s["note"]
    # Without the code line, the only text-less assert of that function still places it.
    bare = "\n".join(ln for ln in moved.splitlines() if not ln.strip().startswith("assert "))
    s = _site(bare)
    assert s["line"] == 1847 and "only assert without a text" in s["note"]


def test_values_only_message_and_foreign_frames(traceback_text):
    values = traceback_text.replace("\nAssertionError", "\nAssertionError: (torch.Size([]), 0, 77856768)")
    assert _site(values)["line"] == 1847
    # A sentence is a message of its own, never a bare assert; a frame outside megatron/ places nothing.
    sentence = traceback_text.replace("\nAssertionError", "\nAssertionError: groups are missing here")
    assert all(s.get("how") != "frame" for s in triage.match_log(sentence)["sources"])
    foreign = traceback_text.replace("megatron/core/parallel_state.py", "mylib/parallel_state.py")
    assert triage.match_log(foreign)["sources"] == []

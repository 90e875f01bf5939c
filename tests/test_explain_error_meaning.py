"""An entry whose meaning contradicts the pasted message never comes first.

Generated over the whole catalogue (references/troubleshooting.md as the tests read it): each
documented message (and older wording) is turned into its opposite by one rewrite of its fixed
words ("is not" <-> "is", "must be" <-> "must not be", "already" -> "not", "cannot" <->
"can", ...), pasted into a noisy multi-rank log, and the entry must not be the first match.
Another entry, a raise site or nothing may answer; the entry may come first only through another
of its messages, never through the one that says the opposite.
The issue's own case (PG-04 "already initialized" against a "not initialized" message) is
pinned separately.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import test_explain_error as te  # noqa: E402
import triage  # noqa: E402
import triage_logs as tl  # noqa: E402
from triage import match  # noqa: E402

# (pattern, replacement): the first that applies to a message's first line makes its opposite.
OPPOSITES = (
    (r"\bmust not be\b", "must be"), (r"\bmust be\b", "must not be"),
    (r"\bshould not\b", "should"), (r"\bshould be\b", "should not be"),
    (r"\bis not\b", "is"), (r"\bare not\b", "are"), (r"\bdoes not\b", "does"), (r"\bdo not\b", "do"),
    (r"\bcannot\b", "can"), (r"\bnot supported\b", "supported"), (r"\bnot\b ", ""),
    (r"\balready\b", "not"), (r"\bis\b", "is not"), (r"\bare\b", "are not"), (r"\bcan\b", "cannot"),
    (r"\bwithout\b", "with"), (r"\brequires?\b", "does not require"),
    (r"\bmust\b", "must not"), (r"\bshould\b", "should not"),
    (r"\bsupported\b", "not supported"), (r"\bUnsupported\b", "Supported"), (r"\bUnknown\b", "Known"),
    (r"\bInvalid\b", "Valid"), (r"\bMismatch\b", "Match"), (r"\bconflicts with\b", "agrees with"),
    (r"\bneither\b", "either"), (r"\bexpects\b", "does not expect"), (r"\bMissing\b", "Present"), (r"\bundefined\b", "defined"),
)


def opposite(text: str) -> str | None:
    first = text.splitlines()[0]
    head, sep, body = first.partition(": ")
    if not sep:
        head, body = "", first
    for rx, repl in OPPOSITES:
        new, n = re.subn(rx, repl, body, count=1)
        if n:
            return (head + sep + new) if sep else new
    return None


def _pairs():
    out, none = [], []
    for p in te.MESSAGES:
        eid, message = p.values
        if te.BARE.match(message.splitlines()[0]):
            continue
        flipped = opposite(message)
        if flipped is None:
            none.append(eid)
            continue
        out.append(pytest.param(eid, message, flipped, id=p.id))
    return out, none


PAIRS, NO_OPPOSITE = _pairs()


def test_most_documented_messages_have_an_opposite():
    assert len(PAIRS) >= 0.8 * (len(PAIRS) + len(NO_OPPOSITE)), NO_OPPOSITE


@pytest.mark.parametrize("eid,message,flipped", PAIRS)
def test_the_opposite_message_does_not_put_the_entry_first(eid, message, flipped):
    pasted = tl.changed_numbers(flipped, seed=len(flipped))
    result = triage.match_log(tl.multi_rank_log(pasted, ranks=(2, 4)))
    first = result["matches"][0] if result["matches"] else None
    if first is None or first["id"] != eid:
        return
    # The entry may still come first through another of its messages that the pasted text does
    # not contradict (MOE-05 has "Bias is not supported for MoE" and "... only supported when
    # ETP==1"), never through the message that says the opposite.
    assert first["entry_text"].splitlines()[0] != message.splitlines()[0], \
        f"{eid} first for its opposite {pasted[:160]!r} (how: {first['how']})"


def test_not_initialized_puts_pg08_first_and_never_pg04():
    # The bundle's own eval log (evals/files/convert_dp_cp_not_initialized.log) and the bare line.
    line = "AssertionError: data parallel group with context parallel combined is not initialized"
    for text in (tl.multi_rank_log(line), line + "\n",
                 (REPO / "evals" / "files" / "convert_dp_cp_not_initialized.log").read_text(encoding="utf-8")):
        ids = [m["id"] for m in triage.match_log(text)["matches"]]
        assert ids[0] == "PG-08", ids
        assert "PG-04" not in ids, ids
    # ... and the entry that says "already initialized" still answers its own message.
    ids = [m["id"] for m in triage.match_log("AssertionError: data parallel group is already initialized\n")["matches"]]
    assert ids[0] == "PG-04"


@pytest.mark.parametrize("a,b,expected", [
    ("data parallel group is already initialized", "data parallel group is not initialized", True),
    ("num_layers must be divisible by 4", "num_layers is not divisible by 4", False),
    ("num_layers must not be divisible by 4", "num_layers must be divisible by 4", True),
    ("Cannot use sequence parallelism without tensor parallelism",
     "Can use sequence parallelism with tensor parallelism", True),
    ("tensor model parallel group is not initialized", "tensor model parallel group is not initialized", False),
])
def test_contradiction_rule(a, b, expected):
    assert match.contradicts(a, b) is expected



def _not_when():
    from test_troubleshooting import ENTRIES

    return [(e.id, e.text.splitlines()[0], t) for e in ENTRIES if e.bullet("Not when")
            for t in re.findall(r"`([^`]+)`", e.bullet("Not when"))]


NOT_WHEN = _not_when()


def test_not_when_is_used():
    assert any(eid == "HANG-07" and text == "invalid usage" for eid, _, text in NOT_WHEN)


@pytest.mark.parametrize("eid,own,text", NOT_WHEN)
def test_a_not_when_text_keeps_the_entry_off_the_line(eid, own, text):
    """The entry's own message carrying one of its **Not when** texts: the entry is not offered."""
    assert text.lower() not in own.lower(), f"{eid}: its own message carries {text!r}"
    pasted = f"{tl.changed_numbers(own, seed=3)} ({text})"
    result = triage.match_log(tl.multi_rank_log(pasted, ranks=(0, 1)))
    assert all(m["id"] != eid for m in result["matches"]), (pasted, [m["id"] for m in result["matches"]])


@pytest.mark.parametrize("result_text,expected", [
    ("unhandled system error (run with NCCL_DEBUG=INFO for details)", True),
    ("remote process exited or there was a network error", True),
    ("invalid usage (run with NCCL_DEBUG=WARN for details)", False),
    ("unhandled cuda error (run with NCCL_DEBUG=INFO for details)", False),
])
def test_hang07_claims_only_the_nccl_results_it_explains(result_text, expected):
    line = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "
            f"{result_text}, NCCL version 2.21.5")
    result = triage.match_log(tl.multi_rank_log(line, ranks=(0, 1)))
    ids = [m["id"] for m in result["matches"]]
    assert (bool(ids) and ids[0] == "HANG-07") == expected, ids

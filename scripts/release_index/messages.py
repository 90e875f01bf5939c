"""Which releases carry a message: for the troubleshooting catalogue's text history."""

from __future__ import annotations

import functools

from .release import load
from .versions import RELEASES


def _norm(text: str) -> str:
    return " ".join(text.split())


@functools.lru_cache(maxsize=None)
def _patterns(version: str) -> list[tuple[str, str, list[str], dict]]:
    """(normalized text, its longest fixed part, fixed parts, message) of each message."""
    out = []
    for m in load(version).messages():
        fixed = _norm(m["text"])
        parts = fixed.split("{}")
        out.append((fixed, max(parts, key=len), parts, m))
    return out


def _filled_in(parts: list[str], text: str) -> bool:
    """text contains the parts in order: the message printed with its variable parts filled in."""
    pos = 0
    for i, part in enumerate(parts):
        if not part:
            continue
        hit = text.find(part, pos)
        if hit < 0:
            return False
        pos = hit + len(part)
    return True


def find_message(text: str, version: str) -> list[dict]:
    """The messages of a release that the text is (part of), the most specific (longest fixed text) first.

    text is either fixed text as the index writes it ("{}" for each variable part; a quoted part of
    a longer message counts) or a message as printed (variable parts filled in, possibly with a
    prefix such as "AssertionError: "), which must contain a whole indexed message.
    """
    want = _norm(text)
    hits = []
    for fixed, anchor, parts, m in _patterns(version):
        if want in fixed or (anchor in want and _filled_in(parts, want)):
            hits.append(m)
    # The most specific first: a short message such as "world_size ({}) is not divisible by {}"
    # also matches a longer one printed with its values.
    return sorted(hits, key=lambda m: -len(m["text"].replace("{}", "")))


def releases_with_message(text: str) -> tuple[str, ...]:
    """The indexed releases (oldest first) in which find_message(text, release) finds the message."""
    return tuple(v for v in RELEASES if find_message(text, v))


def _same_check(m: dict, rel_msgs: list[dict]) -> dict | None:
    """m's check in another release: same kind and function, same text, else the most similar text."""
    from .derive import MSG_SIMILAR
    import difflib
    cands = [x for x in rel_msgs if x["kind"] == m["kind"] and x["function"] == m["function"]]
    cands.sort(key=lambda x: x["file"] != m["file"])  # the same file first
    for x in cands:
        if x["text"] == m["text"]:
            return x
    best = max(cands, key=lambda x: difflib.SequenceMatcher(None, m["text"], x["text"]).ratio(), default=None)
    if best is not None and difflib.SequenceMatcher(None, m["text"], best["text"]).ratio() >= MSG_SIMILAR:
        return best
    return None


def message_history(text: str) -> list[dict]:
    """The wordings of one check across the indexed releases, oldest first (for a catalogue's text history).

    The check is the first message find_message(text, ...) finds in the newest release that has
    one; it is followed to the neighbouring releases by kind and function (same text, else the
    most similar one, as message_changed events pair them). Each item is a run of releases with one
    wording: {"versions": [...], "text", "kind", "exc", "file", "function"}. A release without the
    check ends the walk in that direction; [] when no release has the text.
    """
    anchor = next(((v, find_message(text, v)[0]) for v in reversed(RELEASES) if find_message(text, v)), None)
    if anchor is None:
        return []
    version, m = anchor
    found = {version: m}
    i = RELEASES.index(version)
    for step in (-1, 1):
        cur, j = m, i + step
        while 0 <= j < len(RELEASES):
            nxt = _same_check(cur, load(RELEASES[j]).messages())
            if nxt is None:
                break
            found[RELEASES[j]] = cur = nxt
            j += step
    runs: list[dict] = []
    for v in RELEASES:
        if v not in found:
            continue
        x = found[v]
        if runs and runs[-1]["text"] == x["text"] and RELEASES.index(runs[-1]["versions"][-1]) == RELEASES.index(v) - 1:
            runs[-1]["versions"].append(v)
        else:
            runs.append({"versions": [v], "text": x["text"], "kind": x["kind"], "exc": x["exc"],
                         "file": x["file"], "function": x["function"]})
    return runs

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
    """The messages of a release that the text is (part of).

    text is either fixed text as the index writes it ("{}" for each variable part; a quoted part of
    a longer message counts) or a message as printed (variable parts filled in, possibly with a
    prefix such as "AssertionError: "), which must contain a whole indexed message.
    """
    want = _norm(text)
    hits = []
    for fixed, anchor, parts, m in _patterns(version):
        if want in fixed or (anchor in want and _filled_in(parts, want)):
            hits.append(m)
    return hits


def releases_with_message(text: str) -> tuple[str, ...]:
    """The indexed releases (oldest first) in which find_message(text, release) finds the message."""
    return tuple(v for v in RELEASES if find_message(text, v))

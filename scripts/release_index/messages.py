"""Which releases carry a message: for the troubleshooting catalogue's text history."""

from __future__ import annotations

import functools
import re

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
    return check_history(*anchor)


def check_history(version: str, m: dict, fast: bool = False) -> list[dict]:
    """The wordings of the check m (a message of release version) across the indexed releases,
    oldest first, as message_history gives them. fast: a release that prints the same text is
    taken to carry the same check without reading its messages (its file and function are then
    m's); only releases with another text are read."""
    found = {version: m}
    i = RELEASES.index(version)
    for step in (-1, 1):
        cur, j = m, i + step
        while 0 <= j < len(RELEASES):
            if fast and prints(RELEASES[j], cur["text"]):
                nxt = cur
            else:
                nxt = _same_check(cur, _messages_of(RELEASES[j]))
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


# -- a printed message -> the places that print it (fast: many log lines against every release) -----

_WORD = re.compile(r"[a-z_][a-z0-9_]{2,}")
COMMON = 250  # a word in more templates than this does not select candidates (a stop word)
MIN_FIXED = 12  # fixed characters a template needs to be matched in a log at all
TRUNCATED_SHARE = 0.5  # a paste cut short must still show this share of the fixed text ...
TRUNCATED_MIN = 25  # ... and at least this many fixed characters


class Template:
    """One fixed text ("{}" for each variable part) and every place that prints it, per release."""

    __slots__ = ("text", "parts", "fixed", "raw")

    def __init__(self, text: str):
        self.text = text
        self.parts = [p.strip() for p in text.split("{}")]
        self.fixed = sum(len(p) for p in self.parts)
        self.raw: dict[str, list[list]] = {}  # release -> index records (read as dicts by sites)

    def releases(self) -> tuple[str, ...]:
        return tuple(v for v in RELEASES if v in self.raw)

    @property
    def sites(self) -> dict[str, list[dict]]:
        """{release: [site, ...]}: each site as Release.message_sites gives it."""
        return {v: [_site(r) for r in recs] for v, recs in self.raw.items()}


def _site(r: list) -> dict:
    return {"kind": r[0], "exc": r[1], "text": r[2], "file": r[3], "function": r[4], "line": r[5],
            "condition": r[6] if len(r) > 6 else "", "fields": r[7] if len(r) > 7 else [],
            "flags": r[8] if len(r) > 8 else []}


@functools.lru_cache(maxsize=None)
def _messages_of(version: str) -> list[dict]:
    """Release.messages() of a release, from the message records alone (no full decode)."""
    return [{"kind": r[0], "exc": r[1], "text": r[2], "file": r[3], "function": r[4], "line": r[5]}
            for r in _message_records(version)]


@functools.lru_cache(maxsize=None)
def _message_bytes(version: str) -> bytes | None:
    """The JSON text of a release's message list, cut from its file without decoding the rest.

    data.dumps writes sorted keys without spaces, so the list is the bytes between
    '"messages":' and '],"modules":{' (that sequence cannot occur inside a JSON string, whose
    quotes are escaped). None on any surprise (the callers then read the whole release).
    """
    import gzip

    from . import data

    try:
        raw = gzip.decompress(data.release_file(version).read_bytes())
        start = raw.index(b'"messages":[') + len(b'"messages":')
        end = raw.index(b'],"modules":{', start) + 1
        if b'"schema":%d,' % data.SCHEMA not in raw[end:]:
            return None
        return raw[start:end]
    except (OSError, ValueError):
        return None


@functools.lru_cache(maxsize=None)
def _message_records(version: str) -> list[list]:
    """The release's message records (as the index stores them), read from _message_bytes."""
    import json

    text = _message_bytes(version)
    try:
        return json.loads(text) if text is not None else load(version)._raw["messages"]
    except ValueError:
        return load(version)._raw["messages"]


def prints(version: str, text: str) -> bool:
    """Whether a release has a message with exactly this fixed text (a byte search, no decoding)."""
    import json

    found = _message_bytes(version)
    if found is None:
        return any(r[2] == text for r in _message_records(version))
    return json.dumps(text, ensure_ascii=False).encode("utf-8") in found


def releases_printing(t: "Template") -> tuple[str, ...]:
    """Every indexed release that prints t's text (in any of the spellings t was built from)."""
    texts = {r[2] for recs in t.raw.values() for r in recs}
    return tuple(v for v in RELEASES if v in t.raw or any(prints(v, x) for x in texts))


@functools.lru_cache(maxsize=4)
def templates(versions: tuple[str, ...] = RELEASES) -> tuple[list[Template], dict[str, list[int]]]:
    """Every distinct message text of these releases (all indexed ones by default), and an index
    word -> templates.

    A template is listed under each of its words that fewer than COMMON templates share, so a
    line selects only the templates that share a distinctive word with it.
    """
    by_text: dict[str, Template] = {}
    by_raw: dict[str, Template] = {}  # most texts recur unchanged across releases: normalize each once
    for v in versions:
        for rec in _message_records(v):
            t = by_raw.get(rec[2])
            if t is None:
                key = _norm(rec[2])
                t = by_text.get(key)
                if t is None:
                    t = by_text[key] = Template(key)
                by_raw[rec[2]] = t
            recs = t.raw.get(v)
            if recs is None:
                t.raw[v] = [rec]
            else:
                recs.append(rec)
    out = [t for t in by_text.values() if t.fixed >= MIN_FIXED]
    words = [set(_WORD.findall(" ".join(t.parts).lower())) for t in out]
    df: dict[str, int] = {}
    for ws in words:
        for w in ws:
            df[w] = df.get(w, 0) + 1
    index: dict[str, list[int]] = {}
    for i, ws in enumerate(words):
        rare = [w for w in ws if df[w] < COMMON] or sorted(ws)
        for w in rare:
            index.setdefault(w, []).append(i)
    return out, index


def locate(t: Template, text: str) -> tuple[int, int, int] | None:
    """(fixed characters found, start, end) of t's fixed parts found in order in text; the parts
    after the first one missing are not looked for. None when the first fixed part is missing."""
    pos, start, found = 0, None, 0
    for part in t.parts:
        if not part:
            continue
        hit = text.find(part, pos)
        if hit < 0:
            break
        if start is None:
            start = hit
        found += len(part)
        pos = hit + len(part)
    return None if start is None else (found, start, pos)


def match_printed(line: str, more: str = "", versions: tuple[str, ...] = RELEASES) -> list[tuple[Template, float, str]]:
    """Templates whose message is printed in line (continued by more: the lines after it), best first.

    Each hit is (template, score, how): "template" (every fixed part in order, 1.0) or "truncated"
    (the line ends before the template does: the share of fixed text found, counted only when it
    is at least TRUNCATED_SHARE and TRUNCATED_MIN characters). The most specific (most fixed text)
    first among equal scores. versions: the releases whose messages are looked at (each hit's
    template knows only those; releases_printing finds the others).
    """
    line = _norm(line)
    whole = _norm(line + " " + more) if more else line
    temps, index = templates(versions)
    cands: set[int] = set()
    for w in set(_WORD.findall(whole.lower())):
        cands.update(index.get(w, ()))
    hits = []
    for i in cands:
        t = temps[i]
        loc = locate(t, whole)
        if loc is None or loc[1] >= len(line):  # the message must start on the line itself
            continue
        found, start, end = loc
        if found == t.fixed:
            hits.append((t, 1.0, "template"))
            continue
        loc = locate(t, line)
        if loc and loc[0] >= TRUNCATED_MIN and loc[0] >= TRUNCATED_SHARE * t.fixed and len(line) - loc[2] <= 120:
            hits.append((t, round(loc[0] / t.fixed, 3), "truncated"))
    hits.sort(key=lambda h: (-h[1], -h[0].fixed, h[0].text))
    return hits

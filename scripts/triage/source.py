"""A log line -> where Megatron prints it: the raise site in the user's release, from the release index.

Every message Megatron Core and Megatron-LM raise, assert, warn or log in 0.12.3 ... 0.19.2 is in
the release index (``scripts/release_index``, compiled from the released sources), with its
file, function, line, the condition that prints it (source text), the config fields and flags
that condition reads. This is the floor under the catalogue: a line no entry explains is still
placed, and an entry's match is given its raise site too.

Which site, when one text is printed in several places: the one in the traceback (file and
function of a frame), then the same exception type, then the first in the file order; the
user's release first, else the newest release that prints it (with a note).
"""

from __future__ import annotations

import ast
import functools
import re

import release_index as ri
from release_index import messages as rm
from release_index.versions import DEFAULT, RELEASES, resolve_version

# Text before the message itself: an exception type, a logger's level and name, the layout
# checker's rule id, pytest's "E   ".
_LEAD = re.compile(r"^(?:E\s{2,})?(?:[xX!]\s+\[[\w-]+\]\s+)?"
                   r"(?:\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s*(?:\|\s*[\w.]+\s*)?\]?:?(?:[\w.]+:)?\s*)?"
                   r"(?:(?:[a-z_][\w]*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Warning|Exit|Failure|StopIteration)\s*:\s*)?")
MIN_COVER = 0.3  # fixed text must be this share of the message (what follows the exception type) ...
MIN_FIXED_ALONE = 40  # ... unless it has at least this many fixed characters
MAX_OTHER_SITES = 5
# Messages the Python interpreter itself prints (CPython's wording).  A short Megatron template
# that says the same ("{} has no attribute {}" in megatron/core/msc_utils.py) matches every such
# line; it is that site only when a traceback frame is there.
PYTHON_WORDINGS = tuple(re.compile(p) for p in (
    r"^(?:'[^']*' object|type object '[^']*'|module '[^']*') has no attribute '[^']*'",
    r"^No module named '[^']*'",
    r"^cannot import name '[^']*' from ",
    r"\(\) got an unexpected keyword argument '",
    r"\(\) missing \d+ required (?:positional |keyword-only )?arguments?: ",
    r"\(\) takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given",
    r"^'[^']*' object is not (?:subscriptable|callable|iterable)",
    r"^unsupported operand type\(s\) for ",
    r"^(?:list|tuple|string) index out of range",
))


def indexed(release: str | None) -> str:
    """The indexed release a user's release means (0.17 -> 0.17.1); the newest for unknown or newer ones."""
    try:
        return resolve_version(release)[0] if release else DEFAULT
    except ValueError:
        return DEFAULT


def message_part(line: str) -> str:
    """The message without what a logger, the exception type or a checker put before it."""
    return line[_LEAD.match(line).end():]


def _exc_of(line: str) -> str:
    m = re.match(r"^(?:E\s{2,})?(?:[a-z_][\w]*\.)*((?:[A-Z]\w*)?(?:Error|Exception|Warning|StopIteration))\b", line)
    return m.group(1) if m else ""


def _frame_hit(site: dict, frames: tuple) -> int:
    """2: a frame at the site's file, function and line; 1: file and function; 0: none."""
    func = site["function"].rsplit(".", 1)[-1]
    best = 0
    for path, line, fn in frames:
        path = path.replace("\\", "/")
        if (path == site["file"] or path.endswith("/" + site["file"])) and fn in (func, "?"):
            best = max(best, 2 if line == site["line"] else 1)
    return best


def _rank_sites(sites: list[dict], exc: str, frames: tuple) -> list[dict]:
    return sorted(sites, key=lambda s: (-_frame_hit(s, frames), (s["exc"] or "") != exc and bool(exc),
                                        s["file"], s["line"]))


def explain(event, release: str | None) -> dict | None:
    """The source block for a message event, or None when no Megatron message is printed in it."""
    line = event.line
    msg = message_part(line)
    if not msg:
        return None
    more = " ".join(event.following)
    exc = _exc_of(line)
    rel = indexed(release)
    # The user's release first (one file read); the others only for a line it does not place.
    lead = line[: len(line) - len(msg)]
    worth = bool(exc) or "megatron" in lead or any("megatron/" in f[0] for f in event.frames)
    for versions in ((rel,), RELEASES):
        if versions == RELEASES and not worth:
            break  # reading every release is for exceptions, warnings and Megatron's own log lines
        hits = rm.match_printed(line, more, versions)
        python_says = any(rx.search(msg) for rx in PYTHON_WORDINGS)
        for t, score, how in hits:
            if t.fixed < MIN_FIXED_ALONE and (t.fixed / max(len(msg), 1) < MIN_COVER or how != "template"
                                              or not _is_the_whole_message(t.text, msg)) \
                    and not (how == "template" and _in_frames(t, event.frames)):
                # A short text inside a longer sentence is a coincidence, not the message, unless the
                # traceback runs through the template's own raise site (a release that appends
                # details to it: "... matches in state dict: [keys]").
                continue
            if python_says and t.fixed < MIN_FIXED_ALONE and not _in_frames(t, event.frames):
                continue  # the interpreter's own wording, raised somewhere the traceback does not show
            return _block(t, score, how, exc, event.frames, rel, hits)
    return None


_SENTENCE = re.compile(r"[A-Za-z]{2,}\s+[A-Za-z]{2,}")


def explain_bare(event, release: str | None) -> dict | None:
    """An AssertionError without a text (or with values only, ``(torch.Size([]), 0, 77856768)``)
    raised in Megatron: the assert at the traceback's innermost frame, from the release index's
    asserts that print no message of their own. The frame must be in a ``megatron/`` file and
    name the function; the line must be the assert's, or the function must hold only one."""
    line = event.line
    if _exc_of(line) != "AssertionError" or not event.frames or _SENTENCE.search(message_part(line)):
        return None
    path, lineno, fn = event.frames[-1]
    path = path.replace("\\", "/")
    if "megatron/" not in path:
        return None
    rel = indexed(release)
    site, how = _site_at_frame(_at_frame(ri.load(rel).bare_asserts(), path, fn), lineno, event.code,
                               "assert without a text")
    if site is None:
        return None
    exact = how == AT_LINE
    note = "" if exact else (
        f"the traceback's line {lineno} is not this assert's line {site['line']} in {rel} (your release differs); "
        f"matched by {how}")
    return {
        "file": site["file"], "function": site["function"], "line": site["line"], "kind": "assert",
        "exc": "AssertionError", "condition": site["condition"], "fields": site["fields"], "flags": site["flags"],
        "text": "", "release": rel, "in_your_release": True, "releases": [rel], "other_sites": [],
        "score": 1.0 if exact else 0.9, "how": "frame", "note": note, "frame_agrees": True,
        "your_release_site": None,
    }


_RAISING = re.compile(r"^(assert|raise)\b")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_LITERAL = re.compile(r"""f?["']([^"'{}]{12,})""")


def explain_cut(event, release: str | None) -> dict | None:
    """A Python traceback pasted without its exception line (cut before the tail): when its
    innermost frame is in a ``megatron/`` file and the code line under it is an ``assert`` or a
    ``raise``, the check it stopped at, from the release index: the site at the frame's line, else
    the one whose test or message literal the code line shows, else the only one of that kind in
    the function. Its text is the message the paste lost."""
    if event.kind != "stack" or not event.frames or not _RAISING.match(event.code):
        return None
    path, lineno, fn = event.frames[-1]
    path = path.replace("\\", "/")
    if "megatron/" not in path:
        return None
    kind = _RAISING.match(event.code).group(1)
    rel = indexed(release)
    for at in (rel, *[v for v in reversed(RELEASES) if v != rel]):
        r = ri.load(at)
        here = [x for x in _at_frame((*r.message_sites(), *(r.bare_asserts() if kind == "assert" else ())),
                                     path, fn) if x["kind"] == kind]
        if here:
            break
    else:
        return None
    site, how = _site_at_frame(here, lineno, event.code, kind)
    if site is None:
        return None
    where = "" if at == rel else f"your release {rel} has no {kind} in {fn}; this is {at}'s. "
    note = (f"{where}the pasted traceback ends at this {kind} without the exception line; "
            + ("its message is this site's" if site["text"] else "this assert prints no message")
            + f" (matched by {how})")
    return {
        "file": site["file"], "function": site["function"], "line": site["line"], "kind": site["kind"],
        "exc": site["exc"], "condition": site["condition"], "fields": site["fields"], "flags": site["flags"],
        "text": site["text"], "release": at, "in_your_release": at == rel, "releases": [at],
        "other_sites": [], "score": 1.0 if how == AT_LINE else 0.9, "how": "cut", "note": note,
        "frame_agrees": True, "your_release_site": None,
    }


AT_LINE = "the frame's line"


def _at_frame(sites, path: str, fn: str) -> list[dict]:
    """The sites in the frame's file (a path ending in the site's) and function (its last name)."""
    return [x for x in sites if x["function"].rsplit(".", 1)[-1] == fn
            and (path == x["file"] or path.endswith("/" + x["file"]))]


def _site_at_frame(here: list[dict], lineno: int, code: str, what: str) -> tuple[dict | None, str]:
    """The one site of a function a traceback frame stopped at, and how it was told apart: the
    frame's line, else the message literal or the assert's test on the code line under the frame,
    else the only ``what`` in the function. (None, "") when that does not single one out."""
    exact = [x for x in here if x["line"] == lineno]
    if len(exact) == 1:
        return exact[0], AT_LINE
    lit = _LITERAL.search(code)
    if lit:
        fixed = lit.group(1).split("{")[0].strip()
        by_text = [x for x in here if x["text"] and x["text"].startswith(fixed[:40])]
        if len(by_text) == 1:
            return by_text[0], "the message literal on the code line"
    test = _assert_test(code)
    if test:
        same = [x for x in here if x.get("test") == test]
        if len(same) == 1:
            return same[0], "the assert's test in the code line under the frame"
        names = set(_IDENT.findall(test))
        by_names = [x for x in here if names and names <= set(_IDENT.findall(x["condition"]))]
        if len(by_names) == 1:
            return by_names[0], "the names the assert's test reads"
    if len(here) == 1:
        return here[0], f"the only {what} in the function"
    return None, ""


def _assert_test(code: str) -> str:
    """The test of ``assert <test>, <msg>`` as ast.unparse writes it, from the code line a traceback
    prints under a frame (the message may go on over lines the traceback does not show)."""
    if not code.startswith("assert "):
        return ""
    body = code[len("assert "):].rstrip()
    cuts = [len(body)] + [i for i in range(len(body) - 1, 0, -1) if body[i] == ","]
    for end in cuts:
        try:
            return ast.unparse(ast.parse(body[:end].strip(), mode="eval").body)
        except SyntaxError:
            continue
    return ""


def _in_frames(t: rm.Template, frames: tuple) -> bool:
    """Whether a traceback frame is at one of the template's sites (any release)."""
    return any(_frame_hit(rm._site(r), frames) for raw in t.raw.values() for r in raw)


PROSE_WORDS = 3  # a value with this many words is a sentence, not a value Megatron formats in


@functools.lru_cache(maxsize=1024)
def _whole_rx(text: str) -> re.Pattern:
    parts = [r"\s*".join(re.escape(w) for w in p.split()) for p in text.split("{}")]
    return re.compile(r"\s*(.*?)\s*".join(parts))


def _is_the_whole_message(text: str, msg: str) -> bool:
    """A short template is the message only when it spans the whole message and what fills its
    variable parts reads as values (a number, a name, a shape), not as words of another sentence:
    "{} is not supported" is not "fp8 with cpu offloading is not supported"."""
    m = _whole_rx(text).fullmatch(" ".join(msg.split()))
    return m is not None and all(sum(w.isalpha() for w in v.split()) < PROSE_WORDS for v in m.groups())


def _block(t: rm.Template, score: float, how: str, exc: str, frames: tuple, rel: str, hits: list) -> dict:
    releases = rm.releases_printing(t)
    here = rel in t.raw
    at = rel if here else releases[-1]
    ranked = _rank_sites([rm._site(r) for r in t.raw[at]], exc, frames)
    site = ranked[0]
    note = "" if here else (f"your release {rel} does not print this text; it is printed in "
                            f"{_spans(releases)} (the site shown is {at}'s)")
    # The wording of another release: the less specific text your release prints, when one matches too.
    mine = None if here else next((h for h in hits if h[1] == 1.0 and rel in h[0].raw), None)
    yours = None
    if mine is not None:
        s = _rank_sites([rm._site(r) for r in mine[0].raw[rel]], exc, frames)[0]
        yours = {"file": s["file"], "function": s["function"], "line": s["line"], "text": mine[0].text,
                 "condition": s["condition"], "fields": s["fields"], "flags": s["flags"]}
        note += f"; in {rel} the same line is printed by {s['file']}:{s['line']} ({s['function']}): {mine[0].text}"
    return {
        "file": site["file"], "function": site["function"], "line": site["line"],
        "kind": site["kind"], "exc": site["exc"], "condition": site["condition"],
        "fields": site["fields"], "flags": site["flags"],
        "text": t.text, "release": at, "in_your_release": here, "releases": list(releases),
        "other_sites": [{"file": s["file"], "function": s["function"], "line": s["line"]}
                        for s in ranked[1:1 + MAX_OTHER_SITES]],
        "score": score, "how": how, "note": note,
        "frame_agrees": bool(_frame_hit(site, frames)), "your_release_site": yours,
    }


def _spans(versions) -> str:
    """0.12.3, 0.13.1, 0.14.0 -> "0.12.3-0.14.0" (runs of consecutive indexed releases)."""
    idx = sorted(RELEASES.index(v) for v in versions)
    runs, start = [], idx[0]
    for a, b in zip(idx, idx[1:] + [None]):
        if b != a + 1:
            runs.append(RELEASES[start] if start == a else f"{RELEASES[start]}-{RELEASES[a]}")
            start = b
    return ", ".join(runs)


def history(block: dict) -> list[dict]:
    """The wordings of the check at this site across releases (release_index.check_history), oldest first."""
    site = {k: block[k] for k in ("kind", "exc", "file", "function", "line")}
    site["text"] = next((s["text"] for s in _sites_at(block) if s["line"] == block["line"]), block["text"])
    return [{"versions": r["versions"], "text": r["text"]}
            for r in rm.check_history(block["release"], site, fast=True)]


def _sites_at(block: dict) -> list[dict]:
    return [s for s in rm._messages_of(block["release"])
            if s["file"] == block["file"] and s["function"] == block["function"]]

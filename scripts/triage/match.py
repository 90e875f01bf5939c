"""Score catalogue entries against one event of the log.

How a message event matches an entry, strongest first:

* ``template``: the line is the entry's message (or an older wording, ``text alias``) with other
  values in its variable parts (``1.0``); the values are read from those parts. Values are
  anything: a number in the entry's message also stands for a shape such as ``[1, 4, 1131]``
  (``0.95``, the ``loose`` form). A template with a single distinctive word (``<group
  description> is not initialized``) that the whole line matches scores ``0.94``: an exact
  template outranks word overlap;
* ``truncated``: the line is the start of the message, cut off (``0.93``; at least
  TRUNCATED_MIN characters of it), also right after a value (``for bucket #0``: the value is
  one token there, never the rest of a sentence);
* ``prose``: the line is a message the entry quotes in its text (``Core users get``, older
  wordings in the Versions bullet) with at least PROSE_MIN fixed characters (``0.91``);
* ``words``: most of the message's fixed words occur in the line (``0.9 x`` the share, by length),
  unless the two say opposite things about a word they share (``already initialized`` / ``not
  initialized``, ``must be`` / ``must not be``): such an entry is dropped;
* a bare message (``AssertionError`` and nothing else) matches every entry with that text at
  ``0.5``; the raising frame then decides: a traceback frame inside the statement that raises it
  in megatron-core 0.19.2 adds ``0.5``, one inside the named function ``0.25``;
* ``frame``: no text in common, but the exception type is the entry's and the traceback passes
  through the statement that raises it (``0.7``).

An entry whose **Not when** bullet quotes a text the line carries is not offered for it.

A short title tag before the message (``[Bug] RuntimeError: ...``, ``dsv3:No dot product ...``: at
most TAG_MAX characters) is skipped.

A stack with no exception (``py-spy dump``) matches an entry whose **Stuck in** names one of its
frames (file and function): ``0.9``.
"""

from __future__ import annotations

import functools
import re

from . import catalogue
from .logscan import BUILD_SUFFIX
from .source import message_part as _message_part

# A pasted line is scored against every entry: what is read off the line alone is computed once
# per line, not once per entry (the same pure functions, cached).
message_part = functools.lru_cache(maxsize=1 << 14)(_message_part)


@functools.lru_cache(maxsize=1 << 14)
def _lower_part(line: str) -> str:
    return message_part(line).lower()


@functools.lru_cache(maxsize=1 << 12)
def _line_words(line: str) -> frozenset:
    return frozenset(catalogue.words(line))

THRESHOLD = 0.5
GENERIC_WORDS = 2  # a template with fewer distinctive words than this is a bare message
SHORT_TEMPLATE = 0.94  # a one-word template the whole line matches: above truncations and word overlap
LOOSE, TRUNCATED, PROSE = 0.95, 0.93, 0.91
PROSE_MIN = 40  # fixed characters of a quote in prose (a generic torch error is quoted with fewer)
TRUNCATED_MIN = 16  # fixed characters of a message a truncated paste must show ...
TRUNCATED_SHARE = 0.3  # ... and this share of them (the paste must be exactly the message's start)
# A variable part in a documented message: a placeholder, an ellipsis, a number, or a list of
# numbers (a shape) as one value.
_VAR = re.compile(r"<[^<>\n]*>|…|\.\.\.|[\[(]\s*-?\d[\d.]*(?:\s*,\s*-?\d[\d.]*)*\s*,?\s*[\])]"
                  r"|(?<![A-Za-z_\d.])-?\d+(?:\.\d+)*(?![\d])")
# Negation and requirement words flip what a message says about the word after them: "is not
# initialized" and "must be initialized" both report an uninitialized thing; "already
# initialized" and "must not be initialized" an initialized one.
_FLIP = frozenset("not no non neither cannot never without must should needs need require requires required expected "
                  "expects".split())
# A word that is another one's negation: counted as that word, stated absent.
_ANTONYM = {"invalid": "valid", "unknown": "known", "mismatch": "match", "mismatched": "matched",
            "unsupported": "supported", "incompatible": "compatible", "inconsistent": "consistent",
            "conflicts": "agrees", "conflict": "agree", "disabled": "enabled", "uninitialized": "initialized",
            "unset": "set", "undefined": "defined", "missing": "present", "illegal": "legal", "incorrect": "correct"}
# Short words whose negation is the message's point: "3.10 not in '>=3.12'" (pip's Requires-Python).
_SHORT_WORDS = frozenset(("in",))
_FILLER = frozenset("a an the be is are was were been being to of also".split())
_TOKEN = re.compile(r"[a-z0-9_]+|[.;:!?]")
_NEGATORS = r"(?:not|no|non|never|cannot|without|unsupported)"


def _filler(tok: str) -> bool:
    return tok in _FILLER or any(c.isdigit() for c in tok)  # a value ("2d", "16") is not a word


@functools.lru_cache(maxsize=8192)  # one pasted line is compared with every entry's messages: read it once
def _truths(text: str) -> dict[str, list[bool]]:
    """For each word, whether the text states it (True) or its absence (False), per occurrence.

    A word is negated by the negation and requirement words right before it (fillers such as
    "be", "a" between them): "is not initialized", "must be divisible", "must not be set".
    """
    tokens = _TOKEN.findall(text.lower().replace("n't", " not"))
    out: dict[str, list[bool]] = {}
    for i, tok in enumerate(tokens):
        if (len(tok) < 3 and tok not in _SHORT_WORDS) or tok in _FLIP or _filler(tok) or tok in ".;:!?":
            continue
        truth = tok not in _ANTONYM
        for prev in reversed(tokens[:i]):
            if prev in _FLIP:
                truth = not truth
            elif not _filler(prev):
                break  # another word: the negation does not reach past it
        out.setdefault(_ANTONYM.get(tok, tok), []).append(truth)
    return out


def contradicts(a: str, b: str) -> bool:
    """a and b say opposite things about a word they share (one states it, the other its absence),
    occurrence by occurrence in order (a truncated text has fewer occurrences)."""
    ta, tb = _truths(a), _truths(b)
    for w in ta.keys() & tb.keys():
        n = min(len(ta[w]), len(tb[w]))
        if ta[w][:n] != tb[w][:n]:
            return True
    return False


class _Number:
    """A variable part that is a number in the documented message: a number or a shape here. A
    sentinel, not a string: a literal "#" in a message ("bucket #3") is a word like any other."""

    def __repr__(self) -> str:
        return "NUMBER"


NUMBER = _Number()
TAG_MAX = 40  # characters a title tag ("[Bug] ", "dsv3:") may put before the message
_EXC_BEFORE = re.compile(r"(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)\s*:\s*$")


@functools.lru_cache(maxsize=8192)
def _loose_parts(text: str) -> tuple:
    """The message's first line as literal words, NUMBER for each number (or list of numbers) and
    None for each other variable part (lower case)."""
    out: list = []
    pos = 0
    line = message_part(text.splitlines()[0]).lower()
    for m in _VAR.finditer(line):
        out += line[pos:m.start()].split()
        out.append(None if m.group(0)[0] in "<…." else NUMBER)
        pos = m.end()
    out += line[pos:].split()
    return tuple(out)


def _part_rx(part) -> str:
    if part is NUMBER:  # 8, -1, 0.5, (4, 2), [1, 4, 1131], torch.Size([1, 4])
        return r"([\[(]*-?\d[\d.]*(?:\s*,\s*-?\d[\d.]*)*\s*,?[\])]*)"
    # Any other value never swallows a negation: "topk is not 16" is not "topk is <n>".
    return rf"((?:(?!\b{_NEGATORS}\b).)+?)" if part is None else re.escape(part)


@functools.lru_cache(maxsize=None)
def loose(text: str) -> tuple[re.Pattern | None, tuple, int]:
    """(whole message, truncated forms, fixed characters) of a documented message.

    whole: a number or a shape for each number, any other value (never a negation) for each
    other variable part, any spacing; truncated: (k, fixed characters kept) for the message cut
    after each of its literal words or numbers, longest first. A truncated paste must keep
    TRUNCATED_MIN fixed characters and TRUNCATED_SHARE of the message's (_enough).
    """
    parts = _loose_parts(text)
    fixed = sum(len(p) for p in parts if p and p is not NUMBER)
    if not parts or fixed == 0:
        return None, (), 0
    whole = re.compile(r"\s*".join(_part_rx(p) for p in parts))
    cuts, kept = [], 0
    for k, p in enumerate(parts[:-1], 1):
        kept += len(p) if p and p is not NUMBER else 0
        cuts.append((k, kept))
    return whole, tuple(reversed(cuts)), fixed


@functools.lru_cache(maxsize=None)
def _start_parts(text: str) -> int:
    """How many parts of the message run up to its second literal word (0: fewer than two)."""
    literal = [k for k, p in enumerate(_loose_parts(text), 1) if p and p is not NUMBER][:2]
    return literal[1] if len(literal) == 2 else 0


@functools.lru_cache(maxsize=8192)
def _first_literal(text: str) -> str:
    return next((p for p in _loose_parts(text) if p and p is not NUMBER), "")


@functools.lru_cache(maxsize=1 << 14)
def _lower(line: str) -> str:
    return line.lower()


def _same_start(text: str, line: str) -> bool:
    """The line starts as the message does, up to its second literal word (values in between as
    the message has them): a truncated paste may share few of its words."""
    k = _start_parts(text)
    # The prefix's literal words are matched as they are: without the first one, no match (cheap).
    if not k or _first_literal(text) not in _lower(line):
        return False
    return _prefix_rx(text, k).match(_lower_part(line)) is not None


def _enough(kept: int, fixed: int) -> bool:
    return kept >= TRUNCATED_MIN and kept >= TRUNCATED_SHARE * fixed


@functools.lru_cache(maxsize=None)
def _prefix_rx(text: str, k: int) -> re.Pattern:
    """The message's first k parts. A paste cut right after a variable part ends in its value:
    one token there ("for bucket #0"), never the rest of a sentence."""
    parts = _loose_parts(text)[:k]
    rx = [_part_rx(p) for p in parts]
    if parts[-1] is None:
        rx[-1] = r"(\S+)"
    return re.compile(r"\s*".join(rx))


def _untagged(text: str, line: str) -> str:
    """The line from where the message starts, when a short title tag comes first ("[Bug] RuntimeError:
    ...", "dsv3:No dot product ...", "[Blackwell B200] No ..."); else the line as it is."""
    k = _start_parts(text)
    if not k or _first_literal(text) not in _lower(line) or _same_start(text, line):
        return line
    m = _prefix_rx(text, k).search(line[:TAG_MAX + 200].lower())
    if m is None or m.start() == 0 or line[m.start() - 1].isalnum():
        return line
    # The tag ends where the exception type begins ("dsv3:torch.distributed.DistBackendError: ...").
    if m.start() > TAG_MAX:
        exc = _EXC_BEFORE.search(line[: m.start()])
        if exc is None or exc.start() > TAG_MAX:
            return line
    return line[m.start():]


def _loose_match(text: str, msg_line: str) -> tuple[float, str] | None:
    whole, cuts, fixed = loose(text)
    if whole is None:
        return None
    body = message_part(_untagged(text, message_part(msg_line))).lower()
    if not BUILD_SUFFIX.sub("", message_part(text.splitlines()[0])).strip():
        # The documented message is empty but for the suffix (a bare assert in a constructor):
        # only an empty message with the suffix is it, not any message build_module wrapped.
        if BUILD_SUFFIX.search(body) and not BUILD_SUFFIX.sub("", body).strip() and whole.search(body):
            return LOOSE, "template"
        return None
    if whole.search(body):
        return LOOSE, "template"
    cut = body.rstrip(".… ")
    if len(cut) < TRUNCATED_MIN or not cuts or not _same_start(text, body):
        return None
    head, _, partial = cut.rpartition(" ")
    parts = _loose_parts(text)
    for k, kept in cuts:
        if _enough(kept, fixed) and _prefix_rx(text, k).fullmatch(cut):
            return TRUNCATED, "truncated"
        # Cut inside a word: the paste's last word is the start of the message's next word.
        nxt = parts[k] if k < len(parts) else None
        if head and isinstance(nxt, str) and nxt is not NUMBER and nxt.startswith(partial) and \
                _enough(kept + len(partial), fixed) and _prefix_rx(text, k).fullmatch(head):
            return TRUNCATED, "truncated"
    return None


def _frame_score(rec: dict, frames: tuple) -> tuple[float, dict | None]:
    best, where = 0.0, None
    for path, line, _func in frames:
        path = path.replace("\\", "/")
        for f in rec["frames"]:
            if not (path == f["file"] or path.endswith("/" + f["file"])):
                continue
            if f["lines"][0] <= line <= f["lines"][1]:
                score = 1.0 if f["kind"] == "statement" else 0.5
                if score > best:
                    best, where = score, {"file": f["file"], "line": line, "function": f["function"],
                                          "lines": f["lines"], "kind": f["kind"]}
    return best, where


# A line that only shares words with a message must at least read as a failure: a reporter's
# sentence naming the same settings ("with recompute_method=uniform, recompute_granularity=full")
# is not Megatron's message about them (verl#5251 against CFG-04).
_FAILURE_WORD = re.compile(
    r"error|warn|exception|assert|fail|fatal|abort|invalid|\bmust\b|cannot|can't|unable|could not|not supported"
    r"|unsupported|expected|mismatch|missing|required|no attribute|no module|not found|not initiali[sz]ed"
    r"|time[sd]? ?out|illegal|\bnan\b|overflow|out of memory|too (?:many|few|large|small)", re.I)


def _error_like(line: str) -> bool:
    return bool(_exc_type(line)) or _FAILURE_WORD.search(line) is not None


def _exc_type(text: str) -> str:
    head = text.split(":", 1)[0].strip()
    return head.rsplit(".", 1)[-1] if head.replace(".", "").replace("_", "").isalnum() else ""


def _values(template: dict, groups: tuple) -> dict:
    out = {}
    for i, (name, value) in enumerate(zip(template["names"], groups)):
        if value is None:
            continue
        out[name or f"value{i + 1}"] = value.strip()
    return out


def _text_match(rec: dict, line: str, following: tuple, event_words: set):
    """(text score, how, values, message) of the entry's best message for this line, or None."""
    best = None
    for msg in rec["messages"]:
        if msg["kind"] == "symptom" or not msg.get("templates"):
            continue
        cand = _one_message(msg, line, following, event_words)
        if cand is not None and (best is None or cand[0] > best[0]):
            best = cand
    for quoted in prose(rec):
        if best is not None and best[0] >= PROSE:
            break
        if loose(quoted)[2] >= PROSE_MIN and not contradicts(message_part(line), message_part(quoted)) \
                and (_loose_match(quoted, line) or (None, ""))[1] == "template":
            best = (PROSE, "prose", {}, {"kind": "prose", "text": quoted, "versions": None})
    return best


def _one_message(msg: dict, line: str, following: tuple, event_words: set):
    first = msg["templates"][0]
    rx = catalogue.regex(first["regex"])
    bare = not first["words"]
    generic = len(first["words"]) < GENERIC_WORDS
    m = rx.fullmatch(line) or (None if generic or len(first["words"]) < 3 else rx.search(line))
    if m:
        if bare:
            score = 0.5
        elif generic:
            score = SHORT_TEMPLATE
        else:
            score = 1.0 if m.end() - m.start() == len(line) else 0.97
        values = _values(first, m.groups())
        for extra in msg["templates"][1:]:  # later lines of a multi-line message
            rx2 = catalogue.regex(extra["regex"])
            for nxt in following:
                m2 = rx2.search(nxt)
                if m2:
                    values.update(_values(extra, m2.groups()))
                    break
        return score, "template", values, msg
    if generic or not first["words"]:
        return None
    shared = first["words"] & event_words
    total = sum(map(len, first["words"]))
    share = sum(map(len, shared)) / total
    if share < TRUNCATED_SHARE and not _same_start(msg["text"], _untagged(msg["text"], message_part(line))):
        return None  # too little in common for any looser reading (and its regexes are not built)
    # Beyond the exact template, a message that says the opposite is never offered.
    if contradicts(message_part(line), message_part(msg["text"].splitlines()[0])):
        return None
    hit = _loose_match(msg["text"], line)
    if hit is not None:
        return hit[0], hit[1], {}, msg
    if len(shared) < 3 or share < 0.6 or not _error_like(line):
        return None
    if _exc_type(line) and _exc_type(msg["text"]) and _exc_type(line) != _exc_type(msg["text"]):
        share *= 0.8
    return round(0.9 * share, 3), "words", {}, msg


# A Markdown code span: ``a quote with `backticks` inside`` or `a plain one`.
_CODE_SPAN = re.compile(r"``\s?(.+?)\s?``|`([^`]+)`")


def _code_spans(text: str) -> list[str]:
    return [a or b for a, b in _CODE_SPAN.findall(text)]
# uv and pip print their own lower-case "error:" (uv: ``error: Distribution `x==1` can't be installed``).
_QUOTED_MESSAGE = re.compile(r"^(?:(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)|WARNING|ERROR|error):\s*\S")


def prose(rec: dict) -> tuple[str, ...]:
    """Messages the entry quotes in its fields (``Core users get``, ``Versions``): `Error: ...` spans."""
    f = rec["fields"]
    texts = (f.get("Core users get", ""), f.get("Versions", ""), f.get("Text history", ""))
    return _prose(rec["id"], texts) if any(texts) else ()


@functools.lru_cache(maxsize=None)
def _prose(_eid: str, texts: tuple) -> tuple[str, ...]:
    return tuple(q for t in texts for q in _code_spans(t) if _QUOTED_MESSAGE.match(q))


def excluded(rec: dict, line: str) -> bool:
    """The line carries a text the entry's **Not when** bullet names: another cause sharing its words
    (NCCL's ``invalid usage`` against the entry for ``unhandled system error``)."""
    not_when = rec["fields"].get("Not when")
    if not not_when:  # most entries: nothing to exclude
        return False
    low = _lower(line)
    return any(t.lower() in low for t in _not_when(rec["id"], not_when))


@functools.lru_cache(maxsize=None)
def _not_when(_eid: str, text: str) -> tuple[str, ...]:
    return tuple(_code_spans(text))


def score_message(rec: dict, event) -> dict | None:
    if excluded(rec, event.line):
        return None
    event_words = _line_words(event.line)
    text = _text_match(rec, event.line, event.following, event_words)
    frame, where = _frame_score(rec, event.frames)
    if text is None:
        error = next((m for m in rec["messages"] if m["kind"] == "error"), None)
        if frame == 1.0 and error and _exc_type(event.line) and _exc_type(event.line) == _exc_type(error["text"]):
            return {"score": 0.7, "how": "frame", "values": {}, "message": error, "frame": where}
        return None
    score, how, values, msg = text
    if score == 0.5 and how == "template":  # bare message: the frame decides
        score += 0.5 * frame
    return {"score": round(min(score, 1.0), 3), "how": how, "values": values, "message": msg, "frame": where,
            "frame_score": frame}


def score_stack(rec: dict, event) -> dict | None:
    for stuck in rec["stuck_in"]:
        for path, line, func in reversed(event.frames):  # innermost first
            path = path.replace("\\", "/")
            if (path == stuck["file"] or path.endswith("/" + stuck["file"])) and (
                    func == stuck["function"] or func.endswith("." + stuck["function"])):
                return {"score": 0.9, "how": "stack", "values": {}, "message": None,
                        "frame": {"file": stuck["file"], "line": line, "function": func}}
    return None


def candidates(event) -> list[tuple[dict, dict]]:
    """(entry, match) pairs for this event at or above THRESHOLD, best first."""
    scorer = score_stack if event.kind == "stack" else score_message
    out = []
    for rec in catalogue.entries():
        m = scorer(rec, event)
        if m and m["score"] >= THRESHOLD:
            out.append((rec, m))
    # Ties: a frame inside the raising statement, then the more specific message.
    out.sort(key=lambda rm: (-rm[1]["score"], -rm[1].get("frame_score", 0),
                             -len((rm[1]["message"] or {}).get("text", "")), rm[0]["id"]))
    return out


def nearest(searched: set, limit: int = 5) -> list[tuple[dict, float]]:
    """Entries sharing the most searched words (by share of the entry's words)."""
    scored = []
    for rec in catalogue.entries():
        shared = rec["words"] & searched
        if shared:
            scored.append((rec, round(len(shared) / max(len(rec["words"]), 1), 3)))
    scored.sort(key=lambda rs: (-rs[1], rs[0]["id"]))
    return scored[:limit]

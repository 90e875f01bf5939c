"""Score catalogue entries against one event of the log.

How a message event matches an entry, strongest first:

* ``template``: the line is the entry's message (or an older wording, ``text alias``) with other
  values in its variable parts (``1.0``); the values are read from those parts;
* ``words``: most of the message's fixed words occur in the line (``0.9 x`` the share, by length);
* a bare message (``AssertionError`` and nothing else, or only generic words) matches every entry
  with that text at ``0.5``; the raising frame then decides: a traceback frame inside the
  statement that raises it in megatron-core 0.19.2 adds ``0.5``, one inside the named function
  ``0.25``;
* ``frame``: no text in common, but the exception type is the entry's and the traceback passes
  through the statement that raises it (``0.7``).

A stack with no exception (``py-spy dump``) matches an entry whose **Stuck in** names one of its
frames (file and function): ``0.9``.
"""

from __future__ import annotations

from . import catalogue

THRESHOLD = 0.5
GENERIC_WORDS = 2  # a template with fewer distinctive words than this is a bare message


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
        first = msg["templates"][0]
        rx = catalogue.regex(first["regex"])
        generic = len(first["words"]) < GENERIC_WORDS
        m = rx.fullmatch(line) or (None if generic or len(first["words"]) < 3 else rx.search(line))
        if m:
            score, how = (0.5 if generic else (1.0 if m.end() - m.start() == len(line) else 0.97)), "template"
            values = _values(first, m.groups())
            for extra in msg["templates"][1:]:  # later lines of a multi-line message
                rx2 = catalogue.regex(extra["regex"])
                for nxt in following:
                    m2 = rx2.search(nxt)
                    if m2:
                        values.update(_values(extra, m2.groups()))
                        break
            cand = (score, how, values, msg)
        elif not generic and first["words"]:
            shared = first["words"] & event_words
            total = sum(map(len, first["words"]))
            share = sum(map(len, shared)) / total
            if len(shared) < 3 or share < 0.6:
                continue
            if _exc_type(line) and _exc_type(msg["text"]) and _exc_type(line) != _exc_type(msg["text"]):
                share *= 0.8
            cand = (round(0.9 * share, 3), "words", {}, msg)
        else:
            continue
        if best is None or cand[0] > best[0]:
            best = cand
    return best


def score_message(rec: dict, event) -> dict | None:
    event_words = catalogue.words(event.line)
    text = _text_match(rec, event.line, event.following, event_words)
    frame, where = _frame_score(rec, event.frames)
    if text is None:
        error = next((m for m in rec["messages"] if m["kind"] == "error"), None)
        if frame == 1.0 and error and _exc_type(event.line) and _exc_type(event.line) == _exc_type(error["text"]):
            return {"score": 0.7, "how": "frame", "values": {}, "message": error, "frame": where}
        return None
    score, how, values, msg = text
    if score == 0.5:  # bare message: the frame decides
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

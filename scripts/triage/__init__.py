"""Error triage: a failing job's log -> the troubleshooting entries that explain it.

Standard library only, Python >= 3.10. Reads references/index/catalogue.json (compiled from
references/troubleshooting.md by ``make index-references``), never the Markdown.

Public API (stable; ``scripts/explain_error.py --json`` prints the same object)::

    from triage import match_log, match_stream, BadInput
    match_log(text: str, megatron_version: str | None = None) -> dict
    match_stream(binary_stream, megatron_version=None) -> dict   # reads the stream to its end

    {"schema_version": 1,
     "megatron_version": "0.16.1" or None, "megatron_version_source": "--megatron-version" | ...,
     "matches": [match, ...],          # flat, best first, one per entry
     "problems": [{"matched_line", "ranks", "matches": [match, ...], "chain",
                   "source": source or None, "name": name or None}, ...],   # one per distinct problem
     "sources": [source + {"matched_line"}, ...],  # raise sites, in problem order (triage.source)
     "names": [name + {"matched_line"}, ...],      # name histories (triage.names)
     "unmatched": [{"line", "ranks"}],  # error/warning lines no entry explains (at most 10)
     "launcher": {"failures": [{"rank", "exitcode", "host", ...}]} or None,   # torch elastic summary
     "searched_words": [...], "nearest": [{"id", "title", "anchor", "score"}],  # filled when nothing matched
     "input": {"bytes", "lines", "candidate_lines", "events", "events_dropped"}}

    match = {"id", "title", "score", "matched_line", "ranks", "values", "cause", "fix", "versions",
             "next_command", "anchor", "link", "how", "entry_text", "frame"}

    source = {"file", "function", "line", "kind", "exc", "condition", "fields", "flags", "text", "release",
              "in_your_release", "releases", "other_sites", "history", "score", "how", "note", "frame_agrees",
              "your_release_site"}   # the site your release prints the line from, when the text is another release's
    name = {"query", "what", "key", "kind", "releases", "in_your_release", "events", "successor",
            "answer", "release", "next_command"}

Problems an entry explains come first (best score first); then those only a raise site or a
name's history explains. ``score`` is 0.5-1.0 (see triage.match); ``values`` maps names to the values read from the
message's variable parts; ``versions`` is ``{"release", "stated", "text_history", "caveat"}``.
``BadInput`` (empty, binary) carries the one line to print.
"""

from __future__ import annotations

import io

from . import catalogue, match, names, nextcmd, source, versions
from .logscan import BadInput, Event, Scanner

SCHEMA_VERSION = 1
MAX_PROBLEMS = 20
MAX_UNMATCHED = 10
__all__ = ["BadInput", "SCHEMA_VERSION", "match_log", "match_stream"]


def match_log(text: str, megatron_version: str | None = None) -> dict:
    return match_stream(io.BytesIO(text.encode("utf-8", "replace")), megatron_version)


def match_stream(stream, megatron_version: str | None = None) -> dict:
    release, source_of_release = versions.resolve(megatron_version)
    scanner = Scanner()
    scanner.feed_stream(stream)
    events = scanner.finish()
    problems: dict[str, dict] = {}
    others: dict[tuple, dict] = {}  # problems no entry explains: a raise site or a name's history
    unmatched = []
    for event in events:
        found = match.candidates(event)
        src = source.explain(event, release) if event.kind == "message" else None
        if src is None and event.kind == "message":
            src = source.explain_bare(event, release)
        name = names.explain(event.line, release, event.following) if event.kind == "message" else None
        if event.kind == "stack" and not found:
            cut = source.explain_cut(event, release)
            if cut is not None:  # a traceback pasted without its last line: the check it stopped at
                event, src = _lost_message(event, cut), cut
                found = match.candidates(event) if cut["text"] else []
        if not found:
            if src is None and name is None:
                if event.kind == "message" and _looks_like_a_problem(event.line):
                    unmatched.append(event)
                continue
            key = ("name", name["query"]) if name else ("source", src["file"], src["function"], src["text"])
            other = others.setdefault(key, {"event": event, "ranks": set(), "source": src, "name": name})
            other["ranks"] |= event.ranks
            continue
        rec, best = found[0]
        problem = problems.get(rec["id"])
        if problem is None or best["score"] > problem["score"]:
            ranks = problem["ranks"] if problem else set()
            problem = problems[rec["id"]] = {"score": best["score"], "event": event, "found": found[:3],
                                             "ranks": ranks, "source": src, "name": name}
        problem["ranks"] |= event.ranks
    ordered = sorted(problems.values(), key=lambda p: (-p["score"], p["found"][0][0]["id"]))[:MAX_PROBLEMS]
    out_problems, flat = [], {}
    for p in ordered:
        ms = [_match(rec, m, p["event"], sorted(p["ranks"]), release) for rec, m in p["found"]]
        out_problems.append({"matched_line": _shown(p["event"]), "ranks": sorted(p["ranks"]), "matches": ms,
                             "chain": list(p["event"].chain), "source": _with_history(p["source"]),
                             "name": p["name"]})
        for m in ms:
            if m["id"] not in flat or m["score"] > flat[m["id"]]["score"]:
                flat[m["id"]] = m
    # A catalogue entry always outranks a bare raise site: those problems come after every entry's.
    for o in list(others.values())[: max(0, MAX_PROBLEMS - len(out_problems))]:
        out_problems.append({"matched_line": _shown(o["event"]), "ranks": sorted(o["ranks"]), "matches": [],
                             "chain": list(o["event"].chain), "source": _with_history(o["source"]),
                             "name": o["name"]})
    result = {
        "schema_version": SCHEMA_VERSION,
        "megatron_version": release,
        "megatron_version_source": source_of_release,
        "matches": sorted(flat.values(), key=lambda m: -m["score"]),
        "problems": out_problems,
        "sources": [dict(p["source"], matched_line=p["matched_line"][:300]) for p in out_problems if p["source"]],
        "names": [dict(p["name"], matched_line=p["matched_line"][:300]) for p in out_problems if p["name"]],
        "unmatched": [{"line": e.line[:300], "ranks": sorted(e.ranks)} for e in unmatched[:MAX_UNMATCHED]],
        "launcher": {"failures": scanner.elastic} if scanner.elastic else None,
        "searched_words": [],
        "nearest": [],
        "input": {"bytes": scanner.bytes, "lines": scanner.lines, "candidate_lines": scanner.candidates,
                  "events": len(events), "events_dropped": scanner.overflow},
    }
    if not flat:
        searched = set()
        for e in events:
            searched |= catalogue.words(e.line)
        result["searched_words"] = sorted(searched)[:40]
        result["nearest"] = [{"id": r["id"], "title": r["title"], "anchor": r["anchor"], "score": s}
                             for r, s in match.nearest(searched)]
    return result


def _lost_message(event, cut: dict):
    """The message event a cut traceback lost: the site's exception and text ("{}" left for each
    variable part, which the catalogue's templates accept as any value)."""
    line = f"{cut['exc']}: {cut['text']}" if cut["text"] else cut["exc"]
    return Event("message", line, event.frames, (), (line,), set(event.ranks), event.count, event.code, cut=True)


def _shown(event) -> str:
    if not event.cut:
        return event.line
    path, lineno, fn = event.frames[-1]
    return f"{event.line}  [not in the log: the traceback ends at {path.rsplit('/', 1)[-1]}:{lineno} in {fn}]"


def _with_history(block: dict | None) -> dict | None:
    """The source block with the check's wordings across releases (what changed, and when)."""
    if block is None:
        return None
    if block["how"] == "frame" or not block["text"]:  # an assert without a text: no wording to follow
        return dict(block, history=[])
    return dict(block, history=source.history(block))


def explained(result: dict) -> bool:
    """Whether anything in the log is explained: an entry, a raise site or a name's history."""
    return bool(result["matches"] or result["sources"] or result["names"])


def _looks_like_a_problem(line: str) -> bool:
    from .logscan import EXCEPTION

    return bool(EXCEPTION.match(line)) or line.startswith(("NCCL WARN", "WARNING")) or "Watchdog" in line


def _match(rec: dict, m: dict, event, ranks: list[int], release: str | None) -> dict:
    msg = m["message"]
    return {
        "id": rec["id"],
        "title": rec["title"],
        "score": m["score"],
        "matched_line": event.line[:500],
        "ranks": ranks,
        "values": m["values"],
        "cause": rec["cause"],
        "fix": rec["fix"],
        "versions": versions.caveat(rec, release, msg),
        "next_command": nextcmd.next_command(rec, m["values"]),
        "anchor": rec["anchor"],
        "link": catalogue.link(rec),
        "how": m["how"],
        "entry_text": (msg["text"] if msg else "; ".join(f"{s['file']}:{s['function']}" for s in rec["stuck_in"]))[:500],
        "frame": m["frame"],
    }

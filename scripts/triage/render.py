"""Text report of a triage result (bounded: at most a few entries per problem, long fields cut)."""

from __future__ import annotations

import textwrap

from release_index import patches

MAX_FIELD = 600


def _cut(text: str, limit: int = MAX_FIELD) -> str:
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return "no rank prefix"
    runs, start = [], ranks[0]
    for a, b in zip(ranks, ranks[1:] + [None]):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return "ranks " + ",".join(runs)


def _wrap(label: str, text: str) -> list[str]:
    return textwrap.wrap(_cut(text), width=100, initial_indent=f"    {label}", subsequent_indent="      ")


def _source(s: dict, under_entry: bool) -> list[str]:
    head = "raised at" if under_entry else "no catalogue entry; Megatron prints it at"
    out = [f"  {head} {s['file']}:{s['line']} in {s['function']} ({s['kind']}, {s['release']})"]
    if s["condition"]:
        out += _wrap("when: ", s["condition"])
    if s["fields"]:
        out.append("    reads: " + ", ".join(s["fields"]) + (f"  (flags: {' '.join(s['flags'])})" if s["flags"] else ""))
    if s["note"]:
        out += _wrap("note: ", s["note"])
    hist = s.get("history") or []
    if len(hist) > 1:
        out += _wrap("wording: ", "; ".join(f"{h['versions'][0]}-{h['versions'][-1]}: {h['text']}" for h in hist))
    elif not s["note"]:
        out.append("    releases: " + (", ".join(s["releases"])))
    if s["other_sites"]:
        out.append("    same text also at: " + ", ".join(f"{o['file']}:{o['line']} ({o['function']})"
                                                       for o in s["other_sites"]))
    return out


def _name(n: dict) -> list[str]:
    out = _wrap("name: ", n["answer"])
    for e in n["events"][:6]:
        since = patches.note(e)
        out.append(f"      {e['version']} {e['change']}" + (f" {since}" if since else "")
                   + (f" {e['detail']}" if e["detail"] else "")
                   + (f" -> {e['successor']}" if e["successor"] else ""))
    if n.get("next_command"):
        out.append(f"    next: {n['next_command']}")
    return out


def render(result: dict) -> str:
    lines = []
    release = result["megatron_version"] or "unknown"
    lines.append(f"megatron-core {release} ({result['megatron_version_source']})")
    for i, p in enumerate(result["problems"], 1):
        lines.append("")
        lines.append(f"Problem {i} ({_ranks(p['ranks'])}): {_cut(p['matched_line'], 300)}")
        if len(p["chain"]) > 1:
            lines.append("  exception chain: " + " -> ".join(_cut(c, 80) for c in p["chain"]))
        for m in p["matches"]:
            lines.append(f"  {m['id']} {m['title']}  [score {m['score']}, {m['how']}]  {m['link']}")
            lines.append(f"    entry: {_cut(m['entry_text'].splitlines()[0], 200)}")
            if m["frame"]:
                f = m["frame"]
                lines.append(f"    frame: {f['file']}:{f['line']} in {f['function']}")
            if m["values"]:
                lines.append("    values: " + ", ".join(f"{k}={v}" for k, v in m["values"].items()))
            lines += _wrap("cause: ", m["cause"])
            lines += _wrap("fix: ", m["fix"])
            if m["versions"]["caveat"]:
                lines += _wrap("versions: ", m["versions"]["caveat"])
            if m["next_command"]:
                lines.append(f"    next: {m['next_command']}")
        if p.get("source"):
            lines += _source(p["source"], bool(p["matches"]))
        if p.get("name"):
            lines += _name(p["name"])
    if result["launcher"]:
        fails = result["launcher"]["failures"]
        lines.append("")
        lines.append("torch elastic: failed " + ", ".join(
            f"rank {f.get('rank')} (exitcode {f.get('exitcode', '?')}, host {f.get('host', '?')})" for f in fails[:16]))
    if result["unmatched"]:
        lines.append("")
        lines.append("Other error or warning lines (no catalogue entry):")
        lines += [f"  [{_ranks(u['ranks'])}] {_cut(u['line'], 200)}" for u in result["unmatched"]]
    if not result["matches"]:
        lines.append("")
        lines.append("No catalogue entry matches this log." + (
            " (The problems above are placed from Megatron's source or the release index.)"
            if result["problems"] else ""))
        lines.append("Searched words: " + (", ".join(result["searched_words"]) or "(none: no error, warning or stack line found)"))
        if result["nearest"]:
            lines.append("Nearest entries:")
            lines += [f"  {n['id']} {n['title']}  references/troubleshooting.md#{n['anchor']}" for n in result["nearest"]]
    inp = result["input"]
    lines.append("")
    counted = f", {inp['lines']} lines" if inp["lines"] is not None else ""
    lines.append(f"read {inp['bytes']} bytes{counted}; {inp['candidate_lines']} candidate lines, "
                 f"{inp['events']} distinct events" + (f" ({inp['events_dropped']} more dropped)" if inp["events_dropped"] else ""))
    return "\n".join(lines)

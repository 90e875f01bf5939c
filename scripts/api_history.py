#!/usr/bin/env python3
"""What changed in Megatron Core between releases 0.12 and 0.19.2, from the bundled release index.

  api_history.py GPTModel                       events for a class across 0.12.3 ... 0.19.2
  api_history.py TransformerConfig.num_layers   a dataclass field (inherited ones too)
  api_history.py megatron.core.parallel_state:initialize_model_parallel --at 0.13
  api_history.py --use-custom-fsdp              a Megatron-LM flag (also: api_history.py -- --use-custom-fsdp)
  api_history.py --diff 0.15 0.17 --under megatron.core.transformer

NAME is a dotted module, a class, function or method (short, dotted, or module:Qualname), a field
as Class.field, or a Megatron-LM flag. Each event names the first release with the new state:
added, removed, renamed, moved (with the successor; "inferred" when it is a guess from an
identical body, a same-named definition elsewhere or a deprecation message, not an alias),
signature_changed (which parameters), default_changed (old -> new), message_changed; and behaviour:
deprecated (a message the function or constructor raises, warns or logs, or flag help, says so; the
text is quoted with its file:line), ignored (flag help says the flag is ignored, or a deprecated flag
that no code in megatron/core or megatron/training reads any more), body_changed (the memory
estimator, the microbatch calculator and the pipeline layout parser: code lines added and removed
per function, and per module).
Indexed releases: 0.12.3 0.13.1 0.14.0 0.15.3 0.16.1 0.17.1 0.18.2 0.19.2; a minor line (0.15) or
any patch of it means the indexed release of that line. An event's version is the indexed release;
"[since 0.15.0]" (JSON: "since") names the first patch release of that line with the new state,
compared against the line's earlier tags for added, removed, renamed, moved, signature and default
changes (0.12.x patches are not compared). The index is compiled from the released
sources with `ast` (make index-releases); this script reads only that data.

Exit codes: 0 found, 1 unknown name (nearest names are suggested), 2 bad input (or no index data).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_guard  # noqa: E402
import megatron_release  # noqa: E402
import release_index as ri  # noqa: E402
from release_index.data import MissingData  # noqa: E402

PROG = "api_history.py"
SCHEMA_VERSION = 1
DEFAULT_LIMIT = 40  # events: keeps the text under 4 KB and --json under 16 KB; --full lifts it
DETAIL_CHARS = 240  # of one event's detail in text (--json carries it whole)
TEXT_BUDGET = 3300  # bytes of event lines in text: the whole answer stays under 4 KB
BEHAVIOUR = ("deprecated", "ignored", "body_changed")
MAX_LIMIT = 100_000  # more than every event of the index (about 9,000)


class BadInput(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("name", nargs="?", metavar="NAME", help="module, class, function, Class.field, Enum.MEMBER or --flag")
    p.add_argument("--at", metavar="X.Y", help="also show what NAME is in that release")
    p.add_argument("--diff", nargs=2, metavar=("X.Y", "Z.W"),
                   help="events after release X.Y up to Z.W (for NAME, or all names)")
    p.add_argument("--under", metavar="PREFIX",
                   help="with --diff and no NAME: only names starting with PREFIX (a module path or --flag prefix)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help=f"print at most N events (default {DEFAULT_LIMIT}; with --full all of them)")
    p.add_argument("--full", action="store_true",
                   help="every event, and each event's whole detail in text (output can run to megabytes)")
    p.add_argument("--json", action="store_true", help=f"print one JSON object (schema_version {SCHEMA_VERSION})")
    return p


def _split_args(argv: list[str]) -> list[str]:
    """A flag NAME (--use-custom-fsdp) is not an option of this script: put it after '--'.

    Everything after a '--' of the user's is NAME too ("api_history.py -- --moe-router-topk").
    """
    own = {o for a in build_parser()._actions for o in a.option_strings}
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
        if len(rest) > 1 and rest[1].split("=")[0] in own:
            # "-- --moe-router-score-function --at 0.13": the '--' marked the flag NAME; what follows
            # it are this script's own options (agents write it so).
            argv, rest = argv + rest[1:], rest[:1]
        if len(rest) > 1:
            raise BadInput(f"one NAME after '--', got {len(rest)}: {' '.join(cli_guard.shown(r, 40) for r in rest[:3])}")
    else:
        rest = []
    out, name = [], None
    takes = {"--at": 1, "--diff": 2, "--under": 1, "--limit": 1}  # (--full, --json take none)
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--") and a.split("=")[0] not in own and name is None:
            name = a
        elif takes.get(a) == 1 and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")  # so that a value like --moe is not read as an option
            i += 1
        else:
            out.append(a)
            for _ in range(takes.get(a, 0)):
                i += 1
                if i < len(argv):
                    out.append(argv[i])
        i += 1
    if rest:
        if name is not None or any(not a.startswith("-") for a in out):
            raise BadInput("give one NAME (before or after '--', not both)")
        name = rest[0]
    return out + (["--", name] if name is not None else [])


def _version(text: str) -> str:
    try:
        return ri.resolve_version(text)[0]
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def release_view(key: str, version: str) -> dict:
    """What key is in one release (absent: {"present": False})."""
    rel = ri.load(version)
    out: dict = {"release": version, "present": version in ri.releases_of(key)}
    if not out["present"]:
        return out
    if key.startswith("--"):
        out["flag"] = (rel.flags() or {}).get(key)
    elif ":" not in key:
        out["names"] = rel.names(key)
    else:
        sig = rel.signature(key)
        if sig is not None:
            out["signature"] = sig
        flds = rel.fields(key)
        if flds is not None:
            out["fields"] = flds
        cls, _, attr = key.rpartition(".")
        kind = ri.catalog().get(key, {}).get("kind") if sig is None and attr else None
        if kind == "field":
            out["field"] = next((f for f in rel.fields(cls) or [] if f["name"] == attr), None)
        if kind == "member":
            out["member_of"] = cls
        elif sig is None and flds is None and "field" not in out:
            mod, name = key.split(":", 1)
            out["binding"] = rel.names(mod).get(name)
    return out


def _in_range(ev: dict, lo: str | None, hi: str | None) -> bool:
    order = ri.RELEASES.index
    return (lo is None or order(ev["version"]) > order(lo)) and (hi is None or order(ev["version"]) <= order(hi))


def _fmt_event(ev: dict, key: str | None = None, full: bool = False) -> str:
    parts = [ev["version"].ljust(7), ev["change"].ljust(17)]
    if ri.patches.note(ev):
        parts.append(ri.patches.note(ev))
    if key:
        parts.append(key)
    if ev["detail"]:
        detail = ev["detail"] if full or len(ev["detail"]) <= DETAIL_CHARS else ev["detail"][:DETAIL_CHARS] + "..."
        parts.append(detail + (f" -> {ev['successor']}" if ev["successor"] and ev["change"] in BEHAVIOUR else ""))
    elif ev["successor"]:
        parts.append(f"-> {ev['successor']}")
    return ("  " + "  ".join(parts)).rstrip()


def _fmt_sig(sig: dict) -> list[str]:
    out = []
    for p in sig["params"]:
        star = {"var_positional": "*", "var_keyword": "**"}.get(p["kind"], "")
        txt = star + p["name"] + (f": {p['annotation']}" if p["annotation"] else "")
        txt += f" = {p['default']}" if p["default"] is not None else ""
        out.append(f"    {txt}  [{p['kind']}]")
    return out


def render_release_view(at: dict) -> list[str]:
    if not at["present"]:
        return [f"not in {at['release']}"]
    lines = [f"in {at['release']}:"]
    if "signature" in at:
        via = at["signature"].get("copied_from")
        if via:
            # A pure forwarder (def f(*args, **kwargs): return g(*args, **kwargs)): Python checks the
            # arguments when g is called, so a wrong keyword raises TypeError naming g, not f.
            short = via.rsplit(":", 1)[-1]
            lines.append(f"  signature ({at['signature']['source']}): a (*args, **kwargs) wrapper with "
                         f"@copy_signature({via}); where it passes them on, a keyword {short} lacks raises "
                         f"TypeError from {short}(). Its parameters:")
        else:
            lines.append(f"  signature ({at['signature']['source']}):")
        lines += _fmt_sig(at["signature"])
    if "fields" in at:
        lines.append(f"  {len(at['fields'])} dataclass fields (see --json)")
    if "field" in at and at["field"]:
        f = at["field"]
        lines.append(f"  field {f['name']}: {f['type']} = {f['default']}"
                     + (f"; __post_init__ sets {f['post_init']}" if f["post_init"] else ""))
    if "member_of" in at:
        lines.append(f"  a member of the enum {at['member_of']}")
    if "flag" in at and at["flag"]:
        lines += [f"  {k}: {v}" for k, v in at["flag"].items() if v not in (None, [], "")]
    if "names" in at:
        names = sorted(at["names"])
        lines.append(f"  {len(names)} public names: " + ", ".join(names[:40]) + (" ..." if len(names) > 40 else ""))
    if "binding" in at and at["binding"]:
        lines.append(f"  {at['binding']['kind']}" + (f" -> {at['binding']['target']}" if at["binding"]["target"] else ""))
    return lines


def run_name(args, out) -> int:
    keys = ri.find(args.name)
    if not keys:
        sugg = ri.suggest(args.name)
        if args.json:
            json.dump({"schema_version": SCHEMA_VERSION, "name": args.name, "found": False, "events": [],
                       "suggestions": sugg}, out, indent=1)
            out.write("\n")
        else:
            msg = f"{PROG}: unknown name {args.name!r} in megatron-core {ri.RELEASES[0]} to {ri.RELEASES[-1]}"
            print(msg + (f"; did you mean: {', '.join(sugg)}" if sugg else ""), file=sys.stderr)
        return 1
    key = keys[0]
    lo, hi = (_version(args.diff[0]), _version(args.diff[1])) if args.diff else (None, None)
    evs = [e for e in ri.events(key) if _in_range(e, lo, hi)]
    present = ri.releases_of(key)
    kind = ri.catalog()[key]["kind"]
    at = release_view(key, _version(args.at)) if args.at is not None else None
    if args.json:
        obj = {"schema_version": SCHEMA_VERSION, "name": key, "query": args.name, "found": True,
               "kind": kind, "releases": list(present), "events": evs[: args.limit],
               "other_matches": keys[1:6]}
        if len(evs) > args.limit:
            obj["truncated"] = len(evs) - args.limit
        if at is not None:
            obj["at"] = at
        json.dump(obj, out, indent=1)
        out.write("\n")
        return 0
    span = f"{present[0]} to {present[-1]}" if present else "no release"
    gaps = len(present) != ri.RELEASES.index(present[-1]) - ri.RELEASES.index(present[0]) + 1 if present else False
    print(f"{key} ({kind}): in {span}" + (" (with gaps: " + ", ".join(present) + ")" if gaps else ""), file=out)
    if not evs:
        rng = f"after {lo} up to {hi}" if lo else f"from {ri.RELEASES[0]} to {ri.RELEASES[-1]}"
        print(f"  no changes {rng}", file=out)
    _print_events([_fmt_event(e, full=args.full) for e in evs[: args.limit]], len(evs), args, out,
                  "(--limit N, --full)")
    if at is not None:
        for line in render_release_view(at):
            print(line, file=out)
    if len(keys) > 1:
        print("other matches: " + ", ".join(keys[1:6]) + (" ..." if len(keys) > 6 else ""), file=out)
    return 0


def run_diff(args, out) -> int:
    lo, hi = _version(args.diff[0]), _version(args.diff[1])
    if ri.RELEASES.index(lo) >= ri.RELEASES.index(hi):
        raise BadInput(f"--diff wants an older release first: {lo} is not before {hi}")
    rows = []
    for key, evs in sorted(ri.all_events().items()):
        if args.under and not key.startswith(args.under):
            continue
        rows += [dict(e, name=key) for e in evs if _in_range(e, lo, hi)]
    rows.sort(key=lambda e: (ri.RELEASES.index(e["version"]), e["name"], e["change"]))
    if args.json:
        obj = {"schema_version": SCHEMA_VERSION, "name": None, "from": lo, "to": hi, "under": args.under,
               "count": len(rows), "events": rows[: args.limit]}
        if len(rows) > args.limit:
            obj["truncated"] = len(rows) - args.limit
        json.dump(obj, out, indent=1)
        out.write("\n")
        return 0
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["change"]] = counts.get(r["change"], 0) + 1
    print(f"{len(rows)} events after {lo} up to {hi}" + (f" under {args.under}" if args.under else "")
          + (": " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) if counts else ""), file=out)
    # Text view: what is added or removed inside a module or class added or removed in the same
    # release is counted under it, not listed (--json lists every event).
    whole = {(r["name"], r["version"], r["change"]) for r in rows if r["change"] in ("added", "removed")}
    shown, inside = [], {}
    for r in rows:
        parent = next((p for p in _parents(r["name"]) if (p, r["version"], r["change"]) in whole), None)
        if parent is None:
            shown.append(r)
        else:
            inside[(parent, r["version"], r["change"])] = inside.get((parent, r["version"], r["change"]), 0) + 1
    lines = []
    for r in shown[: args.limit]:
        n = inside.get((r["name"], r["version"], r["change"]))
        lines.append(_fmt_event(r, r["name"], args.full) + (f" (and {n} names inside)" if n else ""))
    _print_events(lines, len(shown), args, out, "(--under PREFIX, --limit N, --full)")
    return 0


def _print_events(lines: list[str], total: int, args, out, how: str) -> None:
    """Event lines within TEXT_BUDGET bytes (unless --full or an explicit --limit), then how many more."""
    used = 0
    for i, line in enumerate(lines):
        used += len(line.encode()) + 1
        if used > TEXT_BUDGET and not args.full and not args.limit_given:
            total_left = total - i
            print(f"  ... {total_left} more {how}", file=out)
            return
        print(line, file=out)
    if total > len(lines):
        print(f"  ... {total - len(lines)} more {how}", file=out)


def _parents(key: str) -> list[str]:
    """Enclosing keys, outermost first: module packages, the module, the class."""
    mod, _, qual = key.partition(":")
    parts = mod.split(".")
    out = [".".join(parts[:i]) for i in range(2, len(parts) + (1 if qual else 0))]
    if "." in qual:
        out.append(f"{mod}:{qual.split('.')[0]}")
    return out


def _bound(args) -> None:
    try:
        args.limit_given = args.limit is not None
        if args.limit is None:
            args.limit = MAX_LIMIT if args.full else DEFAULT_LIMIT
        cli_guard.bounded_int(args.limit, "--limit", 1, MAX_LIMIT)
        for what, text in (("NAME", args.name), ("--under", args.under), ("--at", args.at),
                           *((f"--diff {v}", v) for v in args.diff or ())):
            if text is not None:
                cli_guard.bounded_text(text, what, 400)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    for v in ([args.at] if args.at is not None else []) + list(args.diff or ()):
        _version(v)  # a bad release is bad input (2) before an unknown NAME (1)


def _note_newer_installed() -> None:
    """An installed release newer than the index is named (on stderr): its history ends at 0.19.2."""
    found = megatron_release.installed()
    parsed = megatron_release.parse(found) if found else None
    if parsed and megatron_release.is_newer(parsed):
        print(f"{PROG}: installed megatron-core {found} is newer than {megatron_release.NEWEST}: "
              f"history shown up to {megatron_release.NEWEST}, checked as {megatron_release.NEWEST}",
              file=sys.stderr)


def main(argv: list[str] | None = None, out=None) -> int:
    out = out or sys.stdout
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = build_parser().parse_args(_split_args(argv))
        _bound(args)
        if args.name is not None and not args.name.strip():
            raise BadInput("NAME is empty")
        if args.name is None and not args.diff:
            raise BadInput("give NAME, or --diff X.Y Z.W (see --help)")
        if args.under and (args.name or not args.diff):
            raise BadInput("--under filters --diff over all names; it does not go with NAME")
        _note_newer_installed()
        if args.name is None:
            return run_diff(args, out)
        return run_name(args, out)
    except BadInput as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    except MissingData as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli_guard.run(main, PROG))

#!/usr/bin/env python3
"""Explain a failing Megatron job from its log: the catalogue entry, the cause for your release,
the fix and the next command.

Paste what you have: a whole torchrun/srun log (rank prefixes such as [rank3]: or [default0]:,
timestamps and ANSI colours are stripped), a traceback (chained ones too), torch elastic's
ChildFailedError summary, NCCL WARN lines and watchdog time-outs, warnings, or a py-spy dump of
a hung job. The same error printed by many ranks is reported once, with the ranks. A bare
AssertionError is matched by the traceback frame that raised it; a hang by where its stack stops.

Each match names a section of references/troubleshooting.md: read only that entry (by its
anchor), not the whole file. Under the catalogue is Megatron's own source: any message that
Megatron Core or Megatron-LM 0.12.3 ... 0.19.2 raises, asserts, warns or logs is placed at its
raise site in your release (file, function, line), with the condition that prints it, the
config fields and flags it reads and the releases that print it. An ImportError,
AttributeError or TypeError about a megatron.* name, config field or parameter, and argparse's
"unrecognized arguments" for a Megatron-LM flag, are answered from the release index as
api_history.py does (added, removed, renamed or moved in which release).
A catalogue entry always comes before a bare raise site.

Exit status: 0 at least one problem matched (a catalogue entry, a raise site or a name's
history); 1 nothing matched (the nearest entries and the words searched are shown); 2 bad input
(unreadable file, binary data, empty log) or bad flags.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

EPILOG = """examples:
  python scripts/explain_error.py job.log
  srun ... 2>&1 | tail -n 2000 | python scripts/explain_error.py -
  python scripts/explain_error.py --megatron-version 0.16 --json job.log

--json prints one object (schema_version 1): schema_version, megatron_version,
megatron_version_source, matches (flat, best first: id, title, score, matched_line, ranks,
values, cause, fix, versions, next_command, plus anchor, link, how, entry_text, frame),
problems (one per distinct problem, each with its matches, source and name), sources (raise
sites: file, function, line, kind, exc, condition, fields, flags, text, release,
in_your_release, releases, other_sites, history, how, note, your_release_site), names (key,
kind, releases, in_your_release, events, successor, answer), unmatched, launcher,
searched_words and nearest (when no catalogue entry matched), input.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit 2, like every bad input
        print(f"explain_error.py: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    p = _Parser(prog="explain_error.py", description=__doc__.split("\n\n")[0],
                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", metavar="FILE", help="log files; '-' or none: standard input")
    p.add_argument("--megatron-version", metavar="X.Y",
                   help="your megatron-core release (default: the installed one, read without importing it)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    return p.parse_args(argv)


class _Concat:
    """The given files (or stdin) as one binary stream, read in order."""

    def __init__(self, names):
        self.names = list(names) or ["-"]
        self.current = None

    def read(self, n):
        while True:
            if self.current is None:
                if not self.names:
                    return b""
                name = self.names.pop(0)
                self.current = sys.stdin.buffer if name == "-" else open(name, "rb")  # noqa: SIM115
            data = self.current.read(n)
            if data:
                self.last = data[-1:]
                return data
            if self.current is not sys.stdin.buffer:
                self.current.close()
            self.current = None
            if self.names and getattr(self, "last", b"\n") != b"\n":
                self.last = b"\n"
                return b"\n"  # the next file starts on a line of its own


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    for name in args.files:
        if name != "-" and not os.path.isfile(name):
            print(f"explain_error.py: cannot read {name}: {'a directory' if os.path.isdir(name) else 'no such file'}",
                  file=sys.stderr)
            return 2
    import triage
    from triage import render

    try:
        result = triage.match_stream(_Concat(args.files), args.megatron_version)
    except triage.BadInput as exc:
        print(f"explain_error.py: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # a malformed --megatron-version
        print(f"explain_error.py: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else " the input"
        print(f"explain_error.py: cannot read{where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except triage.catalogue.IndexMissing as exc:
        print(f"explain_error.py: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        print(render.render(result))
    return 0 if triage.explained(result) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)

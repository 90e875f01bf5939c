#!/usr/bin/env python3
"""Review model-provider and config code against the Megatron Core release it will run on.

  review_model_code.py my_provider.py configs/ [--megatron-version 0.15] [--json]
  cat provider.py | review_model_code.py -

The code is parsed with ast, never imported or run (unless --build).  Findings carry a
rule id, path, line, severity (error: breaks on the chosen release; warning: works but is
deprecated, silently different or fragile; info), a message, a fix, the releases it applies
to and the reference section that explains it.  Rules: keywords, positional slots and
required parameters of every megatron callable the release index has a signature for
(constructors, spec functions, utilities; super().__init__ of a Megatron subclass against
its base), including keys of a dict built in the same function or module and passed with
** (unknown, removed, deprecated, required and missing, too many positional, a config
setting passed positionally into a parameter of another name); module functions removed
from the release and called as attributes (mpu.<removed>()); config field reads
(config.x, self.config.x where the code shows the config is Megatron's) absent from the
release; imports that do not resolve (info inside a try that catches ImportError), and
imports of modules that warn at import time that they are deprecated;
literal sizes against the layout checker's rules; a config call whose literal keywords make a
check of the release's own __post_init__ certain to fail (its condition from the release index,
evaluated on the keywords and the fields' defaults; unknown values decide nothing); the config's parallel sizes against
initialize_model_parallel's in the same code; global parallel_state getters where a
process-group collection is in scope (a parameter, or self.pg_collection of a Megatron
subclass; elsewhere one info note per file); the GPTModel and MambaModel deprecations,
also through subclassing (with the HybridModel layer pattern a GPT config maps to); and
layer-spec calls that disagree with their config.

The release: --megatron-version X.Y (0.12 to 0.19), else the installed megatron-core
(importlib.metadata, never imported), else 0.19.2.  Signatures, names and messages come
from the release index shipped with the bundle (scripts/release_index, compiled from the
released sources).

--build MODULE:FUNCTION (runs your code): calls the provider in a child process with a
timeout, on CPU (gloo, world size 1, use_cpu_initialization forced), and reports parameter
counts per module kind, the config settings that had no effect on the built module (each
setting a GPT layer-spec builder also takes, set away from its default, rebuilt at its
default: same modules and weights means no effect), or the exception matched against the
troubleshooting catalogue.  MODULE is imported with the
current directory and the directories of the given paths on sys.path.

Facts about this machine (Transformer Engine not installed) are one "environment" note per
run, apart from the findings about the code, unless --target-te declares the target.
Imports inside a try that catches ImportError are info (the code falls back).

Exit codes: 0 no error finding (and a successful build), 1 an error finding or a failed
build, 2 bad input (unreadable path, a file that does not parse, a bad flag, --timeout not a
finite number > 0, nothing to review: a directory without .py files or only empty files;
one line).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from model_review import SCHEMA_VERSION  # noqa: E402
from model_review.review import BadInput, review_paths  # noqa: E402

PROG = "review_model_code.py"
MAX_TEXT_FINDINGS = 200


def _seconds(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds > 0, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(message)


def build_parser():
    doc = __doc__.split("\n\n")
    p = _Parser(prog=PROG, description=doc[0], epilog="\n\n".join(doc[1:]),
                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="Python files or directories to review ('-' reads standard input)")
    p.add_argument("--megatron-version", metavar="X.Y",
                   help="release to check against (0.12 to 0.19; default: installed, else 0.19.2)")
    p.add_argument("--build", metavar="MODULE:FUNCTION",
                   help="also build the model by calling this provider in a child process")
    p.add_argument("--timeout", type=_seconds, default=300.0, metavar="S",
                   help="--build time limit in seconds (default 300; a finite number > 0)")
    p.add_argument("--target-te", choices=("installed", "absent"),
                   help="declare whether the machine the code runs on has Transformer Engine: "
                        "'absent' gives one te-placeholder warning per TE-only import, "
                        "'installed' none; undeclared, this machine's state is one "
                        "environment note per run")
    p.add_argument("--json", action="store_true",
                   help=f"print one JSON object (schema_version {SCHEMA_VERSION})")
    return p


def render_text(out):
    mv = out["megatron_version"]
    lines = [f"Megatron Core {mv['version']} ({mv['source']}); "
             f"{out['summary']['files']} file(s)"]
    for f in out["findings"][:MAX_TEXT_FINDINGS]:
        lines.append(f"{f['path']}:{f['line']}: {f['severity']} [{f['rule']}] {f['message']}")
        if f["fix"]:
            lines.append(f"    fix: {f['fix']}")
        lines.append(f"    see: {f['reference']} (versions: {f['versions']})")
    more = len(out["findings"]) - MAX_TEXT_FINDINGS
    if more > 0:
        lines.append(f"... {more} more findings (use --json)")
    b = out.get("build")
    if b:
        if b.get("ok"):
            lines.append(f"build {b['target']}: {b['model']}, {b['parameters']:,} parameters")
            for kind, n in b["parameters_by_module"].items():
                lines.append(f"    {kind}: {n:,}")
            for ne in b.get("no_effect", []):
                lines.append(f"    no effect: {ne['field']}={ne['value']!r} builds the same "
                             f"module as the default {ne['default']!r}")
        else:
            lines.append(f"build {b['target']} failed: {b.get('error')}")
            if b.get("hint"):
                lines.append(f"    hint: {b['hint']}")
            m = b.get("match")
            if m and m.get("matches"):
                top = m["matches"][0]
                lines.append(f"    catalogue: {top.get('id')} {top.get('title')} (fix: {top.get('fix')})")
            elif b.get("match_reason"):
                lines.append(f"    catalogue: not matched ({b['match_reason']})")
    for note in out.get("environment", []):
        lines.append(f"environment: {note['message']}")
        lines.append(f"    fix: {note['fix']}")
    s = out["summary"]
    lines.append(f"{s['errors']} error(s), {s['warnings']} warning(s), {s['infos']} info")
    return "\n".join(lines)


def main(argv=None):
    try:
        args = build_parser().parse_args(argv)
        if not args.paths and not args.build:
            raise BadInput("give at least one PATH (or '-' for standard input), or --build")
        target_te = {"installed": True, "absent": False}.get(args.target_te)
        out = review_paths(args.paths, args.megatron_version, target_te=target_te)
        if args.build:
            from model_review.build import run_build
            dirs = [os.getcwd()] + sorted({os.path.dirname(os.path.abspath(p))
                                           for p in args.paths if p != "-"})
            try:
                out["build"] = run_build(args.build, dirs, out["megatron_version"]["version"],
                                         args.timeout)
            except ValueError as exc:
                raise BadInput(str(exc)) from None
    except BadInput as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(out, indent=1) if args.json else render_text(out))
        sys.stdout.flush()
    except BrokenPipeError:  # a closed pipe (| head) is the reader's choice, not an error
        sys.stderr.close()
    failed = out["summary"]["errors"] > 0 or (args.build and not out["build"].get("ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

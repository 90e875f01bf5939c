"""Command line: parsing, hand-over to cluster mode (``inspector.cluster``), --require, exit codes.

This module calls cluster mode (its ``add_arguments``, ``wants_cluster`` and ``main`` hooks); cluster
mode never imports this module.  ``unmet`` (the --require check) lives in ``report`` so both use it.
"""
import argparse
import json
import sys

import megatron_release
from inspector import objects, probes
from inspector.report import DEFAULT_TIMEOUT, unmet  # unmet: kept importable from here

EXIT_OK, EXIT_REQUIRE, EXIT_USAGE = 0, 1, 2
REQUIRABLE = ("python", "torch", "gpus", "megatron_core") + tuple(probes.KERNELS)

DESCRIPTION = """\
Live probe of Megatron Core, PyTorch, GPUs and optional kernels in THIS Python environment.

Every import of torch, megatron.core and optional packages runs in a child process with a
timeout, so a broken or hanging package is reported, never crashes or hangs the report.
The parent never creates a CUDA context: GPU facts come from nvidia-smi (or NVML); torch
is asked about CUDA devices only with --cuda.  No network, no writes, no checkpoint loading,
no process groups (except inside --tiny-model's own child).
"""

EPILOG = """\
statuses: available, not_installed, import_failed, unsupported, timeout, missing, error
  (precision entries may also say not_checked: FP8/MXFP8/NVFP4 support needs --cuda)

kernels probed: %s

exit codes:
  0  report printed (whatever it found)
  1  a component named in --require is not available (the report is still printed)
  2  bad arguments (message on stderr)

examples:
  python scripts/inspect_core_api.py
  python scripts/inspect_core_api.py --json --require megatron_core,torch
  python scripts/inspect_core_api.py --object megatron.core.transformer.mlp:MLP
  python scripts/inspect_core_api.py --object GPTModel.forward --megatron-version 0.13
  python scripts/inspect_core_api.py --config-fields recompute
  python scripts/inspect_core_api.py --tiny-model --json
  python scripts/inspect_core_api.py --check-references
""" % ", ".join(probes.KERNELS)


class UsageError(Exception):
    pass


def _object_key(text):
    if len(text) > MAX_TEXT:
        raise argparse.ArgumentTypeError("at most %d characters, got %d" % (MAX_TEXT, len(text)))
    if objects.valid_object_key(text):
        return text
    from inspector import from_index  # the release index: GPTModel, a dotted path, Class.method
    try:
        key, others = from_index.resolve(text)
    except from_index.UnknownObject as exc:
        raise argparse.ArgumentTypeError(str(exc))
    # Said after parsing succeeds: a usage error stays one line on stderr.
    _READ_AS.append("inspect_core_api: --object %s read as %s%s" % (
        text, key, (" (also: %s)" % ", ".join(others)) if others else ""))
    return key


_READ_AS = []


def _release(text):
    try:
        return megatron_release.choose(text)
    except megatron_release.UnsupportedRelease as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _positive(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError("must be in (0, 3600] seconds, got %r" % text)
    return value


MAX_TEXT = 300  # characters of an --object key or a --config-fields filter


def _bounded(text):
    if len(text) > MAX_TEXT:
        raise argparse.ArgumentTypeError("at most %d characters, got %d" % (MAX_TEXT, len(text)))
    return text


def _require(text):
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in REQUIRABLE]
    if unknown or not names:
        raise argparse.ArgumentTypeError("unknown component %s; known: %s" % (
            ", ".join(unknown) or "(empty)", ", ".join(REQUIRABLE)))
    return names


# Written by hand: argparse's generated usage lists every layout flag and runs to 45 lines.
USAGE = ("%(prog)s [--json] [--timeout SECONDS] [--cuda] [--object NAME ...] [--megatron-version X.Y]\n"
         "       [--config-fields [FILTER]] [--tiny-model] [--check-references] [--full] [--require NAME[,NAME]]\n"
         "   or: torchrun|srun ... %(prog)s --distributed [--json] [--layout --tensor-model-parallel-size N ...]")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, not argparse's usage dump: with the layout flags the usage runs to 45 lines.
        sys.stderr.write("%s: error: %s (see --help)\n" % (self.prog, message))
        sys.exit(EXIT_USAGE)


def _load_cluster():
    try:
        from inspector import cluster
        return cluster
    except ModuleNotFoundError as exc:
        if exc.name in ("inspector.cluster",):
            return None
        sys.stderr.write("inspect_core_api: cluster mode unavailable: %s\n" % exc)
    except Exception as exc:
        sys.stderr.write("inspect_core_api: cluster mode unavailable: %s: %s\n"
                         % (type(exc).__name__, exc))
    return None


def build_parser(cluster=None):
    p = _Parser(prog="inspect_core_api.py", description=DESCRIPTION, epilog=EPILOG, usage=USAGE,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object (with schema_version) instead of text")
    p.add_argument("--timeout", type=_positive, default=None, metavar="SECONDS",
                   help="limit for each child process (default %g); children run concurrently"
                        % DEFAULT_TIMEOUT)
    p.add_argument("--cuda", action="store_true",
                   help="also ask torch (in a child) about CUDA devices, run a tiny matmul, and "
                        "ask Transformer Engine about FP8/MXFP8/NVFP4 support")
    p.add_argument("--object", dest="objects", action="append", type=_object_key, default=[],
                   metavar="NAME", help="also report this object's signature, printed in text mode too (repeatable); "
                   "MODULE:ATTR, a dotted path or a name the release index knows (GPTModel, TransformerConfig.seq_length)")
    p.add_argument("--megatron-version", type=_release, default=None, metavar="X.Y",
                   help="with --object: the release to report (0.12 to 0.19). When it is not the installed "
                        "one, the signatures come from the release index (compiled from that release's source)")
    p.add_argument("--config-fields", nargs="?", const="", default=None, metavar="FILTER", type=_bounded,
                   help="list TransformerConfig/ModelParallelConfig fields with types and "
                        "defaults (FILTER: case-insensitive substring of the field name)")
    p.add_argument("--tiny-model", action="store_true",
                   help="build a tiny GPTModel on CPU in a child (gloo, world size 1) and report "
                        "parameter counts (with --cuda and a GPU, also one forward pass)")
    p.add_argument("--check-references", action="store_true",
                   help="check every fact stated in references/*.md against this installation "
                        "and list those that do not hold (uses scripts/reference_facts.py)")
    p.add_argument("--references-dir", default=None, metavar="DIR",
                   help="directory of reference Markdown for --check-references (default: the bundle's references/)")
    p.add_argument("--full", action="store_true",
                   help="with --json: keep every default object's signature (by default only those "
                        "named by --object; each omitted one says its length in signature_omitted)")
    p.add_argument("--require", type=_require, default=[], metavar="NAME[,NAME]",
                   help="exit 1 unless each named component is available; NAME is a report key: "
                        + ", ".join(REQUIRABLE))
    own = len(p._actions)
    if cluster is not None and hasattr(cluster, "add_arguments"):
        cluster.add_arguments(p)
    p.cluster_actions = p._actions[own:]  # only --distributed reads them (see _unused_cluster_flag)
    return p


def _unused_cluster_flag(parser, args):
    """The first cluster-mode option given without --distributed (it would be ignored), else None."""
    for action in getattr(parser, "cluster_actions", []):
        if action.dest != "distributed" and getattr(args, action.dest, None) != action.default:
            return action.option_strings[0]
    return None


def _wants_cluster(cluster, args):
    if cluster is None:
        return False
    if hasattr(cluster, "wants_cluster"):
        return bool(cluster.wants_cluster(args))
    return bool(getattr(args, "cluster", False))


def main(argv=None):
    cluster = _load_cluster()
    parser = build_parser(cluster)
    del _READ_AS[:]
    args = parser.parse_args(argv)
    for note in _READ_AS:
        sys.stderr.write(note + "\n")
    if _wants_cluster(cluster, args):
        return int(cluster.main(args) or 0)
    unused = _unused_cluster_flag(parser, args)
    if unused:
        parser.error("%s needs --distributed (distributed mode); without it nothing reads it" % unused)
    if args.megatron_version is not None and not _is_installed(args.megatron_version):
        return _from_release_index(parser, args)
    from inspector import render, report as report_mod
    report = report_mod.collect(args)
    if not args.full:
        report_mod.trim_signatures(report, args.objects)
    fallback = None
    if args.objects and report.get("megatron_core", {}).get("status") != "available":
        from inspector import from_index
        release = args.megatron_version.indexed if args.megatron_version else megatron_release.NEWEST
        fallback = from_index.signatures(args.objects, release)
        report["objects_from_release_index"] = {"release": release, "objects": fallback}
    if args.json:
        sys.stdout.write(json.dumps(report, indent=1, sort_keys=False, default=repr) + "\n")
    else:
        text = render.render_text(report, args.objects)
        if fallback is not None:
            text += "\n" + from_index.render(fallback, "megatron-core is not importable here; release %s as "
                                             "indexed" % report["objects_from_release_index"]["release"])
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    missing = unmet(report, args.require)
    for name, status, reason in missing:
        sys.stderr.write("inspect_core_api: required %s is %s%s\n" % (
            name, status, (": " + reason) if reason else ""))
    return EXIT_REQUIRE if missing else EXIT_OK


def _is_installed(choice):
    """Whether --megatron-version names the installed release's indexed line (then the live import answers)."""
    try:
        return megatron_release.installed() is not None and megatron_release.choose(None).indexed == choice.indexed
    except megatron_release.UnsupportedRelease:
        return False


def _from_release_index(parser, args):
    """--megatron-version X (not installed): the --object signatures of X from the release index."""
    from inspector import from_index
    installed = megatron_release.installed()
    if not args.objects:
        parser.error("--megatron-version %s is not the installed release (%s): it selects the release for "
                     "--object, whose signatures then come from the release index; for config fields use "
                     "api_history.py TransformerConfig --at %s" % (
                         args.megatron_version.version, installed or "none installed", args.megatron_version.version))
    release = args.megatron_version.indexed
    views = from_index.signatures(args.objects, release)
    why = "megatron-core %s as indexed; installed: %s" % (release, installed or "none")
    if args.json:
        out = {"schema_version": 1, "tool": "inspect_core_api", "megatron_version": release,
               "installed_megatron_core": installed, "objects_from_release_index": {"release": release, "objects": views}}
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    else:
        sys.stdout.write(from_index.render(views, why) + "\n")
    return EXIT_OK

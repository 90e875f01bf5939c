"""Support package for ``scripts/inspect_core_api.py`` (standard library only at import time).

The parent process imports nothing but this package and the standard library; every step that
imports torch, megatron.core or an optional kernel runs in a child process (``children.py``)
with a timeout, so a broken or hanging package yields a status, never a crash or a hang.

Modules
    cli        argument parsing, ``--require``, exit codes (0 report, 1 requirement unmet, 2 bad input);
               hands ``--distributed`` over to ``cluster`` (which never imports cli)
    report     ``collect(options) -> dict``: the whole local report (the object ``--json`` prints),
               and ``unmet``, the ``--require`` check
    children   child-process runner: timeouts, process-group kill, concurrency, JSON-lines protocol
    child/     package of code that runs INSIDE a child (where the local report imports torch,
               megatron and kernels): its protocol, the default tasks, the tasks on request, dispatch
    cluster/   package of cluster mode (``--distributed``): every rank probes, rank 0 compares;
               its phases import torch (and megatron for ``--layout``) in the rank itself
    probes     the optional-kernel probe table (data) and Megatron's own verdict flags (data)
    objects    the default table of probed Megatron Core objects (data)
    gpus       GPU facts from ``nvidia-smi`` (argv list, timeout) or NVML (in a child)
    env        environment allow-list and secret redaction
    render     text form of the report
    (tests/inspector_schema.py holds the report's documented shape and ``validate(report)``)

Children of a default run: one ``megatron`` child (torch's facts first, then megatron.core, its
verdict flags and the object table; with ``--cuda`` torch gets a child of its own), one child
per optional kernel that is installed (absent ones are found with ``importlib.util.find_spec``
in the parent, which runs no package code), and an NVML child when ``nvidia-smi`` is absent.

Status vocabulary (``STATUSES``) used by every component entry (``torch``, ``gpus``,
``megatron_core``, each ``kernels[name]``, each ``objects[key]``):
    available      imported (or found) and usable as far as can be checked here
    not_installed  no module/distribution of that name on this interpreter's path
    import_failed  the import raised (the exception type and message are in ``reason``)
    unsupported    imports, but Megatron Core does not accept it (its own flag says so) or the
                   hardware cannot run it
    timeout        the child probing it gave no answer within ``--timeout`` seconds
    missing        the package imports but an expected symbol is absent, ``None``, or one of the
                   ``MagicMock`` placeholders Megatron installs when Transformer Engine is absent
    error          the probe itself failed (child killed by a signal, unreadable output, an
                   attribute access that raised)
Precision entries (``precision.fp8`` ...) use the same words plus ``not_checked`` (needs ``--cuda``).

Hooks that cluster mode (the ``inspector/cluster/`` package) uses; both are stable:

(a) ``inspector.report.collect(options=None) -> dict`` returns the full local report, exactly the
    dict ``--json`` prints.  ``options`` may be ``None`` (defaults), a ``dict`` or an
    ``argparse.Namespace``; recognised keys (all optional): ``timeout`` (float seconds, default
    ``report.DEFAULT_TIMEOUT``), ``cuda`` (bool), ``objects`` (list of ``"module:attr"`` added to
    the default table), ``config_fields`` (``None`` = off, ``""`` = all, else a substring filter),
    ``tiny_model`` (bool), ``check_references`` (bool), ``references_dir`` (path),
    ``python`` (interpreter for the children, default ``sys.executable``).  It never raises for
    anything it finds in the environment and never prints to stdout.

(b) ``cli.build_parser()`` calls ``inspector.cluster.add_arguments(parser)`` when
    ``inspector.cluster`` imports.  After parsing, ``cli.main`` asks
    ``inspector.cluster.wants_cluster(args) -> bool`` (if that function is absent, a truthy
    ``args.cluster`` attribute means distributed mode); when true it returns
    ``inspector.cluster.main(args)`` as the process exit code and does nothing else.  A cluster
    module that is absent is silently ignored; one that fails to import for any other reason is
    reported on stderr and ignored.
"""

SCHEMA_VERSION = 1

STATUSES = (
    "available",
    "not_installed",
    "import_failed",
    "unsupported",
    "timeout",
    "missing",
    "error",
)


def dist_version(names):
    """Version of the first installed distribution among ``names`` (metadata only, no import)."""
    from importlib import metadata
    for name in names:
        try:
            return metadata.version(name)
        except Exception:  # a broken dist-info must not break a probe
            continue
    return None

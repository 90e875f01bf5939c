"""The child's side of the JSON-lines protocol (see inspector/children.py) and shared helpers.

``open_channel()`` keeps a private copy of fd 1 for the protocol and points fd 1 at stderr, so
prints from packages and native libraries cannot corrupt it; ``emit`` and ``stage`` write to it.
Standard library only.
"""
import importlib
import json
import os
import sys
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
_OUT = None
_PREFIX = [""]  # facts of a sub-task run inside another task carry its prefix ("torch:")


def emit(key, value):
    _OUT.write(json.dumps({"set": _PREFIX[0] + key, "value": value}, default=repr) + "\n")
    _OUT.flush()


def stage(text):
    _OUT.write(json.dumps({"stage": text}) + "\n")
    _OUT.flush()


def open_channel():
    """Take fd 1 for the protocol; from now on fd 1 and sys.stdout are stderr."""
    global _OUT
    _OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def close_channel():
    if _OUT is not None:
        _OUT.flush()


def describe(exc):
    """'Type: message (in file:line)' on one line, bounded."""
    msg = " ".join(str(exc).split())
    text = "%s: %s" % (type(exc).__name__, msg) if msg else type(exc).__name__
    frames = [f for f in (traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else [])
              if not f.filename.startswith("<frozen")
              and os.path.dirname(os.path.abspath(f.filename)) != _HERE]
    if frames and not isinstance(exc, ModuleNotFoundError):  # "not found" has no useful place
        text += " (raised in %s:%s)" % (frames[-1].filename, frames[-1].lineno)
    return text[:600]


def import_status(exc, wanted):
    """Map an import exception to a status; a missing `wanted` module itself is not_installed."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        parts = wanted.split(".")
        prefixes = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
        if exc.name in prefixes:
            return "not_installed"
    return "import_failed"


def resolve(key):
    """Import 'module:attr.sub' and return the object (raises what the import raises)."""
    module_name, attr = key.split(":", 1)
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def is_mock(obj):
    return type(obj).__module__ == "unittest.mock"


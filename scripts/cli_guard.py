"""How every script ends: a closed pipe, an interrupt and bounded input (stdlib only).

    if __name__ == "__main__":
        sys.exit(cli_guard.run(main, "api_history.py"))

``run`` calls ``main()`` and flushes stdout inside the guard, so that ``script | head`` exits 0
without a ``BrokenPipeError`` traceback (also the one Python prints when it flushes at exit), and
Ctrl-C exits 130 with one line. ``bounded_text`` and ``bounded_int`` are the limits every string and
number a user passes gets; they raise ``ValueError`` with a one-line reason (the scripts exit 2).
"""

from __future__ import annotations

import os
import sys

MAX_TEXT = 1000  # characters of a name, prefix or other one-line string argument
EXIT_INTERRUPTED = 130


def _stdout_to_devnull() -> None:
    """The reader is gone: later writes (and the flush at exit) go nowhere instead of raising."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout without a file descriptor (tests)
        pass


def run(main, prog: str) -> int:
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _stdout_to_devnull()
        return 0
    except KeyboardInterrupt:
        _stdout_to_devnull()
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def shown(text: str, limit: int = 60) -> str:
    """text for an error message: repr'd and cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def bounded_text(text: str, what: str, limit: int = MAX_TEXT) -> str:
    if len(text) > limit:
        raise ValueError(f"{what} is {len(text)} characters; at most {limit}: {shown(text)}")
    if any(ord(c) < 32 for c in text):
        raise ValueError(f"{what} has control characters: {shown(text)}")
    return text


def bounded_int(value: int, what: str, low: int, high: int) -> int:
    if not low <= value <= high:
        raise ValueError(f"{what} must be from {low} to {high}, not {value}")
    return value

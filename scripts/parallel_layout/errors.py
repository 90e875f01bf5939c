"""Errors of the parallel_layout package.

`BadInput` is the only exception a caller must expect from parsing: its
message is one line, meant for stderr, and the checker maps it to exit 2.
"""


class BadInput(ValueError):
    """Malformed or contradictory input (exit code 2); ``str(exc)`` is one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))

"""Helpers for tests that start processes."""

import socket


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now (for gloo rendezvous and stores)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

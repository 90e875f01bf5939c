"""Which releases are indexed, and which one a request means."""

from __future__ import annotations

import re

# The newest patch of every minor line from 0.12 on, plus the pinned 0.19.2 (oldest first).
RELEASES = ("0.12.3", "0.13.1", "0.14.0", "0.15.3", "0.16.1", "0.17.1", "0.18.2", "0.19.2")
DEFAULT = "0.19.2"
DIST = "megatron-core"
_VERSION = re.compile(r"(?:core_v|v)?(\d+)\.(\d+)(?:\.(\d+))?(?:(?:rc|a|b|\.dev|\.post|\+)[0-9A-Za-z.+]*)?")


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _supported() -> str:
    return f"supported: {', '.join(minor_of(r) for r in RELEASES)} (indexed as {', '.join(RELEASES)})"


def _match(requested: str) -> str:
    m = _VERSION.fullmatch(requested.strip())
    if m is None:
        raise ValueError(f"not a megatron-core version: {requested!r}; {_supported()}")
    minor = f"{int(m.group(1))}.{int(m.group(2))}"
    hit = [r for r in RELEASES if minor_of(r) == minor]
    if not hit:
        raise ValueError(f"megatron-core {requested} is not indexed; {_supported()}")
    return hit[-1]


def installed_version() -> str | None:
    """megatron-core's version from its distribution metadata, without importing megatron."""
    try:
        from importlib import metadata
        return metadata.version(DIST)
    except Exception:  # noqa: BLE001 - absent or broken metadata both mean "not installed"
        return None


def resolve_version(requested: str | None) -> tuple[str, str]:
    """(indexed release, source): source is '--megatron-version', 'installed megatron-core' or 'default'.

    A minor line or any patch of it ("0.15", "0.15.1") means the indexed release of that line.
    """
    if requested is not None:
        return _match(requested), "--megatron-version"
    found = installed_version()
    if found is not None:
        try:
            return _match(found), "installed megatron-core"
        except ValueError:
            pass  # an installed release the index does not cover: fall back to the default
    return DEFAULT, "default"

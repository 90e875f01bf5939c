"""Which Megatron Core release a script checks against: the one place that decides (stdlib only).

Every script (check_parallel_layout.py, explain_error.py, review_model_code.py, api_history.py)
asks ``choose(requested)``:

- ``--megatron-version`` (``requested``): a minor line (``0.15``) or a release (``0.15.3``,
  ``0.15.0rc1``, ``core_v0.15.3``) from 0.12 to 0.19.2; its data is the indexed release of that
  line (``indexed``). Anything else raises ``UnsupportedRelease`` naming the supported range
  (the scripts exit 2 with it).
- else the installed ``megatron-core``, read from its distribution metadata (never imported). An
  installed release newer than 0.19.2 is checked as 0.19.2, and ``source`` says so, so every script
  that prints its source names it; one older than 0.12 raises ``UnsupportedRelease``.
- else 0.19.2 (``source`` "default"; ``version`` None: the release is unknown).
"""

from __future__ import annotations

import re
from typing import NamedTuple

# The newest patch of every minor line from 0.12 on, plus the pinned 0.19.2 (oldest first): the
# releases of references/index/releases/ (dev/build_release_index.py compiles exactly these).
RELEASES = ("0.12.3", "0.13.1", "0.14.0", "0.15.3", "0.16.1", "0.17.1", "0.18.2", "0.19.2")
NEWEST = RELEASES[-1]
OLDEST_LINE = "0.12"
DIST_NAMES = ("megatron-core", "megatron_core")
SUPPORTED = ("supported: " + ", ".join(".".join(r.split(".")[:2]) for r in RELEASES)
             + f" (any release from {OLDEST_LINE}.0 to {NEWEST})")

_VERSION = re.compile(r"(?:core_v|v)?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?"
                      r"(?:(?:rc|a|b|\.dev|\.post|\+)[0-9A-Za-z.+]{0,40})?")
MAX_LEN = 64


class UnsupportedRelease(ValueError):
    """A release outside 0.12 to 0.19.2 (the message names the supported range)."""


class Choice(NamedTuple):
    version: str | None  # the user's release as given or installed ("0.15", "0.16.0"); None: unknown
    indexed: str         # the indexed release whose data is used ("0.15.3")
    source: str          # "--megatron-version", "installed megatron-core[ X, newer ...]" or "default"
    newer: str | None    # an installed release newer than NEWEST, checked as NEWEST


def parse(text: str) -> tuple[int, int, int | None] | None:
    """(major, minor, patch or None) of a version string, None when it is not one."""
    m = _VERSION.fullmatch(text.strip()) if isinstance(text, str) and len(text) <= MAX_LEN else None
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), None if m.group(3) is None else int(m.group(3))


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _key(release: str) -> tuple[int, int, int]:
    a, b, c = release.split(".")
    return int(a), int(b), int(c)


def _line(parsed) -> str | None:
    """The indexed release of parsed's minor line, or None when no indexed line holds it."""
    major, minor, patch = parsed
    hit = [r for r in RELEASES if _key(r)[:2] == (major, minor)]
    if not hit or (patch is not None and (major, minor, patch) > _key(NEWEST)):
        return None
    return hit[-1]


def is_newer(parsed) -> bool:
    major, minor, patch = parsed
    return (major, minor, patch or 0) > _key(NEWEST)


def indexed(requested: str) -> str:
    """The indexed release a --megatron-version means; UnsupportedRelease otherwise."""
    parsed = parse(requested)
    if parsed is None:
        shown = requested if isinstance(requested, str) and len(requested) <= MAX_LEN else requested[:MAX_LEN] + "..."
        raise UnsupportedRelease(f"not a megatron-core version: {shown!r}; {SUPPORTED}")
    hit = _line(parsed)
    if hit is None:
        raise UnsupportedRelease(f"megatron-core {requested.strip()} is not indexed; {SUPPORTED}")
    return hit


def installed() -> str | None:
    """megatron-core's version from its distribution metadata, without importing megatron."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python >= 3.8 has it
        return None
    for dist in DIST_NAMES:
        try:
            return metadata.version(dist)
        except Exception:  # noqa: BLE001 - absent or broken metadata both mean "not installed"
            continue
    return None


def choose(requested: str | None, found: str | None | bool = False) -> Choice:
    """The release to check (see the module doc). ``found`` stands in for the installed release
    (tests); False reads the metadata."""
    if requested is not None:
        return Choice(requested.strip(), indexed(requested), "--megatron-version", None)
    found = installed() if found is False else found
    if found is None:
        return Choice(None, NEWEST, "default", None)
    parsed = parse(found)
    if parsed is not None and is_newer(parsed):
        return Choice(NEWEST, NEWEST, f"installed megatron-core {found}, newer than {NEWEST}: "
                      f"checked as {NEWEST}", found)
    if parsed is None or _line(parsed) is None:
        raise UnsupportedRelease(f"installed megatron-core {found} is not supported; {SUPPORTED}; "
                                 "pass --megatron-version to check against one of them")
    return Choice(found, _line(parsed), "installed megatron-core", None)

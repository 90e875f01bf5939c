"""Which releases are indexed, and which one a request means (decided by scripts/megatron_release.py)."""

from __future__ import annotations

import megatron_release as mr

RELEASES = mr.RELEASES
DEFAULT = mr.NEWEST
DIST = mr.DIST_NAMES[0]
minor_of = mr.minor_of
installed_version = mr.installed  # tests replace it


def resolve_version(requested: str | None) -> tuple[str, str]:
    """(indexed release, source): source is '--megatron-version', 'installed megatron-core' (or, for a
    release newer than the index, 'installed megatron-core X, newer than 0.19.2: checked as 0.19.2')
    or 'default'. A minor line or any patch of it ("0.15", "0.15.1") means the indexed release of that
    line; ValueError (megatron_release.UnsupportedRelease) for anything else.
    """
    found = installed_version() if requested is None else None
    choice = mr.choose(requested, found)
    return choice.indexed, choice.source

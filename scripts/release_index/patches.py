"""Which patch release of a minor line first had an event's new state.

The index holds the newest patch of each minor line (0.15.3, 0.18.2, ...), so an event "added in
0.15.3" says only that 0.14.0 lacked the name and 0.15.3 has it. ``patches.json.gz`` (built with the
index from the mirror's earlier tags of each line, ``core_v0.15.0`` ... ``core_v0.15.2``) records,
for each such event of a TRACKED kind, the earliest tag of the line whose state of that name is
already the new one: ``since(key, "0.15.3") == "0.15.0"``. Other kinds (messages, deprecations,
bodies) are not compared per patch: their ``since`` is None.
"""

from __future__ import annotations

import functools
import json

from . import data

TRACKED = ("added", "removed", "renamed", "moved", "signature_changed", "default_changed")


def state(rel: dict, cat: dict, targets: dict, key: str) -> str | None:
    """What the events of a TRACKED kind compare for one name in one compiled release (None: absent)."""
    kind = cat.get(key)
    if kind is None:
        return None
    if kind in ("class", "function", "method"):
        sig = rel["signatures"].get(key)
        return json.dumps([kind, sig[0] if sig else None], sort_keys=True)
    if kind == "field":
        cls, name = key.rsplit(".", 1)
        rec = next((f for f in rel["fields"].get(cls, []) if f[0] == name), None)
        return json.dumps([kind, rec[1:4] if rec else None], sort_keys=True)
    if kind == "flag":
        rec = {k: v for k, v in (rel["flags"] or {}).get(key, {}).items() if k != "help"}
        return json.dumps([kind, rec], sort_keys=True)
    return json.dumps([kind, targets.get(key)])


def patches_file(directory=None):
    return (directory or data.data_dir()) / "patches.json.gz"


@functools.lru_cache(maxsize=1)
def _data() -> dict:
    try:
        return data.read(patches_file())
    except data.MissingData:
        return {"since": {}, "tags": {}}


def since(key: str, version: str, change: str) -> str | None:
    """The first release with the event's new state (a patch tag of version's line, or version), or
    None when this kind is not compared per patch."""
    if change not in TRACKED:
        return None
    return _data()["since"].get(key, {}).get(version, version)


def note(ev: dict) -> str:
    """"[since 0.15.0]" when an event's first patch release is not its indexed release, else ""."""
    return f"[since {ev['since']}]" if ev.get("since") and ev["since"] != ev["version"] else ""


def tags_compared() -> dict[str, list[str]]:
    """Indexed release -> the earlier patch tags of its line that were compared."""
    return _data()["tags"]

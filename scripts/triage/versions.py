"""The user's Megatron Core release, and what an entry says about it.

The release is ``--megatron-version X.Y[.Z]``, else the installed ``megatron-core`` read with
``importlib.metadata`` (the package is never imported), else unknown. The caveat is read from
the entry's own fields: an older wording (``text alias versions=...``), its **Text history**
(``since 0.N``: the fixed text is in every checked release from 0.N on and absent before) and
its **Versions** bullet, which is quoted as the entry states it.
"""

from __future__ import annotations

import re

from reference_facts import version_in_spec

import megatron_release

BUNDLE = megatron_release.NEWEST
CHECKED = (0, 12)  # the oldest line the text histories were checked against (the release index: 0.12.3 on)
SINCE = re.compile(r"since 0\.(\d+)")


def resolve(requested: str | None) -> tuple[str | None, str]:
    """(release or None, where it came from), decided by scripts/megatron_release.py.
    ValueError (UnsupportedRelease) for a release outside 0.12 to 0.19.2."""
    choice = megatron_release.choose(requested)
    if choice.version is None:
        return None, "no --megatron-version given and no megatron-core installed"
    return choice.version, choice.source


def _minor(version: str) -> tuple[int, int]:
    nums = [int(x) for x in re.findall(r"\d+", version)[:2]]
    return (nums + [0, 0])[0], (nums + [0, 0])[1]


def caveat(rec: dict, release: str | None, message: dict | None) -> dict:
    f = rec["fields"]
    notes = []
    if message and message["kind"] == "alias":
        current = next((m["text"].splitlines()[0] for m in rec["messages"] if m["kind"] == "error"), "")
        notes.append(f"this is the wording of {message['versions'] or 'an older release'}; "
                     f"{BUNDLE} prints: {current}")
        if release and message["versions"] and not version_in_spec(release, message["versions"]):
            notes.append(f"your release {release} is outside {message['versions']}")
        elif release:  # the wording is that of the user's release: the history of the new text does not apply
            return {"release": release, "stated": f.get("Versions", ""), "text_history": f.get("Text history"),
                    "caveat": "; ".join(notes)}
    history = f.get("Text history", "")
    since = SINCE.search(history)
    if release is None:
        notes.append(f"release unknown: pass --megatron-version; the entry is verified on {BUNDLE}")
    elif since and _minor(release) < (0, int(since.group(1))) and _minor(release) >= CHECKED:
        notes.append(f"{release} does not have this text (it appears in 0.{since.group(1)}): "
                     f"your release prints another message or none; see Versions")
    elif since and _minor(release) < CHECKED:
        notes.append(f"{release} is older than the releases checked (0.{CHECKED[1]} to {BUNDLE})")
    elif since:
        notes.append(f"same fixed text in {release} (present since 0.{since.group(1)})")
    elif _minor(release) != _minor(BUNDLE):
        notes.append(f"verified on {BUNDLE} only; {release} not checked for this entry")
    if release and _minor(release) > _minor(BUNDLE):
        notes.append(f"{release} is newer than the checked {BUNDLE}")
    return {"release": release, "stated": f.get("Versions", ""), "text_history": history or None,
            "caveat": "; ".join(notes)}

"""Megatron-LM entry scripts and the arguments they add (``--entry SCRIPT``).

``pretrain_gpt.py`` (the default) and the other entry scripts pass an
``extra_args_provider`` to Megatron-LM's parser; its flags are as legal as
Megatron's own for that script.  entries.json is compiled from the scripts'
sources at one tag of Megatron-LM (dev/build_layout_entries.py; the file
names the tag and commit): script path -> provider, the condition under which
the script passes it (``has_nvidia_modelopt``), and its flags.

An entry not in the table is unknown: the checker cannot know what it adds,
so a flag Megatron-LM does not know is a warning naming the entry, not an
error.
"""

from __future__ import annotations

import functools
import json
import os
from typing import NamedTuple, Optional

from .errors import BadInput

DEFAULT_ENTRY = "pretrain_gpt.py"
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "entries.json")
MAX_ENTRY_CHARS = 500


class Entry(NamedTuple):
    name: str  # as given
    path: Optional[str]  # the Megatron-LM path it matched, or None (unknown entry)
    flags: dict  # option -> takes a value
    condition: Optional[str]  # when the script adds them (None: always)
    provider: Optional[str]


@functools.lru_cache(maxsize=1)
def table():
    with open(DATA) as fh:
        return json.load(fh)


def source():
    t = table()
    return f"{t['repo']}@{t['tag']} ({t['commit'][:10]})"


def resolve(name=None):
    """The Entry for a script path or name as a launch command spells it
    (``examples/multimodal/train.py``, ``./pretrain_gpt.py``, ``finetune.py``).
    Raises BadInput when a bare name matches several known scripts."""
    name = name or DEFAULT_ENTRY
    if len(name) > MAX_ENTRY_CHARS or "\x00" in name:
        raise BadInput(f"--entry: a script path of at most {MAX_ENTRY_CHARS} characters")
    norm = name.replace("\\", "/")
    while norm.startswith("./"):
        norm = norm[2:]
    entries = table()["entries"]
    matches = [p for p in entries if p == norm or norm.endswith("/" + p)
               or p.endswith("/" + norm)]
    if len(matches) > 1:
        exact = [p for p in matches if p == norm or norm.endswith("/" + p)]
        if len(exact) != 1:
            raise BadInput(f"--entry {name} matches several Megatron-LM scripts: "
                           + ", ".join(sorted(matches)) + " (give the path)")
        matches = exact
    if matches:
        info = entries[matches[0]]
        return Entry(name, matches[0], info["flags"], info["condition"], info["provider"])
    return Entry(name, None, {}, None, None)


def known(entry):
    """Whether the checker knows what ``entry`` adds (it is in the table)."""
    return entry.path is not None

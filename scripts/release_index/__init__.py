"""The release index: Megatron Core 0.12 to 0.19.2 as data (standard library only, Python >= 3.10).

The data under ``references/index/releases/`` is compiled from released sources with ``ast`` by
``make index-releases`` (``dev/build_release_index.py``); nothing here imports megatron or torch.

    from release_index import RELEASES, resolve_version, load, events, releases_with_message

``load(version)`` gives one release's public modules, names, signatures, dataclass fields,
Megatron-LM flags and the fixed text of its messages; ``events(name)`` gives what changed for a
name between consecutive releases (see ``EVENT_KINDS``). Names are ``module`` (dotted),
``module:Qualname`` (``megatron.core.models.gpt.gpt_model:GPTModel``, a method ``...:Class.meth``,
a dataclass field ``...:TransformerConfig.num_layers``) or a flag (``--use-custom-fsdp``);
``find(name)`` turns a short or dotted spelling into those keys.
"""

from __future__ import annotations

from .data import DATA_DIR, SCHEMA  # noqa: F401
from .derive import derive as derive_events  # noqa: F401 (re-derives events.json from the releases)
from .release import Release, load  # noqa: F401
from .names import all_events, catalog, events, find, releases_of, suggest  # noqa: F401
from . import patches  # noqa: F401 (the first patch release of an event: patches.since)
from .messages import find_message, message_history, releases_with_message  # noqa: F401
from .versions import DEFAULT, RELEASES, resolve_version, minor_of  # noqa: F401

EVENT_KINDS = ("added", "removed", "renamed", "moved", "signature_changed", "default_changed",
               "message_changed", "deprecated", "ignored", "body_changed")

"""The chosen Megatron Core release and what the release index says about it.

The per-release facts (modules, names, signatures, messages) come from the release index
(``scripts/release_index``, compiled from the released sources).  ``View`` wraps one loaded
release with the lookups the rules need; the index object is passed in, so tests can hand
in a small fake with the same interface.
"""

from __future__ import annotations

import difflib
import re

def load_index():
    """The release_index package (scripts/release_index), or None when it is missing."""
    try:
        import release_index  # noqa: PLC0415 (sibling package, found through sys.path)
    except ImportError:
        return None
    return release_index


def resolve(requested, index):
    """(release, source) from release_index.resolve_version; ValueError on bad input."""
    if index is None:
        raise ValueError("the release index (scripts/release_index) is missing from this "
                         "checkout")
    return index.resolve_version(requested)


def vkey(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


class View:
    """One release of the index, with the lookups the rules make."""

    def __init__(self, index, version):
        self.index = index
        self.version = version
        self.rel = index.load(version)
        self._modules = set(self.rel.modules())
        self._roots = {".".join(m.split(".")[:2]) for m in self._modules}
        self._resolved, self._signatures = {}, {}  # a file repeats the same calls: ask once
        self._fields = {}
        self.memo = {}  # derived per-release results rules keep (config/spec pairs)

    # -- names
    def covers(self, module):
        """Whether the index knows this package at all (megatron.training is absent from
        the wheels of some releases: no verdict there)."""
        return ".".join(module.split(".")[:2]) in self._roots

    def has_module(self, module):
        return module in self._modules

    def names(self, module):
        return self.rel.names(module) or {} if module in self._modules else {}

    def resolve(self, obj_id):
        """Follow re-exports through the index: 'megatron.core.models.gpt:GPTModel' ->
        'megatron.core.models.gpt.gpt_model:GPTModel'; None when it does not resolve."""
        if obj_id not in self._resolved:
            self._resolved[obj_id] = self.rel.resolve(obj_id)
        return self._resolved[obj_id]

    def find_definitions(self, name):
        """Every 'module:name' where the release defines (not imports) ``name``."""
        out = []
        for module in sorted(self._modules):
            entry = self.names(module).get(name)
            if entry and entry.get("kind") in ("class", "function", "variable"):
                out.append(f"{module}:{name}")
        return out

    # -- signatures
    def signature(self, obj_id):
        if obj_id not in self._signatures:
            self._signatures[obj_id] = self.rel.signature(obj_id)
        return self._signatures[obj_id]

    def fields(self, class_id):
        if class_id not in self._fields:
            self._fields[class_id] = self.rel.fields(class_id)
        return self._fields[class_id]

    def messages(self):
        return self.rel.messages() or []


def nearest(name, candidates):
    """The candidate spelled almost like ``name`` (a typo or a small rename: num_query_group
    -> num_query_groups), else None; 0.8 keeps unrelated names with a shared word
    (extra_args_provider / model_provider: 0.61) out."""
    hits = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.8)
    return hits[0] if hits else None


def param_history(index, obj_id, param, releases=None):
    """Releases (oldest first) whose signature of obj_id has ``param``."""
    out = []
    for version in releases or index.RELEASES:
        try:
            sig = index.load(version).signature(obj_id)
        except Exception:  # noqa: BLE001 (a release the index cannot load has no verdict)
            continue
        if sig and any(p["name"] == param for p in sig["params"]):
            out.append(version)
    return out


def successor(index, obj_id, param):
    """The successor the index's change events record for a removed/renamed parameter."""
    events = getattr(index, "events", None)
    if events is None:
        return None
    for key in (f"{obj_id}.{param}", f"{obj_id}:{param}"):
        try:
            found = events(key) or []
        except Exception:  # noqa: BLE001 (unknown name format: no successor)
            continue
        for ev in found:
            if ev.get("change") in ("removed", "renamed", "moved") and ev.get("successor"):
                return ev["successor"]
    return None

"""Every name the index knows (across releases), how a spelling maps to it, and its events."""

from __future__ import annotations

import difflib
import functools

from . import data, patches
from .versions import RELEASES

# Definitions are preferred over re-exports when a short name matches several keys.
KIND_RANK = {"class": 0, "function": 0, "module": 1, "field": 2, "member": 2, "method": 3, "flag": 0,
             "variable": 4, "import": 5}


@functools.lru_cache(maxsize=None)
def _events_data() -> dict:
    return data.read(data.events_file())


def catalog() -> dict[str, dict]:
    """{key: {"kind", "releases": (versions that have it)}} for every module, public top-level name,
    public method, dataclass field (under the class that declares it) and flag of any release."""
    out = {}
    for key, (kind, mask) in _events_data()["names"].items():
        out[key] = {"kind": kind, "releases": _unmask(mask)}
    return out


def _unmask(mask: int) -> tuple[str, ...]:
    return tuple(v for i, v in enumerate(RELEASES) if mask >> i & 1)


def releases_of(key: str) -> tuple[str, ...]:
    entry = _events_data()["names"].get(key)
    return () if entry is None else _unmask(entry[1])


def _kind(key: str) -> str | None:
    entry = _events_data()["names"].get(key)
    return None if entry is None else entry[0]


@functools.lru_cache(maxsize=None)
def _by_qualname() -> dict[str, list[str]]:
    idx: dict[str, list[str]] = {}
    for key in _events_data()["names"]:
        if ":" in key:
            qual = key.split(":", 1)[1]
            idx.setdefault(qual, []).append(key)
            if "." in qual:  # "num_layers" alone finds TransformerConfig.num_layers
                idx.setdefault(qual.rsplit(".", 1)[1], []).append(key)
        elif not key.startswith("--"):
            idx.setdefault(key.rsplit(".", 1)[-1], []).append(key)
    return idx


def _rank(key: str, want: str) -> tuple:
    qual = key.split(":", 1)[-1]
    return (qual != want, KIND_RANK.get(_kind(key) or "", 9), not key.startswith("megatron.core"),
            -len(releases_of(key)), len(key), key)


def _field_via_bases(cls_key: str, field: str, depth: int = 0) -> str | None:
    key = f"{cls_key}.{field}"
    if _kind(key) is not None:
        return key
    if depth > 10:
        return None
    for base in _events_data()["bases"].get(cls_key, []):
        hit = _field_via_bases(base, field, depth + 1)
        if hit:
            return hit
    return None


def _follow(key: str) -> str:
    """A re-export ("megatron.core.models.gpt:GPTModel") -> the definition it names."""
    seen = set()
    while key in _events_data()["targets"] and key not in seen:
        seen.add(key)
        key = _events_data()["targets"][key]
    return key


def find(name: str) -> list[str]:
    """The index keys a spelling means, best first ([] when unknown).

    Accepts a key, a dotted module, a dotted object path (also through a package re-export,
    "megatron.core.models.gpt.GPTModel"), "Class", "Class.field" or "Class.method" (inherited
    dataclass fields resolve to the class that declares them), or a flag.
    """
    name = name.strip()
    names = _events_data()["names"]
    if name in names:
        return [name]
    if name.startswith("-"):
        flag = "--" + name.lstrip("-")
        return [flag] if flag in names else [_events_data()["flag_aliases"][flag]] \
            if flag in _events_data()["flag_aliases"] else []
    if ":" in name:
        mod, qual = name.split(":", 1)
        return _qual_in(mod, qual)
    parts = name.split(".")
    if parts[0] == "megatron":
        for i in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:i])
            if mod in names:
                return _qual_in(mod, ".".join(parts[i:]))
        return []
    cands = _by_qualname().get(name, [])
    if not cands and "." in name:  # Class.field inherited from a base dataclass
        cls, attr = name.rsplit(".", 1)
        for ck in _by_qualname().get(cls, []):
            hit = _field_via_bases(ck, attr)
            if hit:
                cands.append(hit)
    defs = [k for k in cands if _kind(k) not in ("import", "variable")]
    return sorted(set(defs or cands), key=lambda k: _rank(k, name))


def _qual_in(mod: str, qual: str) -> list[str]:
    head, _, rest = qual.partition(".")
    key = _follow(f"{mod}:{head}")
    full = f"{key}.{rest}" if rest else key
    if _kind(full) is not None:
        return [full]
    if rest and "." not in rest:
        hit = _field_via_bases(key, rest)
        if hit:
            return [hit]
    return []


def suggest(name: str, n: int = 5) -> list[str]:
    """Nearest known spellings (short names, flags and keys) for an unknown name."""
    name = name.strip()
    if name.startswith("-"):
        pool = [k for k in _events_data()["names"] if k.startswith("--")]
    elif name.startswith("megatron"):
        # Keys whose last part is near the query's last part, and modules: a small pool (fast).
        last = name.replace(":", ".").rsplit(".", 1)[-1]
        near = difflib.get_close_matches(last, list(_by_qualname()), n=10, cutoff=0.6)
        pool = sorted({k for q in near for k in _by_qualname()[q]}
                      | {k for k, (kind, _) in _events_data()["names"].items() if kind == "module"})
    else:
        pool = list(_by_qualname())
    return difflib.get_close_matches(name, pool, n=n, cutoff=0.6)


def events(name: str) -> list[dict]:
    """What changed for a name across RELEASES, oldest first: [{"version", "change", "detail",
    "successor", "inferred"}]; version is the first release with the new state. name is a key or
    any spelling find() accepts (its best match); [] for an unknown name or one that never changed."""
    keys = find(name)
    if not keys:
        return []
    raw = _events_data()["events"].get(keys[0], [])
    return [_event(keys[0], *ev) for ev in raw]


def _event(key, v, c, d, s, i) -> dict:
    # since: the first patch release with the new state (release_index.patches); None when not compared.
    return {"version": v, "change": c, "detail": d, "successor": s, "inferred": bool(i),
            "since": patches.since(key, v, c)}


def all_events() -> dict[str, list[dict]]:
    return {k: [_event(k, *ev) for ev in evs] for k, evs in _events_data()["events"].items()}

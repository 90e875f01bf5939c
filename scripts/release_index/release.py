"""One indexed release: modules, names, signatures, fields, flags and messages."""

from __future__ import annotations

import functools

from . import data
from .versions import RELEASES

KIND_NAMES = {"po": "positional_only", "pk": "positional_or_keyword", "vp": "var_positional",
              "ko": "keyword_only", "vk": "var_keyword"}


class Release:
    def __init__(self, raw: dict):
        self._raw = raw
        self.version: str = raw["version"]
        self.source: str = raw["source"]  # where it was compiled from (git tag or wheel)

    def modules(self) -> set[str]:
        return set(self._raw["modules"])

    def names(self, module: str) -> dict[str, dict]:
        """Public top-level names of a module: {name: {"kind", "target"}}; {} for an unknown module.

        kind is class, function, variable or import; target is "module:name" for an import (only
        imports from megatron are kept) and for a variable bound to a class or function.
        """
        return {n: {"kind": k, "target": t} for n, (k, t) in self._raw["modules"].get(module, {}).items()}

    def signature(self, obj_id: str) -> dict | None:
        """{"params": [...], "source": "file:line"} of "module:Qualname", or None when absent.

        For a class: how it is called (its __init__ without self; a dataclass's fields).
        "copied_from" is set where @copy_signature makes inspect show another function's parameters
        (the function itself is then (*args, **kwargs)).
        """
        rec = self._raw["signatures"].get(obj_id)
        if rec is None:
            return None
        out = {"params": [{"name": n, "kind": KIND_NAMES[k], "default": d, "annotation": a}
                          for n, k, d, a in rec[0]],
               "source": rec[1]}
        if len(rec) > 3:
            out["copied_from"] = rec[3]
        return out

    def fields(self, class_id: str) -> list[dict] | None:
        """Dataclass fields including inherited ones (dataclasses' order), or None for a non-dataclass.

        default is the source text (None: required; a field(default_factory=...) call is kept as
        written); post_init is the literal __post_init__ assigns (source text) when it assigns one.
        init is False for field(init=False); owner is the class that declares the field.
        """
        rec = self._raw["fields"].get(class_id)
        if rec is None:
            return None
        out = []
        for name, typ, default, post, init, post_values, owner in rec:
            f = {"name": name, "type": typ, "default": default, "post_init": post, "init": bool(init),
                 "owner": owner}
            if post_values:
                f["post_init_values"] = post_values
            out.append(f)
        return out

    def flags(self) -> dict[str, dict] | None:
        """Megatron-LM's argparse flags (megatron/training/arguments.py, incl. dataclass-derived groups)."""
        flags = self._raw["flags"]
        return None if flags is None else {k: dict(v) for k, v in flags.items()}

    def messages(self) -> list[dict]:
        """Fixed text of raise/assert/warnings.warn/logger calls; "{}" stands for each variable part."""
        return [{"kind": k, "exc": e, "text": t, "file": f, "function": fn, "line": ln}
                for k, e, t, f, fn, ln in self._raw["messages"]]

    def signature_ids(self) -> list[str]:
        return list(self._raw["signatures"])

    def field_class_ids(self) -> list[str]:
        return list(self._raw["fields"])

    def __repr__(self) -> str:
        return f"Release({self.version!r})"


@functools.lru_cache(maxsize=None)
def load(version: str) -> Release:
    """The indexed release (cached); ValueError for a version the index does not hold."""
    if version not in RELEASES:
        raise ValueError(f"{version!r} is not an indexed release; indexed: {', '.join(RELEASES)}")
    return Release(data.read(data.release_file(version)))

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
        imports from megatron are kept; a dotted module for "import a.b as c") and for a variable
        bound to a class or function.
        """
        return {n: {"kind": k, "target": t} for n, (k, t) in self._raw["modules"].get(module, {}).items()}

    def signature(self, obj_id: str) -> dict | None:
        """{"params": [...], "source": "file:line"} of "module:Qualname", or None when absent.

        For a class: how it is called (its __init__ without self; a dataclass's fields).
        "copied_from" is set where @copy_signature makes inspect show another function's parameters
        (the function itself is then (*args, **kwargs)), and for a method alias in a class body
        ("step = step_legacy": the target method).
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

    def post_init_assigns(self, class_id: str) -> dict[str, str] | None:
        """The fields the class's __post_init__ chain (its own, its bases', and the self.methods
        they call) may assign: "if_none" where every assignment is right under `if self.x is None:`
        (a value the caller gave stays), else "any"; None for data compiled before this was recorded."""
        rec = self._raw.get("post_init_assigns")
        return None if rec is None or class_id not in rec else dict(rec[class_id])

    def flags(self) -> dict[str, dict] | None:
        """Megatron-LM's argparse flags (megatron/training/arguments.py, incl. dataclass-derived groups)."""
        flags = self._raw["flags"]
        return None if flags is None else {k: dict(v) for k, v in flags.items()}

    def messages(self) -> list[dict]:
        """Fixed text of raise/assert/warnings.warn/logger calls; "{}" stands for each variable part."""
        return [{"kind": k, "exc": e, "text": t, "file": f, "function": fn, "line": ln}
                for k, e, t, f, fn, ln, *_ in self._raw["messages"]]

    def message_sites(self) -> list[dict]:
        """messages() with when each is printed: "condition" (source text: the enclosing if tests,
        "not (...)" of an assert's test), the config fields / args dests it reads ("fields") and
        the Megatron-LM flags that set them ("flags"); empty for data compiled before they existed."""
        return [{"kind": r[0], "exc": r[1], "text": r[2], "file": r[3], "function": r[4], "line": r[5],
                 "condition": r[6] if len(r) > 6 else "", "fields": r[7] if len(r) > 7 else [],
                 "flags": r[8] if len(r) > 8 else []} for r in self._raw["messages"]]

    def bare_asserts(self) -> list[dict]:
        """Asserts without a text of their own (``assert x``; ``assert a == b, (a, b)``): where they
        are and what they test ("condition": ``not (<test>)`` with the enclosing if tests), for a
        traceback frame to place. Empty for data compiled before they were recorded."""
        return [{"kind": "assert", "exc": "AssertionError", "text": "", "file": r[0], "function": r[1], "line": r[2],
                 "condition": r[3], "fields": r[4], "flags": r[5], "test": r[6] if len(r) > 6 else ""}
                for r in self._raw.get("bare_asserts", [])]

    def resolve(self, name: str) -> str | None:
        """Where a public name as a user writes it leads in this release, or None if it does not exist.

        name: "pkg.mod", "pkg.mod:Attr", "pkg.mod.Attr" or with a member ("...:Class.method",
        "...:Config.field"). Imports and aliases are followed (``megatron.core.transformer:TransformerConfig``
        -> ``megatron.core.transformer.transformer_config:TransformerConfig``); a module resolves to
        its dotted name. Only what the index holds is known: public names, re-exports from megatron,
        public methods and dataclass fields (a plain class attribute resolves to None).
        """
        mods = self._raw["modules"]
        if ":" in name:
            mod, rest = name.split(":", 1)
            if mod not in mods:
                return None
            parts = rest.split(".")
        else:
            bits = name.split(".")
            k = next((i for i in range(len(bits), 0, -1) if ".".join(bits[:i]) in mods), 0)
            if not k:
                return None
            mod, parts = ".".join(bits[:k]), bits[k:]
        cur = mod
        for i, part in enumerate(parts):
            cur = self._step(cur, part)
            if cur is None:
                return None
        return cur

    def _step(self, cur: str, part: str, depth: int = 0) -> str | None:
        mods = self._raw["modules"]
        if ":" not in cur:  # a module
            entry = mods.get(cur, {}).get(part)
            if entry is None:
                return f"{cur}.{part}" if f"{cur}.{part}" in mods else None
            kind, target = entry
            if kind in ("class", "function") or target is None:
                return f"{cur}:{part}"
            if depth > 12:
                return None
            if ":" not in target:  # import a.b.c binds the top package
                return target if target in mods else None
            tmod, tname = target.split(":", 1)
            if tmod not in mods:
                return None
            again = mods[tmod].get(tname)
            if f"{tmod}.{tname}" in mods and (again is None or again == [kind, target]):
                return f"{tmod}.{tname}"  # from pkg import submodule
            return self._step(tmod, tname, depth + 1)
        key = f"{cur}.{part}"
        if key in self._raw["signatures"]:
            return key
        if any(f[0] == part for f in self._raw["fields"].get(cur, [])):
            return key
        return None

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

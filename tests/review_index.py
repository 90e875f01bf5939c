"""Stand-ins for the release index (scripts/release_index, issue 15) with its interface, for
the review tests until the index is merged:

- ``live_index()``: megatron-core 0.19.2 as installed here.  Names come from the installed
  sources read with ``ast``; signatures and fields from ``inspect``/``dataclasses`` on the
  imported objects; messages are the warnings and log calls whose text is a literal.
- ``FakeIndex(path)``: a few facts of older releases from a JSON fixture
  (tests/data/review/fake_index.json; tests/test_review_signatures.py checks each fact
  against the released sources).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import json
import os
from pathlib import Path

KINDS = {inspect.Parameter.POSITIONAL_ONLY: "positional_only",
         inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
         inspect.Parameter.VAR_POSITIONAL: "var_positional",
         inspect.Parameter.KEYWORD_ONLY: "keyword_only",
         inspect.Parameter.VAR_KEYWORD: "var_keyword"}


class LiveRelease:
    version = "0.19.2"

    def __init__(self):
        import megatron.core
        self.root = Path(megatron.core.__file__).resolve().parent.parent  # .../megatron
        self._files = {}
        for path in sorted(self.root.rglob("*.py")):
            rel = path.relative_to(self.root.parent).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            self._files[".".join(parts)] = path

    def modules(self):
        return set(self._files)

    @functools.lru_cache(maxsize=None)
    def names(self, module):
        path = self._files.get(module)
        if path is None:
            return {}
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        out = {}

        def bind(node):
            if isinstance(node, ast.ClassDef):
                out[node.name] = {"kind": "class", "target": None}
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[node.name] = {"kind": "function", "target": None}
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Name):
                        out[t.id] = {"kind": "variable", "target": None}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                for a in node.names:
                    if a.name == "*":
                        out.update({k: {"kind": "import", "target": f"{base}:{k}"}
                                    for k in self.names(base) if not k.startswith("_")})
                    else:
                        out[a.asname or a.name] = {"kind": "import", "target": f"{base}:{a.name}"}
            elif isinstance(node, ast.Import):
                for a in node.names:
                    out[a.asname or a.name.split(".")[0]] = {"kind": "import", "target": None}
            elif isinstance(node, (ast.If, ast.Try)):
                for body in (node.body, getattr(node, "orelse", []),
                             *[h.body for h in getattr(node, "handlers", [])]):
                    for n in body:
                        bind(n)

        for node in tree.body:
            bind(node)
        return out

    def _object(self, obj_id):
        module, _, name = obj_id.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except Exception:  # noqa: BLE001
            return None

    @functools.lru_cache(maxsize=None)
    def signature(self, obj_id):
        obj = self._object(obj_id)
        if obj is None:
            return None
        try:
            sig = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
        except (TypeError, ValueError):
            return None
        params = [{"name": p.name, "kind": KINDS[p.kind],
                   "default": None if p.default is inspect.Parameter.empty else repr(p.default),
                   "annotation": None} for p in sig.parameters.values()]
        try:
            src = f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
            src = "megatron/" + src.split("/megatron/", 1)[1]
        except (TypeError, OSError, IndexError):
            src = None
        return {"params": params, "source": src}

    def fields(self, class_id):
        obj = self._object(class_id)
        if obj is None or not dataclasses.is_dataclass(obj):
            return None
        return [{"name": f.name, "type": None,
                 "default": repr(f.default) if f.default is not dataclasses.MISSING else None,
                 "post_init": None} for f in dataclasses.fields(obj)]

    def messages(self):
        return []


class LiveIndex:
    RELEASES = ("0.19.2",)

    def __init__(self):
        self._rel = LiveRelease()

    def resolve_version(self, requested):
        return "0.19.2", "--megatron-version" if requested else "default"

    def load(self, version):
        if version != "0.19.2":
            raise ValueError(version)
        return self._rel

    def events(self, name):
        return []


@functools.lru_cache(maxsize=1)
def live_index():
    return LiveIndex()


class FakeRelease:
    def __init__(self, version, data):
        self.version, self.d = version, data

    def modules(self):
        return set(self.d.get("names", {}))

    def names(self, module):
        return self.d.get("names", {}).get(module, {})

    def signature(self, obj_id):
        return self.d.get("signatures", {}).get(obj_id)

    def fields(self, class_id):
        return self.d.get("fields", {}).get(class_id)

    def messages(self):
        return self.d.get("messages", [])


class FakeIndex:
    def __init__(self, path=Path(__file__).parent / "data" / "review" / "fake_index.json"):
        data = json.loads(Path(path).read_text())
        self.RELEASES = tuple(data["releases"])
        self._rel = {v: FakeRelease(v, data["releases"][v]) for v in self.RELEASES}
        self._events = data.get("events", {})

    def resolve_version(self, requested):
        if requested is None:
            return self.RELEASES[-1], "default"
        line = ".".join(requested.split(".")[:2])
        for v in self.RELEASES:
            if v.startswith(line + "."):
                return v, "--megatron-version"
        raise ValueError(f"unsupported version {requested}; supported {', '.join(self.RELEASES)}")

    def load(self, version):
        return self._rel[version]

    def events(self, name):
        return self._events.get(name, [])

"""Child process: compare the release index with an installed megatron-core (any Python >= 3.10).

    python tests/release_index_probe.py TARGET ...   (prints one JSON object)

Run with the interpreter of the installation under test. For each target (a dotted name or
module:attr, as the bundle writes it) that is a class or function, the live object's signature
(inspect.signature; for a class its __init__ without self) and dataclass fields
(dataclasses.fields) are compared with the index entry of the installed release, found under the
object's defining module and qualname. Statuses: ok, mismatch (detail says what differs),
not_in_index, unresolved (does not import here), skipped (a module or a non-callable).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import sys
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import reference_facts as rf  # noqa: E402
import release_index as ri  # noqa: E402

KINDS = {inspect.Parameter.POSITIONAL_ONLY: "positional_only",
         inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
         inspect.Parameter.VAR_POSITIONAL: "var_positional",
         inspect.Parameter.KEYWORD_ONLY: "keyword_only",
         inspect.Parameter.VAR_KEYWORD: "var_keyword"}


def _default_ok(text: str | None, value, module: str) -> bool:
    if text is None:
        return value is inspect.Parameter.empty or value is dataclasses.MISSING
    if value is inspect.Parameter.empty or value is dataclasses.MISSING:
        return False
    if "default_factory" in text:  # dataclass __init__ shows a factory as <factory>
        return repr(value) == "<factory>" or callable(value)
    if rf.default_matches(text, value):
        return True
    # An expression (2 ** 32, F.gelu, float('inf')): evaluate the index's text where Megatron
    # evaluated it, in the defining module's namespace.
    try:
        again = eval(text, dict(vars(sys.modules[module])))  # noqa: S307 - upstream's own default
    except Exception:  # noqa: BLE001 - not evaluable there: a mismatch
        return False
    return again is value or (type(again) is type(value) and again == value)


def compare_signature(obj, sig: dict) -> list[str]:
    if inspect.isclass(obj) and obj.__init__ is object.__init__:
        params = []  # no __init__ anywhere in the MRO: called without arguments
    else:
        live = inspect.signature(obj.__init__) if inspect.isclass(obj) else inspect.signature(obj)
        params = list(live.parameters.values())[1 if inspect.isclass(obj) else 0:]
    want = [(p["name"], p["kind"]) for p in sig["params"]]
    got = [(p.name, KINDS[p.kind]) for p in params]
    if want != got:
        return [f"parameters: index {want} != installed {got}"]
    return [f"default of {p.name}: index {q['default']!r}, installed {p.default!r}"
            for p, q in zip(params, sig["params"]) if not _default_ok(q["default"], p.default, obj.__module__)]


def compare_fields(obj, fields: list[dict]) -> list[str]:
    live = dataclasses.fields(obj)
    if [f.name for f in live] != [f["name"] for f in fields]:
        a, b = [f["name"] for f in fields], [f.name for f in live]
        return [f"fields: only index {sorted(set(a) - set(b))}, only installed {sorted(set(b) - set(a))}, "
                f"order equal: {sorted(a) == sorted(b)}"]
    out = []
    for f, q in zip(live, fields):
        value = f.default if f.default is not dataclasses.MISSING else \
            (f.default_factory if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
        if q["default"] is not None and "default_factory" in q["default"]:
            ok = f.default_factory is not dataclasses.MISSING
        else:
            ok = _default_ok(q["default"], value, q["owner"].split(":")[0])
        if not ok:
            out.append(f"field {f.name}: index default {q['default']!r}, installed {value!r}")
        if q["init"] != f.init:
            out.append(f"field {f.name}: index init={q['init']}, installed init={f.init}")
    return out


def probe(target: str, rel) -> dict:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obj = rf._resolve(target)
    except Exception as exc:  # noqa: BLE001 - an import failure is a status, not a crash
        return {"target": target, "status": "unresolved", "detail": f"{type(exc).__name__}: {exc}"[:300]}
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return {"target": target, "status": "skipped", "detail": type(obj).__name__}
    key = f"{obj.__module__}:{obj.__qualname__}"
    if inspect.isclass(obj) and not any("__init__" in vars(c) for c in obj.__mro__
                                        if c.__module__.startswith("megatron.")):
        # The constructor comes from outside megatron (an exception class on Exception): the index
        # compiles megatron's own source, so it has no signature to compare.
        owner = next(c for c in obj.__mro__ if "__init__" in vars(c))
        return {"target": target, "key": key, "status": "skipped",
                "detail": f"constructor of {owner.__module__}.{owner.__qualname__}"}
    sig = rel.signature(key)
    if sig is None:
        return {"target": target, "key": key, "status": "not_in_index"}
    problems = compare_signature(obj, sig)
    checked = ["signature"]
    if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
        fields = rel.fields(key)
        problems += ["index has no fields"] if fields is None else compare_fields(obj, fields)
        checked.append(f"{len(dataclasses.fields(obj))} fields")
    return {"target": target, "key": key, "status": "mismatch" if problems else "ok",
            "checked": checked, "detail": "; ".join(problems)[:2000]}


def main(argv: list[str]) -> int:
    installed = ri.versions.installed_version()
    version, _ = ri.resolve_version(installed)
    rel = ri.load(version)
    results = [probe(t, rel) for t in argv]
    json.dump({"installed": installed, "indexed": version, "python": sys.version.split()[0],
               "results": results}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

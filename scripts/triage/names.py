"""A failure about a name -> what the release index says about that name (as api_history.py does).

``ImportError`` / ``ModuleNotFoundError`` on a ``megatron.*`` module or name, ``AttributeError``
("has no attribute") on a Megatron module or class, ``TypeError`` ("unexpected keyword
argument", "missing ... required ... argument", "takes N positional arguments but M were
given") on a Megatron callable, config field or parameter, argparse's ``unrecognized arguments``
naming a Megatron-LM flag: in which indexed releases the name (or parameter) exists, what changed for it and
when (added, removed, renamed, moved, with the successor), and whether the user's release has
it. The data and the name lookup are ``scripts/release_index`` (find, events, releases_of), the
same functions ``scripts/api_history.py`` answers from.
"""

from __future__ import annotations

import re

import release_index as ri
from release_index.versions import RELEASES

from .source import _spans as _release_spans, indexed

Q = r"['\"]"
# (pattern, what it names); each pattern's groups: mod, name, cls, callee, param, params.
PATTERNS = (
    (re.compile(rf"cannot import name {Q}(?P<name>\w+){Q} from {Q}(?P<mod>megatron[\w.]*){Q}"), "import"),
    (re.compile(rf"No module named {Q}(?P<mod>megatron[\w.]*){Q}"), "module"),
    (re.compile(rf"module {Q}(?P<mod>megatron[\w.]*){Q} has no attribute {Q}(?P<name>\w+){Q}"), "attribute"),
    (re.compile(rf"(?:{Q}(?P<cls>[A-Z]\w*){Q} object|type object {Q}(?P<tcls>[A-Z]\w*){Q}) has no attribute "
                rf"{Q}(?P<name>\w+){Q}"), "member"),
    (re.compile(rf"(?P<callee>[\w.]+)\(\) got an unexpected keyword argument {Q}(?P<param>\w+){Q}"), "unexpected"),
    (re.compile(r"(?P<callee>[\w.]+)\(\) missing \d+ required (?:positional |keyword-only )?arguments?: "
                r"(?P<params>.+)$"), "missing"),
    (re.compile(r"(?P<callee>[\w.]+)\(\) takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given"),
     "positional"),
    # argparse, as Megatron-LM's parse_args reports a flag it does not define.
    (re.compile(r"error: unrecognized arguments: (?P<flags>.+)$"), "flag"),
)
MAX_EVENTS = 12


def _callable_key(callee: str) -> str | None:
    """GPTModel.__init__ -> GPTModel's key; TransformerConfig.__init__ -> the dataclass; f -> f."""
    name = callee[: -len(".__init__")] if callee.endswith(".__init__") else callee
    if name == "__init__":
        return None
    keys = [k for k in ri.find(name) if k.startswith("megatron")]
    return keys[0] if keys else None


def _params_by_release(key: str) -> dict[str, dict[str, dict]]:
    out = {}
    for v in RELEASES:
        if v not in ri.releases_of(key):
            continue
        sig = ri.load(v).signature(key)
        if sig is not None:
            out[v] = {p["name"]: p for p in sig["params"]}
    return out


def _under_core(query: str) -> str | None:
    """megatron.optimizer -> megatron.core.optimizer (and module:name alike) when only the
    megatron.core path is indexed: the module moved into megatron-core from Megatron-LM's tree."""
    if not query.startswith("megatron.") or query.startswith(("megatron.core", "megatron.training")):
        return None
    keys = ri.find("megatron.core." + query[len("megatron."):])
    return keys[0] if keys else None


def _removed_config_field(callee: str, param: str, release: str) -> dict | None:
    """A keyword another project's class rejects that is a Megatron config field your release no
    longer has: downstream model providers and configs subclass TransformerConfig (Megatron-Bridge's
    providers are such dataclasses), so a saved or older config that sets the field fails there."""
    fields = [k for k in ri.find(param) if k.startswith("megatron") and ri.catalog()[k]["kind"] == "field"
              and k.rsplit(".", 1)[0].endswith("Config")]
    if not fields or any(release in ri.releases_of(k) for k in fields):
        return None  # your release has the field: nothing Megatron removed explains the error
    out = _about(fields[0], release)
    out["answer"] = f"{callee}() is not Megatron's, but {param!r} is a Megatron config field: " + out["answer"]
    out.update(parameter=param, callee_is_megatron=False)
    return out


MAX_CLASSES = 6


def _param_added(key: str, param: str) -> str | None:
    """The release in which callable ``key`` gained ``param`` (the patch release where the index
    compared it), or None when it never gained it by a signature change (it always had it)."""
    ev = next((e for e in ri.events(key) if e["change"] == "signature_changed"
               and re.search(rf"\badded\b[^;]*\b{re.escape(param)}\b", e["detail"] or "")), None)
    return _when(ev) if ev is not None else None


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(map(int, v.split(".")))


def _listed(names: list[str]) -> str:
    return ", ".join(names[:MAX_CLASSES]) + (f" and {len(names) - MAX_CLASSES} more" if len(names) > MAX_CLASSES else "")


def _megatron_constructor_param(callee: str, param: str, release: str) -> dict | None:
    """A keyword another project's class rejects that Megatron's own classes gained as a constructor
    parameter: a class a layer spec puts in place of Megatron's (a custom MoE or attention module,
    built by ``build_module``) receives what Megatron's layer passes to the class it replaces, so
    a parameter Megatron added in release R arrives from R on (Megatron-Bridge#4077: ``is_mtp_layer``,
    0.17)."""
    rel = ri.load(release)
    added: dict[str, str] = {}
    for key, rec in ri.catalog().items():
        if rec["kind"] != "class" or not key.startswith("megatron"):
            continue
        sig = rel.signature(key)
        if sig is None or not any(p["name"] == param for p in sig["params"]):
            continue
        when = _param_added(key, param)
        if when is not None:
            added[key] = when
    if not added:
        return None  # your release's classes do not take it, or always did: not a Megatron change
    first = min(added.values(), key=_vkey)
    names = sorted(k.split(":", 1)[1] for k, v in added.items() if v == first)
    key = next(k for k, v in sorted(added.items()) if v == first)
    shown = _listed(names)
    events = [e for e in ri.events(key) if e["change"] == "signature_changed" and param in (e["detail"] or "")]
    return {"key": key, "kind": "class", "parameter": param, "releases": list(ri.releases_of(key)),
            "in_your_release": True, "callee_is_megatron": False, "events": events[:MAX_EVENTS], "successor": None,
            "answer": (f"{callee}() is not Megatron's, but {param!r} is a constructor parameter Megatron added in "
                       f"{first} to {shown}: a class that a layer spec puts in place of one of these is "
                       f"passed what Megatron passes to it, so from {first} on it receives {param}=...; "
                       f"accept {param} (or **kwargs) in {callee}, or use a release before {first}")}


def _sibling_method_param(callee: str, param: str, release: str) -> dict | None:
    """``Cls.method() got an unexpected keyword argument 'p'`` for a class the index does not hold
    (private, or another project's) whose method has the name of Megatron methods that take ``p``:
    code written for those methods calls it on whatever object it holds (a model chunk, a DDP
    wrapper) and passes ``p``, which an implementation without ``p`` rejects (Megatron-LM#4669:
    ``_BaseDataParallel.finish_grad_sync()`` and ``force_all_reduce``, which
    ``DistributedDataParallel.finish_grad_sync`` takes from 0.16.0 and 0.19.2's
    ``finalize_model_grads`` passes to every model chunk)."""
    cls, _, method = callee.rpartition(".")
    if not cls or method.startswith("_") or "_" not in method:
        return None  # a bare function, a private or dunder method, or a plain word (forward): too common
    rel = ri.load(release)
    takes, lacks = [], []
    for key in ri.find(method):
        if not key.startswith("megatron") or not key.endswith(f".{method}"):
            continue
        sig = rel.signature(key)
        if sig is None:
            continue
        if any(p["name"] == param for p in sig["params"]):
            takes.append(key)
        else:
            lacks.append(key)
    if not takes:
        return None
    key = takes[0]
    added = [v for v in (_param_added(k, param) for k in takes) if v is not None]
    when = f" (from {min(added, key=_vkey)})" if added else " (in every indexed release that has them)"
    text = (f"{callee}() is not in the release index (a private or another project's class), but "
            f"Megatron's {_listed([k.split(':', 1)[1] for k in takes])} take{'s' if len(takes) == 1 else ''} {param!r} in "
            f"{release}{when}: code written for these calls {method}({param}=...) on the object it holds "
            f"(a model chunk, a wrapper), which an implementation without {param} rejects")
    if lacks:
        text += (f"; {_listed([k.split(':', 1)[1] for k in lacks])} "
                 f"{'does' if len(lacks) == 1 else 'do'} not take it in {release}")
    text += f"; accept {param} (or **kwargs) in {callee}, or use a release whose callers do not pass it"
    events = [e for e in ri.events(key) if e["change"] == "signature_changed" and param in (e["detail"] or "")]
    return {"key": key, "kind": ri.catalog()[key]["kind"], "parameter": param, "releases": list(ri.releases_of(key)),
            "in_your_release": True, "callee_is_megatron": False, "events": events[:MAX_EVENTS],
            "successor": None, "answer": text}


def _flags(text: str, release: str) -> dict | None:
    """``error: unrecognized arguments: --a 1 --b``: the first flag that Megatron-LM defined in an
    indexed release (a script written for another release), with its history; None when none is
    Megatron's. A flag your release has is not unknown to Megatron-LM's parser: the script that
    failed parsed it with another parser (or took it out of ``extra_args_provider``'s reach)."""
    flags = [t for t in text.split() if t.startswith("--") and len(t) > 2]
    known = [(f, ri.find(f.split("=", 1)[0])) for f in flags]
    known = [(f, keys[0]) for f, keys in known if keys and ri.catalog()[keys[0]]["kind"] == "flag"]
    if not known:
        return None
    gone = [(f, k) for f, k in known if release not in ri.releases_of(k)]
    flag, key = (gone or known)[0]
    out = _about(key, release)
    if not gone:
        out["answer"] += (f"; {release} defines it, so the parser that rejected it is not Megatron-LM's "
                          "parse_args of that release: check which script and which megatron package ran")
    others = [f for f, _ in known if f != flag]
    if others:
        out["answer"] += f"; also Megatron-LM flags: {', '.join(others[:MAX_EVENTS])}"
    out["query"] = flag
    return out


def _spans(versions) -> str:
    return _release_spans(versions) if versions else "no indexed release"


def _when(ev: dict) -> str:
    """The first release with the event's state: the patch release when the index compared it."""
    return ev["since"] if ev.get("since") else ev["version"]


def _about(key: str, release: str) -> dict:
    present = ri.releases_of(key)
    evs = ri.events(key)
    gone = next((e for e in reversed(evs) if e["change"] in ("removed", "renamed", "moved")), None)
    here = release in present
    text = f"{key} is in {_spans(present)}"
    if gone is not None:
        text += f"; {gone['change']} in {_when(gone)}"
        if gone["successor"]:
            text += f" -> {gone['successor']}" + (" (inferred)" if gone["inferred"] else "")
    added = next((e for e in evs if e["change"] == "added"), None)
    if added is not None:
        text += f"; added in {_when(added)}"
    return {"key": key, "kind": ri.catalog()[key]["kind"], "releases": list(present), "in_your_release": here,
            "events": evs[:MAX_EVENTS], "successor": gone["successor"] if gone else None, "answer": text}


def _parameter(key: str, param: str, release: str, missing: bool) -> dict | None:
    """A parameter of callable key (or a field, for a dataclass) across releases."""
    # A dataclass's parameter is a field: its own key (inherited fields resolve to the declaring class).
    field = [k for k in ri.find(f"{key.split(':', 1)[1]}.{param}") if k.startswith("megatron")] if ":" in key else []
    if field:
        out = _about(field[0], release)
        out["parameter"] = param
        return out
    by_rel = _params_by_release(key)
    if not by_rel:
        return None
    has = [v for v, ps in by_rel.items() if param in ps]
    required = [v for v, ps in by_rel.items() if param in ps and ps[param]["default"] is None
                and ps[param]["kind"] not in ("var_positional", "var_keyword")]
    text = f"parameter {param!r} of {key}: " + (f"in {_spans(has)}" if has else "in no indexed release")
    if missing:
        text += f"; required in {_spans(required)}" if required else "; never required in an indexed release"
    sig_events = [e for e in ri.events(key) if e["change"] == "signature_changed" and param in (e["detail"] or "")]
    return {"key": key, "kind": ri.catalog()[key]["kind"], "parameter": param, "releases": has,
            "required_in": required, "in_your_release": release in has,
            "events": sig_events[:MAX_EVENTS], "successor": None, "answer": text}


def explain(line: str, release: str | None, following: tuple = ()) -> dict | None:
    """The name block for a message line, or None when the line is not about a Megatron name.
    A message wrapped onto the next line ("cannot import name 'x' from" / "'megatron.core...'")
    is read with that line."""
    wrapped = f"{line} {following[0].strip()}" if following else None
    rel = indexed(release)
    for rx, what in PATTERNS:
        m = rx.search(line)
        if m is None and wrapped:
            m = rx.search(wrapped)
            m = m if m is not None and m.start() < len(line) < m.end() else None  # it spans the wrap
        if not m:
            continue
        g = m.groupdict()
        if what in ("import", "attribute", "module"):
            query = f"{g['mod']}:{g['name']}" if g.get("name") else g["mod"]
            keys = ri.find(query)
            elsewhere = not keys and bool(g.get("name"))
            if elsewhere:  # never in that module: where the name lives
                keys = [k for k in ri.find(g["name"]) if k.startswith("megatron")]
            if keys:
                out = _about(keys[0], rel)
                if elsewhere:
                    out["answer"] = f"{query} is in no indexed release; the name is defined as " + out["answer"]
                    out["in_your_release"] = False
            else:
                core = _under_core(query)
                if core is None:
                    return {"query": query, "key": None, "kind": None, "what": what, "releases": [],
                            "in_your_release": False, "events": [], "successor": None, "release": rel,
                            "next_command": None,
                            "answer": f"{query} is in no indexed release ({RELEASES[0]} to {RELEASES[-1]})"}
                # Megatron-LM's pre-core path (megatron.optimizer): its megatron.core home
                out = _about(core, rel)
                out["answer"] = (f"{query} is in no indexed release ({RELEASES[0]} to {RELEASES[-1]}); "
                                 f"megatron-core has it under megatron.core: " + out["answer"])
                out.update(in_your_release=False, successor=core)
        elif what == "member":
            g["cls"] = g["cls"] or g["tcls"]  # an instance's or the class's own attribute
            keys = [k for k in ri.find(f"{g['cls']}.{g['name']}") if k.startswith("megatron")]
            if not keys:
                cls = [k for k in ri.find(g["cls"]) if k.startswith("megatron")]
                if not cls:
                    return None  # not a Megatron class
                return {"query": f"{g['cls']}.{g['name']}", "key": None, "kind": None, "what": what,
                        "class": cls[0], "releases": [], "in_your_release": False, "events": [],
                        "successor": None, "release": rel,
                        "next_command": f"python scripts/api_history.py {cls[0]}",
                        "answer": f"{cls[0]} has no public method or field {g['name']!r} in any indexed release"}
            out = _about(keys[0], rel)
            query = f"{g['cls']}.{g['name']}"
        elif what == "flag":
            out = _flags(g["flags"], rel)
            if out is None:
                return None
            query = out.pop("query")
        elif what == "positional":  # the positional parameters changed: the signature's history
            key = _callable_key(g["callee"])
            if key is None:
                return None
            out = _about(key, rel)
            out["events"] = [e for e in ri.events(key) if e["change"] == "signature_changed"][:MAX_EVENTS]
            changes = "; ".join(f"{e['version']}: {e['detail']}" for e in out["events"]) or "none"
            out["answer"] = f"{key}: signature changes {changes}; in {_spans(out['releases'])}"
            query = f"{g['callee']}(...)"
        else:
            key = _callable_key(g["callee"])
            params = [g["param"]] if g.get("param") else re.findall(r"'(\w+)'", g["params"])
            if not params:
                return None
            if key is not None:
                out = _parameter(key, params[0], rel, what == "missing")
            else:  # not Megatron's callable: a Megatron config field it was given?
                out = None
                if what == "unexpected":
                    out = _removed_config_field(g["callee"], params[0], rel)
                    # A plain word ("name") is any library's keyword: only build_module's "when
                    # instantiating" chain shows Megatron built the class; an underscored one is
                    # distinctive enough alone.
                    built = any("when instantiating" in x for x in (line, *following))
                    if out is None and ("_" in params[0] or built):
                        out = _megatron_constructor_param(g["callee"], params[0], rel)
                    if out is None:
                        out = _sibling_method_param(g["callee"], params[0], rel)
            if out is None:
                return None
            query = f"{g['callee']}({params[0]}=...)"
        if out["in_your_release"] and what not in ("missing", "positional", "flag") \
                and out.get("callee_is_megatron", True):
            out["answer"] += (f"; your release {rel} has it: check that the installed megatron-core is {rel} "
                              "(pip show megatron-core) and that the import path is the one above")
        out.update(query=query, what=what, release=rel,
                   next_command=f"python scripts/api_history.py {out['key']}" if out.get("key") else None)
        return out
    return None

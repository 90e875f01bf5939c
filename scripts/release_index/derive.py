"""Events between consecutive releases, derived from the compiled releases alone.

Lives with the loader (not in dev/) so that a test can re-derive the shipped events from the
shipped releases without the sources. Each event: [version, change, detail, successor, inferred],
version being the first release with the new state.

A name that disappears is, in this order (classes and functions; a method follows its class
to the class's successor, or is renamed inside its class when its body is identical; a dataclass
field moved, not inferred, when the class still has it through a base that now declares it):
- moved/renamed, not inferred: its module still binds the name to a definition elsewhere
  (an import or alias: ``from new import X``, ``Old = New``) — Megatron said so in code;
- moved/renamed, inferred: a definition added in the same release has an identical body
  (renamed when the name differs), or the same name is newly defined in exactly one other module,
  or a deprecation message of either release names it next to exactly one newly added name,
  or (a dataclass) exactly one new dataclass of its module has at least 80% of its fields;
- removed otherwise.
Flags: renamed (not inferred) when the old flag became an alias of a new one; inferred when a new
flag has the old flag's dest, a deprecation help/message names it, or its help text is nearly the
old one's. Bodies under a dozen ast nodes have no hash (dev/release_ast.py), so "pass" or
"raise NotImplementedError" never make two definitions look identical.
"""

from __future__ import annotations

import difflib
import re

# Functions whose body changes are events (module path -> what it is): every function and method of
# these modules (dev/release_behaviour.py hashes their bodies line by line).
BODY_WATCH = {
    "megatron/training/theoretical_memory_usage.py": "memory estimator",
    "megatron/core/num_microbatches_calculator.py": "microbatch calculator",
    "megatron/core/transformer/pipeline_parallel_layer_layout.py": "pipeline layout parser",
}
DEPRECATED = re.compile(r"\bdeprecat", re.I)
# Unconditional only: "has no effect when ..." or "... on attention layers" is not an ignored flag.
IGNORED = re.compile(r"\b(?:flag|argument|option|value|it)\s+(?:is|will be|gets)\s+(?:now\s+)?ignored\b"
                     r"|\bhas no effect\s*(?:[.;]|$)|\bno longer (?:used|has any effect)\b", re.I)
FLAG_HELP_SIMILAR = 0.85  # difflib ratio of help texts above which a new flag continues a removed one
MSG_SIMILAR = 0.6  # difflib ratio above which a replaced message in one function counts as reworded
FIELDS_CARRIED = 0.8  # share of a removed dataclass's fields a new one must have to be its successor


def _catalog(rel: dict) -> dict[str, str]:
    """{key: kind} of one compiled release."""
    out = {}
    for mod, names in rel["modules"].items():
        out[mod] = "module"
        is_pkg = True  # imports are kept only in packages (re-exports), see _keep_import
        for n, (kind, target) in names.items():
            key = f"{mod}:{n}"
            if kind in ("class", "function"):
                out[key] = kind
            elif kind == "import" and _keep_import(rel, mod) and is_pkg:
                out[key] = "import"
            elif kind == "variable":
                out[key] = "variable"
    for key in rel["signatures"]:
        if "." in key.split(":", 1)[1]:
            out[key] = "method"
    for cls, flds in rel["fields"].items():
        for f in flds:
            if f[6] == cls:
                out[f"{cls}.{f[0]}"] = "field"
    for cls, members in rel.get("members", {}).items():  # indexes built before enum members: none
        for n in members:
            out[f"{cls}.{n}"] = "member"
    for flag in rel["flags"] or {}:
        out[flag] = "flag"
    return out


def _keep_import(rel: dict, mod: str) -> bool:
    """Re-exports matter in packages (their __init__), where users import from."""
    return any(p.startswith(mod + ".") for p in rel["modules"])


def _targets(rel: dict) -> dict[str, str]:
    out = {}
    for mod, names in rel["modules"].items():
        for n, (kind, target) in names.items():
            if kind in ("import", "variable") and target and ":" in target:
                out[f"{mod}:{n}"] = target
    return out


def _resolve(targets: dict[str, str], key: str) -> str:
    seen = set()
    while key in targets and key not in seen:
        seen.add(key)
        key = targets[key]
    return key


def _params_detail(old: list, new: list) -> tuple[str | None, str | None]:
    """(signature change detail, default change detail) between two param lists."""
    on, nn = [p[0] for p in old], [p[0] for p in new]
    sig = []
    added = [n for n in nn if n not in on]
    removed = [n for n in on if n not in nn]
    if added:
        sig.append("added " + ", ".join(added))
    if removed:
        sig.append("removed " + ", ".join(removed))
    od, nd = {p[0]: p for p in old}, {p[0]: p for p in new}
    kinds = [f"{n} {od[n][1]}->{nd[n][1]}" for n in nn if n in od and od[n][1] != nd[n][1]]
    if kinds:
        sig.append("kind " + ", ".join(kinds))
    common_old = [n for n in on if n in nd]
    common_new = [n for n in nn if n in od]
    if common_old != common_new:
        sig.append("reordered")
    required = [n for n in nn if n in od and (od[n][2] is None) != (nd[n][2] is None)]
    defaults = [f"{n}: {od[n][2]} -> {nd[n][2]}" for n in nn
                if n in od and od[n][2] != nd[n][2] and n not in required]
    if required:
        sig.append("now " + ", ".join(f"{n} {'required' if nd[n][2] is None else 'optional'}"
                                      for n in required))
    return ("; ".join(sig) or None), ("; ".join(defaults) or None)


# "use X instead", "replaced by X", "renamed to X", "in favor of X": X is the successor.
_SUCCESSOR_IN_TEXT = re.compile(
    r"(?:\buse|\breplaced (?:by|with)|\brenamed to|\bmoved to|\bin favou?r of|\bsuperseded by)\s+[`'\"]?([A-Za-z_][\w.]*)",
    re.I)


def _deprecation_successor(old_name: str, msgs: list[list], added_names: dict[str, list[str]]) -> str | None:
    """The newly added key a deprecation message about old_name points to (unique), else None."""
    found = set()
    for kind, exc, text, *_ in msgs:
        if text and re.search(rf"\b{re.escape(old_name)}\b", text) and re.search(r"deprecat|renamed|replaced", text, re.I):
            for tok in _SUCCESSOR_IN_TEXT.findall(text):
                tok = tok.rstrip(".").rsplit(".", 1)[-1]
                if tok != old_name:
                    found.update(added_names.get(tok, []))
    return found.pop() if len(found) == 1 else None


def _module_of(path: str) -> str:
    mod = path[:-3].replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def derive(releases: list[dict]) -> dict:
    """The events data: names (key -> [kind, release bitmask]), targets, bases, flag_aliases, events."""
    names: dict[str, list] = {}
    events: dict[str, list] = {}
    targets: dict[str, str] = {}
    bases: dict[str, list[str]] = {}
    flag_aliases: dict[str, str] = {}
    cats = [_catalog(r) for r in releases]
    for i, (rel, cat) in enumerate(zip(releases, cats)):
        for key, kind in cat.items():
            entry = names.setdefault(key, [kind, 0])
            entry[0] = kind  # the newest kind wins (a class that became an import is now an import)
            entry[1] |= 1 << i
        targets.update(_targets(rel))
        for cls, flds in rel["fields"].items():
            owners = []
            for f in flds:
                if f[6] != cls and f[6] not in owners:
                    owners.append(f[6])
            if owners:
                bases[cls] = owners
        for flag, rec in (rel["flags"] or {}).items():
            for a in rec.get("aliases") or []:
                if a.startswith("--"):
                    flag_aliases[a] = flag
    for i in range(1, len(releases)):
        _pair(releases[i - 1], releases[i], cats[i - 1], cats[i], events)
    return {"names": names, "targets": targets, "bases": bases, "flag_aliases": flag_aliases,
            "events": events}


def _emit(events, key, version, change, detail=None, successor=None, inferred=False):
    events.setdefault(key, []).append([version, change, detail, successor, int(inferred)])


def _pair(a: dict, b: dict, ca: dict, cb: dict, events: dict) -> None:
    v = b["version"]
    tb = _targets(b)
    gone = [k for k in ca if k not in cb or (ca[k] in ("class", "function") and cb[k] in ("import", "variable"))]
    new = [k for k in cb if k not in ca]
    # indexes of what is new in b, for successor search
    new_by_hash: dict[str, list[str]] = {}
    new_by_name: dict[str, list[str]] = {}
    for k in new:
        if cb[k] in ("class", "function", "method"):
            rec = b["signatures"].get(k)
            if rec is not None:
                new_by_hash.setdefault(rec[2], []).append(k)
            new_by_name.setdefault(k.rsplit(":", 1)[-1].rsplit(".", 1)[-1], []).append(k)
    msgs = a["messages"] + b["messages"]
    successor_of: dict[str, tuple[str, str, str | None]] = {}  # key -> (successor, change, why inferred)
    # Modules, then classes and functions, then methods (a method follows its class).
    for k in gone:
        if ca[k] == "module":
            succ = _module_successor(a, b, k, new)
            if succ:
                successor_of[k] = (succ, "moved", "most public names carried over")
    for k in gone:
        kind = ca[k]
        if kind not in ("class", "function"):
            continue
        name = k.rsplit(":", 1)[-1]
        if k in tb:  # still bound in its module: an explicit alias or re-export
            succ = _resolve(tb, k)
            if succ != k and succ.split(":")[0].startswith("megatron"):
                same = succ.rsplit(":", 1)[-1] == name
                successor_of[k] = (succ, "moved" if same else "renamed", None)
                continue
        rec = a["signatures"].get(k)
        hits = [h for h in new_by_hash.get(rec[2], []) if cb[h] == kind] if rec and rec[2] else []
        if len(hits) == 1:
            same = hits[0].rsplit(":", 1)[-1] == name
            successor_of[k] = (hits[0], "moved" if same else "renamed", "identical body")
            continue
        same_name = [h for h in new_by_name.get(name, []) if cb[h] == kind]
        if len(same_name) == 1:
            successor_of[k] = (same_name[0], "moved", "same name, only new definition of it")
            continue
        succ = _deprecation_successor(name, msgs, {n: [h for h in hs if cb[h] == kind]
                                                   for n, hs in new_by_name.items()})
        if succ:
            successor_of[k] = (succ, "renamed", "named by a deprecation message")
            continue
        succ = _fields_successor(a, b, k, [h for h in new if cb[h] == "class"])
        if succ:
            successor_of[k] = (succ, "renamed", "its dataclass fields carried over")
    for k in gone:  # a field now declared by a base (or another class it inherits from)
        if ca[k] != "field":
            continue
        cls, fname = k.rsplit(".", 1)
        owner = next((f[6] for f in b["fields"].get(cls, []) if f[0] == fname), None)
        if owner and owner != cls:
            successor_of[k] = (f"{owner}.{fname}", "moved", None)
    for k in gone:
        if ca[k] != "method":
            continue
        cls, meth = k.rsplit(".", 1)
        if cls in successor_of:
            succ_cls, _, inferred = successor_of[cls]
            if f"{succ_cls}.{meth}" in cb:
                successor_of[k] = (f"{succ_cls}.{meth}", "moved", inferred)
        elif cls in cb:  # the class stays: a method renamed inside it, if its body is identical
            rec = a["signatures"].get(k)
            hits = [h for h in new_by_hash.get(rec[2], []) if h.startswith(cls + ".")] if rec and rec[2] else []
            if len(hits) == 1:
                successor_of[k] = (hits[0], "renamed", "identical body")
    # flags
    fa, fb = a["flags"] or {}, b["flags"] or {}
    b_alias = {al: f for f, r in fb.items() for al in (r.get("aliases") or [])}
    b_by_dest: dict[str, list[str]] = {}
    for f, r in fb.items():
        if f not in fa:
            b_by_dest.setdefault(r.get("dest") or "", []).append(f)
    for f in fa:
        if f in fb:
            continue
        if f in b_alias:
            successor_of[f] = (b_alias[f], "renamed", None)
        elif len(b_by_dest.get(fa[f].get("dest") or "", [])) == 1:
            successor_of[f] = (b_by_dest[fa[f]["dest"]][0], "renamed", "same dest")
        else:
            helps = [[None, None, r.get("help") or "", "", "", 0] for r in fb.values()]
            succ = _flag_from_help(f, helps + msgs, set(fb) - set(fa))
            if succ:
                successor_of[f] = (succ, "renamed", "named by a deprecation message or help text")
            elif _flag_same_help(fa[f], fa, fb):
                successor_of[f] = (_flag_same_help(fa[f], fa, fb), "renamed", "near-identical help text")
    succeeded_by: dict[str, list[tuple[str, str]]] = {}
    for k, (s, c, _) in sorted(successor_of.items()):
        succeeded_by.setdefault(s, []).append((k, c))
    for k in gone:
        if k in successor_of:
            s, change, inferred = successor_of[k]
            _emit(events, k, v, change, f"{change} to {s}" + (f" (inferred: {inferred})" if inferred else ""), s,
                  bool(inferred))
        else:
            _emit(events, k, v, "removed")
    for k in new:
        if k in succeeded_by:
            _emit(events, k, v, "added", "; ".join(f"{c} from {old}" for old, c in succeeded_by[k]))
        else:
            _emit(events, k, v, "added")
    # changed in place
    for k, rec in b["signatures"].items():
        old = a["signatures"].get(k)
        if old is None or k not in ca or ca.get(k) in ("import", "variable"):
            continue
        sig, dflt = _params_detail(old[0], rec[0])
        if sig:
            _emit(events, k, v, "signature_changed", sig)
        if dflt:
            _emit(events, k, v, "default_changed", dflt)
    for cls, flds in b["fields"].items():
        old = {f[0]: f for f in a["fields"].get(cls, []) if f[6] == cls}
        for f in flds:
            o = old.get(f[0])
            if f[6] != cls or o is None:
                continue
            key = f"{cls}.{f[0]}"
            if o[2] != f[2]:
                _emit(events, key, v, "default_changed", f"default: {o[2]} -> {f[2]}")
            if (o[3], o[5]) != (f[3], f[5]):
                _emit(events, key, v, "default_changed",
                      f"__post_init__ sets: {_post_init_text(o)} -> {_post_init_text(f)}")
            if o[1] != f[1]:
                _emit(events, key, v, "signature_changed", f"type: {o[1]} -> {f[1]}")
    for f, rec in fb.items():
        o = fa.get(f)
        if o is None:
            continue
        if o.get("default") != rec.get("default"):
            _emit(events, f, v, "default_changed", f"default: {o.get('default')} -> {rec.get('default')}")
        changed = [x for x in ("type", "action", "choices", "dest") if o.get(x) != rec.get(x)]
        if changed:
            _emit(events, f, v, "signature_changed",
                  "; ".join(f"{x}: {o.get(x)} -> {rec.get(x)}" for x in changed))
    _message_events(a, b, v, events)
    _behaviour_events(a, b, ca, cb, v, events)


def _flag_from_help(flag: str, msgs: list[list], new_flags: set[str]) -> str | None:
    found = set()
    for m in msgs:
        text = m[2] or ""
        if flag in text and re.search(r"deprecat|renamed|replaced|instead", text, re.I):
            found.update(t for t in re.findall(r"--[a-z0-9][a-z0-9-]*", text) if t in new_flags)
    return found.pop() if len(found) == 1 else None


def _post_init_text(f: list) -> str:
    if f[3] is not None:
        return f[3]
    return "one of " + " | ".join(f[5]) if f[5] else "no literal"


def _fields_successor(a: dict, b: dict, key: str, new_classes: list[str]) -> str | None:
    """The one new dataclass of the same module that has (nearly) all the old one's fields."""
    old = {f[0] for f in a["fields"].get(key, [])}
    if len(old) < 3:
        return None
    mod = key.split(":", 1)[0]
    hits = [c for c in new_classes if c.split(":", 1)[0] == mod and
            len(old & {f[0] for f in b["fields"].get(c, [])}) >= FIELDS_CARRIED * len(old)]
    return hits[0] if len(hits) == 1 else None


def _flag_same_help(rec: dict, fa: dict, fb: dict) -> str | None:
    """The one new flag whose help text is nearly the old flag's (a rename that kept the help)."""
    old = " ".join((rec.get("help") or "").split())
    if len(old) < 20:
        return None
    hits = [f for f, r in fb.items() if f not in fa and
            difflib.SequenceMatcher(None, old, " ".join((r.get("help") or "").split())).ratio() >= FLAG_HELP_SIMILAR]
    return hits[0] if len(hits) == 1 else None


def _module_successor(a: dict, b: dict, mod: str, new: list[str]) -> str | None:
    """A new module with the same last name whose public names mostly match."""
    old = set(a["modules"][mod])
    last = mod.rsplit(".", 1)[-1]
    cands = []
    for k in new:
        if ":" in k or k.startswith("--") or k.rsplit(".", 1)[-1] != last:
            continue
        names = set(b["modules"].get(k, {}))
        if old and len(old & names) >= 0.6 * len(old):
            cands.append(k)
    return cands[0] if len(cands) == 1 else None


def _message_events(a: dict, b: dict, v: str, events: dict) -> None:
    """A message replaced by a similar one in the same function (same kind) was reworded."""
    def group(rel):
        g: dict[tuple, list] = {}
        for kind, exc, text, path, fn, line, *_ in rel["messages"]:  # later fields (condition, reads) are not needed here
            g.setdefault((path, fn, kind), []).append(text)
        return g
    ga, gb = group(a), group(b)
    for key in sorted(set(ga) & set(gb)):
        olds = [t for t in ga[key] if t not in gb[key]]
        news = [t for t in gb[key] if t not in ga[key]]
        for o in olds:
            if not news:
                break
            best = max(news, key=lambda n: difflib.SequenceMatcher(None, o, n).ratio())
            if difflib.SequenceMatcher(None, o, best).ratio() >= MSG_SIMILAR:
                news.remove(best)
                path, fn, kind = key
                _emit(events, f"{_module_of(path)}:{fn}", v, "message_changed",
                      f"{kind}: {o!r} -> {best!r}")


def _quote(text: str, limit: int = 160, about: re.Pattern | None = None) -> str:
    """text cut to limit characters; with ``about``, from the sentence where it first matches."""
    text = " ".join(text.split())
    hit = about.search(text) if about else None
    if hit and hit.start() > limit // 2:
        start = max(text.rfind(". ", 0, hit.start()) + 2, 0)
        text = "..." + text[start:] if start > 0 else text
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _owner_key(path: str, function: str, cat: dict) -> str:
    """The catalogue key a message's function belongs to: a constructor's message is its class's."""
    mod = _module_of(path)
    qual = function[: -len(".__init__")] if function.endswith(".__init__") else function
    while qual:
        if f"{mod}:{qual}" in cat:
            return f"{mod}:{qual}"
        qual = qual.rpartition(".")[0]
    return mod


def _help_successor(text: str, flags: dict) -> str | None:
    """The flag a deprecation text points to: "--new-flag", or a dest ("use new_name instead")."""
    by_dest = {(r.get("dest") or ""): f for f, r in flags.items()}
    for tok in _SUCCESSOR_IN_TEXT.findall(text):
        tok = tok.rstrip(".")
        if ("--" + tok) in flags:
            return "--" + tok
        if tok in by_dest:
            return by_dest[tok]
    hit = re.search(r"(--[a-z0-9][a-z0-9-]*)\s+instead", text)
    return hit.group(1) if hit and hit.group(1) in flags else None


def _behaviour_events(a: dict, b: dict, ca: dict, cb: dict, v: str, events: dict) -> None:
    """Deprecations and ignored inputs that messages, flag help and flag reads show; body changes of
    the watched functions (BODY_WATCH)."""
    fa, fb = a["flags"] or {}, b["flags"] or {}
    # 1. A message (raise/assert/warn/log) that says "deprecated", new in this release's function: not
    # one the function already had (wherever its file now is), nor a rewording of one (message_changed).
    old: dict[str, list[str]] = {}
    for kind, exc, text, path, fn, *_ in a["messages"]:
        norm = " ".join(text.split())
        if DEPRECATED.search(norm):
            old.setdefault(fn, []).append(norm)
    seen = set()
    for kind, exc, text, path, fn, line, *_ in b["messages"]:
        norm = " ".join(text.split())
        if not DEPRECATED.search(norm) or any(
                o == norm or difflib.SequenceMatcher(None, o, norm).ratio() >= MSG_SIMILAR for o in old.get(fn, [])):
            continue
        key = _owner_key(path, fn, cb)
        if (key, norm) in seen:
            continue
        seen.add((key, norm))
        said = f"{fn} {kind}s {_quote(text)} ({path}:{line})"
        _emit(events, key, v, "deprecated", said)
        # What the message names as deprecated: a flag, or a field of the class it is raised in.
        for name in re.findall(r"`?(--[a-z0-9][a-z0-9-]*|[A-Za-z_]\w*)`? (?:is|are|has been) deprecated", norm):
            target = name if name.startswith("--") else f"{key}.{name}"
            if target != key and (target in fb or cb.get(target) == "field"):
                _emit(events, target, v, "deprecated", said,
                      _help_successor(norm, fb) if target.startswith("--") else None)
    # 2. Flag help that now says deprecated or ignored.
    for flag, rec in fb.items():
        new, prev = rec.get("help") or "", (fa.get(flag) or {}).get("help") or ""
        if DEPRECATED.search(new) and not DEPRECATED.search(prev):
            _emit(events, flag, v, "deprecated", f"help: {_quote(new, about=DEPRECATED)}", _help_successor(new, fb))
        if IGNORED.search(new) and not IGNORED.search(prev):
            _emit(events, flag, v, "ignored", f"help: {_quote(new, about=IGNORED)}", _help_successor(new, fb))
    # 3. A deprecated flag still parsed that nothing reads any more. Only deprecated ones: the index
    # holds megatron/core and megatron/training, and other code (megatron/inference, examples) may
    # read a flag that is not deprecated.
    ra, rb = a.get("reads") or {}, b.get("reads") or {}
    for flag, rec in sorted(fb.items()):
        dest = rec.get("dest")
        deprecated = DEPRECATED.search(rec.get("help") or "") or any(
            e[1] == "deprecated" for e in events.get(flag, []))
        if flag in fa and dest and deprecated and ra.get(dest, 0) > 0 and rb.get(dest, 1) == 0:
            _emit(events, flag, v, "ignored",
                  f"deprecated and never read: no code in megatron/core or megatron/training reads "
                  f"{dest} ({ra[dest]} reads in {a['version']}, 0 in {v})")
    # 4. Body changes of the watched functions, and one summary per watched module.
    ba, bb = a.get("bodies") or {}, b.get("bodies") or {}
    per_module: dict[str, list[str]] = {}
    totals: dict[str, list[int]] = {}
    for key in sorted(set(ba) & set(bb)):
        if ba[key] == bb[key]:
            continue
        sm = difflib.SequenceMatcher(None, ba[key], bb[key], autojunk=False)
        removed = sum(i2 - i1 for op, i1, i2, j1, j2 in sm.get_opcodes() if op in ("replace", "delete"))
        added = sum(j2 - j1 for op, i1, i2, j1, j2 in sm.get_opcodes() if op in ("replace", "insert"))
        detail = f"body: {added} lines added, {removed} removed (of {len(ba[key])}; code only, as ast prints it)"
        if key in cb:
            _emit(events, key, v, "body_changed", detail)
        mod = key.split(":", 1)[0]
        per_module.setdefault(mod, []).append(f"{key.split(':', 1)[1]} +{added} -{removed}")
        t = totals.setdefault(mod, [0, 0, 0])
        t[0] += added
        t[1] += removed
    for key in sorted(set(ba) ^ set(bb)):
        mod = key.split(":", 1)[0]
        t = totals.setdefault(mod, [0, 0, 0])
        per_module.setdefault(mod, []).append(f"{key.split(':', 1)[1]} {'added' if key in bb else 'removed'}")
    for mod, parts in sorted(per_module.items()):
        label = next((what for path, what in BODY_WATCH.items() if _module_of(path) == mod), "watched module")
        added, removed = totals[mod][0], totals[mod][1]
        _emit(events, mod, v, "body_changed",
              f"{label}: {added} code lines added, {removed} removed in {len(parts)} function(s): " + ", ".join(parts))

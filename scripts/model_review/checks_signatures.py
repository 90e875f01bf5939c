"""Keywords of Megatron Core constructors and spec functions against the chosen release's
real signatures (from the release index)."""

from __future__ import annotations

import ast
import re

from . import releases, targets

POSITIONAL = ("positional_only", "positional_or_keyword")
# Modules whose classes' signatures the index cannot give: Transformer Engine wrappers are
# built by __new__ (TENorm(config, hidden_size, eps)) or subclass TE itself, which the index
# never sees (the Megatron-Bridge control in tests/test_review_corpus.py).
UNCHECKED = ("megatron.core.extensions.transformer_engine:",)


def _found(ctx, obj_id, *args, **kwargs):
    """A finding that links the api-reference section documenting obj_id."""
    return ctx.finding(*args, reference=targets.reference(obj_id), **kwargs)


def _params(ctx, obj_id):
    """(params without self, accepts **kwargs) of obj_id in the chosen release, following
    FORWARDS; None when the index has no signature."""
    sig = ctx.view.signature(obj_id)
    if sig is None:
        return None
    params = _own(obj_id, sig["params"])
    var_kw = any(p["kind"] == "var_keyword" for p in params)
    fwd = targets.FORWARDS.get(obj_id)
    if var_kw and fwd:
        more = ctx.view.signature(fwd)
        if more:
            names = {p["name"] for p in params}
            # The forwarder may fill the target's required parameters itself (MambaModel
            # maps mamba_stack_spec to hybrid_stack_spec): they are accepted, not required.
            params += [dict(p, default=p["default"] or "<forwarded>")
                       for p in _own(fwd, more["params"]) if p["name"] not in names]
            var_kw = any(p["kind"] == "var_keyword" for p in more["params"])
    return params, var_kw


def _own(obj_id, params):
    """The parameters a caller fills: the index keeps ``self``/``cls`` for methods
    ('module:Class.method') only; a class's or function's first parameter named ``cls``
    (BlendedMegatronDatasetBuilder(cls, sizes, ...)) is a real one."""
    if "." in obj_id.partition(":")[2] and params and params[0]["name"] in ("self", "cls"):
        return params[1:]
    return list(params)


def checked_calls(ctx):
    """(call, obj_id, params, accepts_kwargs) for every call of a checked object (computed
    once per file and release: several rules read it)."""
    key = ("checked_calls", ctx.version)
    cache = ctx.source.cache
    if key not in cache:
        params_of, out = {}, []
        for call in ctx.source.calls:
            obj_id = ctx.resolve_call(call)
            if obj_id is None or not targets.is_checked(obj_id, ctx.view) or \
                    obj_id.startswith(UNCHECKED):
                continue
            if obj_id not in params_of:
                params_of[obj_id] = _params(ctx, obj_id)
            got = params_of[obj_id]
            if got is not None:
                out.append((call, obj_id, got[0], got[1]))
        cache[key] = out
    return cache[key]


def _bad_keywords(ctx):
    """(call, obj_id, keyword, valid names, releases that had it) for keywords the release
    does not accept."""
    for call, obj_id, params, var_kw in checked_calls(ctx):
        if var_kw:
            continue
        valid = [p["name"] for p in params if p["kind"] not in ("var_positional", "var_keyword",
                                                                 "positional_only")]
        for kw in call.all_kwargs():
            if kw not in valid:
                yield call, obj_id, kw, _free(call, params, valid), \
                    releases.param_history(ctx.index, obj_id, kw)


def _free(call, params, valid):
    """Parameters the call does not fill yet (by keyword or position): the only ones a
    renamed keyword can be meant for."""
    slots = [p["name"] for p in params if p["kind"] in POSITIONAL][:call.n_positional]
    return [v for v in valid if v not in call.all_kwargs() and v not in slots]


def _where(call, kw):
    """(line, how the fix is applied): a written keyword, or a key of the ``**`` dict."""
    if kw in call.kw_lines:
        return call.kw_lines[kw], ""
    return call.splat[kw], " (a key of the dict passed with **)"


def _rename(call, kw, new):
    if kw in call.kw_lines:
        return f"{new}=..." if new else f"remove {kw}="
    return f"key {new!r}" if new else f"remove key {kw!r}"


def unknown_keywords(ctx):
    for call, obj_id, kw, valid, history in _bad_keywords(ctx):
        if history:
            continue  # another release has it: removed-keyword (or not yet added) reports it
        near = releases.nearest(kw, valid)
        line, how = _where(call, kw)
        yield _found(ctx, obj_id,
            line,
            f"{targets.short(obj_id)}() has no keyword {kw!r} in {ctx.version} "
            f"({obj_id}){how}; it raises TypeError: ... got an unexpected keyword argument "
            f"'{kw}'",
            _rename(call, kw, near),
            versions=f"every indexed release ({', '.join(ctx.index.RELEASES)})")


def removed_keywords(ctx):
    for call, obj_id, kw, valid, history in _bad_keywords(ctx):
        if not history:
            continue
        later = [v for v in ctx.index.RELEASES if releases.vkey(v) > releases.vkey(history[-1])]
        if releases.vkey(ctx.version) > releases.vkey(history[-1]):
            when = f"removed after {history[-1]} (absent from {later[0]})" if later else "removed"
        else:
            when = f"added in {history[0]}"
        succ = releases.successor(ctx.index, obj_id, kw) or releases.nearest(kw, valid)
        if succ and succ in call.all_kwargs():
            succ = None  # the call already passes it: the old keyword only goes
        line, how = _where(call, kw)
        yield _found(ctx, obj_id,
            line,
            f"{targets.short(obj_id)}() ({obj_id}) keyword {kw!r} is not accepted by "
            f"{ctx.version}: {when}{how}; "
            f"it raises TypeError (unexpected keyword argument)",
            _rename(call, kw, succ),
            versions=f"has {kw}: {', '.join(history)}")


def deprecated_keywords(ctx):
    """A keyword the release accepts but warns about: the release's own warning or log
    message names it next to 'deprecat' in the object's source file."""
    by_file = {}
    for m in ctx.view.messages():
        if m.get("kind") in ("warn", "log") and "deprecat" in m.get("text", "").lower():
            by_file.setdefault(m.get("file"), []).append(m)
    seen = {}
    for call, obj_id, params, _ in checked_calls(ctx):
        paths = []
        # A forwarding constructor hands its keywords on: the receiver's messages count too
        # (MambaModel -> HybridModel).
        for oid in (obj_id, targets.FORWARDS.get(obj_id)):
            sig = ctx.view.signature(oid) if oid else None
            if sig:
                paths.append((sig.get("source") or "").rpartition(":")[0])
        msgs = [m for path in paths for m in by_file.get(path, [])]
        names = {p["name"] for p in params}
        for kw, kw_line in call.all_kwargs().items():
            if kw not in names:
                continue
            if (tuple(paths), kw) not in seen:
                seen[(tuple(paths), kw)] = next((m for m in msgs if _deprecates(m["text"], kw)),
                                                None)
            hit = seen[(tuple(paths), kw)]
            if hit:
                yield _found(ctx, obj_id,
                    kw_line,
                    f"{targets.short(obj_id)}() keyword {kw!r} is deprecated in {ctx.version}: "
                    f"{hit['file']}:{hit['line']} says \"{hit['text']}\"",
                    _rename(call, kw, _instead(hit["text"], names)))


def _instead(text, names):
    """The parameter the message names as the replacement ('Use hybrid_layer_pattern
    instead'), when the callee has it; None: the keyword only goes."""
    m = re.search(r"[Uu]se [`'\"]?(\w+)[`'\"]? instead", text)
    return m.group(1) if m and m.group(1) in names else None


def _deprecates(text, kw):
    """Whether the message says ``kw`` is deprecated: the name, as a whole name (not part of a
    flag such as --moe-router-padding-for-fp8), comes before 'deprecat' in that sentence and is
    not followed by a quoted value (cuda_graph_modules '{}' is deprecated: a value, not the
    keyword).  "hybrid_override_pattern has been deprecated. Use hybrid_layer_pattern
    instead." deprecates the first name only."""
    name = re.compile(rf"(?<![\w-]){re.escape(kw)}(?![\w-])(?!\s*['\"])")
    for sentence in re.split(r"(?<=[.;])\s+", text):
        head, found, _ = sentence.partition("deprecat")
        if found and name.search(head):
            return True
    return False


def missing_required(ctx):
    for call, obj_id, params, _ in checked_calls(ctx):
        if call.has_star_args or (call.has_star_kwargs and not call.splat_known):
            continue
        given = call.all_kwargs()
        for i, p in enumerate(params):
            if p["default"] is not None or p["kind"] in ("var_positional", "var_keyword"):
                continue
            if p["kind"] in POSITIONAL and i < call.n_positional:
                continue
            if p["name"] in given:
                continue
            yield _found(ctx, obj_id,
                call.line,
                f"{targets.short(obj_id)}() requires {p['name']!r} in {ctx.version} ({obj_id}) and the "
                f"call does not pass it (TypeError: missing a required argument)",
                f"{p['name']}=...")


def too_many_positional(ctx):
    for call, obj_id, params, _ in checked_calls(ctx):
        if any(p["kind"] == "var_positional" for p in params):
            continue
        positional = [p for p in params if p["kind"] in POSITIONAL]
        if call.n_positional > len(positional):
            yield _found(ctx, obj_id,
                call.line,
                f"{targets.short(obj_id)}() takes {len(positional)} positional arguments in "
                f"{ctx.version}; the call passes {call.n_positional}",
                "pass the extra arguments by keyword: "
                + ", ".join(p["name"] for p in params if p["kind"] != "var_keyword"))


# A spec parameter and the config field it carries, where the names differ.
ALIASES = {"num_experts": "num_moe_experts"}


def positional_mismatch(ctx):
    """A positional argument that names a config setting (``config.X`` or ``X``) but lands in
    a parameter of another name: the setting goes to the wrong place, silently."""
    fields = {f["name"] for f in (ctx.view.fields(targets.TC) or [])}
    for call, obj_id, params, _ in checked_calls(ctx):
        if not targets.is_checked(obj_id):
            continue  # a layer's sizes (ColumnParallelLinear(config.hidden_size, ...)) are
            # values, not settings: only configs and spec builders take settings by name
        slots = [p for p in params if p["kind"] in POSITIONAL]
        names = {p["name"] for p in params}
        for arg, slot in zip(call.node.args, slots):
            said = _named(arg)
            if said is None or said not in fields or said in (slot["name"],
                                                                ALIASES.get(slot["name"])):
                continue
            where = (f"its parameter {said!r} is elsewhere" if said in names
                     else f"it has no parameter {said!r}")
            yield _found(ctx, obj_id,
                arg.lineno,
                f"positional argument {ast.unparse(arg)} lands in parameter {slot['name']!r} of "
                f"{targets.short(obj_id)}() in {ctx.version}; {where}",
                f"{said}={ast.unparse(arg)}" if said in names else
                f"drop it, or pass {slot['name']}= by keyword")


def _named(node):
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None

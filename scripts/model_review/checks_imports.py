"""Imports that do not resolve in the chosen release, and names that are only a MagicMock
placeholder where Transformer Engine is not installed."""

from __future__ import annotations

import re

from . import releases

# Names whose objects are Transformer Engine classes, or specs made of them, with what fails
# without TE (megatron/core/extensions/transformer_engine.py binds ``te`` to
# ``unittest.mock.MagicMock()`` and the TE spec provider to None, so the imports succeed).
# tests/test_review_te.py reproduces each failure: (exception, fixed text of its message).
TE_MODULES = ("megatron.core.extensions.transformer_engine",)
SPEC_FAILS = ("TypeError", "'NoneType' object is not callable")
STACK_FAILS = ("StopIteration", " when instantiating ")
TE_OBJECTS = {
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_with_transformer_engine_spec":
        SPEC_FAILS,
    "megatron.core.models.hybrid.hybrid_layer_specs:hybrid_stack_spec": STACK_FAILS,
    "megatron.core.models.mamba.mamba_layer_specs:mamba_stack_spec": STACK_FAILS,
}
# Spec functions that pick TE classes when a keyword says so.
TE_WHEN = {
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_decoder_block_spec":
        ("use_transformer_engine", True, SPEC_FAILS),
}
LOCAL_FIX = ("use the local spec (get_gpt_layer_local_spec) on machines without Transformer "
             "Engine, or install Transformer Engine")


def te_uses(ctx):
    """Lines that use a TE-only name (what te_placeholders would report), for the note."""
    if releases.vkey(ctx.version) < releases.vkey(MAGICMOCK_SINCE):
        return []
    return [imp.line for imp in ctx.source.imports
            if _te_failure(ctx, imp.origin if imp.name else imp.module)]


def unresolved_imports(ctx):
    for f in _unresolved(ctx):
        if f.line in ctx.source.guarded_lines and f.severity == "error":
            # inside try/except ImportError: the code falls back; a fact, not a break
            f.severity = "info"
            f.message += " (the import is inside a try that catches ImportError: the code " \
                         "falls back)"
        yield f


def _unresolved(ctx):
    view = ctx.view
    for imp in ctx.source.imports:
        if not imp.module.startswith("megatron.") or not view.covers(imp.module):
            continue
        if imp.name is None:
            if view.has_module(imp.module) or _is_package_of_known(view, imp.module):
                continue
            yield ctx.finding(imp.line, f"module {imp.module} does not exist in {ctx.version}",
                              _where(view, imp.module.rpartition(".")[2]))
            continue
        if not view.has_module(imp.module):
            yield ctx.finding(
                imp.line, f"module {imp.module} does not exist in {ctx.version}",
                _where(view, imp.name, imp))
            continue
        if imp.name.startswith("_") or imp.name in view.names(imp.module) or \
                view.has_module(f"{imp.module}.{imp.name}"):
            continue  # the index keeps public names only; a re-export may lead to a private module
        exports = sorted(view.names(imp.module))
        said = (f"{imp.module} has no name {imp.name!r} in {ctx.version} "
                + (f"(it exports {len(exports)} names)" if exports else "(it exports nothing)"))
        had = _releases_of(ctx, f"{imp.module}:{imp.name}")
        if had:  # the index saw it here in other releases: removed (or not yet added)
            yield ctx.finding(imp.line, f"{said}; it is there in {', '.join(had)}",
                              _where(view, imp.name, imp))
        elif _is_package_of_known(view, imp.module):  # a package __init__ (hybrid: empty)
            yield ctx.finding(imp.line, said, _where(view, imp.name, imp))
        else:
            # A plain module may bind the name from another package (fp8_utils binds
            # FP8_TENSOR_CLASS from Transformer Engine); the index records megatron names only.
            yield ctx.finding(imp.line, said + " (a name the module binds from another package "
                              "cannot be checked: the index records megatron names only)",
                              _where(view, imp.name, imp), severity="warning")


def _releases_of(ctx, key):
    """Indexed releases whose module has the name (defined there, or imported: the index's
    catalog lists defined names only, so re-exports are looked up release by release)."""
    found = tuple(ctx.index.releases_of(key))
    if found:
        return found
    module, _, name = key.partition(":")
    out = []
    for version in ctx.index.RELEASES:
        if name in (ctx.index.load(version).names(module) or {}):
            out.append(version)
    return tuple(out)


def _is_package_of_known(view, module):
    return any(m.startswith(module + ".") for m in view._modules)


def _where(view, name, imp=None):
    defs = view.find_definitions(name)
    if not defs:
        return f"remove the import of {name}: no module of this release defines it"
    module, _, obj = defs[0].partition(":")
    alias = f" as {imp.local}" if imp is not None and imp.local != name else ""
    return f"from {module} import {obj}{alias}"


MAGICMOCK_SINCE = "0.13.1"  # first indexed release whose TE module falls back to MagicMock


def te_placeholders(ctx):
    """Per import, only where the user declared that the target has no Transformer Engine
    (--target-te absent): otherwise it is a fact about this machine, reported once per run
    by review.environment(), not about the code."""
    if ctx.has_te or ctx.target_te is None or \
            releases.vkey(ctx.version) < releases.vkey(MAGICMOCK_SINCE):
        return
    seen = set()
    for imp in ctx.source.imports:
        target = imp.origin if imp.name else imp.module
        what = _te_failure(ctx, target)
        if what:
            yield ctx.finding(
                imp.line,
                f"Transformer Engine is not installed here: {imp.origin.replace(':', '.')} "
                f"imports, but {what}", LOCAL_FIX)
    for call in ctx.source.calls:
        obj_id = ctx.resolve_call(call)
        cond = TE_WHEN.get(obj_id or "")
        if cond and call.literal(cond[0]) == cond[1]:
            yield ctx.finding(
                call.line,
                f"Transformer Engine is not installed here: {call.text}({cond[0]}="
                f"{cond[1]!r}) {_fails(cond[2], 'calling it')}",
                f"{cond[0]}=False, or install Transformer Engine")


def _fails(failure, when):
    exc, text = failure
    return f"{when} raises {exc} ({text!r})"


def _te_failure(ctx, target):
    if target.startswith(TE_MODULES):
        return "its TE wrappers subclass a MagicMock and fail when built"
    resolved = ctx.view.resolve(target) if ctx.view is not None else target
    failure = TE_OBJECTS.get(resolved or target)
    if failure is None:
        return None
    return _fails(failure, "calling it" if failure is SPEC_FAILS else "building a model from it")


def _module_file(module):
    return module.replace(".", "/")


def deprecated_modules(ctx):
    """An import of a module whose own file warns at import time that it is deprecated (a
    module-level warnings.warn or log naming 'deprecat', from the release index's messages):
    custom_layers.transformer_engine through 0.16.1."""
    notes = {}
    for m in ctx.view.messages():
        if m.get("kind") in ("warn", "log") and "deprecat" in m.get("text", "").lower() and \
                m.get("function") in (None, "", "<module>"):
            notes[m["file"]] = m
    if not notes:
        return
    seen = set()
    for imp in ctx.source.imports:
        if not imp.module.startswith("megatron.") or (imp.line, imp.module) in seen:
            continue
        seen.add((imp.line, imp.module))
        base = _module_file(imp.module)
        hit = notes.get(base + ".py") or notes.get(base + "/__init__.py")
        if hit is None:
            continue
        text = " ".join(hit["text"].split())
        succ = re.search(r"[Uu]se '?(megatron[\w.]+)'? instead", text)
        names = ", ".join(i.name + (f" as {i.local}" if i.local != i.name else "")
                          for i in ctx.source.imports
                          if i.line == imp.line and i.module == imp.module and i.name)
        fix = (f"from {succ.group(1)} import {names}" if succ and names else
               f"import {succ.group(1)}" if succ else "see the message for the replacement")
        yield ctx.finding(
            imp.line,
            f"module {imp.module} warns when imported in {ctx.version}: {hit['file']}:"
            f"{hit['line']} says \"{text}\"", fix)

"""Attributes the code reads from Megatron: module functions called as attributes
(``mpu.get_pipeline_model_parallel_split_rank()``) and config fields (``config.x``,
``self.config.x``) that the chosen release does not have, though another indexed release
does (removed, renamed, or not yet added)."""

from __future__ import annotations

from . import releases, source, targets


def _history(ctx, key, lookup):
    """Indexed releases (oldest first) where lookup(release) has ``key``."""
    memo = ctx.index.__dict__.setdefault("_review_history", {}) if hasattr(
        ctx.index, "__dict__") else {}
    if key not in memo:
        out = []
        for version in ctx.index.RELEASES:
            try:
                if lookup(ctx.index.load(version)):
                    out.append(version)
            except Exception:  # noqa: BLE001 (a release the index cannot load: no verdict)
                continue
        memo[key] = tuple(out)
    return memo[key]


def _when(ctx, had):
    """'removed after 0.17.1 (absent from 0.18.2)' or 'added in 0.16.1'."""
    if releases.vkey(ctx.version) > releases.vkey(had[-1]):
        later = [v for v in ctx.index.RELEASES if releases.vkey(v) > releases.vkey(had[-1])]
        return f"removed after {had[-1]}" + (f" (absent from {later[0]})" if later else "")
    return f"added in {had[0]}"


def removed_attributes(ctx):
    """A call of ``module.name`` where the release's module has no ``name``: AttributeError."""
    view = ctx.view
    guarded = {imp.local for imp in ctx.source.imports if imp.line in ctx.source.guarded_lines}
    for call in ctx.source.calls:
        if "." not in call.text or call.text.partition(".")[0] in guarded:
            # a bare name's absence is its import's finding (unresolved-import); a name
            # imported in a try that falls back is expected to be absent
            continue
        module, _, name = (call.target or "").partition(":")
        if not module.startswith("megatron.") or not name or "." in name or \
                name.startswith("_") or not view.has_module(module):
            continue
        if name in view.names(module) or view.has_module(f"{module}.{name}") or \
                ctx.resolve_call(call) or (call.line, name) in ctx.source.feature_checked:
            continue
        had = _history(ctx, f"attr:{module}:{name}",
                       lambda rel: name in (rel.names(module) or {}))
        if not had:
            continue  # never indexed there: a name bound from another package, no verdict
        succ = _moved(ctx, module, name)
        yield ctx.finding(
            call.line,
            f"{call.text}() calls {module}.{name}, which {ctx.version} does not have "
            f"({_when(ctx, had)}; there in {', '.join(had)}): AttributeError: module "
            f"'{module}' has no attribute '{name}'",
            f"{succ}()" if succ else
            f"({call.text}() if hasattr({call.text.rpartition('.')[0]}, {name!r}) else None)",
            versions=f"has {name}: {', '.join(had)}")


def _moved(ctx, module, name):
    """The successor the index's change events record for module.name, if any."""
    events = getattr(ctx.index, "events", None)
    try:
        found = events(f"{module}:{name}") if events else []
    except Exception:  # noqa: BLE001
        return None
    for ev in found or []:
        if ev.get("change") in ("removed", "renamed", "moved") and ev.get("successor"):
            return ev["successor"]
    return None


def _tc_fields(rel):
    return {f["name"] for f in (rel.fields(targets.TC) or [])}


def config_fields(ctx):
    """``config.x`` where TransformerConfig has no field x in the release but another release
    has: the read raises AttributeError.  Names the file stores itself (``config.x = ...``)
    or declares in a class are the code's own and are left alone."""
    if not ctx.source.attr_reads:
        return
    fields = _tc_fields(ctx.view.rel) if hasattr(ctx.view, "rel") else set()
    own = set(ctx.source.stored_attrs)
    for cls in ctx.source.classes:
        own |= cls.fields
    seen, known = set(), {}
    for read in ctx.source.attr_reads:
        if read.func is None:
            continue
        if id(read.func) not in known:
            known[id(read.func)] = _megatron_configs(ctx, read.func)
        if read.base not in known[id(read.func)]:
            continue  # not shown to be a Megatron config (an HF config has other fields)
        attr = read.attr
        if attr in fields or attr in own or attr.startswith("_") or (attr, read.line) in seen \
                or (read.line, attr) in ctx.source.feature_checked:
            continue
        had = _history(ctx, f"field:{attr}", lambda rel: attr in _tc_fields(rel))
        if not had:
            continue  # not a TransformerConfig field in any release: another object's attribute
        seen.add((attr, read.line))
        succ = releases.successor(ctx.index, targets.TC, attr)
        yield ctx.finding(
            read.line,
            f"{read.base}.{attr}: TransformerConfig has no field {attr!r} in {ctx.version} "
            f"({_when(ctx, had)}; a field in {', '.join(had)}); reading it raises "
            f"AttributeError: 'TransformerConfig' object has no attribute '{attr}'",
            f"{read.base}.{succ}" if succ else f"getattr({read.base}, {attr!r}, None)",
            versions=f"has {attr}: {', '.join(had)}")


def _megatron_base(ctx, cls, depth=0):
    """Whether ``cls`` derives from a megatron class (through the file's own classes)."""
    if cls is None or depth > 4:
        return False
    for base in cls.bases:
        if base.startswith("megatron."):
            return True
        local = next((c for c in ctx.source.classes if c.name == base and c is not cls), None)
        if local is not None and _megatron_base(ctx, local, depth + 1):
            return True
    return False


def _megatron_configs(ctx, func):
    """The names that hold a Megatron config in ``func``: a parameter annotated with a
    TransformerConfig, a name passed as the ``config`` argument of a Megatron callable, the
    ``config`` of a method of a Megatron subclass (and its self.config), or a config the
    function builds.  Anything else named config may be another library's (HF) config."""
    out = set()
    for name, note in func.annotations.items():
        if "TransformerConfig" in note or "ModelParallelConfig" in note:
            out.add(name)
    if _megatron_base(ctx, func.cls):
        out |= {"self.config", "config"}
    for call in ctx.source.calls:
        if call.func is not func:
            continue
        obj_id = ctx.resolve_call(call)
        if not obj_id:
            continue
        if obj_id in targets.CONFIGS:
            out.add("config")
        for kw, node in call.kwargs.items():
            if kw in ("config", "transformer_config"):
                out.add(source.dotted(node) or "")
        sig = ctx.view.signature(obj_id) if ctx.view is not None else None
        slots = [p["name"] for p in (sig or {}).get("params", [])
                 if p["kind"] in ("positional_only", "positional_or_keyword")]
        for slot, arg in zip(slots, call.node.args):
            if slot in ("config", "transformer_config"):
                out.add(source.dotted(arg) or "")
    return out

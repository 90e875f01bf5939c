"""Global process-group reads (``parallel_state.get_*_group()``, ranks, world sizes) in
module code and in functions that receive, or build objects that take, a pg_collection."""

from __future__ import annotations

import ast
import re

from . import targets
from .source import _canonical

PS_MODULES = ("megatron.core.parallel_state", "megatron.core.mpu")
GETTER = re.compile(r"^get_(\w+?)_(group|groups|rank|world_size)$")
# parallel_state getter -> the ProcessGroupCollection field that holds the same group, as
# ProcessGroupCollection.use_mpu_process_groups maps them (0.19.2,
# megatron/core/process_groups_config.py; tests/test_review_rules.py re-reads that map).
GROUP_FIELDS = {
    "get_tensor_model_parallel_group": "tp",
    "get_pipeline_model_parallel_group": "pp",
    "get_model_parallel_group": "mp",
    "get_context_parallel_group": "cp",
    "get_tensor_and_context_parallel_group": "tp_cp",
    "get_expert_model_parallel_group": "ep",
    "get_expert_tensor_parallel_group": "expt_tp",
    "get_expert_tensor_and_model_parallel_group": "tp_ep",
    "get_expert_tensor_model_pipeline_parallel_group": "tp_ep_pp",
    "get_embedding_group": "embd",
    "get_position_embedding_group": "pos_embd",
    "get_data_parallel_group": "dp",
}
# Modules whose classes keep the collection they receive as ``self.pg_collection`` (0.19.2;
# tests/test_review_groups.py re-reads each installed file for the assignment).
STORES_PG = (
    "megatron.core.models.common.language_module.language_module",
    "megatron.core.models.gpt.gpt_model",  # through LanguageModule
    "megatron.core.models.hybrid.hybrid_model",  # through LanguageModule
    "megatron.core.models.hybrid.hybrid_block",
    "megatron.core.transformer.attention",
    "megatron.core.transformer.dot_product_attention",
    "megatron.core.transformer.transformer_block",
    "megatron.core.transformer.transformer_layer",
    "megatron.core.transformer.module",
    "megatron.core.ssm.mamba_mixer",
)
PGC_ANNOTATION = re.compile(r"\bProcessGroupCollection\b")


def _param_collection(func):
    """The parameter of ``func`` that is a process-group collection, or None."""
    if func is None:
        return None
    for p in func.params:
        if p == "pg_collection" or PGC_ANNOTATION.search(func.annotations.get(p, "")):
            return p
    return None


def _class_collection(ctx, cls, depth=0):
    """How a method of ``cls`` reaches a collection (``self.pg_collection``), or None: an
    attribute set from a collection parameter, or a megatron base that takes pg_collection
    in this release and keeps it."""
    if cls is None or depth > 3:
        return None
    inits = [f for f in ctx.source.functions if f.cls is cls and f.name == "__init__"]
    for attr, value in cls.self_attrs.items():
        if value is not None and any(value == _param_collection(f) for f in inits):
            return f"self.{attr}"
    for base in cls.bases:
        local = next((c for c in ctx.source.classes if c.name == base and c is not cls), None)
        if local is not None:
            got = _class_collection(ctx, local, depth + 1)
            if got:
                return got
            continue
        if not base.startswith("megatron.") or ctx.view is None:
            continue
        resolved = ctx.view.resolve(_canonical(base))
        sig = ctx.view.signature(resolved) if resolved else None
        if sig and any(p["name"] == "pg_collection" for p in sig["params"]) and \
                resolved.partition(":")[0] in STORES_PG:
            return "self.pg_collection"
    return None


def collection_in_scope(ctx, call):
    """(variable, how) for the collection a call can use instead of the global state."""
    var = _param_collection(call.func)
    if var:
        return var, f"{call.func.name}() receives {var}"
    var = _class_collection(ctx, call.cls)
    if var and _sees_self(call.func) and not _before_super_init(ctx, call):
        return var, f"class {call.cls.name} keeps it as {var}"
    return None


def _sees_self(func):
    """Whether code in ``func`` can reach ``self``: a method, or a function nested in one
    (a closure); not a staticmethod, not a class-level helper without ``self``."""
    while func is not None:
        if getattr(func, "static", False):
            return False
        if func.params and func.params[0] == "self":
            return True
        func = getattr(func, "outer", None)
    return False


def _before_super_init(ctx, call):
    """A read in __init__ above its super().__init__(...): self.pg_collection is not set yet."""
    if call.func is None or call.func.name != "__init__":
        return False
    return any(c.func is call.func and c.line > call.line and c.text.endswith("__init__")
               and "super" in ast.unparse(c.node.func) for c in ctx.source.calls)


def replacement(getter, var="pg_collection"):
    m = GETTER.match(getter)
    if not m:
        return None
    group = getter if m.group(2) == "group" else f"get_{m.group(1)}_group"
    field = GROUP_FIELDS.get(group)
    if field is None:
        return None
    if m.group(2) == "rank":
        return f"{var}.{field}.rank()"
    if m.group(2) == "world_size":
        return f"{var}.{field}.size()"
    return f"{var}.{field}"


def global_groups(ctx):
    """A global getter where a collection is in scope: the code has the right groups at hand
    and reads the global ones.  Elsewhere (no collection in scope), one info note per file."""
    elsewhere = []
    for call in ctx.source.calls:
        module, _, name = (call.target or "").partition(":")
        if module not in PS_MODULES or not GETTER.match(name):
            continue
        scope = collection_in_scope(ctx, call)
        if scope is None or replacement(name) is None:
            # no collection here, or a getter the collection has no group for (the virtual
            # pipeline rank): the global read is the only one there is
            elsewhere.append(call)
            continue
        var, how = scope
        repl = replacement(name, var)
        yield ctx.finding(
            call.line,
            f"{call.text}() reads the global parallel_state although {how}: it ignores the "
            f"process groups passed in (wrong groups under a custom layout, fails before "
            f"initialize_model_parallel)",
            f"use {repl}")
    if elsewhere:
        first = elsewhere[0]
        yield ctx.finding(
            first.line,
            f"{len(elsewhere)} global parallel_state read(s) in code with no process-group "
            f"collection in scope (first: {first.text}()); right while the default groups "
            f"from initialize_model_parallel are the ones in use",
            "", severity="info")

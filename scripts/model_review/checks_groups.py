"""Global process-group reads (``parallel_state.get_*_group()``, ranks, world sizes) in
module code and in functions that receive, or build objects that take, a pg_collection."""

from __future__ import annotations

import re

from . import targets

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
# Base classes that make a class nn.Module code (resolved names, or their last part).
MODULE_BASES = re.compile(r"(^torch\.nn[.:]Module$|(^|[.:])(Module|MegatronModule|LanguageModule)$)")


def _is_module_class(cls):
    return cls is not None and any(MODULE_BASES.search(b) for b in cls.bases)


def _pg_functions(ctx):
    """Functions that take pg_collection, or construct a Megatron object that does."""
    takes = {id(f) for f in ctx.source.functions if "pg_collection" in f.params}
    for call in ctx.source.calls:
        if call.func is None or id(call.func) in takes:
            continue
        obj_id = ctx.resolve_call(call)
        if obj_id is None or obj_id not in targets.CLASSES:
            continue
        accepts = True
        if ctx.view is not None:
            sig = ctx.view.signature(obj_id)
            accepts = bool(sig) and any(p["name"] == "pg_collection" for p in sig["params"])
        if accepts:
            takes.add(id(call.func))
    return takes


def replacement(getter):
    m = GETTER.match(getter)
    if not m:
        return None
    group = getter if m.group(2) == "group" else f"get_{m.group(1)}_group"
    field = GROUP_FIELDS.get(group)
    if field is None:
        return None
    if m.group(2) == "rank":
        return f"pg_collection.{field}.rank()"
    if m.group(2) == "world_size":
        return f"pg_collection.{field}.size()"
    return f"pg_collection.{field}"


def global_groups(ctx):
    pg_funcs = _pg_functions(ctx)
    for call in ctx.source.calls:
        module, _, name = (call.target or "").partition(":")
        if module not in PS_MODULES or not GETTER.match(name):
            continue
        where = None
        if _is_module_class(call.cls):
            where = f"inside the nn.Module class {call.cls.name}"
        elif call.func is not None and id(call.func) in pg_funcs:
            where = (f"inside {call.func.name}(), which "
                     + ("receives a pg_collection" if "pg_collection" in call.func.params
                        else "builds a Megatron object that takes pg_collection"))
        if where is None:
            continue
        repl = replacement(name)
        yield ctx.finding(
            call.line,
            f"{call.text}() reads the global parallel_state {where}: it ignores the "
            f"process groups passed in pg_collection (wrong groups under a custom layout, "
            f"fails before initialize_model_parallel)",
            f"use {repl}" if repl else "take the group from pg_collection")

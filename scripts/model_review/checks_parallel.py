"""The config's parallel sizes against those the same code gives
``parallel_state.initialize_model_parallel``: a TransformerConfig with
tensor_model_parallel_size=1 under a TP=2 group builds without a word (the layers take the
group's size), and every check TransformerConfig.__post_init__ makes ran for the wrong size
(tests/test_review_parallel_sizes.py builds both on two gloo ranks)."""

from __future__ import annotations

from . import source, targets

INIT = "megatron.core.parallel_state:initialize_model_parallel"
# initialize_model_parallel keyword -> the config field that must carry the same size.
SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
         "virtual_pipeline_model_parallel_size", "context_parallel_size",
         "expert_model_parallel_size", "expert_tensor_parallel_size")
SENTINEL = object()


def _given(call, params):
    """{name: node} the call passes, positional slots named from the signature."""
    order = [p["name"] for p in params if p["kind"] in ("positional_only",
                                                          "positional_or_keyword")]
    out = dict(zip(order, call.node.args))
    out.update(call.all_values())
    return out


def _value(nodes, defaults, name):
    if name in nodes:
        return source.literal(nodes[name], SENTINEL), True
    return source.literal(defaults.get(name) or "None", SENTINEL), False


def _effective(values, name):
    """expert_tensor_parallel_size None means 'the tensor parallel size' on both sides."""
    v = values[name][0]
    if name == "expert_tensor_parallel_size" and v is None:
        return values["tensor_model_parallel_size"][0]
    if name == "virtual_pipeline_model_parallel_size" and v == 1:
        return None
    return v


def parallel_size_mismatch(ctx):
    inits = [c for c in ctx.source.calls if ctx.resolve_call(c) and
             ctx.resolve_call(c).endswith(":initialize_model_parallel") and
             ctx.resolve_call(c).startswith("megatron.core.parallel_state")]
    if not inits:
        return
    configs = [c for c in ctx.source.calls if ctx.resolve_call(c) in targets.CONFIGS]
    init_sig = ctx.view.signature(ctx.resolve_call(inits[0])) or {"params": []}
    init_defaults = {p["name"]: p["default"] for p in init_sig["params"]}
    for config in configs:
        if config.has_star_args or (config.has_star_kwargs and not config.splat_known):
            continue
        same = [i for i in inits if i.func is config.func] or (inits if len(inits) == 1 else [])
        if len(same) != 1:
            continue
        init = same[0]
        fields = {f["name"]: f.get("default") for f in
                  (ctx.view.fields(ctx.resolve_call(config)) or [])}
        cfg_nodes = config.all_values()
        init_nodes = _given(init, init_sig["params"])
        cv = {n: _value(cfg_nodes, fields, n) for n in SIZES}
        iv = {n: _value(init_nodes, init_defaults, n) for n in SIZES}
        for name in SIZES:
            if name not in fields or name not in init_defaults:
                continue
            a, b = _effective(cv, name), _effective(iv, name)
            if SENTINEL in (a, b) or a == b or not (cv[name][1] or iv[name][1]):
                continue
            yield ctx.finding(
                config.line,
                f"the config sets {name}={a!r}{'' if cv[name][1] else ' (its default)'} while "
                f"initialize_model_parallel (line {init.line}) builds the groups with "
                f"{name}={b!r}: the layers take the group's size and build without a word, "
                f"while every check TransformerConfig makes ran for {a!r}",
                f"{name}={b!r}")

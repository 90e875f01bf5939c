"""Config and spec agree: a layer-spec builder's parameter that is also a config field
(``qk_layernorm``, ``normalization``, ``num_experts``/``num_moe_experts`` ...) must carry the
value the same code gives the config, because the spec, not the config, decides what is
built.  The pairs are derived from the release index (spec parameters against the config's
fields); a pair is flagged only for the spec functions in PROVEN and only where
tests/test_review_pairs.py builds both ways and sees a different module."""

from __future__ import annotations

from . import checks_signatures, source, targets

ALIASES = checks_signatures.ALIASES
# Spec functions whose pairs the tests build both ways without Transformer Engine.
PROVEN = (
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_local_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_decoder_block_spec",
)
# Derived pairs not flagged, and why.  tests/test_review_pairs.py builds every other derived
# pair both ways (spec value vs spec default, same config) and sees a different module, and
# checks the "config decides" reasons by building both ways and seeing the same module.
NOT_FLAGGED = {
    "fp8": "accepted and ignored by the spec builders (an unused argument)",
    "use_kitchen": "needs the kitchen extension, absent here",
    "use_kitchen_attention": "needs the kitchen extension, absent here",
    "kitchen_attention_backend": "needs the kitchen extension, absent here",
    "moe_grouped_gemm": "config decides: the local spec builds the same module either way",
    "normalization": "config decides: the local spec builds the same module either way",
    "multi_latent_attention": "MLA attention needs CUDA to build: not proven on CPU",
}
SENTINEL = object()


def _literal(node):
    return source.literal(node, SENTINEL)


def _default(text):
    return SENTINEL if text is None else source.literal(text, SENTINEL)


def pairs(view, spec_id, config_id=targets.TC):
    """[(spec parameter, config field, spec default, config default)] in this release."""
    key = ("pairs", spec_id, config_id, tuple(NOT_FLAGGED))
    if key not in view.memo:
        view.memo[key] = _pairs(view, spec_id, config_id)
    return view.memo[key]


def _pairs(view, spec_id, config_id):
    sig = view.signature(spec_id)
    fields = view.fields(config_id) or []
    by_name = {f["name"]: f for f in fields}
    out = []
    for p in (sig or {}).get("params", []):
        field = by_name.get(ALIASES.get(p["name"], p["name"]))
        if field is not None and p["name"] not in NOT_FLAGGED:
            out.append((p["name"], field["name"], _default(p["default"]),
                        _default(field.get("default"))))
    return out


def spec_config_mismatch(ctx):
    configs = []
    for call in ctx.source.calls:
        obj_id = ctx.resolve_call(call)
        if obj_id in (targets.TC, targets.MLA):
            configs.append((call, obj_id))
    if not configs:
        return
    for call in ctx.source.calls:
        spec_id = ctx.resolve_call(call)
        if spec_id not in PROVEN or call.has_star_args or \
                (call.has_star_kwargs and not call.splat_known):
            continue
        same = [c for c in configs if c[0].func is call.func]
        if not same and len(configs) == 1:
            same = configs
        if len(same) != 1:
            continue  # no single config this spec belongs with
        config_call, config_id = same[0]
        sig = ctx.view.signature(spec_id)
        order = [p["name"] for p in sig["params"] if p["kind"] in
                 ("positional_only", "positional_or_keyword")]
        given = dict(zip(order, call.node.args))
        given.update(call.all_values())
        config_values = config_call.all_values()
        if config_call.has_star_kwargs and not config_call.splat_known:
            continue
        for param, field, spec_default, config_default in pairs(ctx.view, spec_id, config_id):
            if param in given:
                spec_value = _literal(given[param])
                how = f"passes {param}={spec_value!r}"
            else:
                spec_value, how = spec_default, f"leaves {param} at its default {spec_default!r}"
            if field in config_values:
                config_value = _literal(config_values[field])
                chow = f"sets {field}={config_value!r}"
            else:
                config_value, chow = config_default, f"leaves {field} at {config_default!r}"
            if SENTINEL in (spec_value, config_value) or spec_value == config_value:
                continue
            if field not in config_values and param not in given:
                continue
            yield ctx.finding(
                call.line,
                f"{call.text}() {how} while the config (line {config_call.line}) {chow}: the "
                f"spec decides what is built, so the model does not match its config",
                f"{param}=config.{field}")

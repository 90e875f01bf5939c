"""Literal sizes in a config call, checked with the layout checker's own rules
(parallel_layout.rules: one rule table for both scripts)."""

from __future__ import annotations

import dataclasses
import math

from parallel_layout import rules as layout_rules
from parallel_layout.flags import LayoutInput

from . import targets

# Config keyword (Megatron Core) -> LayoutInput attribute (Megatron-LM's args name).
CONFIG_TO_LAYOUT = {
    "tensor_model_parallel_size": "tensor_model_parallel_size",
    "pipeline_model_parallel_size": "pipeline_model_parallel_size",
    "context_parallel_size": "context_parallel_size",
    "expert_model_parallel_size": "expert_model_parallel_size",
    "expert_tensor_parallel_size": "expert_tensor_parallel_size",
    "virtual_pipeline_model_parallel_size": "num_virtual_stages_per_pipeline_rank",
    "num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
    "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split": "account_for_embedding_in_pipeline_split",
    "account_for_loss_in_pipeline_split": "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout": "pipeline_model_parallel_layout",
    "sequence_parallel": "sequence_parallel",
    "num_layers": "num_layers",
    "hidden_size": "hidden_size",
    "ffn_hidden_size": "ffn_hidden_size",
    "num_attention_heads": "num_attention_heads",
    "num_query_groups": "num_query_groups",
    "kv_channels": "kv_channels",
    "num_moe_experts": "num_experts",
    "moe_ffn_hidden_size": "moe_ffn_hidden_size",
    "moe_layer_freq": "moe_layer_freq",
    "gated_linear_unit": "swiglu",
    "add_bias_linear": "add_bias_linear",
}

# The layout rules that apply to a config built in code, each an error for Megatron Core
# users too.  Two rules' source in the layout table is Megatron-LM's validate_args; the value
# says where Megatron Core itself fails on the same sizes (references/troubleshooting.md,
# reproduced there).
SIZE_RULES = {
    "heads-divisible-by-tp": None,
    "query-groups-vs-tp": None,
    "ffn-divisible-by-tp": None,
    "moe-ffn-divisible-by-etp": None,
    "uneven-stages": None,
    "uneven-with-account-split": None,
    "account-split-with-vpp": None,
    "pipeline-layout-conflicts": None,
    "vpp-layers-at-build": None,
    "moe-bias-needs-etp1": None,
    "moe-ffn-without-experts": None,
    "layers-divisible-by-pp": "Megatron Core asserts in get_num_layers_to_build when the "
                              "block is built (troubleshooting PP-02)",
    "experts-divisible-by-ep": "Megatron Core's MoELayer asserts, with no message, when it is "
                               "built (troubleshooting MOE-03)",
}


def layout_of(kwargs, version=None):
    """A LayoutInput from a config call's literal keywords, with Megatron Core's defaults
    (not Megatron-LM's) for what the call leaves out; None without a literal size. ``version``
    (the reviewed release) selects the rules' release, as --megatron-version does in the checker."""
    values = {}
    for kw, attr in CONFIG_TO_LAYOUT.items():
        if kw in kwargs and kwargs[kw] is not None:
            values[attr] = kwargs[kw]
    if not values:
        return None
    for attr, value in values.items():
        if attr != "pipeline_model_parallel_layout" and not isinstance(value, (int, list)):
            return None  # a string where a size belongs: the signature rules speak there
    L = LayoutInput(**values)
    L.megatron_version = version
    heads, hidden = L.num_attention_heads, L.hidden_size
    # TransformerConfig.__post_init__: groups default to heads, ffn to 4*hidden.
    L.group_query_attention = True
    if L.num_query_groups is None or "num_query_groups" not in kwargs:
        L.num_query_groups = heads
    if L.ffn_hidden_size is None and hidden is not None:
        L.ffn_hidden_size = 4 * hidden
    L.add_bias_linear = kwargs.get("add_bias_linear", True)
    L.swiglu = bool(kwargs.get("gated_linear_unit", False))
    if L.num_virtual_stages_per_pipeline_rank == 1:
        L.num_virtual_stages_per_pipeline_rank = None
    tp, pp, cp = L.tensor_model_parallel_size, L.pipeline_model_parallel_size, L.context_parallel_size
    etp = L.expert_tensor_parallel_size or tp
    # No world size in code: the smallest one every grid fits.
    L.world_size = math.lcm(tp * pp * cp, etp * L.expert_model_parallel_size * pp)
    L.gpus_per_node = L.world_size
    return L


def call_violations(ctx, call):
    """The layout rules' violations of one TransformerConfig / MLATransformerConfig call's literal
    sizes ([] for another call). Kept in the release view's memo: config-raises asks too, to say a
    check once."""
    key = ("layout-violations", ctx.source.path, call.line, call.col)
    memo = ctx.view.memo if ctx.view is not None else {}
    if key not in memo:
        memo[key] = _violations(ctx, call)
    return memo[key]


def _violations(ctx, call):
    obj_id = ctx.resolve_call(call)
    if obj_id is None or targets.short(obj_id) not in ("TransformerConfig", "MLATransformerConfig"):
        return []
    try:
        L = layout_of(call.literal_kwargs(), ctx.version)
        if L is None:
            return []
        wanted = tuple(layout_rules.RULES_BY_ID[r] for r in SIZE_RULES)
        return layout_rules.check(L, rules=wanted, with_memory=False).violations
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return []  # sizes that are not positive integers: Megatron fails elsewhere


def literal_sizes(ctx):
    for call in ctx.source.calls:
        for v in call_violations(ctx, call):
            rule = layout_rules.RULES_BY_ID[v.rule]
            when = SIZE_RULES[v.rule] or (f"Megatron checks it {rule.late}" if rule.late else "")
            yield ctx.finding(call.line, v.message + (f" ({when})" if when else ""), v.fix,
                              versions=rule.versions, rule_id=f"layout.{v.rule}")

"""The GPTModel deprecation and the HybridModel route (with the layer pattern a GPT config
maps to), and the MambaModel deprecation."""

from __future__ import annotations

from . import releases, targets
from .source import _canonical

# First release whose constructor logs the deprecation; tests/test_review_rules.py checks
# each against the released sources (message present there, absent one release before).
GPT_DEPRECATED_SINCE = "0.19.0"
GPT_MESSAGE = "GPTModel IS DEPRECATED."
MAMBA_DEPRECATED_SINCE = "0.18.0"
MAMBA_MESSAGE = "MambaModel has been deprecated. Use HybridModel instead."
# A GPT layer is attention then MLP; HybridModel builds one pattern symbol per sub-layer
# (megatron.core.models.hybrid.hybrid_layer_allocation.Symbols).
ATTENTION, MLA, MLP, MOE = "*", "+", "-", "E"


def _since(ctx, since):
    return releases.vkey(ctx.version) >= releases.vkey(since)


def _config_calls(ctx):
    out = []
    for call in ctx.source.calls:
        obj_id = ctx.resolve_call(call)
        if obj_id in (targets.TC, targets.MLA) or (
                obj_id and targets.short(obj_id) in ("TransformerConfig", "MLATransformerConfig")):
            out.append((call, targets.short(obj_id)))
    return out


def gpt_pattern(kwargs, mla=False):
    """The hybrid_layer_pattern that builds the layers a GPT config describes, or None
    when the literal keywords do not say how many layers there are."""
    n = kwargs.get("num_layers")
    if not isinstance(n, int) or n < 1:
        return None
    attn = MLA if mla or kwargs.get("multi_latent_attention") else ATTENTION
    experts = kwargs.get("num_moe_experts")
    freq = kwargs.get("moe_layer_freq", 1)
    if not experts:
        return (attn + MLP) * n
    if isinstance(freq, int) and freq >= 1:
        mask = [1 if i % freq == 0 else 0 for i in range(n)]
    elif isinstance(freq, list) and len(freq) == n:
        mask = freq
    else:
        return None
    return "".join(attn + (MOE if m else MLP) for m in mask)


def gptmodel_deprecated(ctx):
    if not _since(ctx, GPT_DEPRECATED_SINCE):
        return
    configs = _config_calls(ctx)
    yield from _subclasses(ctx, targets.GPT, GPT_DEPRECATED_SINCE, GPT_MESSAGE)
    for call in ctx.source.calls:
        obj_id = ctx.resolve_call(call)
        if obj_id is None or targets.short(obj_id) != "GPTModel" or \
                not obj_id.startswith("megatron.core.models.gpt") or call.via_super:
            continue
        same = [c for c in configs if c[0].func is call.func] or configs
        pattern = None
        if len(same) == 1:
            pattern = gpt_pattern(same[0][0].literal_kwargs(), same[0][1] == "MLATransformerConfig")
        fix = ("HybridModel(config=..., hybrid_stack_spec=..., vocab_size=..., "
               "max_sequence_length=..., hybrid_layer_pattern=" +
               (f"{pattern!r}" if pattern else "'*-' * num_layers") +
               ") from megatron.core.models.hybrid.hybrid_model; the pattern has one symbol "
               "per sub-layer (attention '*', MLP '-', MoE 'E'), so a GPT config of N layers "
               "maps to 2N symbols: set num_layers to the pattern length")
        yield ctx.finding(
            call.line,
            f"GPTModel is deprecated from {GPT_DEPRECATED_SINCE} on: its constructor logs "
            f"\"{GPT_MESSAGE} ...\" (a logging WARNING, not a DeprecationWarning); the "
            f"successor is HybridModel",
            fix, versions=f"{GPT_DEPRECATED_SINCE} and later")


def mambamodel_deprecated(ctx):
    if not _since(ctx, MAMBA_DEPRECATED_SINCE):
        return
    yield from _subclasses(ctx, targets.MAMBA, MAMBA_DEPRECATED_SINCE, MAMBA_MESSAGE)
    for call in ctx.source.calls:
        obj_id = ctx.resolve_call(call)
        if obj_id is None or targets.short(obj_id) != "MambaModel" or call.via_super:
            continue
        fix = "HybridModel(..., hybrid_stack_spec=...) from megatron.core.models.hybrid.hybrid_model"
        if "mamba_stack_spec" in call.all_kwargs():
            fix += " (mamba_stack_spec= becomes hybrid_stack_spec=)"
        yield ctx.finding(call.line, f"MambaModel is deprecated from {MAMBA_DEPRECATED_SINCE} "
                          f"on: it logs \"{MAMBA_MESSAGE}\"", fix,
                          versions=f"{MAMBA_DEPRECATED_SINCE} and later")


def _subclasses(ctx, base_id, since, message):
    """``class MyModel(GPTModel)``: its super().__init__ runs the base constructor, which
    logs the deprecation for every instance."""
    for cls in ctx.source.classes:
        for base in cls.bases:
            if not base.startswith("megatron."):
                continue
            resolved = ctx.view.resolve(_canonical(base)) if ctx.view is not None else None
            if resolved != base_id:
                continue
            name = targets.short(base_id)
            yield ctx.finding(
                cls.line,
                f"class {cls.name} subclasses {name}, deprecated from {since} on: "
                f"super().__init__ runs {name}.__init__, which logs \"{message}"
                f"{' ...' if message.endswith('.') and name == 'GPTModel' else ''}\" for "
                f"every instance",
                "subclass HybridModel (megatron.core.models.hybrid.hybrid_model) instead",
                versions=f"{since} and later")

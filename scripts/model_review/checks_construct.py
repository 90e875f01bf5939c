"""A config call that the release's own __post_init__ refuses: construct.raises on its keywords."""

from __future__ import annotations

import re

from . import checks_layout, construct, targets


def config_raises(ctx):
    """TransformerConfig / MLATransformerConfig / ModelParallelConfig(...) whose keywords make a
    check of the release's __post_init__ certain to fail: the first such check, as Megatron words it."""
    if ctx.view is None:
        return
    for call in ctx.source.calls:
        obj_id = ctx.resolve_call(call)
        cls = targets.short(obj_id) if obj_id else None
        if cls not in construct.CLASSES or call.n_positional or call.has_star_args or not call.splat_known:
            continue
        written = call.all_values()
        literal = call.literal_kwargs()
        # A keyword whose value is not a literal is unknown: it must not fall back to the default.
        unknown = set(written) - set(literal)
        seen = construct.verdicts(ctx.view.rel, cls, literal, unknown)
        first = next((i for i, (_, v) in enumerate(seen) if v is True), None)
        if first is None:
            continue
        site = seen[first][0]
        undecided = sum(1 for _, v in seen[:first] if v is construct.UNKNOWN)
        text = site["text"]
        head = text.split("{}")[0].strip()
        # The layout rule already words some of these checks (MoE bias, heads vs TP): say it once.
        if any(v.message.startswith(head) for v in checks_layout.call_violations(ctx, call)):
            continue
        yield ctx.finding(
            call.line,
            f"{cls}(...) raises in {ctx.version}: {site['exc']}: {text} "
            f"({site['file']}:{site['line']}, {site['function']}; when {site['condition']})"
            + (f"; {undecided} earlier check(s) these keywords do not decide may raise first" if undecided else ""),
            "change the keywords the condition reads: " + ", ".join(
                sorted(set(re.findall(r"self\.(\w+)", site["condition"])))),
            rule_id="config-raises")

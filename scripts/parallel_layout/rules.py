"""The layout rules of megatron-core 0.19.2, as a table.

``RULES`` holds one ``Rule`` per check: its id, kind (``error`` makes the
layout invalid, ``warning`` does not), the Megatron source that enforces it,
the versions it was checked against, ``late`` (when Megatron only checks it
after the job starts: model build, first step), ``stricter`` (why the
checker rejects what Megatron lets through; such rules are left out of the
agreement test), and ``check(ctx)`` which returns ``None`` or
``(message, fix)``.  Messages reproduce Megatron's text, typos and missing
spaces included, wherever Megatron has one; tests/test_layout_rules.py
triggers the real check and compares.  ``check(layout)`` applies every rule
and returns a ``Result``.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Optional

from . import derive as D

ARGS = "megatron/training/arguments.py validate_args"
TC = "megatron/core/transformer/transformer_config.py TransformerConfig.__post_init__"
MPC = "megatron/core/model_parallel_config.py ModelParallelConfig.__post_init__"
PS = "megatron/core/parallel_state.py initialize_model_parallel"
SCHED = ("megatron/core/pipeline_parallel/schedules.py "
         "forward_backward_pipelining_with_interleaving")
BLOCK = "megatron/core/transformer/transformer_block.py get_num_layers_to_build"
LAYOUT = "megatron/core/transformer/pipeline_parallel_layer_layout.py"
UTILS = "megatron/core/utils.py ensure_divisibility (via ColumnParallelLinear/RowParallelLinear)"
MAPPINGS = "megatron/core/tensor_parallel/mappings.py _split_along_first_dim"
CALC = "megatron/core/num_microbatches_calculator.py ConstantNumMicroBatchesCalculator"
ATTN = ("megatron/core/transformer/attention.py Attention.__init__ / "
        "SelfAttention.get_query_key_value_tensors")
V0192 = "0.19.2"


class Rule(NamedTuple):
    id: str
    kind: str  # "error" or "warning"
    source: str
    versions: str
    check: Callable
    stricter: Optional[str] = None
    late: Optional[str] = None  # when Megatron checks it, if not at configuration time


@dataclasses.dataclass
class Violation:
    rule: str
    message: str
    fix: str
    source: str = ""
    # whole alternative layouts (flag -> value, True adds a switch, None drops
    # a flag) that pass every rule: parallel_layout.suggest
    suggestions: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Warning_:
    rule: str
    message: str
    source: str = ""


@dataclasses.dataclass
class Result:
    valid: bool
    violations: list
    warnings: list
    derived: dict
    skipped: list
    memory: Optional[dict] = None
    # error rules applied as 0.19.2 has them, whose message the chosen
    # release's sources do not contain (see Rule.versions)
    unverified: list = dataclasses.field(default_factory=list)

    def to_dict(self):
        return {
            "valid": self.valid,
            "violations": [dataclasses.asdict(v) for v in self.violations],
            "warnings": [dataclasses.asdict(w) for w in self.warnings],
            "derived": self.derived,
            "memory": self.memory,
            "skipped_rules": self.skipped,
            "rules_unverified_for_release": self.unverified,
        }


class Ctx:
    """The layout plus the sizes every rule needs."""

    def __init__(self, layout):
        self.L = layout
        self.tp = layout.tensor_model_parallel_size
        self.pp = layout.pipeline_model_parallel_size
        self.cp = layout.context_parallel_size
        self.ep = layout.expert_model_parallel_size
        self.etp = D.etp(layout)
        self.world = layout.world_size
        self.dp = D.data_parallel_size(layout)
        self.vpp = D.virtual_pipeline_size(layout)
        self.experts = D.num_experts(layout)
        self.version = version_tuple(getattr(layout, "megatron_version", None))


def version_tuple(text):
    """'0.15.3' -> (0, 15, 3); None -> the default release."""
    parts = (text or V0192).split("+")[0].split(".")
    return tuple(int(p) for p in parts[:3] if p.isdigit())


class Skip(Exception):
    """A rule whose inputs were not given."""


def need(*values):
    if any(v is None for v in values):
        raise Skip()


# ---------------------------------------------------------------- helpers

def divisors(n):
    """Divisors of n, for fix suggestions (only 1 and n beyond 10**10: sizes that
    large are typos, and trial division would take minutes)."""
    if n > 10 ** 10:
        return [1, n]
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def nearest(values, target, k=3):
    return sorted(sorted(values, key=lambda v: (abs(v - target), v))[:k])


def fmt_list(values):
    return ", ".join(str(v) for v in values)


def tp_options(c, ok):
    """TP sizes satisfying ``ok`` and every other TP rule (heads, query
    groups, world divisible by TP*PP*CP), so a fix never trades one violation
    for another."""
    heads = c.L.num_attention_heads
    groups = D.num_query_groups(c.L)
    rest = c.pp * c.cp
    found = []
    for t in divisors(c.world) if c.world % rest == 0 else divisors(heads or 1):
        if heads and heads % t:
            continue
        if groups and groups % t and (t % groups or c.version < (0, 16)):
            continue
        if (c.world // rest if c.world % rest == 0 else c.world) % t:
            continue
        if ok(t):
            found.append(t)
    return found


def multiples_around(n, step):
    lo = (n // step) * step
    return [v for v in (lo, lo + step) if v > 0]


# ---------------------------------------------------------------- grid rules

def world_divisible(c):
    m = c.tp * c.pp * c.cp
    if c.world % m == 0:
        return None
    ok = [t for t in divisors(c.world) if t <= c.world]
    return (f"world size ({c.world}) is not divisible by total_model_size "
            f"(total_model_size={m})",
            f"use a world size that is a multiple of TP*PP*CP={m} "
            f"(e.g. {fmt_list(multiples_around(c.world, m))}), or choose TP*PP*CP among the "
            f"divisors of {c.world} nearest {m}: {fmt_list(nearest(ok, m))}")


def expert_grid_divisible(c):
    g = c.etp * c.ep * c.pp
    if c.world % g == 0:
        return None
    if c.ep == 1 and c.etp == c.tp and c.world % (c.tp * c.pp * c.cp):
        return None  # implied by world-divisible; Megatron stops there first
    eps = [e for e in divisors(c.experts or c.ep) if c.world % (c.etp * e * c.pp) == 0]
    return (f"world_size ({c.world}) is not divisible by "
            f"expert_tensor_model_pipeline_parallel size ({g})",
            f"make ETP*EP*PP divide the world size {c.world}: e.g. EP in {fmt_list(eps[-4:])}"
            if eps else f"make ETP*EP*PP divide the world size {c.world} (change ETP or PP)")


def heads_tp(c):
    h = c.L.num_attention_heads
    need(h)
    if h % c.tp == 0:
        return None
    return (f"num_attention_heads ({h}) must be a multiple of "
            f"tensor_model_parallel_size ({c.tp}).",
            f"use TP in {fmt_list(nearest(tp_options(c, lambda t: h % t == 0), c.tp))} "
            f"(divisors of {h} heads that the other rules allow)")


def query_groups_tp(c):
    g = D.num_query_groups(c.L)
    need(g)
    if g % c.tp == 0 or (c.tp % g == 0 and c.version >= (0, 16)):
        return None
    if c.version < (0, 16):  # 0.12-0.15: multiple only (TransformerConfig.__post_init__)
        if g % c.tp == 0:
            return None
        ok = tp_options(c, lambda t: g % t == 0)
        return (f"num_query_groups ({g}) must be a multiple of "
                f"tensor_model_parallel_size ({c.tp}).",
                f"use TP in {fmt_list(nearest(ok, c.tp))} (divides {g} query groups and the "
                f"heads; TP above the group count needs 0.16 or later)" if ok else
                f"no TP divides the heads and {g} query groups: change --num-query-groups")
    ok = tp_options(c, lambda t: g % t == 0 or t % g == 0)
    return (f"num_query_groups ({g}) must be a multiple or divisor of "
            f"tensor_model_parallel_size ({c.tp}).",
            f"use TP in {fmt_list(nearest(ok, c.tp))} (relates to {g} query groups, divides "
            f"the heads and the world)" if ok else
            f"no TP divides the heads and relates to {g} query groups: change "
            "--num-query-groups")


def heads_query_groups(c):
    """Attention splits the fused QKV output into groups of np/ng query heads:
    the forward pass reshapes it to [s, b, ng, (np/ng + 2) * hn] (np, ng per
    TP rank), which fails when the heads do not divide into the groups.  (With
    fewer groups than TP ranks, TP divides the heads and the groups divide TP,
    so the heads divide into the groups.)"""
    h, g = c.L.num_attention_heads, D.num_query_groups(c.L)
    need(h, g)
    if h % g == 0 or g % c.tp or h % c.tp or c.L.multi_latent_attention:
        return None  # heads-divisible-by-tp / query-groups-vs-tp stop the others earlier
    hn = D.kv_channels(c.L)
    need(hn)
    np_, ng = h // c.tp, g // c.tp
    s = c.L.seq_length // c.cp if c.L.seq_length else "s"
    b = c.L.micro_batch_size or "b"
    size = (s * b * (np_ + 2 * ng) * hn) if isinstance(s, int) and isinstance(b, int) \
        else f"{s} * {b} * {(np_ + 2 * ng) * hn}"
    return (f"shape '[{s}, {b}, {ng}, {(np_ // ng + 2) * hn}]' is invalid for input of size "
            f"{size}",
            _groups_fix(h, g, c.tp))


def _groups_fix(heads, groups, tp):
    """Every valid group count when there are few; else the four nearest the given one."""
    valid = [d for d in divisors(heads) if d % tp == 0]
    if len(valid) <= 8:
        return (f"use --num-query-groups in {fmt_list(valid)} (the divisors of {heads} heads that "
                f"TP={tp} divides)")
    near = sorted(sorted(valid, key=lambda d: (abs(d - groups), d))[:4])
    return (f"use --num-query-groups in {fmt_list(near)} (the nearest to {groups} of the {len(valid)} "
            f"divisors of {heads} heads that TP={tp} divides)")


def hidden_heads(c):
    h, a = c.L.hidden_size, c.L.num_attention_heads
    need(h, a)
    if c.L.kv_channels is not None or h % a == 0:
        return None
    return ("AssertionError (no message): assert args.hidden_size % "
            "args.num_attention_heads == 0",
            f"make --hidden-size a multiple of {a} heads, or set --kv-channels explicitly")


def ep_needs_experts(c):
    if c.ep == 1 or c.experts:
        return None
    return ("num_experts must be non None to use expert model parallelism",
            "set --num-experts, or use --expert-model-parallel-size 1 for a dense model")


def fp16_expert_parallel(c):
    """0.12.3-0.15.3 validate_args (Expert parallelism check); 0.16.1 dropped it."""
    if c.ep == 1 or not c.L.fp16 or c.version >= (0, 16):
        return None
    return ("Expert parallelism is not supported with fp16 training.",
            "use --bf16, or --expert-model-parallel-size 1 (0.16.1 and later accept fp16 "
            "with expert parallelism)")


def ep_tp_needs_sp(c):
    """ModelParallelConfig.__post_init__ 0.12.3-0.14.0 raised; from 0.15.0 it warns
    (the warning moe-tp-without-sp)."""
    if c.version >= (0, 15) or c.ep == 1 or c.tp == 1 or D.sequence_parallel(c.L):
        return None
    return ("When using expert parallelism and tensor parallelism, sequence parallelism must "
            "be used", "add --sequence-parallel (0.15.0 and later only warn)")


def tp_pp_dp_mapping_experts(c):
    """initialize_model_parallel: with --use-tp-pp-dp-mapping (order
    tp-cp-ep-pp-dp, not ending in pp) and PP > 1, the expert grid's DP must
    equal the dense DP, i.e. ETP*EP == TP*CP."""
    L = c.L
    if not L.use_tp_pp_dp_mapping or c.pp == 1 or c.dp is None:
        return None
    g = c.etp * c.ep * c.pp
    if c.world % g:
        return None  # expert-grid-divisible reports it
    edp = c.world // g
    if edp == c.dp:
        return None
    return ("When not using pp-last rank ordering, the data parallel size of the attention and "
            "moe layers must be the same",
            f"make ETP*EP equal TP*CP={c.tp * c.cp} (expert DP {edp} vs DP {c.dp}), or drop "
            "--use-tp-pp-dp-mapping")


def experts_ep(c):
    if c.ep == 1 or not c.experts or c.experts % c.ep == 0:
        return None
    return ("Number of experts should be a multiple of expert model parallel_size.",
            f"use EP in {fmt_list(nearest(divisors(c.experts), c.ep))} "
            f"(divisors of {c.experts} experts)")


def seq_cp(c):
    s = c.L.seq_length
    need(s)
    if c.cp == 1 or s % (2 * c.cp) == 0:
        return None
    return ("seq-length should be a multiple of 2 * context-parallel-size "
            "if context-parallel-size > 1.",
            f"use --seq-length {fmt_list(multiples_around(s, 2 * c.cp))}, or CP in "
            f"{fmt_list([d for d in divisors(s // 2) if d > 1][:6]) if s % 2 == 0 else '1'}")


def max_pos(c):
    m, s = c.L.max_position_embeddings, c.L.seq_length
    need(m, s)
    if m >= s:
        return None
    return (f"max_position_embeddings ({m}) must be greater than or equal to "
            f"seq_length ({s}).", f"set --max-position-embeddings {s} or more")


# ---------------------------------------------------------------- pipeline

def vpp_exclusive(c):
    L = c.L
    given = [L.num_layers_per_virtual_pipeline_stage, L.num_virtual_stages_per_pipeline_rank,
             L.pipeline_model_parallel_layout]
    if sum(v is not None for v in given) <= 1:
        return None
    a, b, lay = given
    return ("No more than one of the following arguments can be set at the same time: "
            "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,"
            "--pipeline-model-parallel-layout. "
            f"args.num_layers_per_virtual_pipeline_stage={a!r}, "
            f"args.num_virtual_stages_per_pipeline_rank={b!r}, "
            f"args.pipeline_model_parallel_layout={lay!r}.",
            "keep exactly one way of choosing the virtual pipeline size")


def layout_string(c):
    """Layout string: parse, stage count, and validate_layer_layout."""
    L = c.L
    text = L.pipeline_model_parallel_layout
    if text is None:
        return None
    try:
        stages = D.unroll_layout(text)
    except D.LayoutTooLong:
        return (f"the layout expands to more than {D.MAX_LAYOUT_CHARS:,} characters",
                "write the layout with the real number of stages and layers")
    except ValueError as exc:
        ch = str(exc)
        return (f"Invalid layer character: {ch} (stage=..., layout_str=...), known layer "
                f"characters: ['E', 'L', 't', 'm']",
                "use only E (embedding), t (decoder layer), m (MTP layer), L (loss), '|' "
                "between stages, '(...)*n' and 'x*n' repetition")
    n = len(stages)
    if n % c.pp:
        return (f"The length of pipeline_model_parallel_layout must be divisible by "
                f"pipeline_model_parallel_size (num_stages={n}, "
                f"args.pipeline_model_parallel_size={c.pp})",
                f"write {c.pp * max(1, round(n / c.pp))} stages, or use PP in "
                f"{fmt_list(nearest(divisors(n), c.pp))}")
    pp, vpp = c.pp, n // c.pp
    flat = [ch for v in range(vpp) for r in range(pp) for ch in stages[v * pp + r]]
    mtp = L.mtp_num_layers
    checks = [
        (bool(flat) and flat[0] == "E",
         f"The first layer must be embedding, but got {_layer_repr(flat[:1])}"),
        (bool(flat) and flat[-1] == "L",
         f"The last layer must be loss, but got {_layer_repr(flat[-1:])}"),
        (flat.count("E") == 1, "Embedding must be specified exactly once"),
        (flat.count("L") == 1, "Loss must be specified exactly once"),
        (L.num_layers is None or flat.count("t") == L.num_layers,
         f"Number of decoder layers {flat.count('t')}must match num_layers {L.num_layers}"),
        (flat.count("m") == mtp or (mtp is None and flat.count("m") == 0),
         "Number of mtp layers in layout must match mtp_num_layers"),
        ("m" not in flat or "t" not in flat[flat.index("m"):],
         "decoder layers must be placed before MTP layers"),
    ]
    for ok, message in checks:
        if not ok:
            return (message, "fix the layout string: one E first, one L last, "
                    f"{L.num_layers} t in total, MTP layers (m) after all decoder layers")
    return None


def _layer_repr(chars):
    return f"LayerType.{D.CHAR_TO_LAYER[chars[0]]}" if chars else "nothing"


def layout_conflicts(c):
    L = c.L
    if L.pipeline_model_parallel_layout is None:
        return None
    if not (L.decoder_first_pipeline_num_layers is not None
            or L.decoder_last_pipeline_num_layers is not None
            or L.account_for_embedding_in_pipeline_split
            or L.account_for_loss_in_pipeline_split):
        return None
    return ("pipeline_model_parallel_layout cannot be set with other pipeline layout arguments."
            f" self.num_layers_in_first_pipeline_stage={L.decoder_first_pipeline_num_layers!r},"
            f" self.num_layers_in_last_pipeline_stage={L.decoder_last_pipeline_num_layers!r},"
            f" self.account_for_embedding_in_pipeline_split="
            f"{L.account_for_embedding_in_pipeline_split!r},"
            f" self.account_for_loss_in_pipeline_split={L.account_for_loss_in_pipeline_split!r}.",
            "drop --decoder-first/last-pipeline-num-layers and --account-for-* when a "
            "--pipeline-model-parallel-layout is given (write E and L into the layout)")


def uneven_with_account(c):
    L = c.L
    uneven = (L.decoder_first_pipeline_num_layers is not None
              or L.decoder_last_pipeline_num_layers is not None)
    account = L.account_for_embedding_in_pipeline_split or L.account_for_loss_in_pipeline_split
    if not uneven or not account or L.pipeline_model_parallel_layout is not None:
        return None
    return ("num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be"
            "set at the same time with account_for_embedding_in_pipeline_split"
            "and account_for_loss_in_pipeline_split",
            "use either the uneven first/last stage sizes or --account-for-*-in-pipeline-split")


def layers_per_vp_stage_flag(c):
    """--num-layers-per-virtual-pipeline-stage arithmetic in validate_args."""
    L = c.L
    n = L.num_layers_per_virtual_pipeline_stage
    if n is None or L.num_virtual_stages_per_pipeline_rank is not None \
            or L.pipeline_model_parallel_layout is not None:
        return None
    if L.decoder_first_pipeline_num_layers is not None \
            or L.decoder_last_pipeline_num_layers is not None:
        return ("please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline "
                "parallel degree when enable uneven pipeline parallelism",
                "replace --num-layers-per-virtual-pipeline-stage by "
                "--num-virtual-stages-per-pipeline-rank")
    total = D.layers_for_split(L)
    need(total)
    if total % c.pp:
        return ("number of layers of the model must be divisible pipeline model parallel size",
                f"use PP in {fmt_list(nearest(divisors(total), c.pp))}")
    per_stage = total // c.pp
    if per_stage % n:
        return ("number of layers per pipeline stage must be divisible number of layers per "
                "virtual pipeline stage",
                f"use --num-layers-per-virtual-pipeline-stage in "
                f"{fmt_list(nearest(divisors(per_stage), n))}")
    return None


def even_split(c):
    """validate_args, no VPP flag and no uneven stages: layers % PP."""
    L = c.L
    if any(v is not None for v in (L.num_layers_per_virtual_pipeline_stage,
                                   L.num_virtual_stages_per_pipeline_rank,
                                   L.pipeline_model_parallel_layout, L.hybrid_layer_pattern,
                                   L.decoder_first_pipeline_num_layers,
                                   L.decoder_last_pipeline_num_layers)):
        return None
    total = D.layers_for_split(L)
    need(total)
    if total % c.pp == 0:
        return None
    return ("Number of layers should be divisible by the pipeline-model-parallel size",
            f"use PP in {fmt_list(nearest(divisors(total), c.pp))}, or uneven stages with "
            f"--decoder-first-pipeline-num-layers/--decoder-last-pipeline-num-layers")


def uneven_stages(c):
    """TransformerConfig.__post_init__ 'Uneven PP' block."""
    L = c.L
    first, last = L.decoder_first_pipeline_num_layers, L.decoder_last_pipeline_num_layers
    if (first is None and last is None) or L.pipeline_model_parallel_layout is not None:
        return None
    need(L.num_layers)
    vpp = c.vpp
    rest, middle = L.num_layers, c.pp
    for name, value in (("first", first), ("last", last)):
        if value is None:
            continue
        if value <= 0:
            return (f"num_layers_in_{name}_pipeline_stage must be larger than 0",
                    f"give --decoder-{name}-pipeline-num-layers a positive value")
        if vpp is not None and value % vpp:
            return (f"number of layers at {name} stage: {value}must be divisible by virtual "
                    f"pipelineparallel degree {vpp}",
                    f"use a multiple of {vpp} layers on the {name} stage")
        rest -= value
        middle -= 1
    # The Mismatch assert exists from 0.16; before, TransformerConfig accepted
    # middle stages without layers (and layers without middle stages) silently.
    if bool(rest) != bool(middle) and c.version >= (0, 16):
        return (f"Mismatch: {rest} middle layers remaining but {middle} middle PP stages "
                f"available.", _uneven_fix(L.num_layers, c.pp, first, last))
    if middle and rest % middle:
        return (f"number of layers at middle stage: {rest} must be divisible bythe middle "
                f"pipeline model parallel size {middle}", _uneven_fix(L.num_layers, c.pp, first, last))
    if middle and vpp is not None and (rest // middle) % vpp:
        return (f"number of layers on each middle pipeline rank:{rest // middle} must be "
                f"divisible by virtualpipeline parallel degree {vpp}",
                f"make the layers per middle stage a multiple of {vpp}")
    return None


def uneven_negative(c):
    """Stricter: more first+last layers than the model has."""
    L = c.L
    first, last = L.decoder_first_pipeline_num_layers, L.decoder_last_pipeline_num_layers
    if (first is None and last is None) or L.pipeline_model_parallel_layout is not None:
        return None
    need(L.num_layers)
    rest = L.num_layers - (first or 0) - (last or 0)
    middle = c.pp - (first is not None) - (last is not None)
    if rest >= 0 and middle >= 0:
        return None
    return (f"the first/last stage sizes leave {rest} layers for {middle} middle stages",
            _uneven_fix(L.num_layers, c.pp, first, last))


def _uneven_fix(num_layers, pp, first, last):
    """The first/last stage sizes nearest the given ones that leave a positive
    multiple of the middle stage count (searched per residue, not per pair)."""
    mid = pp - 2
    if pp < 3:
        return f"use an even split (PP dividing {num_layers})"
    options = []
    centre = 1 if first is None else min(max(first, 1), max(1, num_layers - 2))
    for f in range(max(1, centre - mid), min(num_layers - 2, centre + 2 * mid) + 1):
        top = num_layers - f - 1  # the largest last stage leaving a middle layer
        target = min(max(last if last is not None else 1, 1), top)
        base = target - (target - (num_layers - f)) % mid  # same residue, <= target
        for la in (base - mid, base, base + mid):
            rest = num_layers - f - la
            if la >= 1 and rest > 0 and rest % mid == 0:
                cost = abs(f - (first or f)) + abs(la - (last or la))
                options.append((cost, f, la, rest // mid))
    if not options:
        return f"use an even split (PP dividing {num_layers})"
    options.sort()
    _, f, la, m = options[0]
    return (f"e.g. --decoder-first-pipeline-num-layers {f} --decoder-last-pipeline-num-layers "
            f"{la} ({m} layers on each of the {pp - 2} middle stages)")


def account_split(c):
    """TransformerConfig: --account-for-* with VPP (validate_args skips it)."""
    L = c.L
    if not (L.account_for_embedding_in_pipeline_split or L.account_for_loss_in_pipeline_split):
        return None
    if L.pipeline_model_parallel_layout is not None or L.decoder_first_pipeline_num_layers \
            is not None or L.decoder_last_pipeline_num_layers is not None:
        return None
    if L.num_virtual_stages_per_pipeline_rank is None:
        return None  # validate_args' own checks (even_split, layers_per_vp_stage_flag) apply
    total = D.layers_for_split(L)
    need(total)
    if c.vpp is None:  # the flag resolved to VPP 1: validate_args skipped its split check
        if total % c.pp == 0:
            return None
        return (f"number of middle layers: {total} must be divisible by middle "
                f"pipeline_model_parallel_size {c.pp}",
                f"use PP in {fmt_list(nearest(divisors(total), c.pp))}")
    if total % c.pp:
        return (f"num_layers: {total} after enableaccount_for_embedding_in_pipeline_split or "
                f"account_for_loss_in_pipeline_split must be divisibleby "
                f"pipeline_model_parallel_size {c.pp}",
                f"use PP in {fmt_list(nearest(divisors(total), c.pp))}")
    per_rank = total // c.pp
    if per_rank % c.vpp:
        return (f"number of layers on each pipeline rank: {per_rank}(after enable "
                f"account_for_embedding_in_pipeline_split or account_for_loss_in_pipeline_split)"
                f" must be divisible byvirtual_pipeline_model_parallel_size{c.vpp}",
                f"use --num-virtual-stages-per-pipeline-rank in "
                f"{fmt_list(nearest(divisors(per_rank), c.vpp))}")
    return None


def vpp_even_build(c):
    """Stricter: --num-virtual-stages-per-pipeline-rank with an even split is
    not checked by validate_args or TransformerConfig; the model build asserts."""
    L = c.L
    # validate_args skips its even-split check whenever this flag is given,
    # even when it resolves to no interleaving (VPP 1).
    if L.num_virtual_stages_per_pipeline_rank is None:
        return None
    if L.pipeline_model_parallel_layout is not None or L.account_for_embedding_in_pipeline_split \
            or L.account_for_loss_in_pipeline_split or L.decoder_first_pipeline_num_layers \
            is not None or L.decoder_last_pipeline_num_layers is not None:
        return None
    need(L.num_layers)
    n = L.num_layers
    if n % c.pp:
        return (f"num_layers={n} should be divisible by config.pipeline_model_parallel_size={c.pp}",
                f"use PP in {fmt_list(nearest(divisors(n), c.pp))}")
    per_rank = n // c.pp
    if c.vpp is not None and c.pp > 1 and per_rank % c.vpp:
        return (f"num_layers_per_pipeline_rank {per_rank}             should be divisible by "
                f"vp_size {c.vpp}",
                f"use --num-virtual-stages-per-pipeline-rank in "
                f"{fmt_list(nearest(divisors(per_rank), c.vpp))}")
    return None


def vpp_needs_pp(c):
    if c.vpp is None:
        return None
    if c.L.overlap_p2p_comm and c.pp <= 1:
        return ("When interleaved schedule is used, pipeline-model-parallel size should be "
                "greater than 1", "drop the virtual pipeline flags or use PP > 1")
    if not c.L.overlap_p2p_comm and c.pp <= 2:
        return ("When interleaved schedule is used and p2p communication overlap is disabled, "
                "pipeline-model-parallel size should be greater than 2 to avoid having multiple "
                "p2p sends and recvs between same 2 ranks per communication batch",
                "use PP > 2, or drop --no-overlap-p2p-communication")
    return None


def distopt_instances(c):
    n = c.L.num_distributed_optimizer_instances
    if n == 1 or c.dp is None or (c.dp * c.cp) % n == 0:
        return None
    return ("Data parallel size should be divisible by partial DistOpt shard factor",
            f"use --num-distributed-optimizer-instances dividing DP*CP={c.dp * c.cp}: "
            f"{fmt_list(nearest(divisors(c.dp * c.cp), n))}")


def expert_distopt_instances(c):
    """initialize_model_parallel (0.13.1 on) asserts the same of the expert grid's DP; reported
    only where it differs from DP*CP (ETP*EP != TP*CP), else the rule above already fires."""
    n = c.L.num_distributed_optimizer_instances
    g = c.etp * c.ep * c.pp
    if n == 1 or c.dp is None or c.world % g or c.version < (0, 13):
        return None  # an indivisible world: expert-grid-divisible reports it
    edp = c.world // g
    if edp % n == 0 or edp == c.dp * c.cp:
        return None
    etp1 = " or --expert-tensor-parallel-size 1" if c.etp > 1 else ""
    return ("Expert data parallel size should be divisible by partial DistOpt shard factor",
            f"use --num-distributed-optimizer-instances dividing expert DP={edp} "
            f"(world // (ETP*EP*PP)): {fmt_list(nearest(divisors(edp), n))}{etp1}")


# ---------------------------------------------------------------- batch

def global_batch(c):
    L = c.L
    need(L.micro_batch_size, c.dp, L.global_batch_size)
    step = L.micro_batch_size * c.dp
    if L.global_batch_size % step == 0:
        return None
    g = L.global_batch_size
    return (f"eval_global_batch_size ({g}) must be divisible by eval_micro_batch_size "
            f"({L.micro_batch_size}) * data_parallel_size ({c.dp})",
            f"use --global-batch-size {fmt_list(multiples_around(g, step))} (multiples of "
            f"micro {L.micro_batch_size} x DP {c.dp}), or --micro-batch-size in "
            f"{fmt_list([m for m in divisors(g) if (g // m) % c.dp == 0][:6]) or 'none'}")


def interleaved_group(c):
    if c.vpp is None:
        return None
    m = D.num_microbatches(c.L)
    need(m)
    group = c.L.microbatch_group_size_per_vp_stage or c.pp
    if group > m or group < c.pp:
        if m < c.pp:
            fix = (f"use at least {c.pp} microbatches per step: --global-batch-size "
                   f"{c.pp * c.L.micro_batch_size * c.dp} or more (a multiple of micro "
                   f"{c.L.micro_batch_size} x DP {c.dp})")
        else:
            fix = (f"use --microbatch-group-size-per-virtual-pipeline-stage in "
                   f"[{c.pp}, {m}], or drop it (default: PP={c.pp})")
        return ("The number of contiguous micro-batches in a virtual pipeline stage"
                f"should range in [PP={c.pp} , M={m}]", fix)
    rem = m % group
    if 0 < rem < c.pp:
        return ("The remainder of M (the total micro-batches) divided by N (number of "
                "contiguous micro-batches in a virtual pipeline stage) should be 0, or larger "
                f"than or equal to the pipeline-parallel size, but it is {rem}. Otherwise, it "
                "introduces dependency bubbles in the pipeline and reduces throughput.",
                f"make the number of microbatches ({m}) a multiple of {group}, e.g. "
                f"{fmt_list(multiples_around(m, group))}")
    return None


# ---------------------------------------------------------------- sizes at model build

def _linear_split(ffn, size, gated):
    """First size the fc1 (ColumnParallelLinear, 2*ffn when gated) then fc2
    (RowParallelLinear) constructors fail to divide, or None."""
    for dim in ((2 * ffn) if gated else ffn, ffn):
        if dim % size:
            return dim
    return None


def ffn_tp(c):
    f = D.ffn_hidden_size(c.L)
    need(f)
    bad = _linear_split(f, c.tp, c.L.swiglu)
    if bad is None or not D.has_dense_layers(c.L):
        return None
    return (f"{bad} is not divisible by {c.tp}",
            f"use --ffn-hidden-size {fmt_list(multiples_around(f, c.tp))}")


def moe_ffn_etp(c):
    f = D.moe_ffn_hidden_size(c.L)
    if f is None:
        return None
    bad = _linear_split(f, c.etp, c.L.swiglu)
    if bad is None:
        return None
    return (f"{bad} is not divisible by {c.etp}",
            f"use --moe-ffn-hidden-size {fmt_list(multiples_around(f, c.etp))} or another ETP")


def sp_sequence(c):
    s = c.L.seq_length
    need(s)
    if not D.sequence_parallel(c.L):
        return None
    local = s // c.cp
    if local % c.tp == 0:
        return None
    return ("First dimension of the tensor should be divisible by tensor parallel size",
            f"make seq-length / CP ({local}) a multiple of TP={c.tp}")


# ---------------------------------------------------------------- features

def mtp_position(c):
    L = c.L
    if not L.mtp_num_layers or L.position_embedding_type in ("rope", "none"):
        return None
    return (f"Multi-Token Prediction (MTP) is not supported with {L.position_embedding_type} "
            "position embedding type.The supported position embedding types are rope and none.",
            "use --position-embedding-type rope (or none) with --mtp-num-layers")


def recompute_selective_method(c):
    if D.recompute_granularity(c.L) != "selective" or c.L.recompute_method is None:
        return None
    return ("recompute method is not yet supported for selective recomputing granularity",
            "drop --recompute-method with selective recompute")


def recompute_full(c):
    L = c.L
    if D.recompute_granularity(L) != "full":
        return None
    if L.recompute_method is None:
        return ("Using recompute_granularity: full so recompute_method must be \"block\" or "
                "\"uniform\"", "add --recompute-method uniform (or block)")
    if L.recompute_num_layers is None:
        need(L.num_layers)
        return ("When using recompute_granularity: full recompute_num_layers must be between 1 "
                f"and num_layers_per_pipeline_rank: {L.num_layers // c.pp}",
                "add --recompute-num-layers N")
    return None


def recompute_selective_layers(c):
    if D.recompute_granularity(c.L) != "selective" or c.L.recompute_num_layers is None:
        return None
    return ("When using recompute_granularity: selective recompute_num_layers must be None.",
            "drop --recompute-num-layers with selective recompute")


FSDP2_RULES = (
    (lambda L: L.pipeline_model_parallel_size == 1,
     "--use-torch-fsdp2 is not supported with pipeline parallelism", "use PP=1 with FSDP2"),
    (lambda L: L.expert_model_parallel_size == 1,
     "--use-torch-fsdp2 is not supported with expert parallelism", "use EP=1 with FSDP2"),
    (lambda L: not L.use_distributed_optimizer,
     "--use-torch-fsdp2 is not supported with MCore's distributed optimizer",
     "drop --use-distributed-optimizer (FSDP2 shards the optimizer itself)"),
    (lambda L: not L.gradient_accumulation_fusion,
     "--use-torch-fsdp2 is not supported with gradient accumulation fusion",
     "add --no-gradient-accumulation-fusion"),
    (lambda L: L.ckpt_format in ("torch_dist", "torch_dcp"),
     "--use-torch-fsdp2 requires --ckpt-format torch_dist or torch_dcp",
     "use --ckpt-format torch_dist"),
    (lambda L: L.untie_embeddings_and_output_weights,
     "--use-torch-fsdp2 requires --untie-embeddings-and-output-weights",
     "add --untie-embeddings-and-output-weights"),
    (lambda L: not L.fp16, "--use-torch-fsdp2 not supported with fp16 yet", "use --bf16"),
)


def torch_fsdp2(c):
    if not c.L.use_torch_fsdp2:
        return None
    for ok, message, fix in FSDP2_RULES:
        if not ok(c.L):
            return message, fix
    return None


def megatron_fsdp_ckpt(c):
    L = c.L
    if L.use_megatron_fsdp and L.ckpt_format != "fsdp_dtensor":
        return ("Megatron-FSDP requires the `fsdp_dtensor` checkpointing format.",
                "add --ckpt-format fsdp_dtensor")
    if L.ckpt_format == "fsdp_dtensor" and not L.use_megatron_fsdp:
        return ("--ckpt-format fsdp_dtensor is only tested with Megatron FSDP.",
                "add --use-megatron-fsdp or use --ckpt-format torch_dist")
    return None


def torch_dcp(c):
    L = c.L
    if L.ckpt_format != "torch_dcp":
        return None
    if not L.use_torch_fsdp2:
        return ("--ckpt-format torch_dcp is only tested with FSDP.", "add --use-torch-fsdp2")
    if c.tp > 1:
        return ("--ckpt-format torch_dcp is not tested with megatron tensor parallelism.",
                "use TP=1 or --ckpt-format torch_dist")
    if c.pp > 1:
        return ("--ckpt-format torch_dcp is not tested with megatron pipeline parallelism.",
                "use PP=1 or --ckpt-format torch_dist")
    return None


def moe_bias_etp(c):
    """TransformerConfig: 0.12.3-0.14.0 reject any bias with MoE; from 0.15
    (checked 0.15.0, 0.15.3) only with ETP > 1."""
    if not c.experts or not c.L.add_bias_linear:
        return None
    if c.version < (0, 15):
        return ("Bias is not supported for MoE",
                "add --disable-bias-linear (0.15 and later allow biases with ETP 1)")
    if c.etp == 1:
        return None
    return ("Bias in Moe is only supported when ETP==1",
            "add --disable-bias-linear, or use --expert-tensor-parallel-size 1")


def moe_pattern_length(c):
    L = c.L
    freq = L.moe_layer_freq
    if not c.experts or not isinstance(freq, list) or L.num_layers is None \
            or len(freq) == L.num_layers:
        return None
    return (f"Invalid length of moe_layer_pattern: {len(freq)}, expected {L.num_layers}, "
            f"current moe layer pattern: {freq}",
            f"give --moe-layer-freq a list of exactly {L.num_layers} entries (0 dense, 1 MoE), "
            "or an integer N for one MoE layer every N layers")


def moe_ffn_without_experts(c):
    L = c.L
    if c.experts or L.moe_ffn_hidden_size is None:
        return None
    freq = L.moe_layer_freq
    if (isinstance(freq, list) and 0 in freq) or (isinstance(freq, int) and freq > 1):
        return None
    return ("moe_ffn_hidden_size is set but num_moe_experts is None. Please set "
            "num_moe_experts or remove moe_ffn_hidden_size.",
            "add --num-experts or drop --moe-ffn-hidden-size")


# ---------------------------------------------------------------- flags and hybrid models

DEFAULT_VERSION = V0192


def given_flags(L):
    """[(option, value tokens)] the user passed: the checker's flags whose value
    differs from Megatron's default, then the other pasted arguments."""
    from .catalog import split_flags
    from .flags import FLAGS
    out = []
    for f in FLAGS:
        value = getattr(L, f.dest)
        if f.kind in ("true", "false"):
            if value != f.default:
                out.append((f.option, []))
        elif value is not None and value != f.default:
            out.append((f.option, [str(value)]))
    return out + [(o, v) for o, v in split_flags(L.other_flags or ()) if o is not None]


def unknown_flags(c):
    """Flags neither the release nor the entry script (--entry) knows.  Under an
    entry the checker does not know, they are the warning unknown-flag-entry."""
    from . import entries
    entry = entries.resolve(c.L.entry)
    if not entries.known(entry):
        return None
    return _unknown_flag_report(c, entry)


def unknown_flags_entry(c):
    from . import entries
    entry = entries.resolve(c.L.entry)
    if entries.known(entry):
        return None
    found = _unknown_flag_report(c, entry)
    if found is None:
        return None
    message, fix = found
    return (f"{message} (not Megatron-LM's flags; the entry script {entry.name} is not one "
            "the checker knows, and may add them)",
            f"check that {entry.name} adds them (its extra_args_provider); otherwise: {fix}")


def _unknown_flag_report(c, entry):
    from . import catalog
    version = c.L.megatron_version or DEFAULT_VERSION
    known = catalog.release_flags(version)
    if known is None:
        return None
    bad = [(o, v) for o, v in given_flags(c.L) if o not in known and o not in entry.flags]
    if not bad:
        return None
    hints = []
    for option, _ in bad:
        past = catalog.history().get(option)
        if past and past["successor"]:
            hints.append(f"{option} was removed in {past['removed_in']}: use {past['successor']}")
        elif past:
            hints.append(f"{option} was removed in {past['removed_in']} (no successor)")
        elif catalog.added_in(option):
            hints.append(f"{option} exists from {catalog.added_in(option)} on")
        else:
            hints.append(f"{option} is not a Megatron-LM flag in any release 0.12-0.19")
    return ("unrecognized arguments: " + " ".join(" ".join([o] + v) for o, v in bad),
            f"Megatron-LM {version} stops at argument parsing: " + "; ".join(hints))


# The index's type strings the checker converts as argparse would (int() / float());
# other types (strings, Literals, Megatron's own converters) are left to Megatron.
VALUE_TYPES = {"int": int, "Optional[int]": int, "int | None": int, "float": float,
               "Optional[float]": float, "float | None": float, "list[int]": int,
               "Optional[list[int]]": int, "list[int] | None": int}


def flag_values(c):
    """argparse's type conversion of the pasted flags the checker does not parse
    itself (their types from the release index): Megatron-LM stops at parsing."""
    from . import catalog
    version = c.L.megatron_version or DEFAULT_VERSION
    known = catalog.release_flags(version)
    if not known:
        return None
    from .catalog import split_flags
    for option, values in split_flags(c.L.other_flags or ()):
        convert = VALUE_TYPES.get(str((known.get(option) or {}).get("type")))
        if option is None or convert is None:
            continue
        for token in values:
            try:
                convert(token)
            except ValueError:
                return (f"argument {option}: invalid {convert.__name__} value: '{token}'",
                        f"give {option} {convert.__name__} value(s), as separate arguments")
    return None


def w_entry_conditional_flags(c):
    """Flags an entry adds only under a condition (pretrain_gpt.py adds the
    ModelOpt arguments only when nvidia-modelopt is installed)."""
    from . import catalog, entries
    entry = entries.resolve(c.L.entry)
    if not entry.condition:
        return None
    known = catalog.release_flags(c.L.megatron_version or DEFAULT_VERSION) or {}
    used = [o for o, _ in given_flags(c.L) if o in entry.flags and o not in known]
    if not used:
        return None
    return (f"{' '.join(used)}: {entry.path} adds them only when `{entry.condition}` "
            f"({entry.provider})", "install nvidia-modelopt where the job runs")


def hybrid_pattern(c):
    pattern = c.L.hybrid_layer_pattern
    if pattern is None:
        return None
    from .flags import HYBRID_SYMBOLS
    main = pattern.split("/")[0]
    for ch in main:
        if ch not in HYBRID_SYMBOLS and ch != "|":
            return (f"In main pattern, '{ch}' is not a valid layer symbol. Valid symbols are: "
                    f"{set(HYBRID_SYMBOLS) | {'|'}}",
                    "use M (mamba), G (gdn), * (attention), D (dsa), + (mla), - (mlp), "
                    "E (moe), and | between pipeline segments")
    if "*" in main and ("D" in main or "+" in main):
        return ("Not supported to have both Attention and MLA/DSA in one model",
                "use either * (attention) or D/+ (DSA/MLA) layers")
    return None


HYBRID_CONFLICTS = (
    ("num_layers_per_virtual_pipeline_stage",
     "--num-layers-per-virtual-pipeline-stage should not be used with --hybrid-layer-pattern. "
     "To specify virtual pipelining, describe a number of pipeline segments in "
     "--hybrid-layer-pattern that is a multiple of --pipeline-model-parallel-size greater than "
     "1"),
    ("num_virtual_stages_per_pipeline_rank",
     "--num-virtual-stages-per-pipeline-rank should not be used with --hybrid-layer-pattern. "
     "Virtual pipeline stages are derived from the number of | segments in the pattern."),
    ("pipeline_model_parallel_layout",
     "--pipeline-model-parallel-layout should not be used with --hybrid-layer-pattern. "
     "Pipeline stage layout is defined by | separators in the pattern."),
    ("account_for_embedding_in_pipeline_split",
     "--account-for-embedding-in-pipeline-split should not be used with "
     "--hybrid-layer-pattern. Pipeline stage layout is defined by | separators in the "
     "pattern."),
    ("account_for_loss_in_pipeline_split",
     "--account-for-loss-in-pipeline-split should not be used with --hybrid-layer-pattern. "
     "Pipeline stage layout is defined by | separators in the pattern."),
)


def hybrid_conflicts(c):
    L = c.L
    if L.hybrid_override_pattern is not None and L.hybrid_layer_pattern is not None \
            and not getattr(L, "_hybrid_from_override", False) and c.version >= (0, 17):
        return ("--hybrid-override-pattern and --hybrid-layer-pattern cannot both be specified. "
                "--hybrid-override-pattern is deprecated; use --hybrid-layer-pattern instead.",
                "keep only --hybrid-layer-pattern")
    segments = D.hybrid_segments(L)
    if segments is None:
        return None
    if len(segments) > 1:
        for name, which in (("decoder_first_pipeline_num_layers", "first"),
                            ("decoder_last_pipeline_num_layers", "last")):
            if getattr(L, name) is not None:
                return (f"If --hybrid-layer-pattern contains pipe separators, "
                        f"--decoder-{which}-pipeline-num-layers should not be specified as "
                        "the pipeline layout is explicitly defined.",
                        f"drop --decoder-{which}-pipeline-num-layers (the | segments define "
                        "the stages)")
    for dest, message in HYBRID_CONFLICTS:
        if getattr(L, dest) not in (None, False):
            return message, "drop the flag: the pattern's | segments define the stages"
    return None


def hybrid_segments_pp(c):
    segments = D.hybrid_segments(c.L)
    if segments is None or (len(segments) == 1 and c.pp > 1):
        return None
    n = len(segments)
    if n % c.pp == 0:
        return None
    return ("The number of hybrid pipeline segments described by --hybrid-layer-pattern must be "
            "evenly divisible by --pipeline-model-parallel-size. "
            f"Got {n} segments and {c.pp} pipeline parallel size.",
            f"write a multiple of {c.pp} '|'-separated segments, or use PP in "
            f"{fmt_list(nearest(divisors(n), c.pp))}")


def hybrid_pp_split(c):
    """select_pipeline_segment, pattern without '|' on PP > 1 (model build)."""
    L = c.L
    segments = D.hybrid_segments(L)
    if segments is None or len(segments) > 1 or c.pp == 1:
        return None
    n = len(segments[0])
    first, last = L.decoder_first_pipeline_num_layers, L.decoder_last_pipeline_num_layers
    if first is None and last is None:
        if n % c.pp == 0:
            return None
        return (f"Number of layers ({n}) must be evenly divisible by "
                f"pipeline-model-parallel-size ({c.pp}) when no pipe separators are "
                "specified in the pattern.",
                f"put '|' between {c.pp} (or a multiple of {c.pp}) pipeline segments, e.g. "
                f"segments of {n // c.pp} and {n - n // c.pp * (c.pp - 1)} layers")
    middle = n - (first or 0) - (last or 0)
    stages = c.pp - (first is not None) - (last is not None)
    if stages > 0 and middle % stages:
        return (f"Middle layers ({middle}) must be evenly divisible by middle pipeline stages "
                f"({stages}).", "choose first/last stage sizes that leave a multiple of "
                f"{stages} layers, or put '|' between the stages")
    return None


def step_schedule(c):
    L = c.L
    if L.step_batch_size_schedule is None:
        return None
    if L.global_batch_size is not None:
        return ("Cannot specify both --step-batch-size-schedule and --global-batch-size",
                "drop --global-batch-size (the schedule sets the batch size)")
    try:
        schedule = D.step_schedule(L)
    except ValueError as exc:
        return str(exc), 'write "THRESHOLD:BATCH_SIZE" pairs, e.g. "0:768 250B:1536"'
    except OverflowError:
        return "schedule value out of range", "use finite thresholds and batch sizes"
    if not schedule:
        return "schedule must have at least one entry", 'e.g. "0:768 250B:1536"'
    if schedule[0][0] != 0:
        return (f"first schedule entry must have threshold 0, got {schedule[0][0]}",
                "start the schedule with 0:BATCH_SIZE")
    for (a, _), (b, _) in zip(schedule, schedule[1:]):
        if b <= a:
            return (f"schedule thresholds must be strictly increasing, got {a} before {b}",
                    "make every threshold larger than the one before")
    for _, size in schedule:
        if size <= 0:
            return f"batch size must be positive, got {size}", "use positive batch sizes"
    return None


def step_schedule_divisible(c):
    L = c.L
    if L.step_batch_size_schedule is None or L.global_batch_size is not None:
        return None
    need(L.micro_batch_size, c.dp)
    try:
        schedule = D.step_schedule(L)
    except (ValueError, OverflowError):
        return None
    step = L.micro_batch_size * c.dp
    for _, size in schedule or ():
        if size > 0 and size % step:
            return (f"current global batch size ({size}) is not divisible by micro_batch_size "
                    f"({L.micro_batch_size}) * data_parallel_size ({c.dp})",
                    f"make every batch size of the schedule a multiple of micro x DP = {step}")
    return None


# megatron/training/determinism.py (0.19): options --deterministic-mode needs, in order
DETERMINISM_REQUIRED = (("cross_entropy_loss_fusion", False), ("tp_comm_overlap", False))


def deterministic_mode(c):
    """validate_args with --deterministic-mode: 0.19 asserts the options of
    determinism.ARG_VALUES_REQUIRED_FOR_DETERMINISM; 0.12-0.18 refused flash
    attention and the fused cross entropy (and an unset NCCL_ALGO, which the
    checker cannot see)."""
    L = c.L
    if not L.deterministic_mode:
        return None
    if c.version >= (0, 19):
        mismatched = [f"{name}={required!r} (got {getattr(L, name)!r})"
                      for name, required in DETERMINISM_REQUIRED
                      if getattr(L, name) != required]
        if not mismatched:
            return None
        return (f"--deterministic-mode requires: {', '.join(mismatched)}. Adjust these options "
                "to continue.", "drop " + " ".join(
                    "--" + name.replace("_", "-") for name, required in DETERMINISM_REQUIRED
                    if getattr(L, name) != required))
    if L.use_flash_attn:
        return ("Flash attention can not be used in deterministic mode.",
                "drop --use-flash-attn")
    if L.cross_entropy_loss_fusion:
        return ("Cross Entropy Fusion is currently not deterministic.",
                "drop --cross-entropy-loss-fusion")
    return None


def decoder_seq(c):
    L = c.L
    if L.decoder_seq_length is None or L.max_position_embeddings is None \
            or L.max_position_embeddings >= L.decoder_seq_length:
        return None
    return ("AssertionError (no message): assert args.max_position_embeddings >= "
            "args.decoder_seq_length",
            f"set --max-position-embeddings {L.decoder_seq_length} or more")


# ---------------------------------------------------------------- memory

def _estimate(c):
    """The memory estimate, once per check; a check without memory (the plan's
    and the suggestion search's inner checks, which judge memory themselves)
    skips the memory rules."""
    if not c.with_memory:
        raise Skip()
    if not hasattr(c, "memory"):
        from . import memory
        c.memory = memory.estimate(c.L)
    return c.memory


def _memory_text(mem, r):
    st = mem["per_stage"][r]
    act = st["activation_bytes"] or 0
    return (f"PP rank {r} needs {st['total_bytes'] / (1 << 30):.2f} GiB per GPU "
            f"(weights+optimizer {st['weight_and_optimizer_bytes'] / (1 << 30):.2f} + "
            f"activations {act / (1 << 30):.2f})")


def memory_fits(c):
    """Stricter: the estimate of the most loaded rank against the memory given."""
    from .memory import budget_gib
    budget = budget_gib(c.L)
    if not budget:
        return None
    mem = _estimate(c)
    if mem is None or mem["fits"] is not False:
        return None
    return (f"{_memory_text(mem, mem['most_loaded_pp_rank'])}, more than the {budget:g} GiB "
            "given: DOES NOT FIT",
            "see the suggested layouts (each fits); or more TP/PP/CP, "
            "--use-distributed-optimizer, --recompute-activations, a smaller micro batch"
            + _fp32_note(c.L))


def _fp32_note(L):
    """Without --bf16/--fp16 the estimate is fp32, as Megatron-LM trains then; published BF16
    or FP8 layouts checked without the flag look too big (the 2026-12-02 benchmark's answers)."""
    from .memory import precision
    if precision(L) != "fp32":
        return ""
    return ("; the estimate is fp32 (no --bf16/--fp16, Megatron-LM's default): add --bf16 if "
            "the run trains in BF16 or FP8")


def w_memory_assumed(c):
    from .memory import ASSUMED_GPU_GIB, GIB, budget_gib
    if budget_gib(c.L):
        return None
    mem = _estimate(c)
    if mem is None or mem["total_bytes_per_gpu"] <= ASSUMED_GPU_GIB * GIB:
        return None
    return (f"{_memory_text(mem, mem['most_loaded_pp_rank'])}: more than an {ASSUMED_GPU_GIB} "
            "GiB GPU holds (DOES NOT FIT there)",
            "give --gpu-memory-gib (or --gpu) for a verdict and layouts that fit" + _fp32_note(c.L))


# ---------------------------------------------------------------- warnings

def w_sp_without_tp(c):
    if c.L.sequence_parallel and c.tp == 1:
        return ("Disabling sequence parallelism because tensor model parallelism is disabled",
                None)
    return None


def w_moe_tp_without_sp(c):
    if c.ep > 1 and c.tp > 1 and not c.L.sequence_parallel:
        return ("When using expert parallelism and tensor parallelism for training, sequence "
                "parallelism must be used", "add --sequence-parallel")
    if c.experts and c.tp > 1 and not c.L.sequence_parallel:
        return ("MoE with TP > 1 and no --sequence-parallel: each TP rank routes the full "
                "sequence; Megatron warns once EP > 1", "add --sequence-parallel")
    return None


def w_tp_without_sp(c):
    if c.tp > 1 and not c.L.sequence_parallel and not c.experts:
        return (f"TP={c.tp} without --sequence-parallel: LayerNorm/dropout activations are "
                "replicated on every TP rank", "add --sequence-parallel")
    return None


def w_tp_across_nodes(c):
    n = c.L.gpus_per_node
    for name, size in (("TP", c.tp), ("ETP", c.etp)):
        if size > 1 and (size > n or n % size):
            return (f"{name}={size} groups span nodes ({n} GPUs per node): every layer's "
                    "all-reduce/all-gather crosses the inter-node network",
                    f"keep {name} within a node: {name} in {fmt_list([d for d in divisors(n)])}")
    return None


def w_query_groups_ignored(c):
    L = c.L
    if L.group_query_attention or L.num_query_groups in (None, 1):
        return None
    return (f"--num-query-groups {L.num_query_groups} is ignored without "
            "--group-query-attention: the model is built with num_query_groups = "
            f"num_attention_heads ({L.num_attention_heads})", "add --group-query-attention")


def w_swiglu_ffn_default(c):
    L = c.L
    if not L.swiglu or L.ffn_hidden_size is not None or L.hidden_size is None:
        return None
    return (f"--swiglu without --ffn-hidden-size: ffn_hidden_size = int((4h*2/3)/64)*64 = "
            f"{D.ffn_hidden_size(L)}, which may not be the size of the model you mean",
            "set --ffn-hidden-size to the model's value")


def w_gqa_default_groups(c):
    L = c.L
    if not L.group_query_attention or L.num_query_groups != 1:
        return None
    return ("--group-query-attention with num_query_groups 1 (the parser default when "
            "--num-query-groups is omitted): this is multi-query attention",
            "set --num-query-groups explicitly")


def w_moe_ffn_default(c):
    if c.experts and c.L.moe_ffn_hidden_size is None:
        return ("moe_ffn_hidden_size is not set, using ffn_hidden_size for MoE instead.",
                "set --moe-ffn-hidden-size explicitly")
    return None


def w_global_batch_default(c):
    L = c.L
    if L.global_batch_size is None and L.micro_batch_size is not None and c.dp is not None:
        return (f"setting global batch size to {L.micro_batch_size * c.dp}: without "
                "--global-batch-size the batch grows with DP", "set --global-batch-size")
    return None


def w_vpp_one(c):
    L = c.L
    if c.vpp is None and (L.num_layers_per_virtual_pipeline_stage is not None
                          or L.num_virtual_stages_per_pipeline_rank == 1):
        per = D.layers_for_split(L)
        if L.num_virtual_stages_per_pipeline_rank == 1 or (
                per is not None and per % c.pp == 0
                and per // c.pp == L.num_layers_per_virtual_pipeline_stage):
            return ("the virtual pipeline size works out to 1, so Megatron silently uses the "
                    "non-interleaved schedule", "use a smaller --num-layers-per-virtual-"
                    "pipeline-stage (or a larger --num-virtual-stages-per-pipeline-rank)")
    return None


def w_few_microbatches(c):
    m = D.num_microbatches(c.L)
    if m is None or c.pp == 1 or m >= c.pp:
        return None
    return (f"{m} microbatches for PP={c.pp}: the pipeline never fills (bubble "
            f"{(c.pp - 1) / (m + c.pp - 1):.0%})",
            f"use at least {4 * c.pp} microbatches (larger global batch or smaller micro batch)")


def w_missing_model(c):
    L = c.L
    missing = [f for f, v in (("--num-layers", L.num_layers), ("--hidden-size", L.hidden_size),
                              ("--num-attention-heads", L.num_attention_heads),
                              ("--max-position-embeddings", L.max_position_embeddings),
                              ("--micro-batch-size", L.micro_batch_size)) if v is None]
    if not missing:
        return None
    return (f"not given: {' '.join(missing)} (Megatron-LM requires them); rules that need "
            "them were skipped", "paste the full flag list for a complete check")


def w_cuda_max_connections(c):
    fsdp = c.L.use_megatron_fsdp or c.L.use_torch_fsdp2
    if fsdp:
        return ("FSDP: Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1 "
                "('FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.')",
                "leave CUDA_DEVICE_MAX_CONNECTIONS unset (or > 1)")
    if (c.tp > 1 or c.cp > 1) and c.L.overlap_moe_expert_parallel_comm \
            and c.version >= (0, 14):
        return ("TP > 1 or CP > 1 with --overlap-moe-expert-parallel-comm: on GPUs before "
                "Blackwell Megatron-LM only warns ('For Hopper and before, try not to use "
                "tensor model parallelism or context parallelism with "
                "overlap_moe_expert_parallel_comm.'); CUDA_DEVICE_MAX_CONNECTIONS 1 favours "
                "TP/CP, 32 the expert overlap", None)
    if c.tp > 1 and c.version < (0, 13):
        # 0.12: "tp > 1 or cp > 1 and arch < 10" binds as tp > 1 or (cp > 1 and arch < 10)
        return ("TP > 1 on 0.12: Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 on every GPU "
                "generation, Blackwell included (the architecture test binds to CP only)",
                "export CUDA_DEVICE_MAX_CONNECTIONS=1")
    if c.tp > 1 or c.cp > 1:
        return ("TP > 1 or CP > 1: on GPUs before Blackwell (compute capability < 10) "
                "Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1",
                "export CUDA_DEVICE_MAX_CONNECTIONS=1 on Ampere/Hopper")
    return None


def w_megatron_fsdp_distopt(c):
    if c.L.use_megatron_fsdp and not c.L.use_distributed_optimizer:
        return ("Megatron-FSDP is only compatible with --use-distributed-optimizer. Using "
                "DistributedOptimizer...", "add --use-distributed-optimizer to be explicit")
    return None


def w_cp_fsdp(c):
    if (c.tp > 1 or c.cp > 1) and (c.L.use_torch_fsdp2 or c.L.use_megatron_fsdp):
        return ("TP/CP with FSDP: they want different CUDA_DEVICE_MAX_CONNECTIONS settings "
                "(Megatron-LM warns on GPUs before Blackwell)", None)
    return None


def _r(id, kind, source, check, stricter=None, versions=V0192, late=None):
    return Rule(id, kind, source, versions, check, stricter, late)


HYBRID = "megatron/core/models/hybrid/hybrid_layer_allocation.py"
# flags that earlier releases do not have (unknown-flag reports them there)
V_HYBRID = "0.17.1-0.19.2 (--hybrid-layer-pattern added in 0.17.1)"
V_STEP = "0.18.2-0.19.2 (--step-batch-size-schedule added in 0.18.2)"
STEP = CALC.replace("ConstantNumMicroBatchesCalculator", "StepBatchsizeNumMicroBatchesCalculator")

RULES = (
    _r("unknown-flag", "error", "megatron/training/arguments.py parse_args (argparse)",
       unknown_flags, versions="0.12.3-0.19.2: each release's own flag set (release index)"),
    _r("flag-value", "error", "megatron/training/arguments.py parse_args (argparse)",
       flag_values, versions="0.12.3-0.19.2: each release's flag types (release index)"),
    _r("world-divisible", "error", ARGS + "; " + PS, world_divisible, versions="0.12.3-0.19.2"),
    _r("expert-grid-divisible", "error", PS, expert_grid_divisible, versions="0.12.3-0.19.2"),
    _r("heads-divisible-by-tp", "error", TC, heads_tp, versions="0.12.3-0.19.2"),
    _r("query-groups-vs-tp", "error", TC, query_groups_tp,
       versions="0.12.3-0.19.2: multiple only to 0.15.3, multiple or divisor from "
                "0.16.1"),
    _r("heads-divisible-by-query-groups", "error", ATTN, heads_query_groups,
       late="in the first forward pass (the QKV reshape)",
       versions="0.12.3-0.19.2 (the reshape in attention.py; the message is torch's)"),
    _r("hidden-divisible-by-heads", "error", ARGS, hidden_heads),
    _r("ep-needs-experts", "error", ARGS, ep_needs_experts, versions="0.12.3-0.19.2"),
    _r("experts-divisible-by-ep", "error", ARGS, experts_ep, versions="0.12.3-0.19.2"),
    _r("fp16-expert-parallel", "error", ARGS, fp16_expert_parallel,
       versions="0.12.3-0.15.3 in validate_args (0.16.1 on, the message is left only in "
                "yaml_arguments.py validate_yaml, the --yaml-cfg path)"),
    _r("ep-tp-needs-sp", "error", MPC, ep_tp_needs_sp,
       versions="0.12.3-0.14.0 (a ValueError; from 0.15.0 the warning moe-tp-without-sp)"),
    _r("tp-pp-dp-mapping-expert-dp", "error", PS, tp_pp_dp_mapping_experts,
       versions="0.12.3-0.19.2"),
    _r("seq-divisible-by-2cp", "error", ARGS, seq_cp, versions="0.12.3-0.19.2"),
    _r("max-position-covers-seq", "error", ARGS, max_pos, versions="0.12.3-0.19.2"),
    _r("vpp-options-exclusive", "error", ARGS, vpp_exclusive, versions="0.13.1-0.19.2"),
    _r("pipeline-layout", "error", ARGS + "; " + LAYOUT, layout_string, versions="0.13.1-0.19.2"),
    _r("pipeline-layout-conflicts", "error", TC, layout_conflicts, versions="0.13.1-0.19.2"),
    _r("uneven-with-account-split", "error", TC, uneven_with_account, versions="0.12.3-0.19.2"),
    _r("layers-per-virtual-stage", "error", ARGS, layers_per_vp_stage_flag, versions="0.12.3-0.19.2"),
    _r("layers-divisible-by-pp", "error", ARGS, even_split, versions="0.12.3-0.19.2"),
    _r("uneven-stages", "error", TC, uneven_stages,
       versions="0.12.3-0.19.2; the Mismatch check (middle layers vs middle stages) from 0.16.1"),
    _r("uneven-stages-overflow", "error", TC, uneven_negative,
       stricter="TransformerConfig accepts first+last > num_layers when the middle stage "
                "count divides the negative remainder; get_num_layers_to_build then returns a "
                "negative layer count for the middle stages (e.g. [5, -1, -1, 5] for 8 layers "
                "on PP=4)"),
    _r("account-split-with-vpp", "error", TC, account_split, versions="0.12.3-0.19.2"),
    _r("vpp-layers-at-build", "error", BLOCK, vpp_even_build,
       late="when the model is built (get_num_layers_to_build)", versions="0.12.3-0.19.2"),
    _r("moe-bias-needs-etp1", "error", TC, moe_bias_etp,
       versions="0.12.3-0.19.2: no bias with MoE to 0.14.0, ETP 1 from 0.15.0"),
    _r("moe-ffn-without-experts", "error", TC, moe_ffn_without_experts, versions="0.18.2-0.19.2"),
    _r("moe-layer-pattern-length", "error",
       "megatron/core/models/gpt/gpt_layer_specs.py get_gpt_decoder_block_spec",
       moe_pattern_length, late="when the GPT layer specs are built", versions="0.12.3-0.19.2"),
    _r("interleaved-needs-pp", "error", ARGS, vpp_needs_pp, versions="0.12.3-0.19.2"),
    _r("distributed-optimizer-instances", "error", PS, distopt_instances, versions="0.12.3-0.19.2"),
    _r("expert-distributed-optimizer-instances", "error", PS, expert_distopt_instances,
       versions="0.13.1-0.19.2"),
    _r("global-batch-divisible", "error", ARGS + "; " + CALC, global_batch, versions="0.18.2-0.19.2"),
    _r("interleaved-microbatch-group", "error", SCHED, interleaved_group,
       late="at the first training step, by the interleaved schedule"),
    _r("ffn-divisible-by-tp", "error", UTILS, ffn_tp,
       late="when the MLP's linear layers are built", versions="0.12.3-0.19.2"),
    _r("moe-ffn-divisible-by-etp", "error", UTILS, moe_ffn_etp,
       late="when the experts' linear layers are built", versions="0.12.3-0.19.2"),
    _r("sequence-parallel-seq-divisible", "error", MAPPINGS, sp_sequence,
       late="in the first forward pass (scatter into the sequence-parallel region)", versions="0.12.3-0.19.2"),
    _r("mtp-position-embedding", "error", ARGS, mtp_position, versions="0.12.3-0.19.2"),
    _r("recompute-selective-method", "error", ARGS, recompute_selective_method, versions="0.12.3-0.19.2"),
    _r("recompute-full-settings", "error", TC, recompute_full, versions="0.12.3-0.19.2"),
    _r("recompute-selective-layers", "error", TC, recompute_selective_layers, versions="0.12.3-0.19.2"),
    _r("torch-fsdp2", "error", ARGS, torch_fsdp2, versions="0.12.3-0.19.2"),
    _r("megatron-fsdp-ckpt-format", "error", ARGS, megatron_fsdp_ckpt, versions="0.18.2-0.19.2"),
    _r("torch-dcp", "error", ARGS, torch_dcp, versions="0.12.3-0.19.2"),
    _r("hybrid-layer-pattern", "error", ARGS + "; " + HYBRID + " _validate_pattern",
       hybrid_pattern, versions="0.17.1-0.19.2 (--hybrid-layer-pattern added in 0.17.1; the "
                                "Attention with MLA/DSA message from 0.18.2)"),
    _r("hybrid-pattern-conflicts", "error", ARGS, hybrid_conflicts, versions=V_HYBRID),
    _r("hybrid-segments-divisible-by-pp", "error", ARGS, hybrid_segments_pp,
       versions=V_HYBRID),
    _r("hybrid-pipeline-split", "error", HYBRID + " select_pipeline_segment", hybrid_pp_split,
       late="when the hybrid model is built (select_pipeline_segment)", versions=V_HYBRID),
    _r("step-batch-size-schedule", "error", ARGS + "; " + STEP, step_schedule,
       versions=V_STEP),
    _r("step-batch-size-divisible", "error", STEP + ".update", step_schedule_divisible,
       late="during training, when the schedule reaches that batch size", versions=V_STEP),
    _r("decoder-seq-length", "error", ARGS, decoder_seq),
    _r("deterministic-mode-options", "error", ARGS + "; megatron/training/determinism.py",
       deterministic_mode, versions="0.12.3-0.19.2: tp_comm_overlap and the fused cross "
                                    "entropy from 0.19 (determinism.py); flash attention and "
                                    "the fused cross entropy before"),
    _r("memory-fits", "error", "parallel_layout/memory.py estimate (the checker's own)",
       memory_fits,
       stricter="Megatron does not estimate memory before launch: a layout that does not "
                "fit starts and fails with a CUDA out-of-memory error",
       versions="0.12.3-0.19.2 (an estimate, not a Megatron check)"),
    _r("incomplete-input", "warning", ARGS, w_missing_model),
    _r("memory-over-assumed-gpu", "warning", "parallel_layout/memory.py estimate",
       w_memory_assumed),
    _r("unknown-flag-entry", "warning", "the entry script's extra_args_provider (--entry)",
       unknown_flags_entry),
    _r("entry-conditional-flags", "warning", "the entry script's extra_args_provider (--entry)",
       w_entry_conditional_flags),
    _r("sp-without-tp", "warning", ARGS, w_sp_without_tp),
    _r("moe-tp-without-sp", "warning", MPC, w_moe_tp_without_sp),
    _r("tp-without-sp", "warning", "Korthikanti et al. 2022, Table 2", w_tp_without_sp),
    _r("tp-across-nodes", "warning", "rank order tp-cp-ep-dp-pp (" + PS + ")", w_tp_across_nodes),
    _r("query-groups-ignored", "warning",
       "megatron/training/argument_utils.py core_transformer_config_from_args",
       w_query_groups_ignored),
    _r("moe-ffn-default", "warning", ARGS, w_moe_ffn_default),
    _r("swiglu-ffn-default", "warning", ARGS, w_swiglu_ffn_default),
    _r("gqa-default-groups", "warning",
       "megatron/training/arguments.py _add_network_size_args (--num-query-groups default 1)",
       w_gqa_default_groups),
    _r("global-batch-default", "warning", ARGS, w_global_batch_default),
    _r("virtual-pipeline-is-one", "warning", ARGS, w_vpp_one),
    _r("few-microbatches", "warning", "megatron/core/pipeline_parallel/schedules.py",
       w_few_microbatches),
    _r("cuda-device-max-connections", "warning", ARGS, w_cuda_max_connections,
       versions="0.13.1-0.19.2: before Blackwell only; 0.12.3: asserted for TP > 1 on every "
                "GPU; --overlap-moe-expert-parallel-comm (0.14.0 on) makes it a warning"),
    _r("megatron-fsdp-forces-distopt", "warning", ARGS, w_megatron_fsdp_distopt),
    _r("fsdp-with-tp-cp", "warning", ARGS, w_cp_fsdp),
)

RULES_BY_ID = {r.id: r for r in RULES}

# The flag whose values a rule's fix names.  With suggestions on, those values
# are the ones parallel_layout.suggest finds by changing that flag alone (each
# passes every rule, and fits a memory given), so the fix line and the
# suggested layouts come from one search.
KNOBS = {
    "heads-divisible-by-tp": "--tensor-model-parallel-size",
    "query-groups-vs-tp": "--tensor-model-parallel-size",
    "world-divisible": "--tensor-model-parallel-size",
    "experts-divisible-by-ep": "--expert-model-parallel-size",
    "expert-grid-divisible": "--expert-model-parallel-size",
    "layers-divisible-by-pp": "--pipeline-model-parallel-size",
    "vpp-layers-at-build": "--num-virtual-stages-per-pipeline-rank",
    "account-split-with-vpp": "--num-virtual-stages-per-pipeline-rank",
    "layers-per-virtual-stage": "--num-layers-per-virtual-pipeline-stage",
    "distributed-optimizer-instances": "--num-distributed-optimizer-instances",
    "global-batch-divisible": "--global-batch-size",
    "interleaved-microbatch-group": "--microbatch-group-size-per-virtual-pipeline-stage",
    "seq-divisible-by-2cp": "--context-parallel-size",
}


# Rules that judge the checker's memory estimate, not a check Megatron makes: a layout that breaks
# only these still has a defined step (the performance model predicts it), and a published
# measurement on such a layout shows the estimate, not the layout, is off.
ESTIMATE_RULES = ("memory-fits",)


def only_estimates_violated(result) -> bool:
    """True when ``result`` is invalid by ESTIMATE_RULES alone."""
    return bool(result.violations) and all(v.rule in ESTIMATE_RULES for v in result.violations)


def check(layout, rules=RULES, with_memory=True, suggest=None) -> Result:
    """Apply every rule; never stops at the first violation.  ``suggest``
    (default: when every rule runs with memory) adds each violation's
    ``suggestions``."""
    ctx = Ctx(layout)
    ctx.with_memory = with_memory
    violations, warnings, skipped = [], [], []
    for rule in rules:
        try:
            found = rule.check(ctx)
        except Skip:
            skipped.append(rule.id)
            continue
        if found is None:
            continue
        message, fix = found
        if rule.kind == "error":
            violations.append(Violation(rule.id, message, fix or "", rule.source))
        else:
            text = message if not fix else f"{message} (suggestion: {fix})"
            warnings.append(Warning_(rule.id, text, rule.source))
    if suggest is None:
        suggest = with_memory and rules is RULES
    if violations and suggest:
        from .suggest import suggestions, single_flag_fix
        found = suggestions(layout)
        for v in violations:
            v.suggestions = [dict(c) for c in found]
            knob = KNOBS.get(v.rule)
            if knob:  # the fix's values: the same search, one flag changed
                v.fix = single_flag_fix(layout, knob, v.fix)
    derived = D.derive(layout)
    mem = _estimate(ctx) if with_memory else None
    unverified = [r.id for r in rules if r.kind == "error" and ctx.version < first_release(r)]
    return Result(not violations, violations, warnings, derived, skipped, mem, unverified)


def first_release(rule):
    """The first release ``rule.versions`` names (its range start, or the single
    release it was checked against)."""
    return version_tuple(rule.versions.split("-")[0].split(":")[0].split(" ")[0].split(";")[0])

"""Suggestions: whole alternative layouts that pass every rule.

A violation's ``fix`` text looks at one rule; a suggestion is a set of flag
changes (``{"--tensor-model-parallel-size": 4}``, ``True`` adds a switch,
``None`` drops a flag) after which the *whole* layout passes every rule of
the chosen release and, when ``--gpu-memory-gib`` is given, fits.  The
search changes the knobs of ``KNOBS`` (never the model's architecture),
one, two or three at a time, breadth first; candidates are ordered by how
many flags change, then by how far the numbers move (log2 ratio).
"""

from __future__ import annotations

import copy
import math

from . import derive as D
from .flags import FLAGS

BY_OPTION = {f.option: f for f in FLAGS}
MAX_SUGGESTIONS = 3
MAX_DEPTH = 3
BEAM = 24  # partial fixes kept per depth (fewest violations first)


def _divisors(n, limit=4096):
    if not n or n > 10 ** 9:
        return [1]
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    return sorted(d for d in set(small + [n // d for d in small]) if d <= limit)


def _near(values, current, k=4):
    """The k values nearest ``current`` (log scale), current excluded."""
    cur = current or 1
    pool = [v for v in set(values) if v != current and v]
    return sorted(pool, key=lambda v: (abs(math.log2(v / cur)), v))[:k]


def _sizes(L):
    world = L.world_size
    experts = D.num_experts(L)
    heads = L.num_attention_heads
    out = {
        "--tensor-model-parallel-size": _near(
            [t for t in _divisors(world, 64) if not heads or heads % t == 0],
            L.tensor_model_parallel_size),
        "--pipeline-model-parallel-size": _near(
            [p for p in _divisors(world, L.num_layers or 1024)],
            L.pipeline_model_parallel_size),
        "--context-parallel-size": _near(_divisors(world, 64), L.context_parallel_size, 3),
    }
    if experts or L.expert_model_parallel_size > 1:
        out["--expert-model-parallel-size"] = _near(
            _divisors(experts or 1, 256), L.expert_model_parallel_size)
    if experts:
        out["--expert-tensor-parallel-size"] = [1, None] if L.expert_tensor_parallel_size \
            else [1]
    return out


def _batch(L):
    dp = D.data_parallel_size(L)
    out = {}
    if L.micro_batch_size and dp:
        step = L.micro_batch_size * dp
        g = L.global_batch_size or step
        pp = L.pipeline_model_parallel_size
        options = {max(step, (g // step) * step), (g // step + 1) * step, step * pp,
                   step * 2 * pp}
        out["--global-batch-size"] = _near(options, L.global_batch_size, 4)
    if L.global_batch_size and L.micro_batch_size:
        out["--micro-batch-size"] = _near(_divisors(L.global_batch_size, 64),
                                          L.micro_batch_size, 3)
    return out


def _pipeline(L):
    out = {}
    for option, dest in (("--num-virtual-stages-per-pipeline-rank",
                          "num_virtual_stages_per_pipeline_rank"),
                         ("--num-layers-per-virtual-pipeline-stage",
                          "num_layers_per_virtual_pipeline_stage"),
                         ("--microbatch-group-size-per-virtual-pipeline-stage",
                          "microbatch_group_size_per_vp_stage"),
                         ("--decoder-first-pipeline-num-layers",
                          "decoder_first_pipeline_num_layers"),
                         ("--decoder-last-pipeline-num-layers",
                          "decoder_last_pipeline_num_layers"),
                         ("--pipeline-model-parallel-layout", "pipeline_model_parallel_layout"),
                         ("--recompute-num-layers", "recompute_num_layers"),
                         ("--recompute-method", "recompute_method"),
                         ("--moe-ffn-hidden-size", "moe_ffn_hidden_size")):
        if getattr(L, dest) is not None:
            out[option] = [None]
    vpp = L.num_virtual_stages_per_pipeline_rank
    if vpp:
        per_rank = (L.num_layers or vpp) // max(1, L.pipeline_model_parallel_size) or 1
        out.setdefault("--num-virtual-stages-per-pipeline-rank", []).extend(
            v for v in _near(_divisors(per_rank), vpp, 3) if v > 1)
    for option, dest in (("--account-for-embedding-in-pipeline-split",
                          "account_for_embedding_in_pipeline_split"),
                         ("--account-for-loss-in-pipeline-split",
                          "account_for_loss_in_pipeline_split"),
                         ("--recompute-activations", "recompute_activations"),
                         ("--use-distributed-optimizer", "use_distributed_optimizer"),
                         ("--use-torch-fsdp2", "use_torch_fsdp2"),
                         ("--use-megatron-fsdp", "use_megatron_fsdp")):
        if getattr(L, dest):
            out[option] = [None]
    return out


def _features(L):
    """Switches and settings that single rules ask for."""
    out = {}
    if L.max_position_embeddings is not None and L.seq_length \
            and L.max_position_embeddings < L.seq_length:
        out["--max-position-embeddings"] = [L.seq_length]
    if L.add_bias_linear and D.num_experts(L):
        out["--disable-bias-linear"] = [True]
    if L.deterministic_mode:
        for option, dest in (("--tp-comm-overlap", "tp_comm_overlap"),
                             ("--cross-entropy-loss-fusion", "cross_entropy_loss_fusion"),
                             ("--use-flash-attn", "use_flash_attn")):
            if getattr(L, dest):
                out[option] = [None]
    if L.use_tp_pp_dp_mapping:
        out["--use-tp-pp-dp-mapping"] = [None]
    if L.gpu_memory_gib:  # ways to need less memory, for a layout that does not fit
        if not L.use_distributed_optimizer and not (L.use_megatron_fsdp or L.use_torch_fsdp2):
            out["--use-distributed-optimizer"] = [True]
        if not L.recompute_activations and L.recompute_granularity is None:
            out["--recompute-activations"] = [True]
        if L.micro_batch_size and L.micro_batch_size > 1:
            out["--micro-batch-size"] = [1]
    if L.expert_model_parallel_size > 1 and L.tensor_model_parallel_size > 1 \
            and not L.sequence_parallel:
        out["--sequence-parallel"] = [True]
    if L.fp16 and L.expert_model_parallel_size > 1:
        out["--fp16"] = [None]
        out["--bf16"] = [True]
    if L.recompute_granularity == "full":
        if L.recompute_method is None:
            out["--recompute-method"] = ["uniform"]
        if L.recompute_num_layers is None:
            out["--recompute-num-layers"] = [1]
    if L.recompute_granularity is not None:
        out.setdefault("--recompute-granularity", []).append(None)
    if L.use_torch_fsdp2:
        if L.gradient_accumulation_fusion:
            out["--no-gradient-accumulation-fusion"] = [True]
        if not L.untie_embeddings_and_output_weights:
            out["--untie-embeddings-and-output-weights"] = [True]
    if L.use_megatron_fsdp and L.ckpt_format != "fsdp_dtensor":
        out["--ckpt-format"] = ["fsdp_dtensor"]
    elif L.ckpt_format != "torch_dist":
        out["--ckpt-format"] = ["torch_dist"]
    if not L.overlap_p2p_comm:
        out["--no-overlap-p2p-communication"] = [None]
    if L.mtp_num_layers and L.position_embedding_type not in ("rope", "none"):
        out["--position-embedding-type"] = ["rope"]
    if L.num_distributed_optimizer_instances > 1:
        out["--num-distributed-optimizer-instances"] = [None]
    return out


def _unknown(L):
    """Drop each flag the release does not know (adding its successor)."""
    from .rules import DEFAULT_VERSION, given_flags
    from . import catalog
    from .entries import resolve
    known = catalog.release_flags(L.megatron_version or DEFAULT_VERSION)
    if known is None:
        return {}
    entry = resolve(L.entry).flags
    out = {}
    for option, _ in given_flags(L):
        if option not in known and option not in entry:
            out[option] = [None]
            successor = (catalog.history().get(option) or {}).get("successor")
            if successor in known and successor in BY_OPTION \
                    and BY_OPTION[successor].kind == "true":
                out.setdefault(successor, [True])
    return out


def knobs(layout):
    """flag -> candidate values for this layout."""
    table = {}
    for option, values in _unknown(layout).items():
        table[option] = list(values)
    for part in (_sizes(layout), _batch(layout), _pipeline(layout), _features(layout)):
        for option, values in part.items():
            table.setdefault(option, [])
            for v in values:
                if v not in table[option]:
                    table[option].append(v)
    return table


def apply(layout, changes):
    """A copy of ``layout`` with the flag changes applied."""
    new = copy.copy(layout)
    for option, value in changes.items():
        if option not in BY_OPTION:  # a pasted flag the checker does not parse
            new.other_flags = _without(new.other_flags or (), option) + (
                (option,) if value is True else ())
            continue
        flag = BY_OPTION[option]
        if value is None:
            setattr(new, flag.dest, flag.default)
        elif value is True:
            setattr(new, flag.dest, flag.kind == "true")
        else:
            setattr(new, flag.dest, value)
    return new


def _without(tokens, option):
    """The pasted arguments without ``option`` and its values."""
    from .catalog import split_flags
    out = []
    for name, values in split_flags(tokens):
        if name != option:
            out += ([name] if name else []) + values
    return tuple(out)


def _distance(layout, changes):
    moved = 0.0
    for option, value in changes.items():
        if option not in BY_OPTION:
            moved += 1.0
            continue
        old = getattr(layout, BY_OPTION[option].dest)
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(old, int) \
                and old > 0 and value > 0:
            moved += abs(math.log2(value / old))
        else:
            moved += 1.0
    return (len(changes), round(moved, 6), sorted(changes))


def _errors(layout, rules):
    from .rules import check
    return check(layout, rules=rules, with_memory=False).violations


def _fits(layout):
    from .memory import budget_gib
    if not budget_gib(layout):
        return True
    from . import memory
    est = memory.estimate(layout)
    return est is None or est["fits"] is not False


def suggestions(layout, rules=None, limit=MAX_SUGGESTIONS):
    """Up to ``limit`` flag-change dicts, nearest first, each of which makes
    the layout pass every rule (and fit when a GPU memory size is given)."""
    from .rules import RULES
    rules = rules or tuple(r for r in RULES if r.kind == "error")
    table = knobs(layout)
    options = sorted(table)
    found = []
    frontier = [{}]
    seen = set()
    for _depth in range(MAX_DEPTH):
        scored = []
        for base in frontier:
            for option in options:
                if option in base:
                    continue
                for value in table[option]:
                    changes = dict(base, **{option: value})
                    key = tuple(sorted((k, repr(v)) for k, v in changes.items()))
                    if key in seen:
                        continue
                    seen.add(key)
                    candidate = apply(layout, changes)
                    try:
                        errors = _errors(candidate, rules)
                    except (ZeroDivisionError, TypeError, ValueError):
                        continue
                    if not errors and _fits(candidate):
                        found.append(changes)
                    else:
                        scored.append((len(errors), _distance(layout, changes), changes))
        if len(found) >= limit:
            break
        scored.sort(key=lambda item: (item[0], item[1]))
        frontier = [c for _, _, c in scored[:BEAM]]
    found = _minimal(found)
    found.sort(key=lambda c: _distance(layout, c))
    return found[:limit]


def single_flag_values(layout, option, rules=None):
    """The values of ``option`` (the knob table's, plus the divisors and multiples
    a rule's fix would name) with which, changed alone, the layout passes every
    rule and fits: what suggestions() finds at depth one for that flag."""
    from .rules import RULES
    rules = rules or tuple(r for r in RULES if r.kind == "error")
    pool = list(knobs(layout).get(option, []))
    for value in _extra_candidates(layout, option):
        if value not in pool:
            pool.append(value)
    good = []
    for value in pool:
        candidate = apply(layout, {option: value})
        try:
            ok = not _errors(candidate, rules) and _fits(candidate)
        except (ZeroDivisionError, TypeError, ValueError):
            ok = False
        if ok:
            good.append(value)
    numbers = sorted((v for v in good if isinstance(v, int) and not isinstance(v, bool)),
                     key=lambda v: (abs(math.log2(v / (getattr(layout, BY_OPTION[option].dest)
                                                       or 1))), v))
    return numbers + [v for v in good if not isinstance(v, int) or isinstance(v, bool)]


def _extra_candidates(layout, option):
    """Sizes a rule's fix would name for ``option``: divisors of the relevant count."""
    L = layout
    if option == "--tensor-model-parallel-size":
        return _divisors(L.world_size, 64)
    if option == "--pipeline-model-parallel-size":
        return _divisors(L.world_size, L.num_layers or 1024)
    if option == "--context-parallel-size":
        return _divisors(L.world_size, 64)
    if option == "--expert-model-parallel-size":
        return _divisors(D.num_experts(L) or 1, 256)
    if option in ("--num-virtual-stages-per-pipeline-rank",
                  "--num-layers-per-virtual-pipeline-stage"):
        per_rank = (D.layers_for_split(L) or 1) // max(1, L.pipeline_model_parallel_size)
        return [d for d in _divisors(per_rank or 1) if d > 1] + [None]
    if option == "--num-distributed-optimizer-instances":
        dp = D.data_parallel_size(L) or 1
        return _divisors(dp * L.context_parallel_size) + [None]
    if option == "--global-batch-size":
        dp = D.data_parallel_size(L)
        if not (dp and L.micro_batch_size):
            return []
        step = dp * L.micro_batch_size
        g = L.global_batch_size or step
        return [v for v in ((g // step) * step, (g // step + 1) * step) if v > 0]
    if option == "--microbatch-group-size-per-virtual-pipeline-stage":
        m = D.num_microbatches(L) or 0
        return [v for v in range(L.pipeline_model_parallel_size, min(m, 64) + 1)] + [None]
    return []


MAX_FIX_VALUES = 6


def single_flag_fix(layout, option, original):
    """The fix line for a rule whose fix names values of ``option``."""
    values = single_flag_values(layout, option)
    if not values:
        return (f"for this rule alone: {original} (no value of {option} alone passes every "
                "rule here" + (" and fits" if layout.gpu_memory_gib else "")
                + ": see the suggested layouts)")
    shown = [("drop the flag" if v is None else str(v)) for v in values[:MAX_FIX_VALUES]]
    more = f" (and {len(values) - MAX_FIX_VALUES} more)" if len(values) > MAX_FIX_VALUES else ""
    return (f"use {option} in {', '.join(shown)}{more}: each, changed alone, passes every rule"
            + (" and fits" if layout.gpu_memory_gib else ""))


def _minimal(found):
    """Drop a suggestion that contains another one (the extra change is not needed)."""
    items = [set((k, repr(v)) for k, v in c.items()) for c in found]
    keep = []
    for i, c in enumerate(found):
        if not any(j != i and items[j] < items[i] for j in range(len(found))):
            keep.append(c)
    return keep


def as_flags(changes):
    """Ready-to-paste text: '--a 4 --b' plus '(remove --c)' for dropped flags."""
    add, drop = [], []
    for option, value in changes.items():
        if value is None:
            drop.append(option)
        elif value is True:
            add.append(option)
        else:
            add.append(f"{option} {value}")
    text = " ".join(add)
    if drop:
        text += (" " if text else "") + "(remove " + " ".join(drop) + ")"
    return text


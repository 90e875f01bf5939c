#!/usr/bin/env python3
"""Check a Megatron Core parallel layout (TP/PP/VPP/CP/EP/ETP/DP) before launching.

Paste the Megatron-LM flags of your launch script and give the cluster size:

  check_parallel_layout.py --world-size 64 --tensor-model-parallel-size 8 \\
      --pipeline-model-parallel-size 2 --num-layers 32 --hidden-size 4096 \\
      --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096 \\
      --micro-batch-size 1 --global-batch-size 256 --vocab-size 32000 --bf16

Every violated rule is reported at once (rule id, Megatron's own message where
it has one, a concrete fix), with warnings for legal-but-suspect layouts,
derived sizes (DP, expert DP, microbatches, padded vocabulary, layers per
stage) and a per-GPU memory estimate.  Megatron-LM flags the checker does not
use are listed.  Rules and numbers follow the chosen release
(references/parallelism-reference.md gives each rule's source).

Modes:
  --ranks   add the rank groups (tp, pp, dp, cp, dp-cp, tp-pp, ep, etp, edp,
            tp-ep, tp-ep-pp, ...) and a rank map (node, GPU, coordinates)
  --plan    enumerate every valid layout for the model on --world-size (and the
            micro-batch and virtual pipeline sizes the flags leave free) and rank
            them: fits in memory, then predicted tokens/s/GPU on --gpu (h100 when
            not given)
  --gpu     a100-80g, h100, h200, b200, b300, gb200, gb300: predict step time,
            tokens/s/GPU, model TFLOP/s and MFU of the layout (precision from
            --bf16 / --fp8-format / --fp8-recipe / --fp4-format), and use the GPU's
            HBM as the memory budget (unless --gpu-memory-gib is given)
  --verify  also run Megatron's own validation (needs megatron-core; slow)

Flags: every Megatron-LM flag of the chosen release is known; flags the
checker does not use are listed, flags the release does not know are a
violation (unknown-flag: Megatron-LM exits at argument parsing) with the
successor and the release that removed them.  --megatron-version X.Y applies
that release's rules (default: the installed megatron-core, read without
importing it, else 0.19.2; the report says which).

Exit codes: 0 valid, 1 invalid layout (or, with --verify, Megatron disagrees),
2 bad input (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cli_guard  # noqa: E402
from parallel_layout import SCHEMA_VERSION, MEGATRON_CORE_VERSION, gpus  # noqa: E402
from parallel_layout.errors import BadInput  # noqa: E402
from parallel_layout.flags import (add_layout_arguments, layout_from_namespace,  # noqa: E402
                                   resolve_release_dependent)

PROG = "check_parallel_layout.py"
MAX_TEXT_RANKS = 64  # rank-map entries in --json of a summarised (large) world
SUMMARY_TEXT_RANKS = 8  # rank-map lines in the text (--json has every rank up to 256 GPUs)
MAX_RANKS_WORLD = 1 << 20  # every group is computed: ~1.5 GB and 4 s at this size
PLAN_LIMIT = 10


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(message)


def _plan_limit(text):
    value = int(text)
    if not 0 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"must be from 0 to 100000, got {value}")
    return value


def build_parser():
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0],
                     epilog=__doc__.split("\n\n", 1)[1],
                     formatter_class=argparse.RawDescriptionHelpFormatter,
                     allow_abbrev=False)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object (schema_version %d)" % SCHEMA_VERSION)
    parser.add_argument("--ranks", action="store_true", help="add rank groups and a rank map")
    parser.add_argument("--ranks-all", action="store_true",
                        help="with --ranks on more than %d GPUs: every group and rank in "
                             "--json, instead of a summary" % 256)
    parser.add_argument("--schedule", action="store_true",
                        help="add the pipeline schedule: per pipeline rank, warm-up, 1F1B and "
                             "cool-down steps (1F1B or interleaved) and the global decoder "
                             "layers of each virtual stage")
    parser.add_argument("--plan", action="store_true",
                        help="enumerate and rank every valid layout for the model")
    parser.add_argument("--plan-limit", type=_plan_limit, default=None, metavar="N",
                        help="layouts to print with --plan (default %d, with --full all; "
                             "0 = all)" % PLAN_LIMIT)
    parser.add_argument("--gpu", metavar="NAME",
                        help="GPU for the performance prediction and the memory budget: "
                             + ", ".join(gpus.names()))
    parser.add_argument("--full", action="store_true",
                        help="with --plan: every layout, each with its whole performance "
                             "breakdown (default output stays under 4 KB text / 16 KB JSON)")
    parser.add_argument("--verify", action="store_true",
                        help="also run the installed Megatron on the whole command; a "
                             "disagreement exits 1 with both verdicts")
    parser.add_argument("--entry", metavar="SCRIPT",
                        help="the Megatron-LM entry script the flags go to (default "
                             "pretrain_gpt.py); the arguments of known entry scripts "
                             "(examples/multimodal/train.py, the ModelOpt finetune.py, ...) "
                             "are legal; under an unknown one, unknown flags are warnings")
    parser.add_argument("--megatron-version", metavar="X.Y",
                        help="apply the rules and flag set of this release (0.12-0.19; "
                             "default: the installed megatron-core, else 0.19.2)")
    add_layout_arguments(parser)
    return parser


def gib(n):
    return "n/a" if n is None else f"{n / (1 << 30):.2f} GiB"


def show(value):
    return "-" if value is None else value


def text_report(layout, result, unknown, extra):
    d = result.derived
    lines = [
        f"Layout on {layout.world_size} GPUs ({d['nodes']} node(s) x {layout.gpus_per_node}): "
        f"TP={d['tensor_model_parallel_size']} PP={d['pipeline_model_parallel_size']} "
        f"CP={d['context_parallel_size']} DP={show(d['data_parallel_size'])} "
        f"EP={d['expert_model_parallel_size']} ETP={d['expert_tensor_parallel_size']} "
        f"EDP={show(d['expert_data_parallel_size'])} "
        f"VPP={show(d['virtual_pipeline_model_parallel_size'])}",
        "VALID" if result.valid else f"INVALID: {len(result.violations)} violated rule(s)",
    ]
    for v in result.violations:
        lines += [f"  x [{v.rule}] {v.message}", f"      fix: {v.fix}", f"      source: {v.source}"]
    shown = []
    for v in result.violations:  # every violation carries the same whole layouts
        shown += [s for s in v.suggestions if s not in shown]
    if shown:
        from parallel_layout.suggest import as_flags
        lines.append("Suggested layouts (each passes every rule; paste the flags):")
        lines += [f"  {i}. {as_flags(s)}" for i, s in enumerate(shown, 1)]
    elif result.violations:
        lines.append("Suggested layouts: none found within three flag changes")
    if result.warnings:
        lines.append("Warnings:")
        lines += [f"  ! [{w.rule}] {w.message}" for w in result.warnings]
    lines.append("Derived:")
    for key in ("num_microbatches", "global_batch_size", "padded_vocab_size", "ffn_hidden_size",
                "kv_channels", "num_query_groups", "sequence_parallel", "layers_per_stage"):
        lines.append(f"  {key}: {d[key]}")
    mem = result.memory
    if mem:
        lines += memory_lines(mem)
    else:
        lines.append("Memory: not estimated (needs --num-layers --hidden-size "
                     "--num-attention-heads and a valid split)")
    lines.append(f"Rules and flags of megatron-core {layout.megatron_version} "
                 f"({extra['version_source']})")
    if result.unverified:
        lines.append(f"Applied as in 0.19.2, not found in {layout.megatron_version}'s sources "
                     "(reworded, scoped differently or absent there): "
                     + " ".join(result.unverified))
    sorted_flags = extra["flags"]
    if sorted_flags["irrelevant"]:
        lines.append("Known to Megatron-LM, not used for the layout: "
                     + " ".join(sorted_flags["irrelevant"]))
    if sorted_flags["unknown"]:
        from parallel_layout.entries import known, resolve
        entry = resolve(layout.entry)
        lines.append("Unknown to this release (Megatron-LM exits at argument parsing"
                     + ("" if known(entry) else f" unless {entry.name} adds them") + "): "
                     + " ".join(u["flag"] for u in sorted_flags["unknown"]))
    if "ranks" in extra:
        lines += rank_map_lines(layout, extra["ranks"], extra["rank_map"])
    if "schedule" in extra:
        from parallel_layout import schedule
        lines += (schedule.lines(extra["schedule"]) if extra["schedule"] else
                  ["Pipeline schedule: not computed (needs a valid layout with "
                   "--micro-batch-size and --num-layers)"])
    if "verify" in extra:
        v = extra["verify"]
        if v.get("available") and v["agrees"] is False:
            lines.append("DISAGREEMENT with Megatron: checker says "
                         f"{'valid' if result.valid else 'invalid'}; Megatron "
                         f"{'accepts' if v['megatron']['accepted'] else 'rejects'}"
                         + (f" at {v['megatron']['stage']}: {v['megatron']['error']}"
                            if not v['megatron']['accepted'] else ""))
        lines.append("Megatron verify: " + json.dumps(v))
    return "\n".join(lines)


MAX_MEMORY_RANKS = 8  # pipeline ranks listed one per line; the most loaded is always shown


def memory_lines(mem):
    """One line per pipeline rank (weights+optimizer + activations = total of that
    rank), then the most loaded rank against the memory given."""
    lines = [f"Memory per GPU ({mem['precision']}), by pipeline rank: weights+optimizer + "
             "activations = total"]
    stages = mem["per_stage"]
    worst = mem["most_loaded_pp_rank"]
    shown = stages[:MAX_MEMORY_RANKS]
    if worst >= MAX_MEMORY_RANKS:
        shown = shown[:-1] + [stages[worst]]
    for st in shown:
        # each term rounded as printed, so that the printed line adds up
        w = round(st["weight_and_optimizer_bytes"] / (1 << 30), 2)
        a = round((st["activation_bytes"] or 0) / (1 << 30), 2)
        lines.append(f"  PP rank {st['pp_rank']:>3}: {w:.2f} + {a:.2f} = {w + a:.2f} GiB"
                     + ("  <- most loaded" if st["pp_rank"] == worst else ""))
    if len(stages) > len(shown):
        lines.append(f"  ... {len(stages) - len(shown)} more pipeline ranks (use --json)")
    budget = mem["gpu_memory_bytes"]
    if budget:
        verdict = "fits" if mem["fits"] else "DOES NOT FIT"
        lines.append(f"  Most loaded: PP rank {worst}, {gib(mem['total_bytes_per_gpu'])}: "
                     f"{verdict} in {gib(budget)}")
    else:
        lines.append(f"  Most loaded: PP rank {worst}, {gib(mem['total_bytes_per_gpu'])} "
                     "(give --gpu-memory-gib for a verdict)")
    return lines


def rank_map_lines(layout, groups, rank_map):
    from parallel_layout import ranks
    lines = ["Rank map (rank: node/gpu  tp pp dp cp | ep etp edp):"]
    shown = SUMMARY_TEXT_RANKS  # the text stays short; --json has every rank (up to 256)
    for entry in rank_map[:shown]:
        c = entry["coords"]
        lines.append(f"  rank {entry['rank']:>5}: node {entry['node']:>4} gpu {entry['gpu']:>2}  "
                     f"tp={c['tp']} pp={c['pp']} dp={c['dp']} cp={c['cp']} | "
                     f"ep={c['ep']} etp={c['etp']} edp={c['edp']}")
    if layout.world_size > shown:
        lines.append(f"  ... {layout.world_size - shown} more ranks (use --json"
                     + (" --ranks-all" if layout.world_size > ranks.SUMMARY_ABOVE else "") + ")")
    lines.append("Groups (count x size: the first two ... the last):")
    summary = groups if isinstance(next(iter(groups.values()), None), dict) \
        else ranks.summarise(groups)
    for name, g in summary.items():
        shown = f"[{g['first']}]" + (f"; [{g['second']}]" if g["second"] else "")
        if g["count"] > 2 and summary is not groups and g["count"] <= 4:
            shown = "; ".join(f"[{ranks.compact(x)}]" for x in groups[name])  # all of them
        elif g["count"] > 2:
            shown += f" ... [{g['last']}]"
        lines.append(f"  {name:>18}: {g['count']} x {g['size']}: {shown}")
    return lines


def performance_line(perf, layout, valid):
    """One line of the prediction and its three largest terms (share of the step)."""
    if not perf:
        from parallel_layout.performance import not_predicted_reason
        why = (not_predicted_reason(layout) if valid else None) or "the layout is invalid"
        return f"Performance: not predicted ({why})"
    step = perf["step_seconds"] or 1
    top = ", ".join(f"{k} {perf['breakdown'][k] / step:.0%}" for k in perf["top_terms"])
    return (f"Performance on {perf['gpu']} ({perf['precision']}): "
            f"{perf['tokens_per_second_per_gpu']:,.0f} tokens/s/GPU, step "
            f"{perf['step_seconds']:.3g} s, {perf['model_tflops_per_gpu']:,.0f} model TFLOP/s/GPU "
            f"(MFU {perf['mfu']:.1%}); largest terms: {top}"
            + ("" if perf.get("memory_fits", True) else
               "; memory_fits: false (the memory estimate alone is over the budget)"))


def plan_lines(plans, limit, own_rank=None, gpu_name=None, bounded_out=0):
    lines = [f"{len(plans)} valid layout(s), fastest first (predicted on {gpu_name}):"]
    if bounded_out:
        lines[0] = (f"{len(plans)} valid layout(s) evaluated, fastest first (predicted on "
                    f"{gpu_name}); {bounded_out} more size choice(s) left out, bounded slower "
                    "than these (--full evaluates all):")
    header = ("  TP  PP  CP  EP ETP    DP mbs vpp     m  fits  tok/s/GPU   MFU  bubble "
              "    mem/GPU  flags")
    lines.append(header)
    for p in plans[:limit or None]:
        fits = {True: "yes", False: "NO", None: "?"}[p["fits_memory"]]
        perf = p["performance"] or {}
        tokens = perf.get("tokens_per_second_per_gpu")
        mfu = perf.get("mfu")
        lines.append(
            f"  {p['tensor_model_parallel_size']:>2} {p['pipeline_model_parallel_size']:>3} "
            f"{p['context_parallel_size']:>3} {p['expert_model_parallel_size']:>3} "
            f"{p['expert_tensor_parallel_size']:>3} {p['data_parallel_size']:>5} "
            f"{p['micro_batch_size']:>3} {show(p['virtual_pipeline_model_parallel_size']):>3} "
            f"{str(p['num_microbatches']):>5} {fits:>5} "
            f"{'-' if tokens is None else f'{tokens:,.0f}':>10} "
            f"{'-' if mfu is None else f'{mfu:.0%}':>5} {p['pipeline_bubble_fraction']:>7.1%} "
            f"{gib(p['total_bytes_per_gpu']):>11}  "
            + p["flags"].replace("--tensor-model-parallel-size", "--tp").replace(
                "--pipeline-model-parallel-size", "--pp").replace(
                "--context-parallel-size", "--cp").replace(
                "--expert-model-parallel-size", "--ep").replace(
                "--expert-tensor-parallel-size", "--etp").replace(
                "--micro-batch-size", "--mbs").replace(
                "--num-virtual-stages-per-pipeline-rank", "--vpp"))
    shown = len(plans[:limit or None])
    if shown < len(plans):
        lines.append(f"  ... {len(plans) - shown} more (--plan-limit N or --full; --json for "
                     "the Megatron flags)")
    lines.append("flags abbreviated: --tp/--pp/--cp/--ep/--etp/--mbs/--vpp stand for "
                 "--tensor-model-parallel-size ... --num-virtual-stages-per-pipeline-rank")
    of = f"of {len(plans)}" if not bounded_out else \
        f"of {len(plans)} evaluated; the {bounded_out} left out rank below it"
    lines.append(f"Your layout ranks {own_rank} {of} (sizes, micro batch and "
                 "virtual stages; the plan uses even splits)." if own_rank else
                 "Your layout is not among them (it is invalid or uses an uneven split).")
    return "\n".join(lines)


def resolve_version(requested):
    """(release, source): --megatron-version, the installed megatron-core
    (importlib.metadata, never imported) or the default 0.19.2."""
    try:
        from release_index import resolve_version as resolve
    except ImportError:  # the bundle without the release index
        if requested:
            raise BadInput("--megatron-version needs scripts/release_index") from None
        return MEGATRON_CORE_VERSION, "default"
    try:
        return resolve(requested)
    except ValueError as exc:
        raise BadInput(f"--megatron-version: {exc}") from None


def classify_flags(argv, layout):
    from parallel_layout.catalog import classify
    from parallel_layout.flags import FLAGS
    checker = {a.option_strings[0] for a in build_parser()._actions if a.option_strings}
    megatron = {f.option for f in FLAGS}
    own = checker - megatron  # the checker's own options are not Megatron's
    tokens = [t for t, _ in _strip_own(argv, own)]
    from parallel_layout.entries import resolve
    return classify(tokens, layout.megatron_version, megatron, resolve(layout.entry).flags)


def _strip_own(argv, own):
    """The arguments without the checker's own options and their values."""
    from parallel_layout.catalog import split_flags
    out = []
    for option, values in split_flags(argv):
        if option in own:
            continue
        for token in ([option] if option else []) + values:
            out.append((token, option))
    return out


def collect_extra(args, layout, result):
    extra = {}
    if args.ranks and result.derived["data_parallel_size"] is not None \
            and layout.world_size % result.derived["expert_tensor_parallel_size"] == 0 \
            and not any(v.rule == "expert-grid-divisible" for v in result.violations):
        from parallel_layout import ranks
        order = ranks.layout_order(layout)
        groups = ranks.rank_groups(layout, order=order)
        extra["rank_order"] = order
        coords = ranks.rank_coordinates(layout, order=order)
        n = layout.gpus_per_node
        summary = layout.world_size > ranks.SUMMARY_ABOVE and not args.ranks_all
        extra["ranks"] = ranks.summarise(groups) if summary else groups
        extra["ranks_summarised"] = summary
        extra["rank_map"] = [{"rank": r, "node": r // n, "gpu": r % n, "coords": c}
                             for r, c in enumerate(coords[:MAX_TEXT_RANKS] if summary
                                                   else coords)]
        extra["rank_map_total"] = layout.world_size
    elif args.ranks:
        extra["ranks"] = None
        extra["rank_map"] = []
    if args.schedule:
        from parallel_layout import schedule
        extra["schedule"] = schedule.schedule(layout) if result.valid else None
    if args.verify:
        from parallel_layout import verify
        extra["verify"] = verify.verify(layout, result)
    return extra


def run(argv):
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    version, source = resolve_version(args.megatron_version)
    layout = layout_from_namespace(args)
    layout.other_flags = tuple(unknown)
    layout.megatron_version = version
    layout.entry = args.entry
    resolve_release_dependent(layout)
    if args.ranks and layout.world_size > MAX_RANKS_WORLD:
        raise BadInput(f"--ranks lists rank groups for up to {MAX_RANKS_WORLD:,} GPUs "
                       f"(got --world-size {layout.world_size:,})")
    if args.plan_limit is not None and args.plan_limit < 0:
        raise BadInput("--plan-limit must be >= 0")
    limit = args.plan_limit if args.plan_limit is not None else (0 if args.full else PLAN_LIMIT)
    gpu = None
    if args.gpu:
        gpu = gpus.get(args.gpu)
        if layout.gpu_memory_gib is None:  # the GPU's HBM is the memory budget
            layout.gpu_memory_gib = gpus.memory_budget_gib(gpu["name"])
    if args.plan and None in (layout.num_layers, layout.hidden_size, layout.num_attention_heads,
                              layout.seq_length):
        raise BadInput("--plan needs the model: --num-layers --hidden-size "
                       "--num-attention-heads --seq-length")
    from parallel_layout import rules
    result = rules.check(layout)
    extra = collect_extra(args, layout, result)
    extra["version_source"] = source
    extra["flags"] = classify_flags(argv, layout)
    performance = None
    # Predicted (and ranked by --plan) also when the memory estimate alone rejects the layout:
    # the step is defined, and the estimate may be off (published layouts measured on the GPU
    # exceed it).
    over_memory = rules.only_estimates_violated(result)
    if gpu is not None:
        from parallel_layout import performance as perf_model
        performance = perf_model.predict(layout, gpu) if result.valid or over_memory else None
        if performance is not None:
            performance["memory_fits"] = not over_memory
    plans = None
    if args.plan:
        from parallel_layout import plan
        plan_gpu = gpu or plan.G.get(plan.DEFAULT_GPU)
        plan_stats = {}
        plans = plan.enumerate_layouts(layout, gpu=plan_gpu, full=args.full,
                                       detail=limit or None, exact=limit or None,
                                       own=layout if result.valid or over_memory else None,
                                       stats=plan_stats)
        own_rank = plan.rank_of(layout, plans) if result.valid or over_memory else None
    if args.json:
        out = {"schema_version": SCHEMA_VERSION, "megatron_core_version": version,
               "megatron_version_source": source}
        out.update(result.to_dict())
        out["ignored_flags"] = unknown
        out.update({k: v for k, v in extra.items() if k != "version_source"})
        out["performance"] = performance  # null without --gpu
        if plans is not None:
            out["plan"] = plans[:limit or None]
            out["plan_count"] = len(plans)
            # Size choices whose lower bound is slower than the plans shown and the given layout
            # (not evaluated; --full evaluates all).
            out["plan_bounded_out"] = plan_stats.get("bounded_out", 0)
            out["plan_rank"] = own_rank
            out["plan_gpu"] = plan_gpu["name"]
        print(json.dumps(out))
    else:
        if extra.get("ranks") is None and args.ranks:
            extra.pop("ranks")
        print(text_report(layout, result, unknown, extra))
        if gpu is not None:
            print(performance_line(performance, layout, result.valid))
        if plans is not None:
            print(plan_lines(plans, limit, own_rank, plan_gpu["name"],
                             plan_stats.get("bounded_out", 0)))
    if args.plan:
        return 0 if plans else 1
    disagrees = args.verify and extra["verify"].get("available") \
        and extra["verify"]["agrees"] is False
    return 0 if result.valid and not disagrees else 1


def _run_checked(argv):
    try:
        return run(argv)
    except BadInput as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        # cli_guard: a closed pipe exits 0 and Ctrl-C 130, as in every script
        return cli_guard.run(lambda: _run_checked(argv), PROG)
    except Exception as exc:  # noqa: BLE001 - the contract is: never a traceback
        print(f"{PROG}: internal error: {type(exc).__name__}: {' '.join(str(exc).split())}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Derived sizes: the numbers Megatron computes from the flags.

Each function mirrors one computation of megatron-core 0.19.2 and names it.
Functions return None where an input is missing or the layout is invalid
(the rules in rules.py report why).
"""

from __future__ import annotations

import math
import re

CHAR_TO_LAYER = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
MAX_STAGE_CELLS = 1_000_000  # pp x vpp cells a stage table may hold


class LayoutTooLong(ValueError):
    """A layout string whose repetitions expand beyond any real model."""


def etp(layout):
    """ETP defaults to TP (validate_args; ModelParallelConfig.__post_init__)."""
    return layout.expert_tensor_parallel_size or layout.tensor_model_parallel_size


def model_size(layout):
    return (layout.tensor_model_parallel_size * layout.pipeline_model_parallel_size
            * layout.context_parallel_size)


def expert_grid_size(layout):
    return etp(layout) * layout.expert_model_parallel_size * layout.pipeline_model_parallel_size


def data_parallel_size(layout):
    """world // (TP*PP*CP): validate_args and initialize_model_parallel."""
    m = model_size(layout)
    return layout.world_size // m if layout.world_size % m == 0 else None


def expert_data_parallel_size(layout):
    """world // (ETP*EP*PP), only meaningful with experts."""
    if not num_experts(layout):
        return None
    g = expert_grid_size(layout)
    return layout.world_size // g if layout.world_size % g == 0 else None


def num_experts(layout):
    """validate_args turns --num-experts 0 into None."""
    return layout.num_experts or None


def padded_vocab_size(layout):
    """megatron/training/vocab_utils.py calculate_padded_vocab_size."""
    if layout.vocab_size is None:
        return None
    multiple = layout.make_vocab_size_divisible_by * layout.tensor_model_parallel_size
    return int(math.ceil(layout.vocab_size / multiple) * multiple)


def ffn_hidden_size(layout):
    """validate_args default: 4h, or int((4h*2/3)/64)*64 with --swiglu."""
    if layout.ffn_hidden_size is not None:
        return layout.ffn_hidden_size
    if layout.hidden_size is None:
        return None
    if layout.swiglu:
        return int((4 * layout.hidden_size * 2 / 3) / 64) * 64
    return 4 * layout.hidden_size


def kv_channels(layout):
    if layout.kv_channels is not None:
        return layout.kv_channels
    if layout.hidden_size is None or layout.num_attention_heads is None:
        return None
    return layout.hidden_size // layout.num_attention_heads


def num_query_groups(layout):
    """core_transformer_config_from_args: --num-query-groups only counts with
    --group-query-attention; otherwise groups = heads (MHA)."""
    if layout.group_query_attention:
        return layout.num_query_groups
    return layout.num_attention_heads


def has_dense_layers(layout):
    """False when every decoder layer is MoE (--moe-layer-freq 1, the default)."""
    if not num_experts(layout):
        return True
    freq = layout.moe_layer_freq
    if isinstance(freq, int):
        return freq > 1 and (layout.num_layers or 0) > 1
    return 0 in freq


def moe_ffn_hidden_size(layout):
    if not num_experts(layout):
        return None
    return layout.moe_ffn_hidden_size or ffn_hidden_size(layout)


def step_schedule(layout):
    """--step-batch-size-schedule as [(threshold, batch size)] (StepBatchsize-
    NumMicroBatchesCalculator._parse_schedule), or None; raises ValueError."""
    text = getattr(layout, "step_batch_size_schedule", None)
    if text is None:
        return None
    suffix = {"K": 10 ** 3, "M": 10 ** 6, "B": 10 ** 9, "T": 10 ** 12}

    def number(part):
        part = part.strip().upper()
        mult = suffix.get(part[-1:], 1)
        return int(float(part[:-1] if mult > 1 else part) * mult)

    out = []
    for entry in text.strip().replace(",", " ").split():
        if ":" not in entry:
            raise ValueError(f'Invalid schedule entry "{entry}". Expected format: '
                             '"THRESHOLD:BATCH_SIZE"')
        threshold, size = entry.split(":", 1)
        t = number(threshold)
        if layout.seq_length:
            t //= layout.seq_length
        out.append((t, number(size)))
    return sorted(out)


def global_batch_size(layout):
    """validate_args: default global batch = micro * DP; with a step schedule,
    the calculator's global batch is the last entry's."""
    try:
        schedule = step_schedule(layout)
    except (ValueError, OverflowError):
        schedule = None
    if schedule and layout.global_batch_size is None:
        return schedule[-1][1]
    if layout.global_batch_size is not None:
        return layout.global_batch_size
    dp = data_parallel_size(layout)
    if layout.micro_batch_size is None or dp is None:
        return None
    return layout.micro_batch_size * dp


def num_microbatches(layout):
    """ConstantNumMicroBatchesCalculator: global // (micro * DP)."""
    dp = data_parallel_size(layout)
    gbs = global_batch_size(layout)
    try:
        schedule = step_schedule(layout)
    except (ValueError, OverflowError):
        schedule = None
    if schedule and layout.global_batch_size is None:
        gbs = min(size for _, size in schedule)  # the fewest microbatches of the schedule
    if dp is None or gbs is None or layout.micro_batch_size is None:
        return None
    per_step = layout.micro_batch_size * dp
    return gbs // per_step if gbs % per_step == 0 else None


def recompute_granularity(layout):
    """--recompute-activations means selective (validate_args)."""
    if layout.recompute_activations:
        return "selective"
    return layout.recompute_granularity


def sequence_parallel(layout):
    """validate_args switches SP off when TP == 1."""
    return bool(layout.sequence_parallel and layout.tensor_model_parallel_size > 1)


MAX_LAYOUT_CHARS = 1_000_000  # expanded layout characters (layers and '|'), in total


def unroll_layout(text):
    """PipelineParallelLayerLayout.parse_str_to_list: stages as lists of chars.
    Raises ValueError on characters Megatron does not know, LayoutTooLong when
    the expansion would exceed MAX_LAYOUT_CHARS in total (Megatron's two
    passes, "(...)*n" then "x*n", are sized before either one expands)."""
    text = text.replace(",", "")
    if len(text) > MAX_LAYOUT_CHARS:
        raise LayoutTooLong("layout too long")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        grown = len(text)
        for match in re.finditer(pattern, text):
            digits = match.group(2).lstrip("0") or "0"
            if len(digits) > 7:
                raise LayoutTooLong("layout too long")
            grown += len(match.group(1)) * int(digits) - len(match.group(0))
            if grown > MAX_LAYOUT_CHARS:
                raise LayoutTooLong("layout too long")
        text = re.sub(pattern, lambda m: m.group(1) * int(m.group(2)), text)
    stages = text.split("|")
    for stage in stages:
        for ch in stage:
            if ch not in CHAR_TO_LAYER:
                raise ValueError(ch)
    return stages


def hybrid_segments(layout):
    """--hybrid-layer-pattern's pipeline segments (main pattern split at '|'),
    or None without a pattern (hybrid_layer_allocation.select_pipeline_segment)."""
    pattern = getattr(layout, "hybrid_layer_pattern", None)
    if pattern is None:
        return None
    main = pattern.split("/")[0]
    return main.split("|") if main else [""]


def virtual_pipeline_size(layout):
    """validate_args: VPP from the layout string, --num-virtual-stages-per-
    pipeline-rank, or layers per stage // --num-layers-per-virtual-pipeline-
    stage; a result of 1 means no interleaving (None)."""
    pp = layout.pipeline_model_parallel_size
    vpp = None
    segments = hybrid_segments(layout)
    if segments is not None:
        # validate_args derives VPP from the '|' segments (None without pipes)
        n = len(segments)
        return n // pp if n > pp and n % pp == 0 else None
    if layout.pipeline_model_parallel_layout is not None:
        try:
            stages = len(unroll_layout(layout.pipeline_model_parallel_layout))
        except ValueError:
            return None
        vpp = stages // pp if stages % pp == 0 else None
    elif layout.num_virtual_stages_per_pipeline_rank is not None:
        vpp = layout.num_virtual_stages_per_pipeline_rank
    elif layout.num_layers_per_virtual_pipeline_stage is not None:
        n = layers_for_split(layout)
        if n is None or n % pp:
            return None
        per_stage = n // pp
        if per_stage % layout.num_layers_per_virtual_pipeline_stage:
            return None
        vpp = per_stage // layout.num_layers_per_virtual_pipeline_stage
    return None if vpp == 1 else vpp


def layers_for_split(layout):
    """num_layers (+1 with embedding, +1 with loss accounted in the split)."""
    if layout.num_layers is None:
        return None
    return (layout.num_layers + int(layout.account_for_embedding_in_pipeline_split)
            + int(layout.account_for_loss_in_pipeline_split))


def stage_table(layout):
    """Decoder layers per [pp_rank][vpp_rank] (what get_num_layers_to_build
    builds), or None when the split is invalid or inputs are missing.
    Also returns where embedding, loss and MTP live: dict with keys
    ``layers`` (matrix), ``mtp`` (matrix), ``embedding_rank``, ``loss_rank``."""
    pp = layout.pipeline_model_parallel_size
    vpp = virtual_pipeline_size(layout) or 1
    if pp * vpp > MAX_STAGE_CELLS:
        return None
    segments = hybrid_segments(layout)
    if segments is not None and len(segments) > 1:
        if len(segments) % pp:
            return None
        vpp = len(segments) // pp
        layers = [[len(segments[v * pp + r]) for v in range(vpp)] for r in range(pp)]
        return {"layers": layers, "mtp": [[0] * vpp for _ in range(pp)],
                "embedding_rank": 0, "loss_rank": pp - 1}
    if layout.pipeline_model_parallel_layout is not None:
        return _stage_table_from_string(layout, pp, vpp)
    L = layout.num_layers
    if L is None:
        return None
    mtp = layout.mtp_num_layers or 0
    first, last = layout.decoder_first_pipeline_num_layers, layout.decoder_last_pipeline_num_layers
    if first is not None or last is not None:
        rest, middle = L, pp
        if first is not None:
            rest, middle = rest - first, middle - 1
        if last is not None:
            rest, middle = rest - last, middle - 1
        if rest < 0 or middle < 0 or bool(rest) != bool(middle) or (middle and rest % middle):
            return None
        per_rank = [rest // middle if middle else 0] * pp
        if first is not None:
            per_rank[0] = first
        if last is not None:
            per_rank[-1] = last
        if any(n % vpp for n in per_rank):
            return None
        layers = [[n // vpp] * vpp for n in per_rank]
    else:
        n = layers_for_split(layout)
        if n % pp or (n // pp) % vpp:
            return None
        chunk = n // pp // vpp
        layers = [[chunk] * vpp for _ in range(pp)]
        if layout.account_for_embedding_in_pipeline_split:
            layers[0][0] -= 1
        if layout.account_for_loss_in_pipeline_split:
            layers[-1][-1] -= 1
        if min(min(row) for row in layers) < 0:
            return None
    mtp_table = [[0] * vpp for _ in range(pp)]
    mtp_table[-1][-1] = mtp
    return {"layers": layers, "mtp": mtp_table, "embedding_rank": 0, "loss_rank": pp - 1}


def _stage_table_from_string(layout, pp, vpp):
    try:
        stages = unroll_layout(layout.pipeline_model_parallel_layout)
    except ValueError:
        return None
    if len(stages) % pp:
        return None
    vpp = len(stages) // pp
    layers = [[stages[v * pp + r].count("t") for v in range(vpp)] for r in range(pp)]
    mtp = [[stages[v * pp + r].count("m") for v in range(vpp)] for r in range(pp)]
    emb = [r for r in range(pp) for v in range(vpp) if "E" in stages[v * pp + r]]
    loss = [r for r in range(pp) for v in range(vpp) if "L" in stages[v * pp + r]]
    return {"layers": layers, "mtp": mtp, "embedding_rank": emb[0] if emb else 0,
            "loss_rank": loss[0] if loss else pp - 1}


def layers_per_stage(layout):
    table = stage_table(layout)
    if table is None:
        return None
    return [sum(row) for row in table["layers"]]


def derive(layout):
    """All derived sizes as a JSON-ready dict."""
    table = stage_table(layout)
    return {
        "world_size": layout.world_size,
        "tensor_model_parallel_size": layout.tensor_model_parallel_size,
        "pipeline_model_parallel_size": layout.pipeline_model_parallel_size,
        "context_parallel_size": layout.context_parallel_size,
        "expert_model_parallel_size": layout.expert_model_parallel_size,
        "expert_tensor_parallel_size": etp(layout),
        "data_parallel_size": data_parallel_size(layout),
        "expert_data_parallel_size": expert_data_parallel_size(layout),
        "virtual_pipeline_model_parallel_size": virtual_pipeline_size(layout),
        "num_microbatches": num_microbatches(layout),
        "global_batch_size": global_batch_size(layout),
        "micro_batch_size": layout.micro_batch_size,
        "padded_vocab_size": padded_vocab_size(layout),
        "ffn_hidden_size": ffn_hidden_size(layout),
        "moe_ffn_hidden_size": moe_ffn_hidden_size(layout),
        "kv_channels": kv_channels(layout),
        "num_query_groups": num_query_groups(layout),
        "sequence_parallel": sequence_parallel(layout),
        "recompute_granularity": recompute_granularity(layout),
        "layers_per_stage": [sum(r) for r in table["layers"]] if table else None,
        "layers_per_virtual_stage": table["layers"] if table else None,
        "gpus_per_node": layout.gpus_per_node,
        "nodes": -(-layout.world_size // layout.gpus_per_node),
    }

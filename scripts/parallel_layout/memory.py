"""Per-GPU memory estimate: weights + optimizer state, and activations.

Reference implementation: megatron/training/theoretical_memory_usage.py
(megatron-core 0.19.2).  Where that estimator applies (even pipeline split,
CP = 1, rope or no position embedding, no MTP, bf16, SP with selective
recompute), the numbers agree within 1% (tests/test_layout_memory.py).  This
module is more precise where Megatron's is not:

* per pipeline stage, from the real layer split (uneven first/last stages,
  ``--pipeline-model-parallel-layout``, account-for-embedding/loss), instead
  of "1/PP of the layers plus the embedding on one shard";
* the distributed optimizer shards dense parameters over DP x CP (the
  data-parallel group with context parallelism) and divides by
  ``--num-distributed-optimizer-instances``; experts over expert-DP;
* learned absolute position embeddings, biases (unless
  ``--disable-bias-linear``), the MTP projection, and precision (fp16, bf16,
  fp32 bytes per parameter from Megatron's docs/user-guide/features/
  dist_optimizer.md table), Megatron-FSDP/FSDP2 sharding;
* activations per layer come from parallel_layout.activations (measured
  against real megatron-core layers; the attention backend decides whether
  the s x s scores are kept), the sequence divided by CP; the in-flight
  microbatches per stage follow the 1F1B / interleaved schedules.
"""

from __future__ import annotations

from . import activations as A
from . import derive as D

GIB = 1 << 30

# bytes per parameter: (non-distributed, distributed: fixed part, sharded part)
# Source: docs/user-guide/features/dist_optimizer.md (Megatron-LM core_v0.19.0).
BYTES_PER_PARAM = {
    "fp16": (20, 4, 16),
    "bf16": (18, 6, 12),
    "fp32": (16, 8, 8),
}


# The memory a GPU is assumed to have when none is given (a warning, not an error).
ASSUMED_GPU_GIB = 80


def budget_gib(layout):
    """The GPU memory the user gave, in GiB, or None: the one place every memory
    verdict reads (``--gpu-memory-gib``; a ``--gpu NAME`` catalogue sets the same
    field from the GPU's HBM capacity).  Given, "DOES NOT FIT" is a violation;
    not given, a warning against ASSUMED_GPU_GIB."""
    return layout.gpu_memory_gib or None


def precision(layout):
    return "bf16" if layout.bf16 else "fp16" if layout.fp16 else "fp32"


def bytes_per_param(layout, shard_degree):
    """Weights + grads + optimizer bytes per parameter for one GPU."""
    full, fixed, sharded = BYTES_PER_PARAM[precision(layout)]
    if layout.use_megatron_fsdp or layout.use_torch_fsdp2:
        strategy = layout.data_parallel_sharding_strategy if layout.use_megatron_fsdp \
            else "optim_grads_params"
        param_bytes = {"fp16": 2, "bf16": 2, "fp32": 4}[precision(layout)]
        grad_bytes = fixed - param_bytes
        if strategy == "no_shard":
            return full
        if strategy == "optim":
            return fixed + sharded / shard_degree
        if strategy == "optim_grads":
            return param_bytes + (grad_bytes + sharded) / shard_degree
        return full / shard_degree
    if layout.use_distributed_optimizer:
        return fixed + sharded / shard_degree
    return full


def moe_count(layout, start, n):
    """MoE layers among decoder layers [start, start+n) (moe_layer_freq: every
    N-th layer from layer 0, or a 0/1 list), without materialising the pattern."""
    if not D.num_experts(layout) or n <= 0:
        return 0
    freq = layout.moe_layer_freq
    if isinstance(freq, int):
        return _multiples_below(start + n, freq) - _multiples_below(start, freq)
    return sum(freq[start:start + n])


def _multiples_below(end, step):
    return (end + step - 1) // step if end > 0 else 0


def moe_share(layout):
    n = layout.num_layers
    return moe_count(layout, 0, n) / n if n else 0.0


def _mlp_params(h, ffn, gated, bias):
    """(tp_sharded, replicated) of one MLP: fc1 (ColumnParallelLinear, 2*ffn wide
    when gated, its bias sharded with it) and fc2 (RowParallelLinear: its bias is
    added after the reduction, so every TP rank holds all of it)."""
    width = ffn * (2 if gated else 1)
    return h * width + ffn * h + (width if bias else 0), (h if bias else 0)


def layer_params(layout):
    """(tp_sharded, replicated, expert_sharded) parameters of a dense and a MoE
    layer, as the GPT layer specs build them (tests/test_layout_param_counts.py
    counts sum(p.numel()) of real models per TP rank)."""
    h = layout.hidden_size
    a = layout.num_attention_heads
    g = D.num_query_groups(layout)
    kv = D.kv_channels(layout)
    ffn = D.ffn_hidden_size(layout)
    gated = bool(layout.swiglu)
    norm = 1 if layout.normalization == "RMSNorm" else 2
    bias = layout.add_bias_linear
    # linear_qkv (column parallel, bias sharded) and linear_proj (row parallel,
    # bias replicated)
    attention = (2 * h * kv * (a + g) + (kv * (a + 2 * g) if bias else 0), h if bias else 0)
    mlp = _mlp_params(h, ffn, gated, bias)
    norms = 2 * h * norm
    dense = (attention[0] + mlp[0], attention[1] + mlp[1] + norms, 0)
    experts = D.num_experts(layout)
    if not experts:
        return dense, dense
    moe_ffn = D.moe_ffn_hidden_size(layout)
    routed = sum(_mlp_params(h, moe_ffn, gated, bias)) * experts  # ETP 1 whenever biased
    router = h * experts + (experts if bias else 0)
    shared = _mlp_params(h, layout.moe_shared_expert_intermediate_size, gated, bias) \
        if layout.moe_shared_expert_intermediate_size else (0, 0)
    moe = (attention[0] + shared[0], attention[1] + shared[1] + norms + router, routed)
    return dense, moe


def stage_params(layout):
    """Per pipeline rank: (tp_sharded, replicated, expert_sharded) parameter counts."""
    table = D.stage_table(layout)
    if table is None:
        return None
    pp = layout.pipeline_model_parallel_size
    vpp = len(table["layers"][0])
    dense, moe = layer_params(layout)
    h = layout.hidden_size
    norm = 1 if layout.normalization == "RMSNorm" else 2
    vocab = D.padded_vocab_size(layout) or 0
    stages = [[0.0, 0.0, 0.0] for _ in range(pp)]
    index = 0
    for v in range(vpp):
        for r in range(pp):
            n = table["layers"][r][v]
            n_moe = moe_count(layout, index, n)
            for k in range(3):
                stages[r][k] += n_moe * moe[k] + (n - n_moe) * dense[k]
            index += n
            mtp = table["mtp"][r][v]
            if mtp:
                last = layout.num_layers - 1
                kind = moe if moe_count(layout, last, 1) else dense
                for k in range(3):
                    stages[r][k] += mtp * kind[k]
                stages[r][0] += mtp * 2 * h * h  # eh_proj
                stages[r][1] += mtp * 3 * norm * h  # enorm, hnorm, final norm
    first, last = table["embedding_rank"], table["loss_rank"]
    stages[first][0] += vocab * h
    if layout.position_embedding_type == "learned_absolute" and layout.max_position_embeddings:
        stages[first][1] += layout.max_position_embeddings * h
    if layout.untie_embeddings_and_output_weights or pp > 1 or first != last:
        stages[last][0] += vocab * h
    stages[last][1] += norm * h
    return stages


def weight_bytes(layout):
    """Per pipeline rank: (parameters on one GPU, weight+optimizer bytes)."""
    stages = stage_params(layout)
    if stages is None:
        return None
    tp = layout.tensor_model_parallel_size
    etp = D.etp(layout)
    ep = layout.expert_model_parallel_size
    dp = D.data_parallel_size(layout)
    edp = D.expert_data_parallel_size(layout) or dp
    if dp is None:
        return None
    dense_shard = dp * layout.context_parallel_size // layout.num_distributed_optimizer_instances
    dense_shard = max(1, dense_shard)
    out = []
    for tp_sharded, replicated, expert in stages:
        dense_params = tp_sharded / tp + replicated
        expert_params = expert / (etp * ep)
        total = (dense_params * bytes_per_param(layout, dense_shard)
                 + expert_params * bytes_per_param(layout, edp or 1))
        out.append((dense_params + expert_params, total))
    return out


def layer_model_inputs(layout, s, moe=False):
    """The inputs of activations.layer_bytes_per_token for this layout."""
    h, a = layout.hidden_size, layout.num_attention_heads
    kv = D.kv_channels(layout)
    groups = D.num_query_groups(layout)
    q_heads = a
    if layout.multi_latent_attention:
        # MLA: queries and keys of qk_head_dim + qk_pos_emb_head_dim, values of
        # v_head_dim, per head (no query groups).
        kv = layout.qk_head_dim + layout.qk_pos_emb_head_dim
        groups = a
    return {
        "h": h, "heads": q_heads, "groups": groups, "kv_channels": kv,
        "ffn": D.ffn_hidden_size(layout), "gated": bool(layout.swiglu),
        "normalization": layout.normalization, "tp": layout.tensor_model_parallel_size,
        "sp": D.sequence_parallel(layout),
        "hidden_dropout": (layout.hidden_dropout or 0) > 0,
        "attention_dropout": (layout.attention_dropout or 0) > 0,
        # validate_args: --apply-query-key-layer-scaling turns it on.  Megatron-LM's
        # flag defaults to off, TransformerConfig's field to on (a Core user's
        # layer keeps fp32 probabilities unless told otherwise).
        "softmax_fp32": bool(layout.attention_softmax_in_fp32
                             or layout.apply_query_key_layer_scaling),
        "scores": A.stores_scores(layout.attention_backend, layout.transformer_impl),
        "recompute": D.recompute_granularity(layout), "s": s,
        "experts": D.num_experts(layout) if moe else None,
        "topk": layout.moe_router_topk, "moe_ffn": D.moe_ffn_hidden_size(layout),
        "etp": D.etp(layout), "shared_ffn": layout.moe_shared_expert_intermediate_size,
    }


def per_layer_activation(layout, s, b, moe=False):
    """Bytes of stored activations per layer and microbatch on one GPU
    (parallel_layout.activations, measured against real layers)."""
    return A.layer_bytes_per_token(layer_model_inputs(layout, s, moe)) * s * b


def activation_bytes_per_layer(layout):
    """One microbatch, one GPU, the layer kind with the most layers (MoE on a tie)."""
    if layout.seq_length is None or None in (layout.hidden_size, layout.num_attention_heads):
        return None
    s = layout.seq_length // layout.context_parallel_size
    b = layout.micro_batch_size or 1
    return int(per_layer_activation(layout, s, b, moe=moe_share(layout) >= 0.5))


def activation_bytes(layout):
    """Per pipeline rank: activation bytes of the in-flight microbatches."""
    table = D.stage_table(layout)
    if table is None or layout.seq_length is None:
        return None
    pp = layout.pipeline_model_parallel_size
    t = layout.tensor_model_parallel_size
    vpp = D.virtual_pipeline_size(layout)
    m = D.num_microbatches(layout)
    s = layout.seq_length // layout.context_parallel_size
    b = layout.micro_batch_size or 1
    h = layout.hidden_size
    sp = D.sequence_parallel(layout)
    vocab = D.padded_vocab_size(layout) or 0
    share = moe_share(layout)
    # per GPU; the totals below are per-GPU bytes times TP, divided at the end
    per_layer = t * ((1 - share) * per_layer_activation(layout, s, b)
                     + share * per_layer_activation(layout, s, b, moe=True)
                     if share else per_layer_activation(layout, s, b))
    full = D.recompute_granularity(layout) == "full"
    out = []
    for r in range(pp):
        layers = sum(table["layers"][r])
        if vpp is not None:
            in_flight = (pp - r) * (1 + (pp - 1) / (pp * vpp))
        else:
            in_flight = min(pp - r, m) if m is not None else pp - r
        total = per_layer * layers * in_flight
        if r == table["embedding_rank"]:
            total += (8 * s * b + s * b * h * (1 if sp else t)) * in_flight
        if full and layers:
            total += t * _one_layer_full(layout, s, b)
        if r == table["loss_rank"]:
            total += s * b * h * 4 * (1 + vocab / h)
        out.append(total / t)
    return out


def _one_layer_full(layout, s, b):
    """Working set while one layer is recomputed under full recompute."""
    granularity = layout.recompute_granularity
    activations = layout.recompute_activations
    layout.recompute_granularity, layout.recompute_activations = None, False
    try:
        return per_layer_activation(layout, s, b)
    finally:
        layout.recompute_granularity, layout.recompute_activations = granularity, activations


def estimate(layout):
    """JSON-ready memory estimate, or None when model sizes are missing."""
    if None in (layout.num_layers, layout.hidden_size, layout.num_attention_heads):
        return None
    try:
        weights = weight_bytes(layout)
        acts = activation_bytes(layout)
    except (ZeroDivisionError, TypeError):
        return None
    if weights is None:
        return None
    per_stage = []
    for r, (params, wbytes) in enumerate(weights):
        abytes = acts[r] if acts else None
        per_stage.append({
            "pp_rank": r,
            "parameters_per_gpu": int(params),
            "weight_and_optimizer_bytes": int(wbytes),
            "activation_bytes": int(abytes) if abytes is not None else None,
            "total_bytes": int(wbytes + (abytes or 0)),
        })
    worst = max(per_stage, key=lambda st: st["total_bytes"])
    result = {
        "weight_and_optimizer_bytes_per_gpu": max(st["weight_and_optimizer_bytes"]
                                                  for st in per_stage),
        "activation_bytes_per_gpu": per_stage[0]["activation_bytes"],
        "activation_bytes_per_layer": activation_bytes_per_layer(layout),
        "attention_scores_stored": A.stores_scores(layout.attention_backend,
                                                   layout.transformer_impl),
        "total_bytes_per_gpu": worst["total_bytes"],
        "most_loaded_pp_rank": worst["pp_rank"],
        "precision": precision(layout),
        "per_stage": per_stage,
        "gpu_memory_bytes": int(budget_gib(layout) * GIB) if budget_gib(layout) else None,
        "fits": (worst["total_bytes"] <= budget_gib(layout) * GIB
                 if budget_gib(layout) else None),
        "notes": "estimate: excludes CUDA context, NCCL buffers, allocator fragmentation "
                 "and temporary buffers (typically several GiB)",
    }
    return result

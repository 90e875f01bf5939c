"""Predicted step time, tokens/s/GPU and MFU of a layout: an analytical model, one function per term.

The step is the pipeline's slowest stage run for ``m + (p - 1) / v`` microbatch slots (1F1B and
interleaved schedules, Narayanan et al. 2021), plus the data-parallel traffic the overlap flags leave
exposed and the optimizer step.  A microbatch slot on a stage is the sum of its layers' terms:
GEMMs on a roofline (compute at a calibrated share of the precision's peak, or HBM traffic), the
attention core, the memory-bound element-wise work, and the tensor-, context- and expert-parallel
collectives that the flags do not hide.  The two constants per GPU and precision (GEMM efficiency,
element-wise traffic factor) are fitted on published measurements
(``parallel_layout.calibration``, data in tests/data/perf_published.json); every other number is the
GPU's datasheet (``parallel_layout.gpus``) or the layout.

Everything is per GPU; ``bytes`` are bytes moved, ``seconds`` wall time.  Stdlib only.
"""

from __future__ import annotations

import json
import math
import os

from . import derive as D
from . import gpus as G
from .catalog import split_flags
from .errors import BadInput
from .flags import FLAGS

CALIBRATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "perf_calibration.json")
ACT_BYTES = 2  # bf16 activations and gradients (the layouts here train with --bf16)
LINK_EFFICIENCY = 0.8  # NCCL bus bandwidth / line rate on NVLink and InfiniBand (nccl-tests)
# Latency of one communication step (the alpha of Hockney's alpha-beta model, 1994): assumed at
# the order of NCCL's small-message latency, not fitted.  It prices many small steps (a CP ring
# over short chunks, TP collectives of small activations) that bandwidth alone calls free.
STEP_LATENCY = 10e-6
ADAM_BYTES_PER_PARAM = 30  # fp32 master, m, v read+write (24), fp32 grad read (4), bf16 write (2)

# Megatron-LM flags that change speed, not the layout; read from the arguments the checker leaves
# to Megatron (layout.other_flags).  kind: "true" (store_true) or "value".
PERF_FLAGS = {
    "--fp8-format": "value", "--fp8-recipe": "value", "--fp4-format": "value",
    "--fp4-recipe": "value", "--squared-relu": "true", "--overlap-grad-reduce": "true",
    "--overlap-param-gather": "true", "--tp-comm-overlap": "true",
    "--moe-shared-expert-overlap": "true", "--cp-comm-type": "value", "--window-size": "value",
    "--window-attn-skip-freq": "value", "--recompute-modules": "value",
    "--moe-layer-recompute": "true", "--mtp-num-layers": "value",
}
# A PERF_FLAGS option that the checker parses itself (its rules read it) never reaches
# layout.other_flags: its value is the layout attribute the flag table names.
_PARSED_DEST = {f.option: f.dest for f in FLAGS}


def perf_options(layout):
    """{option: value or True} of PERF_FLAGS, from the parsed layout or the flags left to Megatron."""
    out = {}
    for option, values in split_flags(getattr(layout, "other_flags", ()) or ()):
        if option in PERF_FLAGS:
            out[option] = True if PERF_FLAGS[option] == "true" else " ".join(values)
    for option in PERF_FLAGS.keys() & _PARSED_DEST.keys():
        value = getattr(layout, _PARSED_DEST[option], None)
        if value not in (None, False):
            out[option] = True if PERF_FLAGS[option] == "true" else str(value)
    return out


def precision(layout, opts):
    """Tensor-core format of the GEMMs from Megatron's flags: --fp4-format (NVFP4), --fp8-format
    with --fp8-recipe mxfp8 (MXFP8) or another recipe (FP8; Megatron's default recipe is delayed),
    else --bf16 / --fp16 (half precision) or fp32."""
    if opts.get("--fp4-format"):
        return "nvfp4"
    if opts.get("--fp8-format"):
        return "mxfp8" if opts.get("--fp8-recipe") == "mxfp8" else "fp8"
    if layout.bf16 or layout.fp16:
        return "bf16"
    return "fp32"


BYTES_PER_ELEMENT = {"nvfp4": 0.5, "fp8": 1, "mxfp8": 1, "bf16": 2, "fp32": 4}


# --- Model FLOPs -----------------------------------------------------------------------------

def model_flops_per_token(shape):
    """Model FLOPs per trained token (forward + backward, no recomputation), the count of
    megatron/training/training.py ``num_floating_point_operations`` (megatron-core 0.19.2): 6 x
    the multiply-adds of the attention projections (MLA or GQA), dense MLP, routed top-k and shared
    experts and the output layer (plus MTP), and 6 x s/2 per token for causal attention scores."""
    s = shape
    per_layer_attn = 6 * s["attn_linear_macs"]
    core = 6 * s["attn_core_macs_per_pos"] * s["seq"] / 2  # causal: half of the s x s scores
    dense = 6 * s["h"] * s["ffn"] * s["ffn_mult"]
    moe = 6 * s["h"] * s["ffn_mult"] * (s["moe_ffn"] * s["topk"] + s["shared_ffn"])
    layers = s["layers"] + s["mtp"]
    n_moe = s["n_moe"] + (s["mtp"] if s["last_is_moe"] else 0)
    n_dense = layers - n_moe
    mtp_proj = 6 * s["mtp"] * (3 * s["h"] + 2 * s["h"] * s["h"])
    logits = 6 * s["h"] * s["vocab"] * (1 + s["mtp"])
    return (layers * (per_layer_attn + core) + n_dense * dense + n_moe * moe + mtp_proj + logits)


# --- Model shape -----------------------------------------------------------------------------

def model_shape(layout, opts):
    """The sizes every term reads, from the checker's parsed flags (``parallel_layout.flags``) and
    derived sizes (``parallel_layout.derive``)."""
    L = layout
    h, n = L.hidden_size, L.num_attention_heads
    kv = D.kv_channels(L)
    g = D.num_query_groups(L) or n
    experts = D.num_experts(L) or 0
    if L.multi_latent_attention:
        qk = L.qk_head_dim + L.qk_pos_emb_head_dim
        # Megatron counts the low-rank norms as one multiply-add per rank element (the "+ 1").
        q_macs = (L.q_lora_rank * (h + n * qk + 1) if L.q_lora_rank else h * n * qk)
        attn_linear = (q_macs + L.kv_lora_rank * (h + n * (L.qk_head_dim + L.v_head_dim) + 1)
                       + h * L.qk_pos_emb_head_dim + n * L.v_head_dim * h)
        core_per_pos = n * (qk + L.v_head_dim)  # QK^T and PV multiply-adds per query, key pair
        q_width, kv_width, out_width = n * qk, n * (L.qk_head_dim + L.v_head_dim), n * L.v_head_dim
    else:
        attn_linear = h * (n * kv + 2 * g * kv) + n * kv * h
        core_per_pos = 2 * n * kv
        q_width, kv_width, out_width = n * kv, 2 * g * kv, n * kv
    n_moe = _moe_layers(L) if experts else 0
    freq = L.moe_layer_freq
    last_is_moe = bool(experts) and (freq[-1] == 1 if isinstance(freq, list)
                                     else (L.num_layers - 1) % freq == 0)
    window = opts.get("--window-size")
    window_len = None
    if window:
        left = window.replace(" ", "").split(",")[0]
        window_len = int(left) + 1 if left.lstrip("-").isdigit() and int(left) >= 0 else None
    skip = opts.get("--window-attn-skip-freq")
    mtp = int(opts["--mtp-num-layers"]) if str(opts.get("--mtp-num-layers", "")).isdigit() else 0
    shape = {
        "h": h, "heads": n, "groups": g, "kv": kv, "seq": L.seq_length,
        "ffn": D.ffn_hidden_size(L), "ffn_mult": 3 if L.swiglu else 2,
        "squared_relu": bool(opts.get("--squared-relu")),
        "layers": L.num_layers, "n_moe": n_moe, "experts": experts,
        "moe_ffn": D.moe_ffn_hidden_size(L) or 0, "topk": L.moe_router_topk if experts else 0,
        "shared_ffn": L.moe_shared_expert_intermediate_size or 0, "last_is_moe": last_is_moe,
        "vocab": D.padded_vocab_size(L), "mtp": mtp or 0,
        "attn_linear_macs": attn_linear, "attn_core_macs_per_pos": core_per_pos,
        "q_width": q_width, "kv_width": kv_width, "out_width": out_width,
        "mla": bool(L.multi_latent_attention),
        "window": window_len, "window_share": _window_share(skip) if window_len else 0.0,
        "flash": L.attention_backend not in ("unfused", "local") and L.transformer_impl != "local",
    }
    shape["key"] = content_id(tuple(sorted(shape.items())))  # memo key of all derived from it
    return shape


_CONTENT_IDS = {}


def content_id(content):
    """A small integer per distinct ``content`` (a tuple of every number a memo depends on): the
    memo keys hash it once here instead of hashing the whole tuple at every lookup."""
    found = _CONTENT_IDS.get(content)
    if found is None:
        found = _CONTENT_IDS[content] = len(_CONTENT_IDS)
    return found


def _moe_layers(layout):
    freq = layout.moe_layer_freq
    if isinstance(freq, list):
        return sum(freq)
    return len(range(0, layout.num_layers, freq))


def _window_share(skip):
    """Share of layers with the sliding window: all, or (N-1)/N with --window-attn-skip-freq N
    (every N-th layer keeps full attention; TransformerConfig.window_attn_skip_freq)."""
    if not skip or not str(skip).strip().isdigit() or int(skip) < 1:
        return 1.0
    n = int(skip)
    return (n - 1) / n


# --- Compute terms ---------------------------------------------------------------------------

def gemm_seconds(m, n, k, peak, efficiency, hbm_bandwidth, bytes_per_element, half_dim=0):
    """One GEMM [m,k] x [k,n] on the roofline (Williams, Waterman and Patterson 2009, "Roofline"):
    the larger of 2mnk FLOPs at ``efficiency`` x peak and the operands' HBM traffic.  A GEMM whose
    smallest dimension d is small runs below the large-GEMM efficiency (partly filled tiles and
    waves, NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background"): the
    efficiency is scaled by d / (d + ``half_dim``), ``half_dim`` one constant chosen on the fit
    rows (``calibration``); it prices small per-expert GEMMs and narrow TP/ETP shards."""
    d = min(m, n, k)
    scale = d / (d + half_dim) if half_dim and d > 0 else 1.0
    compute = 2 * m * n * k / (peak * efficiency * scale)
    traffic = (m * k + k * n) * bytes_per_element + m * n * ACT_BYTES
    return max(compute, traffic / hbm_bandwidth)


def layer_gemms(shape, par, moe):
    """(m, n, k, count) of the forward GEMMs of one transformer layer on one GPU: attention
    projections (q/kv/out widths split by TP; MLA's low-rank projections as one GEMM of the same
    multiply-adds), then the dense MLP (fc1 2x wide with SwiGLU) or the MoE experts: each GPU runs
    its E/EP local experts on the tokens routed to them (balanced: tokens x top-k x ETP / (TP x CP)
    per GPU, split over the local experts; fc widths split by ETP) and the shared expert
    (Megatron's MoELayer, Narayanan et al. 2021 for the TP split of every projection)."""
    s = shape
    tokens = par["tokens"]  # b x s / CP: the sequence TP gathers (sequence parallel)
    tp = par["tp"]
    h = s["h"]
    gemms = [(tokens, s["attn_linear_macs"] / (h * tp), h, 1)]
    if not moe:
        gemms.append((tokens, s["ffn"] * (s["ffn_mult"] - 1) / tp, h, 1))
        gemms.append((tokens, h, s["ffn"] / tp, 1))
        return gemms
    etp, ep = par["etp"], par["ep"]
    local = max(1, s["experts"] // ep)
    routed = tokens * s["topk"] * etp * ep / (tp * s["experts"])  # tokens per local expert
    gemms.append((routed, s["moe_ffn"] * (s["ffn_mult"] - 1) / etp, h, local))
    gemms.append((routed, h, s["moe_ffn"] / etp, local))
    if s["shared_ffn"]:
        gemms.append((tokens, s["shared_ffn"] * (s["ffn_mult"] - 1) / tp, h, 1))
        gemms.append((tokens, h, s["shared_ffn"] / tp, 1))
    return gemms


def layer_gemm_seconds(shape, par, hw, moe):
    """Forward + backward (data and weight gradients: 3 GEMMs of the forward's size each) of
    ``layer_gemms`` (Narayanan et al. 2021, section 3.5: backward = 2 x forward)."""
    return 3 * sum(c * gemm_seconds(m, n, k, hw["peak"], hw["gemm_efficiency"],
                                    hw["hbm_bandwidth"], hw["bytes_per_element"],
                                    hw["gemm_half_dim"])
                   for m, n, k, c in layer_gemms(shape, par, moe))


def attention_core_seconds(shape, par, hw):
    """Q K^T and P V of one layer, forward and backward, on one GPU.  Causal attention computes half
    of the s x s scores; a sliding window of w keys computes about w per query.  Flash attention's
    backward recomputes the scores: 5 matmuls against the forward's 2 (Dao 2023, FlashAttention-2),
    3.5 x the forward in all, in BF16 at the GEMM efficiency; unfused attention does 3 x the forward
    and moves the s x s scores through HBM (``unfused_scores_bytes``)."""
    s = shape
    keys = s["seq"] / 2
    if s["window"]:
        share = s["window_share"]
        keys = share * min(s["window"], s["seq"] / 2) + (1 - share) * s["seq"] / 2
    # Each CP rank holds b s/CP queries (load-balanced causal chunks), heads split by TP.
    macs = par["tokens"] * keys * s["attn_core_macs_per_pos"] / par["tp"]
    factor = 3.5 if s["flash"] else 3.0
    return factor * 2 * macs / (hw["bf16_peak"] * hw["gemm_efficiency_bf16"])


def unfused_scores_bytes(shape, par):
    """Bytes of the s x s attention scores that unfused attention writes and reads: scores, softmax,
    dropout mask and output, 5 x a x s^2 x b bytes per layer (Korthikanti et al. 2022, eq. 1),
    forward and backward (x 3)."""
    if shape["flash"]:
        return 0.0
    heads = shape["heads"] / par["tp"]
    return 3 * 5 * heads * par["tokens"] * shape["seq"] / par["cp"] * par["mbs_scale"]


def elementwise_bytes(shape, par, moe):
    """HBM traffic of the memory-bound work of one layer, forward and backward: norms, residuals,
    dropout, rotary embedding and the activation function on the tensors Korthikanti et al. 2022
    count as saved activations (2 norms and residuals on h, q/k/v and output on their widths,
    fc1's output and the activation on the FFN width), each read and written in the forward and
    twice in the backward; for MoE the router scores and the permutation of the top-k copies."""
    s = shape
    tp, tokens = par["tp"], par["tokens"]
    per_token = 8 * s["h"] / tp + (s["q_width"] + s["kv_width"] + s["out_width"]) / tp
    if moe:
        copies = s["topk"] * par["etp"] / tp
        per_token += copies * (4 * s["h"] + (s["ffn_mult"] + 1) * s["moe_ffn"] / par["etp"])
        per_token += s["experts"] / tp
        if s["shared_ffn"]:
            per_token += (s["ffn_mult"] + 1) * s["shared_ffn"] / tp
    else:
        per_token += (s["ffn_mult"] + 1) * s["ffn"] / tp
    return 3 * 2 * ACT_BYTES * per_token * tokens


def layer_memory_seconds(shape, par, hw, moe):
    """``elementwise_bytes`` (+ unfused attention scores) at HBM bandwidth, times the calibrated
    element-wise factor (fused kernels move less, quantisation to FP8/FP4 more)."""
    return (hw["elementwise_factor"] * elementwise_bytes(shape, par, moe)
            + unfused_scores_bytes(shape, par)) / hw["hbm_bandwidth"]


def output_layer_seconds(shape, par, hw):
    """Output (logits) GEMM [b s/CP, h] x [h, V/TP], forward + backward (the vocabulary term of
    Narayanan et al. 2021, eq. 3), plus the cross entropy's fp32 logits read and written
    (memory-bound), on the last pipeline stage; once more per MTP layer."""
    s = shape
    gemm = 3 * gemm_seconds(par["tokens"], s["vocab"] / par["tp"], s["h"], hw["bf16_peak"],
                            hw["gemm_efficiency_bf16"], hw["hbm_bandwidth"], ACT_BYTES,
                            hw["gemm_half_dim"])
    loss = 3 * 4 * par["tokens"] * s["vocab"] / par["tp"] / hw["hbm_bandwidth"]
    return (gemm + loss) * (1 + s["mtp"])


# --- Communication terms ---------------------------------------------------------------------

def link_bandwidth(group, stride, hw):
    """Per-GPU bandwidth of a group of ``group`` ranks ``stride`` apart: NVLink when the whole group
    lies in one NVLink domain, else the inter-node NIC (the group's ring crosses it)."""
    span = group * stride
    fast = span <= hw["nvlink_domain"]
    return (hw["nvlink_bandwidth"] if fast else hw["internode_bandwidth"]) * LINK_EFFICIENCY


def ring_seconds(nbytes, group, bandwidth):
    """All-gather or reduce-scatter of ``nbytes`` (the full tensor) over ``group`` ranks with a ring:
    (g - 1) / g x bytes per GPU (Thakur, Rabenseifner and Gropp 2005)."""
    return 0.0 if group <= 1 else (group - 1) / group * nbytes / bandwidth


def tp_comm_seconds(shape, par, hw):
    """Sequence-parallel TP of one layer: all-gather before and reduce-scatter after attention and
    MLP, forward and backward: 8 collectives of the [b s/CP, h] activation (Korthikanti et al.
    2022, section 4.2.2)."""
    nbytes = par["tokens"] * shape["h"] * ACT_BYTES
    tp = par["tp"]
    steps = 8 * (tp - 1) if tp > 1 else 0
    return 8 * ring_seconds(nbytes, tp, link_bandwidth(tp, 1, hw)) + steps * STEP_LATENCY


def cp_comm_seconds(shape, par, hw, cp_comm_type):
    """Context parallelism of one layer.  p2p (ring, the default): CP-1 exchanges of the local K and
    V chunk forward and of K, V and their gradients backward (Liu et al. 2023, Ring Attention;
    Megatron's attention via TE); a2a (Ulysses, Jacobs et al. 2023): 4 all-to-alls of q, k, v and
    the output forward and 4 backward, each moving (CP-1)/CP of the tensor."""
    cp = par["cp"]
    if cp <= 1:
        return 0.0
    bw = link_bandwidth(cp, par["tp"], hw)
    local = par["tokens"] / cp * ACT_BYTES / par["tp"]
    if cp_comm_type == "a2a":
        width = shape["q_width"] + shape["kv_width"] + shape["out_width"]
        return 2 * (cp - 1) / cp * local * width * cp / bw + 8 * STEP_LATENCY
    return 3 * (cp - 1) * local * shape["kv_width"] / bw


def cp_ring_latency_seconds(par):
    """The CP ring's steps run one after another with the attention of each chunk: CP-1 steps
    forward and CP-1 backward per layer, each paying ``STEP_LATENCY`` that overlap cannot hide
    (Hockney 1994; Liu et al. 2023 for the ring)."""
    return 2 * (par["cp"] - 1) * STEP_LATENCY


def ep_comm_seconds(shape, par, hw):
    """Expert-parallel all-to-all of one MoE layer: token dispatch and combine forward, and their
    gradients backward (4 all-to-alls), each moving the top-k copies of the GPU's tokens, (EP-1)/EP
    of them off the GPU (Lepikhin et al. 2021, GShard; Megatron's alltoall dispatcher).  NVLink when
    the expert group (EP x ETP ranks) fits in one NVLink domain."""
    ep = par["ep"]
    if ep <= 1:
        return 0.0
    tokens = par["tokens"] / par["tp"]  # the sequence-parallel shard each rank dispatches
    nbytes = tokens * shape["topk"] * shape["h"] * ACT_BYTES
    return 4 * (all_to_all_seconds(nbytes, ep, par["etp"], hw) + STEP_LATENCY)


def all_to_all_seconds(nbytes, group, stride, hw):
    """All-to-all of ``nbytes`` per GPU over ``group`` ranks ``stride`` apart, pairwise exchange
    moving (g-1)/g of the buffer (Thakur, Rabenseifner and Gropp 2005): the share bound for peers
    in the GPU's NVLink domain goes over NVLink, the rest over the NIC, both at once."""
    local = max(1, min(group, hw["nvlink_domain"] // max(1, stride)))
    eff = LINK_EFFICIENCY
    inside = (local - 1) / group * nbytes / (hw["nvlink_bandwidth"] * eff)
    outside = (group - local) / group * nbytes / (hw["internode_bandwidth"] * eff)
    return max(inside, outside)


def moe_sync_seconds(hw, moe_layers):
    """Fixed time per MoE layer and microbatch (forward + backward) that does not scale with
    tokens: the dropless dispatcher's device-to-host copy of the tokens-per-expert counts and the
    kernel launches around it (Megatron's MoEAlltoAllTokenDispatcher synchronises there unless
    the counts are known).  A calibrated constant per GPU and precision."""
    return moe_layers * hw["moe_layer_latency"]


def pp_p2p_seconds(shape, par, hw):
    """Pipeline send/receive per microbatch and stage: the activation forward and its gradient
    backward, [b s/CP, h] split by TP (scatter-gather, Narayanan et al. 2021 section 4.1), once per
    virtual stage."""
    if par["pp"] <= 1:
        return 0.0
    nbytes = par["tokens"] * shape["h"] * ACT_BYTES / par["tp"]
    stride = par["world"] // par["pp"]
    return 2 * par["vpp"] * nbytes / link_bandwidth(2, stride, hw)


def bubble_fraction(pp, m, vpp):
    """Pipeline bubble over ideal time: (p - 1) / (v m) for 1F1B (v = 1) and interleaved schedules
    (Narayanan et al. 2021, section 2.2)."""
    return 0.0 if pp <= 1 else (pp - 1) / (vpp * m)


def dp_comm_seconds(par, hw, params, params_expert, microbatch_seconds, opts, fsdp):
    """Data-parallel gradient reduce-scatter and parameter all-gather (distributed optimizer; an
    all-reduce costs the same two phases, Rajbhandari et al. 2020, ZeRO) of the stage's dense
    parameters over DP x CP and expert parameters over expert-DP, in bf16.  --overlap-grad-reduce
    hides the reduce behind the last microbatch's backward (2/3 of a slot), --overlap-param-gather
    the gather behind the first forward (1/3): only the excess is exposed (Megatron's
    DistributedDataParallel buckets).  Megatron FSDP gathers and reduces per microbatch, overlapped
    with the layers' compute."""
    dp_dense = par["dp"] * par["cp"]
    dense_bw = link_bandwidth(dp_dense, par["tp"], hw)
    rs = ring_seconds(params * ACT_BYTES, dp_dense, dense_bw)
    if params_expert and par["edp"] > 1:
        expert_bw = link_bandwidth(par["edp"], par["ep"] * par["etp"], hw)
        rs += ring_seconds(params_expert * ACT_BYTES, par["edp"], expert_bw)
    ag = rs
    if fsdp:
        per_mb = 3 * rs
        return max(0.0, per_mb - microbatch_seconds) * par["m"]
    exposed_rs = max(0.0, rs - 2 / 3 * microbatch_seconds) if opts.get(
        "--overlap-grad-reduce") else rs
    exposed_ag = max(0.0, ag - 1 / 3 * microbatch_seconds) if opts.get(
        "--overlap-param-gather") else ag
    return exposed_rs + exposed_ag


def recompute_seconds(layout, opts, layer_seconds, core_seconds, layers):
    """Extra forward work of activation recomputation (Korthikanti et al. 2022): selective
    (Megatron's default module core_attn) reruns the attention core's forward (1/3.5 of its
    forward + backward); full reruns the whole forward of ``--recompute-num-layers`` layers
    (uniform/block), a third of their forward + backward."""
    granularity = D.recompute_granularity(layout)
    if granularity == "full":
        n = min(layers, layout.recompute_num_layers or layers)
        return n * layer_seconds / 3
    if granularity == "selective":
        return layers * core_seconds / 3.5
    return 0.0


def optimizer_seconds(params_per_gpu, hw):
    """Adam step, memory-bound: ~30 bytes per parameter (fp32 master weights, moments and
    gradients read and written, bf16 weights written) at HBM bandwidth (Kingma and Ba 2015;
    Megatron's distributed optimizer shards it over DP)."""
    return params_per_gpu * ADAM_BYTES_PER_PARAM / hw["hbm_bandwidth"]


# --- Putting it together ---------------------------------------------------------------------

def load_calibration(path=CALIBRATION):
    with open(path) as fh:
        return json.load(fh)


_CALIBRATION = None


def calibration():
    global _CALIBRATION
    if _CALIBRATION is None:
        _CALIBRATION = load_calibration()
    return _CALIBRATION


def precision_class(prec):
    """MXFP8 runs the FP8 tensor cores: one GEMM efficiency for both."""
    return "fp8" if prec == "mxfp8" else prec


def constants_for(gpu_name, prec, calib):
    """((GEMM efficiency, element-wise factor, MoE layer latency), source) of a GPU and precision.
    The GPU's fitted constants (or those of the GPU named in ``borrow``: H200 runs H100's
    kernels); a precision without its own efficiency takes the nearest fitted one (NVFP4 -> FP8
    -> BF16); a GPU without data the defaults."""
    name = calib.get("borrow", {}).get(gpu_name, gpu_name)
    entry = calib["constants"].get(name)
    if not entry:
        return tuple(calib["default"]), "default"
    effs = entry["gemm_efficiency"]
    for cls in (precision_class(prec), "fp8", "bf16"):
        if cls in effs:
            return (effs[cls], entry["elementwise_factor"], entry["moe_layer_latency"]), name
    return tuple(calib["default"]), "default"


_HARDWARE = {}


def hardware(gpu, prec, calib):
    """The datasheet numbers and the calibrated constants the terms read (memoised per GPU,
    precision and calibration)."""
    # Keyed on the constants' values: the fit changes them in place.
    key = (gpu["name"], prec, constants_for(gpu["name"], prec, calib),
           constants_for(gpu["name"], "bf16", calib), calib.get("gemm_half_dim", 0))
    found = _HARDWARE.get(key)
    if found is None:
        if len(_HARDWARE) > 4096:
            _HARDWARE.clear()
        found = _hardware(gpu, prec, calib)
        found["key"] = content_id(tuple(sorted(found.items())))  # every number the terms read
        _HARDWARE[key] = found
    return found


def _hardware(gpu, prec, calib):
    (eff, factor, latency), fitted = constants_for(gpu["name"], prec, calib)
    (eff16, _, _), _ = constants_for(gpu["name"], "bf16", calib)
    return {"peak": G.peak_flops(gpu, prec), "bf16_peak": gpu["peak"]["bf16"],
            "gemm_efficiency": eff, "gemm_efficiency_bf16": eff16, "elementwise_factor": factor,
            "moe_layer_latency": latency, "gemm_half_dim": calib.get("gemm_half_dim", 0),
            "hbm_bandwidth": gpu["hbm_bandwidth"], "nvlink_domain": gpu["nvlink_domain"],
            "nvlink_bandwidth": gpu["nvlink_bandwidth"],
            "internode_bandwidth": gpu["internode_bandwidth"],
            "bytes_per_element": BYTES_PER_ELEMENT[prec], "fitted": fitted}


def parallel(layout):
    L = layout
    tp, pp, cp = (L.tensor_model_parallel_size, L.pipeline_model_parallel_size,
                  L.context_parallel_size)
    b = L.micro_batch_size or 1
    return {"tp": tp, "pp": pp, "cp": cp, "ep": L.expert_model_parallel_size, "etp": D.etp(L),
            "dp": D.data_parallel_size(L), "edp": D.expert_data_parallel_size(L) or 1,
            "vpp": D.virtual_pipeline_size(L) or 1, "m": D.num_microbatches(L),
            "mbs": b, "tokens": b * L.seq_length / cp, "mbs_scale": 1, "world": L.world_size}


def stage_params(shape, par, dense_layers, moe_layers, first, last):
    """(dense params per GPU, expert params per GPU) of one stage: attention, dense MLP, shared
    expert and norms split by TP; routed experts by EP x ETP; embedding / output by TP."""
    s = shape
    attn = s["attn_linear_macs"] + 2 * s["h"]
    dense = attn + s["h"] * s["ffn"] * s["ffn_mult"]
    moe = attn + s["h"] * s["shared_ffn"] * s["ffn_mult"] + s["h"] * s["experts"]
    expert = s["h"] * s["moe_ffn"] * s["ffn_mult"] * s["experts"]
    vocab = s["h"] * s["vocab"] * ((1 if first else 0) + (1 if last else 0))
    p_dense = (dense_layers * dense + moe_layers * moe + vocab) / par["tp"]
    p_expert = moe_layers * expert / (par["ep"] * par["etp"])
    return p_dense, p_expert


def not_predicted_reason(layout, opts=None):
    """Why ``predict`` returns None for ``layout``, in one phrase (None when it predicts)."""
    L = layout
    opts = perf_options(L) if opts is None else opts
    missing = [flag for flag, value in (
        ("--num-layers", L.num_layers), ("--hidden-size", L.hidden_size),
        ("--num-attention-heads", L.num_attention_heads), ("--seq-length", L.seq_length),
        ("--vocab-size", L.vocab_size)) if value is None]
    if missing:
        return "needs " + " ".join(missing)
    if D.hybrid_segments(L) is not None:
        return "hybrid (Mamba) layers have no term in the model"
    if precision(L, opts) == "fp32":
        return "fp32 training is not modelled: give --bf16, --fp8-format or --fp4-format"
    if D.data_parallel_size(L) is None or D.num_microbatches(L) is None:
        return "the layout's DP or microbatch count is undefined (see the violations)"
    return None


def predict(layout, gpu, calib=None, opts=None, shape=None):
    """The ``performance`` object of a layout on ``gpu`` (a record of ``gpus.get``), or None when
    the model cannot represent it (``not_predicted_reason`` says why); raises BadInput for a
    precision the GPU lacks."""
    found = prediction(layout, gpu, calib, opts, shape)
    return None if found is None else found.as_dict()


def prediction(layout, gpu, calib=None, opts=None, shape=None):
    """A ``Prediction`` of the layout on ``gpu``, or None (see ``predict``)."""
    L = layout
    if None in (L.num_layers, L.hidden_size, L.num_attention_heads, L.seq_length):
        return None
    if D.hybrid_segments(L) is not None:
        return None  # Mamba and other hybrid layers have no term here
    calib = calib or calibration()
    opts = perf_options(L) if opts is None else opts
    prec = precision(L, opts)
    if prec == "fp32":
        return None
    par = parallel(L)
    if par["dp"] is None or par["m"] is None:
        return None
    shape = shape or model_shape(L, opts)
    if shape["vocab"] is None:
        return None
    hw = hardware(gpu, prec, calib)
    return evaluate(L, shape, par, hw, opts, gpu, prec, calib)


def rank_layers(layout, shape):
    """[(decoder layers, first, last)] per pipeline rank (all its virtual stages), from the
    checker's stage table (uneven splits, --account-for-*, layout strings); an even split when
    the table cannot be built."""
    pp = layout.pipeline_model_parallel_size
    L = layout
    key = (pp, D.virtual_pipeline_size(L), L.num_layers, L.pipeline_model_parallel_layout,
           L.decoder_first_pipeline_num_layers, L.decoder_last_pipeline_num_layers,
           L.account_for_embedding_in_pipeline_split, L.account_for_loss_in_pipeline_split,
           L.mtp_num_layers, getattr(L, "hybrid_layer_pattern", None), shape["mtp"])
    if key in _STAGE_CACHE:
        return _STAGE_CACHE[key]
    if len(_STAGE_CACHE) > 4096:
        _STAGE_CACHE.clear()
    table = D.stage_table(layout)
    if table:
        counts = [sum(row) for row in table["layers"]]
    else:
        counts = [math.ceil(shape["layers"] / pp)] * pp
    counts[-1] += shape["mtp"]  # MTP layers run after the decoder on the last stage
    _STAGE_CACHE[key] = [(n, r == 0, r == pp - 1) for r, n in enumerate(counts)]
    return _STAGE_CACHE[key]


_STAGE_CACHE = {}


def rank_terms(shape, par, hw, opts, layout, layers, last):
    """Seconds per term of one microbatch (forward + backward) on a pipeline rank holding
    ``layers`` decoder layers (MoE layers in the model's proportion) and, if ``last``, the output
    layer."""
    moe_share = shape["n_moe"] / shape["layers"] if shape["layers"] else 0
    n_moe = layers * moe_share
    n_dense = layers - n_moe
    core = attention_core_seconds(shape, par, hw)
    terms = {
        "gemm_attention_mlp": n_dense * layer_gemm_seconds(shape, par, hw, False),
        "gemm_moe": n_moe * layer_gemm_seconds(shape, par, hw, True) if n_moe else 0.0,
        "attention_core": layers * core,
        "elementwise": (n_dense * layer_memory_seconds(shape, par, hw, False)
                        + n_moe * layer_memory_seconds(shape, par, hw, True)),
        "output_layer": output_layer_seconds(shape, par, hw) if last else 0.0,
    }
    compute = sum(terms.values())
    tp_comm = layers * tp_comm_seconds(shape, par, hw)
    if opts.get("--tp-comm-overlap"):  # userbuffers overlap TP collectives with the GEMMs
        tp_comm = max(0.0, tp_comm - terms["gemm_attention_mlp"] - terms["gemm_moe"])
    cp_comm = layers * cp_comm_seconds(shape, par, hw, opts.get("--cp-comm-type") or "p2p")
    cp_comm = max(0.0, cp_comm - terms["attention_core"])  # the ring overlaps the core's chunks
    if par["cp"] > 1 and (opts.get("--cp-comm-type") or "p2p") == "p2p":
        cp_comm += layers * cp_ring_latency_seconds(par)
    ep_comm = n_moe * ep_comm_seconds(shape, par, hw)
    if layout.overlap_moe_expert_parallel_comm:  # a2a of one microbatch behind another's compute
        ep_comm = max(0.0, ep_comm - compute / 2)
    terms.update({"tp_comm": tp_comm, "cp_comm": cp_comm, "ep_comm": ep_comm,
                  "moe_sync": moe_sync_seconds(hw, n_moe)})
    layer_total = sum(terms.values()) - terms["output_layer"]
    terms["recompute"] = recompute_seconds(layout, opts, layer_total / max(layers, 1), core,
                                           layers)
    return terms, n_dense, n_moe


_RANK_CACHE = {}


def _rank_terms_cached(shape, par, hw, opts, layout, layers, last, static=None):
    """rank_terms, memoised on everything it reads: --plan asks for the same rank under many
    virtual-stage counts, which change only the bubble, the point-to-point and the DP terms.
    The last rank differs from the others only by its output layer (unless the EP overlap hides
    behind it), so both share one entry and the output layer is added apart."""
    if static is None:
        static = _static_key(shape, hw, opts, layout)
    apart = last and not layout.overlap_moe_expert_parallel_comm
    key = (par["tp"], par["cp"], par["ep"], par["etp"], par["tokens"], layers,
           last and not apart, static)
    found = _RANK_CACHE.get(key)
    if found is None:
        if len(_RANK_CACHE) > 20000:
            _RANK_CACHE.clear()
        terms, n_dense, n_moe = rank_terms(shape, par, hw, opts, layout, layers,
                                           last and not apart)
        found = _RANK_CACHE[key] = (terms, n_dense, n_moe, sum(terms.values()))
    if apart:
        out_key = ("output", par["tp"], par["tokens"], static)
        out = _RANK_CACHE.get(out_key)
        if out is None:
            out = _RANK_CACHE[out_key] = output_layer_seconds(shape, par, hw)
        terms = dict(found[0], output_layer=out)  # same key order: the same float sum
        found = (terms, found[1], found[2], sum(terms.values()))
    return found


def _static_key(shape, hw, opts, layout):
    """The part of the rank-terms key that --plan never varies (model, hardware, flags)."""
    return content_id((shape["key"], hw["key"], tuple(sorted(opts.items())),
                       layout.overlap_moe_expert_parallel_comm, D.recompute_granularity(layout),
                       layout.recompute_num_layers))


def evaluate(layout, shape, par, hw, opts, gpu, prec, calib):
    L = layout
    pp, vpp, m = par["pp"], par["vpp"], par["m"]
    # The slowest pipeline rank sets the pace of every microbatch slot.
    kinds = {(n, last) for n, _, last in rank_layers(L, shape)}  # ranks alike are one case
    static = _static_key(shape, hw, opts, L)
    terms, n_dense, n_moe, _ = max(
        (_rank_terms_cached(shape, par, hw, opts, L, n, last, static)
         for n, last in sorted(kinds)),
        key=lambda t: t[3])
    p2p = pp_p2p_seconds(shape, par, hw)
    if vpp > 1 and L.overlap_p2p_comm:  # the interleaved schedule overlaps send/recv with compute
        p2p = max(0.0, p2p - sum(terms.values()))
    terms = dict(terms, pp_p2p=p2p)
    slot = sum(terms.values())
    # Per-term totals over the step: microbatch slots, then the bubble.
    step = {k: v * m for k, v in terms.items()}
    step["pipeline_bubble"] = slot * m * bubble_fraction(pp, m, vpp)
    p_dense, p_expert = stage_params(shape, par, n_dense, n_moe, True, pp == 1)
    fsdp = bool(L.use_megatron_fsdp or L.use_torch_fsdp2)
    step["dp_comm"] = dp_comm_seconds(par, hw, p_dense, p_expert, slot, opts, fsdp)
    shard = par["dp"] * par["cp"] if (L.use_distributed_optimizer or fsdp) else 1
    step["optimizer"] = optimizer_seconds(p_dense / shard + p_expert / par["edp"], hw)
    seconds = sum(step.values())
    gbs = m * par["mbs"] * par["dp"]
    tokens_per_gpu = gbs * L.seq_length / (seconds * L.world_size)
    return Prediction(step, seconds, tokens_per_gpu, shape, hw, gpu, prec, calib)


def step_lower_bound(layout, shape, hw, opts, mbs, smallest=None, vpp=1):
    """Seconds no variant of ``layout`` with a micro batch between ``smallest`` (default ``mbs``)
    and ``mbs`` and at most ``vpp`` virtual stages can beat: the global batch's tokens at the
    per-token cost of a microbatch slot of ``mbs``, plus the bubble of (PP - 1) / ``vpp`` slots of
    the smallest micro batch.  Every slot term, per token, is flat or shrinks with the micro batch
    (linear traffic and FLOPs; a GEMM's weight traffic, the step latencies and the MoE sync spread
    over more tokens), so the largest micro batch costs least per token, and a slot of b tokens
    costs at least b / ``mbs`` of the largest's.  Left out, as at least zero: the point-to-point,
    DP and optimizer terms, and the terms an overlap hides (their exposed share is not monotone
    in the micro batch).  --plan bounds candidates with it before evaluating."""
    L = layout
    par = parallel(L)
    par.update(mbs=mbs, tokens=mbs * L.seq_length / par["cp"])
    static = _static_key(shape, hw, opts, L)
    skip = {"recompute"} if (opts.get("--tp-comm-overlap")
                             or L.overlap_moe_expert_parallel_comm) else set()
    if opts.get("--tp-comm-overlap"):
        skip.add("tp_comm")
    if L.overlap_moe_expert_parallel_comm:
        skip.add("ep_comm")
    slot = max(sum(v for k, v in _rank_terms_cached(shape, par, hw, opts, L, n, last,
                                                    static)[0].items() if k not in skip)
               for n, _, last in rank_layers(L, shape))
    smallest = smallest or mbs
    bubble = slot * smallest / mbs * (par["pp"] - 1) / vpp
    return L.global_batch_size / (par["dp"] * mbs) * slot + bubble


class Prediction:
    """A computed step: ``tokens_per_second_per_gpu`` at once, the JSON-ready ``performance``
    object on demand (``as_dict``), so --plan renders only the plans it prints."""

    __slots__ = ("step", "seconds", "tokens_per_second_per_gpu", "shape", "hw", "gpu", "prec",
                 "calib")

    def __init__(self, step, seconds, tokens, shape, hw, gpu, prec, calib):
        self.step, self.seconds, self.tokens_per_second_per_gpu = step, seconds, tokens
        self.shape, self.hw, self.gpu, self.prec, self.calib = shape, hw, gpu, prec, calib

    def as_dict(self):
        return render(self.step, self.seconds, self.tokens_per_second_per_gpu, self.shape,
                      self.hw, self.gpu, self.prec, self.calib)


def render(step, seconds, tokens_per_gpu, shape, hw, gpu, prec, calib):
    flops = model_flops_per_token(shape)
    tflops = flops * tokens_per_gpu / 1e12
    top = sorted(step.items(), key=lambda kv: -kv[1])
    return {
        "step_seconds": round(seconds, 4),
        "tokens_per_second_per_gpu": round(tokens_per_gpu, 1),
        "model_tflops_per_gpu": round(tflops, 1),
        "model_flops_formula": "megatron.training.training.num_floating_point_operations "
                               "(megatron-core 0.19.2): %.4g FLOPs per token" % flops,
        "mfu": round(tflops * 1e12 / hw["peak"], 4),
        "mfu_peak": f"{gpu['name']} dense {prec} peak {hw['peak'] / 1e12:g} TFLOP/s",
        "precision": prec,
        "breakdown": {k: round(v, 5) for k, v in step.items()},
        "top_terms": [k for k, _ in top[:3]],
        "gpu": gpu["name"],
        "calibration": {"constants_of": hw["fitted"], "gemm_efficiency": hw["gemm_efficiency"],
                        "elementwise_factor": hw["elementwise_factor"],
                        "moe_layer_latency_seconds": hw["moe_layer_latency"],
                        "gemm_half_dim": hw["gemm_half_dim"],
                        "fitted_on": calib.get("fitted_on")},
    }


def require_gpu(name):
    """gpus.get with the message the CLI prints."""
    if not name:
        raise BadInput("performance needs --gpu NAME (one of: %s)" % ", ".join(G.names()))
    return G.get(name)

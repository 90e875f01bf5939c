"""Activation bytes one transformer layer keeps for backward, per token.

The model is a sum of the tensors megatron-core 0.19.2's layer saves, each
written down from a measurement: tests/test_layout_activations.py builds real
``TransformerLayer``s on CPU, counts the bytes saved for backward with
``torch.autograd.graph.saved_tensors_hooks`` and compares every grid point
with ``layer_bytes_per_token`` (within 10%; the reference gives the worst
error).  Korthikanti et al. 2022 (Table 2) is the special case "unfused
attention, LayerNorm, GeLU, dropout on": 34 + 5as/h bytes per s*b*h.

Two facts differ between the CPU the test runs on and a GPU, so both are
kernel-profile entries (``PROFILES``), each proven on CPU by the test:

* a dropout mask is a bool tensor (1 byte) from CUDA's fused dropout, but a
  tensor of the activation's dtype on CPU (``torch.nn.functional.dropout``
  multiplies by a noise tensor there);
* RMSNorm: Transformer Engine (and torch's fused CUDA kernel) keep the input
  and one fp32 statistic per token; torch's CPU composite keeps two fp32
  copies of the input instead of the bf16 one.

The attention backend decides whether the s x s probabilities are kept:
``--attention-backend`` flash / fused (and auto, which picks one of them
with Transformer Engine) keep only a log-sum-exp per head and token; unfused
and local (and ``--transformer-impl local``) keep the probabilities, their
dropout mask and the dropped-out copy.
"""

from __future__ import annotations

# bytes: "mask" per dropout-mask element; "norm_input" whether a norm keeps its
# bf16 input; "norm_extra" bytes per token per h beyond that (fp32 copies).
PROFILES = {
    "gpu": {"mask": 1, "rms_keeps_input": True, "rms_extra_per_h": 0},
    "cpu": {"mask": 2, "rms_keeps_input": False, "rms_extra_per_h": 8},
}

# Backends that keep the s x s attention probabilities (the score term).
SCORE_BACKENDS = frozenset({"unfused", "local"})
ACT = 2  # bytes of a bf16/fp16 activation
FP32 = 4


def stores_scores(attention_backend, transformer_impl):
    """Whether the core attention keeps s x s probabilities for backward.
    ``--transformer-impl local`` builds DotProductAttention (unfused); with
    Transformer Engine, ``auto`` selects flash or fused attention."""
    if transformer_impl == "local":
        return True
    return attention_backend in SCORE_BACKENDS


def _norm(kind, h, profile):
    """(bytes of the norm's own saved tensors beyond its bf16 input, keeps input)."""
    if kind == "RMSNorm":
        return FP32 + profile["rms_extra_per_h"] * h, profile["rms_keeps_input"]
    return 2 * FP32, True  # LayerNorm: mean and rstd in fp32


def layer_bytes_per_token(m, profile="gpu"):
    """Bytes per token (of the full s*b) on one GPU for one layer.

    ``m`` is a mapping with keys: h, heads, groups, kv_channels, ffn, gated,
    normalization, tp, sp, hidden_dropout, attention_dropout,
    softmax_fp32, scores (bool: unfused attention), recompute (None,
    "selective", "full"), and for a MoE layer experts, topk, moe_ffn, etp,
    shared_ffn.  Returns a float."""
    p = PROFILES[profile]
    h, a, t = m["h"], m["heads"], m["tp"]
    g, d = m["groups"], m["kv_channels"]
    seq = t if m["sp"] else 1  # tensors sharded over the sequence by SP
    if m["recompute"] == "full":
        # A checkpointed layer keeps only its input hidden states
        # (tensor_parallel.checkpoint saves its arguments).
        return ACT * h / seq
    mask = p["mask"] if m["hidden_dropout"] else 0
    total = 0.0
    # Layer input (kept by the first norm) and the residual into the second norm.
    for _ in range(2):
        extra, keeps = _norm(m["normalization"], h, p)
        total += (extra + (ACT * h if keeps else 0)) / seq
    if not p["rms_keeps_input"] and m["normalization"] == "RMSNorm":
        total += ACT * h / seq  # the layer input is counted even where no op keeps it
    total += 2 * ACT * h / seq  # norm outputs: inputs of the QKV and FC1 linears
    total += 2 * mask * h / seq  # dropout after attention and after the MLP
    # Core attention inputs.  Unfused attention repeats K and V to all heads
    # (GQA) and keeps Q, K, V of h each; otherwise the fused QKV output is
    # kept (q view or copy, k and v of groups*kv_channels).
    q_width = a * d
    scores = m["scores"] and m["recompute"] != "selective"
    if scores:
        qkv = 3 * ACT * q_width
    else:
        qkv = ACT * (q_width + 2 * g * d) + (ACT * q_width if g != a else 0)
    total += qkv / t
    if scores:
        fp32 = m["softmax_fp32"]
        per = (FP32 if fp32 else ACT)
        if m["attention_dropout"]:
            per += p["mask"] + ACT
        elif fp32:
            per += ACT  # the bf16 copy the probs @ V product keeps
        total += per * a * m["s"] / t
    elif m["recompute"] != "selective":
        total += FP32 * a / t  # flash/fused attention: log-sum-exp per head and token
    total += ACT * q_width / t  # attention output: input of the output projection
    total += _mlp(m, p) if not m.get("experts") else _moe(m, p)
    return total


def _dense_mlp(ffn, gated, t):
    # fc1 output (2*ffn when gated, the fused SwiGLU keeps only it) and the
    # activation output, which fc2 keeps.
    return (ACT * ffn * (2 if gated else 1) + ACT * ffn) / t


def _mlp(m, p):
    return _dense_mlp(m["ffn"], m["gated"], m["tp"])


def _moe(m, p):
    """Router, permuted tokens, experts.  Each token goes to ``topk`` experts:
    per GPU the experts see s*b*topk rows on average (SP gathers the TP
    shards; EP ranks exchange tokens but each keeps 1/EP of the experts)."""
    h, k, e, etp = m["h"], m["topk"], m["experts"], m["etp"]
    seq = m["tp"] if m["sp"] else 1
    ffn = m["moe_ffn"]
    # router: logits, top-k indices and probabilities, routing map (small)
    router = (ACT * e + 8 * k + FP32 * k + e) / seq
    permuted = ACT * h * k  # the gathered, permuted expert inputs
    if m["gated"]:
        per_row = (ACT * 2 * ffn + ACT * ffn) / etp  # fused weighted SwiGLU
    else:
        per_row = 3 * ACT * ffn / etp  # fc1 out, activation, prob-weighted activation
    shared = _dense_mlp(m["shared_ffn"], m["gated"], m["tp"]) if m.get("shared_ffn") else 0
    return router + permuted + k * per_row + shared

"""Bytes a real megatron-core TransformerLayer saves for backward, on CPU.

Run as ``python tests/layer_activation_probe.py PORT`` in each of a
2-rank gloo world (environment ``RANK``, ``WORLD_SIZE``=2); rank 0 prints one
JSON line: ``{point name: {"bytes": saved bytes, "tensors": [[bytes, shape, dtype], ...]}}``.
Used by tests/test_layout_activations.py, which compares each point with
``parallel_layout.memory.layer_activation_bytes``.

Counting (the issue's rules): every tensor that autograd saves during the
forward pass (``torch.autograd.graph.saved_tensors_hooks``), each storage
once, parameters and the shared attention mask excluded, and the layer's
input counted even where no operation saves it; tensors offered to the hook
inside a checkpointed forward (``tensor_parallel.random.is_checkpointing``) are not kept and
not counted (a stack of layers keeps every
layer's input: it is the previous layer's output, saved by the next).

CPU stand-ins: the CUDA RNG tracker (dropout under a tracker fork) becomes a
no-op context (recompute's CUDA RNG state save/restore with it),
``torch.cuda.current_device`` returns ``"cpu"`` (Megatron's
global memory buffer allocates the attention score buffer there).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import warnings

S, H, HEADS, B = 64, 64, 4, 2  # small: the grid runs in the normal suite


def grid():
    """(name, TransformerConfig overrides, spec options, tensor parallel size, builder)."""
    off = dict(hidden_dropout=0.0, attention_dropout=0.0)
    # Megatron-LM's defaults: --swiglu keeps --bias-swiglu-fusion on.
    swiglu = dict(gated_linear_unit=True, activation_func="silu", normalization="RMSNorm",
                  ffn_hidden_size=3 * H, add_bias_linear=False, bias_activation_fusion=True)
    gqa = dict(num_query_groups=2)
    moe = dict(num_moe_experts=4, moe_router_topk=2, moe_ffn_hidden_size=2 * H,
               moe_token_dispatcher_type="allgather", add_bias_linear=False)
    return [
        ("dense", dict(off), 1, "layer"),
        ("dense-dropout", {}, 1, "layer"),
        ("dense-softmax-fp32", dict(off, attention_softmax_in_fp32=True), 1, "layer"),
        ("swiglu-gqa", dict(off, **swiglu, **gqa), 1, "layer"),
        ("swiglu-gqa-dropout", dict(swiglu, **gqa), 1, "layer"),
        ("moe", dict(off, **moe), 1, "layer"),
        ("moe-swiglu-gqa", {**off, **swiglu, **moe, **gqa, "ffn_hidden_size": None}, 1,
         "layer"),
        ("selective", dict(recompute_granularity="selective"), 1, "layer"),
        ("selective-swiglu-gqa", dict(off, recompute_granularity="selective", **swiglu, **gqa),
         1, "layer"),
        ("full", dict(recompute_granularity="full", recompute_method="uniform",
                      recompute_num_layers=1), 1, "block"),
        ("full-2", dict(recompute_granularity="full", recompute_method="uniform",
                        recompute_num_layers=1, num_layers=2), 1, "block"),
        ("flash-sdpa", dict(off, **swiglu, **gqa), 1, "sdpa"),
        ("tp2", dict(off), 2, "layer"),
        ("tp2-sp", dict(off, sequence_parallel=True), 2, "layer"),
        ("tp2-sp-dropout", dict(sequence_parallel=True), 2, "layer"),
        ("tp2-sp-selective", dict(sequence_parallel=True, recompute_granularity="selective"), 2,
         "layer"),
        ("tp2-sp-moe", dict(off, sequence_parallel=True, **moe), 2, "layer"),
    ]


class _Tracker:
    def fork(self, *args, **kwargs):
        return contextlib.nullcontext()

    def get_states(self):
        return {}

    def set_states(self, states):
        pass


def _sdpa_class():
    """Core attention through torch's CPU flash kernel (saves O(s) statistics,
    as flash and fused attention do), with DotProductAttention's interface."""
    import torch
    from megatron.core.transformer.module import MegatronModule

    class SDPAttention(MegatronModule):
        def __init__(self, config, layer_number, attn_mask_type, attention_type,
                     attention_dropout=None, softmax_scale=None, cp_comm_type=None,
                     pg_collection=None, **kwargs):
            super().__init__(config=config)

        def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None):
            # [s, b, n, d] -> [b, n, s, d]; kv heads are not repeated (enable_gqa).
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=k.size(1) != q.size(1))
            out = out.permute(2, 0, 1, 3).contiguous()
            return out.view(out.size(0), out.size(1), -1)

    return SDPAttention


def _norms_without_sp_assert(spec):
    """Megatron's torch-norm fallback (no Apex, no TE on CPU) asserts that
    sequence parallelism is off, because it does not all-reduce the norm
    weights' gradients over TP; the norm's saved tensors are the same either
    way (its input is the local [s/TP, b, h] shard), so the norms are built
    from a copy of the config with sequence_parallel False."""
    import copy
    from megatron.core.transformer.torch_norm import WrappedTorchNorm

    def build(config, hidden_size, eps=1e-5, **kwargs):
        plain = copy.copy(config)
        plain.sequence_parallel = False
        return WrappedTorchNorm(plain, hidden_size, eps=eps, **kwargs)

    sub = spec.submodules
    for name in ("input_layernorm", "pre_mlp_layernorm"):
        if getattr(sub, name) is WrappedTorchNorm:
            setattr(sub, name, build)
    for holder in (sub.self_attention.submodules,):
        for name in ("q_layernorm", "k_layernorm"):
            if getattr(holder, name, None) is WrappedTorchNorm:
                setattr(holder, name, build)


def measure(name, overrides, tp, builder):
    import torch
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_block import TransformerBlock
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core import tensor_parallel

    kw = dict(num_layers=1, hidden_size=H, num_attention_heads=HEADS, bf16=True,
              params_dtype=torch.bfloat16, use_cpu_initialization=True,
              tensor_model_parallel_size=tp, attention_softmax_in_fp32=False)
    kw.update(overrides)
    if kw.get("activation_func") == "silu":
        kw["activation_func"] = torch.nn.functional.silu
    if kw.get("num_moe_experts") and tp > 1:
        kw["expert_tensor_parallel_size"] = tp
    config = TransformerConfig(**kw)
    spec = get_gpt_layer_local_spec(num_experts=config.num_moe_experts,
                                    normalization=config.normalization)
    if config.sequence_parallel:
        _norms_without_sp_assert(spec)
    if builder == "sdpa":
        spec.submodules.self_attention.submodules.core_attention = _sdpa_class()
    if builder == "block":
        module = TransformerBlock(config, spec, post_process=False)
    else:
        module = build_module(spec, config=config, layer_number=1)
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    local = S // tp if config.sequence_parallel else S
    torch.manual_seed(0)
    x = torch.randn(local, B, H, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(B, 1, S, S, dtype=torch.bool).triu(1)
    excluded = params | {mask.untyped_storage().data_ptr()}
    saved = {}

    def pack(t):
        # Inside a checkpointed forward (run under no_grad) the hook still
        # sees tensors that autograd then drops; they are not kept.
        if tensor_parallel.random.is_checkpointing():
            return t
        storage = t.untyped_storage()
        if storage.data_ptr() not in excluded and storage.nbytes():
            saved[storage.data_ptr()] = [storage.nbytes(), list(t.shape), str(t.dtype)]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = module(x, attention_mask=mask)
    saved.setdefault(x.untyped_storage().data_ptr(),
                     [x.untyped_storage().nbytes(), list(x.shape), str(x.dtype)])
    out = out[0] if isinstance(out, tuple) else out
    out.float().sum().backward()  # the saved tensors are what backward needs
    tensors = sorted(saved.values(), key=lambda v: -v[0])
    return {"bytes": sum(v[0] for v in tensors), "tensors": tensors, "tp": tp,
            "s": S, "b": B, "h": H, "heads": HEADS}


@contextlib.contextmanager
def cpu_stand_ins():
    """The CUDA RNG tracker and device queries a layer's forward makes, answered on CPU."""
    import torch
    from unittest import mock
    from megatron.core import tensor_parallel

    tracker = lambda *a, **k: _Tracker()  # noqa: E731
    with mock.patch.object(tensor_parallel.random, "get_cuda_rng_tracker", tracker), \
            mock.patch.object(tensor_parallel, "get_cuda_rng_tracker", tracker), \
            mock.patch.object(torch.cuda, "current_device", lambda: "cpu"), \
            mock.patch.object(tensor_parallel.random, "_get_cuda_rng_state", lambda **k: None), \
            mock.patch.object(tensor_parallel.random, "_set_cuda_rng_state", lambda *a, **k: None):
        yield


def main(port):
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    warnings.simplefilter("ignore")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    results = {}
    with cpu_stand_ins():
        for tp in (1, 2):
            ps.initialize_model_parallel(tensor_model_parallel_size=tp,
                                         create_gloo_process_groups=False)
            for name, overrides, point_tp, builder in grid():
                if point_tp == tp:
                    results[name] = measure(name, overrides, tp, builder)
            ps.destroy_model_parallel()
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(results))


if __name__ == "__main__":
    main(int(sys.argv[1]))

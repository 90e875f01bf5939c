"""Reproduce every `reproduced` entry of references/troubleshooting.md against megatron-core.

REPROS maps a catalogue entry id to (runner, function). The runner says where the
function must execute:

- ``inproc``: one fresh interpreter runs all of them in turn (megatron is imported once);
- ``gloo``: every rank of a 2-process gloo world runs all of them in turn, between
  ``destroy_model_parallel`` calls; rank 0's results are kept;
- ``fresh``: a new interpreter per PYTHONPATH variant, because the result depends on
  what is importable (fake broken packages from tests/data/troubleshooting/ go first on
  PYTHONPATH) or on warnings emitted at import time.

Each function returns the text a user would see: the last line(s) of the traceback
(``Type: message``, exactly as ``traceback.format_exception_only`` renders it), the
warning (``Category: message``), or, for silent failures, a symptom line built from
observed values. The tests assert that this text equals the fence of the entry, and
that the file it came from (deepest site-packages frame of the traceback, or the caller
of warnings.warn / the logger, skipping rank-0 relay helpers) is the entry's
``Raised in`` path.

This file is also the worker script: ``python tests/test_troubleshooting_repro.py
inproc OUT`` / ``gloo RANK WORLD PORT OUT`` / ``fresh ID[,ID...] OUT`` write a JSON object
{entry id: {"text", "where"}} to OUT (stdout is left to megatron's own prints);
``hangrank RANK PORT`` is one rank of the HANG-01 hang, started by its fresh repro (rank 0
dumps its stack with faulthandler and exits; the repro reads the dump).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import pytest

from procutil import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()
DATA = ROOT / "tests" / "data" / "troubleshooting"
DOC = ROOT / "references" / "troubleshooting.md"
PY = sys.executable
WORKER_TIMEOUT_S = 240

# --------------------------------------------------------------------------- helpers


# Where the last repro's exception, warning or log record came from (path relative to
# site-packages); reset before each repro, reported next to its text.
WHERE: dict[str, str] = {}


def site_relative(filename: str) -> str:
    return filename.split("site-packages/", 1)[1] if "site-packages/" in filename else filename


# Helpers that only forward a message (warn/log on rank 0): the origin is their caller.
RELAYS = ("megatron/training/utils/common_utils.py", "megatron/core/_rank_utils.py")


def origin_from_stack() -> str | None:
    """Innermost site-packages frame of the current stack that is not a relay or logging."""
    for frame in reversed(traceback.extract_stack()[:-1]):
        rel = site_relative(frame.filename)
        if "site-packages/" in frame.filename and rel not in RELAYS:
            return rel
    return None


def note_where_tb(exc: BaseException) -> None:
    """Record the deepest traceback frame inside site-packages (the raising file)."""
    frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
    inside = [f for f in frames if "site-packages/" in f]
    if inside:
        WHERE["where"] = site_relative(inside[-1])


def exc_text(exc: BaseException) -> str:
    """What the bottom of the traceback shows."""
    return "".join(traceback.format_exception_only(type(exc), exc)).rstrip("\n")


def raised(fn) -> str:
    """Run fn, return its exception text; a repro that does not raise is a failure."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    except BaseException as exc:  # noqa: BLE001 - SystemExit/AssertionError are the point
        note_where_tb(exc)
        return exc_text(exc)
    return "<no exception>"


def catch_warnings_with_origin():
    """Like catch_warnings(record=True), but each record also knows its origin file."""
    caught: list = []
    ctx = warnings.catch_warnings()

    def show(message, category, filename, lineno, file=None, line=None):
        caught.append((category, message, origin_from_stack()))

    class _Ctx:
        def __enter__(self):
            ctx.__enter__()
            warnings.simplefilter("always")
            warnings.showwarning = show
            return caught

        def __exit__(self, *exc):
            return ctx.__exit__(*exc)

    return _Ctx()


def warned(fn, category=UserWarning, contains: str = "") -> str:
    """Run fn and return the first matching warning as ``Category: message``."""
    with catch_warnings_with_origin() as caught:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    for cat, message, origin in caught:
        if issubclass(cat, category) and contains in str(message):
            WHERE["where"] = origin
            return f"{cat.__name__}: {message}"
    return "<no warning>"


@contextlib.contextmanager
def log_records(logger_name: str, contains: str):
    """Collect 'LEVEL: message' of the logger's records that contain `contains`; the first sets WHERE."""
    import logging

    records: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record):
            if contains in record.getMessage():
                WHERE.setdefault("where", origin_from_stack())
                records.append(f"{record.levelname}: {record.getMessage()}")

    logger = logging.getLogger(logger_name)
    handler = Grab()
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def tc(**kw):
    """TransformerConfig with a tiny default model; kw overrides."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    base = dict(num_layers=2, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True)
    base.update(kw)
    return TransformerConfig(**base)


LM_BASE = [
    "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
    "--max-position-embeddings", "128", "--seq-length", "128", "--micro-batch-size", "1",
]


def lm_validate(extra, world_size=1, env=None, arch=None):
    """Parse Megatron-LM's command line (LM_BASE + extra) and run validate_args.

    arch: value returned by the patched GPU-architecture query (8 Ampere, 9 Hopper,
    10 Blackwell); validate_args asks the GPU only when TP or CP > 1.
    """
    from megatron.training import arguments as A

    old_env = dict(os.environ)
    old_arch = A.get_device_arch_version
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    os.environ.update(env or {})
    if arch is not None:
        A.get_device_arch_version = lambda: arch
    sys.argv = ["pretrain_gpt.py", *LM_BASE, *extra]
    try:
        args = A.parse_args()
        A.validate_args(args)
    finally:
        os.environ.clear()
        os.environ.update(old_env)
        A.get_device_arch_version = old_arch


def local_gpt(config, vocab_size=128, **spec_kw):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    return GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(**spec_kw),
        vocab_size=vocab_size,
        max_sequence_length=32,
    )


def init_mp(**kw):
    from megatron.core import parallel_state as ps

    ps.destroy_model_parallel()
    ps.initialize_model_parallel(**kw)


# --------------------------------------------------------------------------- inproc repros
# Tensor parallelism


def r_tp_heads():
    return raised(lambda: tc(hidden_size=96, num_attention_heads=6, tensor_model_parallel_size=4))


def r_tp_query_groups():
    return raised(lambda: tc(num_attention_heads=8, num_query_groups=3, tensor_model_parallel_size=2))


def r_tp_sp_without_tp():
    return raised(lambda: tc(sequence_parallel=True))


def r_tp_kv_channels_silent():
    cfg = tc(hidden_size=100, num_attention_heads=3)
    return (
        f"accepted: hidden_size={cfg.hidden_size} num_attention_heads={cfg.num_attention_heads} "
        f"kv_channels={cfg.kv_channels} -> attention width "
        f"{cfg.kv_channels * cfg.num_attention_heads} != hidden_size"
    )


def r_tp_lm_hidden_heads():
    return raised(lambda: lm_validate(["--hidden-size", "100", "--num-attention-heads", "3"]))


def r_tp_vocab_padding_silent():
    from megatron.training.vocab_utils import calculate_padded_vocab_size

    sizes = {
        tp: calculate_padded_vocab_size(50257, 128, tp, logging_enabled=False) for tp in (1, 2, 8)
    }
    line = "padded vocab for 50257 tokens: " + ", ".join(f"TP={k}: {v}" for k, v in sizes.items())
    return line + "\n" + _padded_logit_changes_loss()


def _padded_logit_changes_loss():
    """Megatron's own vocab-parallel cross entropy steps (TP=1, no group needed): a padded
    column's logit enters the softmax sum, so the loss of the same token changes."""
    import torch
    from megatron.core.tensor_parallel.cross_entropy import VocabParallelCrossEntropy as V

    def loss(columns):
        logits, logits_max = V.calculate_logits_max(torch.zeros(1, 1, columns))
        target = torch.zeros(1, 1, dtype=torch.long)
        _, _, predicted, sum_exp, exp_logits = V.calculate_predicted_logits(logits, target, logits_max, 0, columns)
        return V.calculate_cross_entropy_loss(exp_logits, predicted, sum_exp)[1].item()

    return (f"loss of one token, 8 real logits of 0: {loss(8):.4f}; "
            f"with one padded logit of 0 added: {loss(9):.4f}")


# Pipeline parallelism


def r_pp_dtype():
    return raised(lambda: tc(pipeline_model_parallel_size=2))


def r_pp_layers_core():
    import torch
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    cfg = tc(num_layers=5, pipeline_model_parallel_size=2, pipeline_dtype=torch.bfloat16)
    return raised(lambda: get_num_layers_to_build(cfg, pp_rank=0))


def r_pp_layers_lm():
    return raised(
        lambda: lm_validate(["--num-layers", "5", "--pipeline-model-parallel-size", "2"], world_size=2)
    )


def _pp(**kw):
    import torch

    return tc(pipeline_dtype=torch.bfloat16, **kw)


def r_pp_uneven_mismatch():
    return raised(
        lambda: _pp(
            num_layers=4,
            pipeline_model_parallel_size=2,
            num_layers_in_first_pipeline_stage=2,
            num_layers_in_last_pipeline_stage=1,
        )
    )


def r_pp_uneven_middle():
    return raised(
        lambda: _pp(num_layers=8, pipeline_model_parallel_size=4, num_layers_in_first_pipeline_stage=1)
    )


def r_pp_uneven_vpp():
    return raised(
        lambda: _pp(
            num_layers=8,
            pipeline_model_parallel_size=2,
            virtual_pipeline_model_parallel_size=2,
            num_layers_in_first_pipeline_stage=3,
        )
    )


def r_pp_layout_conflict():
    return raised(
        lambda: _pp(
            num_layers=4,
            pipeline_model_parallel_size=2,
            pipeline_model_parallel_layout="Ett|ttL",
            num_layers_in_first_pipeline_stage=2,
        )
    )


def r_pp_layout_count():
    return raised(
        lambda: _pp(num_layers=5, pipeline_model_parallel_size=2, pipeline_model_parallel_layout="Ettt|tL")
    )


def r_pp_layout_stages():
    return raised(
        lambda: _pp(num_layers=3, pipeline_model_parallel_size=2, pipeline_model_parallel_layout="Et|t|tL")
    )


def r_pp_layout_char():
    return raised(
        lambda: _pp(num_layers=3, pipeline_model_parallel_size=2, pipeline_model_parallel_layout="Ett|xL")
    )


def r_pp_layout_vpp():
    return raised(
        lambda: _pp(
            num_layers=4,
            pipeline_model_parallel_size=2,
            virtual_pipeline_model_parallel_size=3,
            pipeline_model_parallel_layout="Et|t|t|tL",
        )
    )


def r_pp_lm_interleaved():
    return raised(
        lambda: lm_validate(
            [
                "--pipeline-model-parallel-size", "2",
                "--num-layers-per-virtual-pipeline-stage", "1",
                "--no-overlap-p2p-communication",
            ],
            world_size=2,
        )
    )


def r_dp_global_batch():
    from megatron.core import num_microbatches_calculator as nmc

    def run():
        nmc.destroy_num_microbatches_calculator()
        nmc.init_num_microbatches_calculator(
            rank=0, global_batch_size=10, micro_batch_size=4, data_parallel_size=1
        )

    return raised(run)


# Context parallelism


def r_cp_seq_lm():
    return raised(
        lambda: lm_validate(
            ["--context-parallel-size", "2", "--seq-length", "126"], world_size=2, arch=10
        )
    )


def r_cp_comm_type_len():
    return raised(lambda: tc(num_layers=4, context_parallel_size=2, cp_comm_type=["p2p", "p2p"]))


def r_cp_a2a_p2p():
    return raised(
        lambda: lm_validate(
            ["--context-parallel-size", "2", "--cp-comm-type", "a2a+p2p"], world_size=2, arch=10
        )
    )


# MoE / expert parallelism


def r_moe_ep_without_experts():
    return raised(lambda: tc(expert_model_parallel_size=2))


def r_moe_lm_experts_ep():
    return raised(
        lambda: lm_validate(
            ["--num-experts", "3", "--expert-model-parallel-size", "2"], world_size=2
        )
    )


def r_moe_bias_etp():
    return raised(lambda: tc(num_moe_experts=4, tensor_model_parallel_size=2))


def r_moe_allgather_varlen():
    return raised(
        lambda: tc(num_moe_experts=4, moe_token_dispatcher_type="allgather", variable_seq_lengths=True)
    )


def r_moe_deepep():
    return raised(lambda: tc(num_moe_experts=4, moe_enable_deepep=True))


def r_moe_topk1():
    return raised(lambda: tc(num_moe_experts=4, moe_router_topk=1))


def r_moe_ffn_without_experts():
    return raised(lambda: tc(moe_ffn_hidden_size=128))


def r_moe_group_topk():
    return raised(lambda: tc(num_moe_experts=8, moe_router_topk=2, moe_router_group_topk=2))


def r_moe_a2a_overlap_ep():
    return raised(lambda: tc(num_moe_experts=4, bf16=True, overlap_moe_expert_parallel_comm=True))


# Data parallel / optimizer / FSDP


def r_dp_overlap_param_gather():
    return raised(lambda: lm_validate(["--overlap-param-gather"]))


def r_dp_overlap_param_gather_grad():
    return raised(lambda: lm_validate(["--use-distributed-optimizer", "--overlap-param-gather"]))


def r_dp_mfsdp_ckpt():
    return raised(lambda: lm_validate(["--use-megatron-fsdp"]))


def r_dp_mfsdp_connections():
    return raised(
        lambda: lm_validate(["--use-megatron-fsdp"], env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    )


def r_dp_fsdp2_pp():
    return raised(
        lambda: lm_validate(
            ["--use-torch-fsdp2", "--pipeline-model-parallel-size", "2"], world_size=2
        )
    )


def r_dp_fsdp2_gaf():
    return raised(lambda: lm_validate(["--use-torch-fsdp2"]))


# Process groups


def r_pg_not_initialized():
    from megatron.core import parallel_state as ps

    return raised(ps.get_tensor_model_parallel_group)


def r_pg_unknown_attr():
    from megatron.core.process_groups_config import ProcessGroupCollection

    return raised(lambda: ProcessGroupCollection(tp=None, tensor=None))


def r_pg_invalid_required():
    from megatron.core.process_groups_config import ProcessGroupCollection

    return raised(lambda: ProcessGroupCollection.use_mpu_process_groups(required_pgs=["tensor"]))


def r_pg_mpu_before_init_silent():
    from megatron.core.process_groups_config import ProcessGroupCollection

    pgs = ProcessGroupCollection.use_mpu_process_groups(required_pgs=["tp", "cp"])
    return f"accepted: pg_collection.tp={pgs.tp!r} pg_collection.cp={pgs.cp!r}"


def r_pg_model_before_init():
    # Which group's check fires first follows set iteration order in
    # use_mpu_process_groups, i.e. string hashing, so it changes from run to run.
    text = raised(lambda: local_gpt(tc()))
    return re.sub(
        r"^AssertionError: [\w ()-]*group[\w ()-]* is not initialized$",
        "AssertionError: <group description> is not initialized",
        text,
    )


def r_pg_init_without_torch_distributed():
    from megatron.core import parallel_state as ps

    return raised(ps.initialize_model_parallel)


def r_dp_buckets():
    from megatron.core.distributed import DistributedDataParallelConfig

    return raised(lambda: DistributedDataParallelConfig(num_buckets=4, bucket_size=10**6))


def r_pg_lm_world():
    return raised(lambda: lm_validate(["--tensor-model-parallel-size", "2"], world_size=3))


# CUDA streams


def r_cs_connections_hopper():
    return raised(lambda: lm_validate(["--tensor-model-parallel-size", "2"], world_size=2, arch=9))


def r_cs_connections_blackwell_silent():
    with contextlib.redirect_stdout(io.StringIO()):
        lm_validate(["--tensor-model-parallel-size", "2"], world_size=2, arch=10)
    return "accepted: TP=2, CUDA_DEVICE_MAX_CONNECTIONS unset, GPU arch 10 (Blackwell)"


# Runtime failures and hangs


def r_hang_a2a_overlap_old_torch():
    """EP A2A overlap on a torch older than 2.6: the torch-version query is patched."""
    import megatron.core.transformer.transformer_config as T

    old = T.is_torch_min_version
    T.is_torch_min_version = lambda version, check_equality=True: False
    try:
        return raised(
            lambda: tc(
                num_moe_experts=4, expert_model_parallel_size=2, add_bias_linear=False,
                moe_token_dispatcher_type="alltoall", overlap_moe_expert_parallel_comm=True,
            )
        )
    finally:
        T.is_torch_min_version = old


# Optional kernels


def r_ok_te_spec_without_te():
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec

    return raised(get_gpt_layer_with_transformer_engine_spec)


def r_ok_mamba_ssm_missing():
    from megatron.core.ssm.mamba_mixer import MambaMixer

    return raised(lambda: MambaMixer(tc(), None, d_model=64))


def r_ok_kitchen_stub():
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    return raised(lambda: get_gpt_layer_local_spec(use_kitchen=True))


# Deprecations and other config checks


def r_dep_mamba_model():
    from megatron.core.models.mamba.mamba_model import MambaModel

    with log_records("megatron.core.models.mamba.mamba_model", "deprecated") as records:
        raised(lambda: MambaModel(config=None))
    return records[0] if records else "<no log record>"


def r_dep_lm_hybrid_both():
    return raised(
        lambda: lm_validate(["--hybrid-override-pattern", "M*", "--hybrid-layer-pattern", "M*"])
    )


def r_dep_lm_hybrid_override():
    return warned(
        lambda: lm_validate(["--hybrid-override-pattern", "M*M*"]), contains="hybrid-override"
    )


def r_dep_lm_model_parallel_size():
    return raised(lambda: lm_validate(["--model-parallel-size", "2"]))


def r_dep_lm_no_position_embedding():
    return raised(lambda: lm_validate(["--no-position-embedding"]))


def r_dep_lm_checkpoint_activations():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            lm_validate(["--checkpoint-activations"])
        except SystemExit as exc:
            tail = out.getvalue().rstrip("\n").splitlines()[-1]
            return f"{tail}\n(then SystemExit, code {exc.code})"
    return "<no exit>"


def r_dep_inference_params():
    from megatron.core.utils import deprecate_inference_params

    return warned(lambda: deprecate_inference_params(None, object()), contains="inference_params")


def r_cfg_fp16_bf16():
    return raised(lambda: tc(fp16=True, bf16=True))


def r_cfg_full_recompute_no_method():
    return raised(lambda: tc(recompute_granularity="full"))


def r_cfg_full_recompute_no_layers():
    return raised(lambda: tc(recompute_granularity="full", recompute_method="uniform"))


def r_cfg_full_scope_default():
    return warned(tc, contains="full scope")


def r_cfg_recompute_typo():
    return raised(lambda: tc(recompute_granularity="block"))


def r_rt_te_cross_entropy_fusion():
    return warned(
        lambda: tc(cross_entropy_loss_fusion=True, cross_entropy_fusion_impl="te"),
        contains="cross entropy loss fusion",
    )


# --------------------------------------------------------------------------- gloo repros
# Run on both ranks of a 2-process gloo world; each starts from a clean parallel state.


def g_pg_world_not_divisible():
    return raised(lambda: init_mp(tensor_model_parallel_size=4))


def g_pg_already_initialized():
    from megatron.core import parallel_state as ps

    init_mp()
    return raised(ps.initialize_model_parallel)


def g_pp_vpp_without_pp():
    return raised(lambda: init_mp(virtual_pipeline_model_parallel_size=2))


def g_moe_expert_grid():
    return raised(lambda: init_mp(tensor_model_parallel_size=2, expert_model_parallel_size=2))


def g_tp_ffn():
    init_mp(tensor_model_parallel_size=2)
    return raised(lambda: local_gpt(tc(tensor_model_parallel_size=2, ffn_hidden_size=33)))


def g_tp_vocab():
    init_mp(tensor_model_parallel_size=2)
    return raised(lambda: local_gpt(tc(tensor_model_parallel_size=2), vocab_size=127))


def g_tp_ckpt_shape():
    init_mp()
    old = local_gpt(tc(), vocab_size=256).state_dict()
    new = local_gpt(tc(), vocab_size=128)
    return raised(lambda: new.load_state_dict(old))


def g_tp_sp_split():
    import torch
    from megatron.core.tensor_parallel.mappings import scatter_to_sequence_parallel_region

    init_mp(tensor_model_parallel_size=2)
    return raised(lambda: scatter_to_sequence_parallel_region(torch.zeros(5, 1, 8)))


def g_cp_needs_te():
    from megatron.core.transformer.dot_product_attention import DotProductAttention
    from megatron.core.transformer.enums import AttnMaskType

    init_mp(context_parallel_size=2)
    cfg = tc(context_parallel_size=2)
    return raised(lambda: DotProductAttention(cfg, layer_number=1, attn_mask_type=AttnMaskType.causal, attention_type="self"))


def g_moe_experts_not_divisible_core():
    init_mp(expert_model_parallel_size=2)
    cfg = tc(num_moe_experts=3, expert_model_parallel_size=2, add_bias_linear=False)
    return raised(lambda: local_gpt(cfg, num_experts=3))


def g_dep_gptmodel():
    init_mp()
    with log_records("megatron.core.models.gpt.gpt_model", "DEPRECATED") as records:
        local_gpt(tc())
    return records[0] if records else "<no log record>"


def g_moe_tp_without_sp():
    """A real MoELayer forward in training mode with TP 2 and no sequence parallelism."""
    import torch

    init_mp(tensor_model_parallel_size=2)
    cfg = tc(num_moe_experts=4, add_bias_linear=False, tensor_model_parallel_size=2)
    moe = local_gpt(cfg, num_experts=4).decoder.layers[0].mlp
    assert type(moe).__name__ == "MoELayer" and moe.training
    return raised(lambda: moe(torch.zeros(4, 1, cfg.hidden_size)))


def g_cs_core_connections_warning():
    """Megatron Core's own CUDA_DEVICE_MAX_CONNECTIONS warning: a TP=2 linear layer's forward."""
    import torch
    from megatron.core.tensor_parallel import layers

    init_mp(tensor_model_parallel_size=2)
    cfg = tc(tensor_model_parallel_size=2)
    linear = layers.ColumnParallelLinear(8, 8, config=cfg, init_method=torch.nn.init.zeros_,
                                         bias=False, gather_output=False)
    layers.linear_with_grad_accumulation_and_async_allreduce.warned = False  # once per process
    return warned(lambda: linear(torch.zeros(2, 1, 8, requires_grad=True)), contains="CUDA_DEVICE")


# What direct Megatron Core users get for the Megatron-LM-only entries (CORE_REPROS).


def c_tp_unpadded_vocab():
    init_mp()
    weight = local_gpt(tc(), vocab_size=50257).embedding.word_embeddings.weight
    return f"accepted: GPTModel(vocab_size=50257) -> embedding.word_embeddings.weight {tuple(weight.shape)}"


def c_pp_vpp2_without_overlap():
    cfg = _pp(num_layers=4, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2,
              overlap_p2p_comm=False)
    return (f"accepted: TransformerConfig(pipeline_model_parallel_size={cfg.pipeline_model_parallel_size}, "
            f"virtual_pipeline_model_parallel_size={cfg.virtual_pipeline_model_parallel_size}, "
            f"overlap_p2p_comm={cfg.overlap_p2p_comm})")


def c_cp_batch_split():
    import torch
    from megatron.core import parallel_state as ps
    from megatron.core.utils import get_batch_on_this_cp_rank

    init_mp(context_parallel_size=2)
    batch = {"tokens": torch.zeros(1, 126, dtype=torch.long)}
    return raised(lambda: get_batch_on_this_cp_rank(batch, False, cp_group=ps.get_context_parallel_group()))


def c_cp_hierarchical_groups():
    from megatron.core import parallel_state as ps

    init_mp(context_parallel_size=2)
    cfg = tc(context_parallel_size=2, cp_comm_type="a2a+p2p")
    groups = ps.get_hierarchical_context_parallel_groups(check_initialized=False)
    return (f"accepted: TransformerConfig(context_parallel_size=2, cp_comm_type={cfg.cp_comm_type!r}); "
            f"get_hierarchical_context_parallel_groups(check_initialized=False) -> {groups!r}")


def c_moe_grouped_gemm_spec():
    init_mp()
    cfg = tc(num_moe_experts=4, add_bias_linear=False, moe_grouped_gemm=True)
    experts = local_gpt(cfg, num_experts=4, moe_grouped_gemm=True).decoder.layers[0].mlp.experts
    return f"accepted: moe_grouped_gemm=True with the local spec -> experts {type(experts).__name__}"


def c_dp_overlap_param_gather():
    from megatron.core.distributed import DistributedDataParallelConfig

    c = DistributedDataParallelConfig(overlap_param_gather=True, overlap_grad_reduce=False,
                                      use_distributed_optimizer=False)
    return (f"accepted: DistributedDataParallelConfig(overlap_param_gather={c.overlap_param_gather}, "
            f"overlap_grad_reduce={c.overlap_grad_reduce}, use_distributed_optimizer={c.use_distributed_optimizer})")


def c_dp_param_gather_without_grad_reduce():
    from megatron.core.distributed import DistributedDataParallelConfig

    c = DistributedDataParallelConfig(overlap_param_gather=True, overlap_grad_reduce=False,
                                      use_distributed_optimizer=True)
    return (f"accepted: DistributedDataParallelConfig(overlap_param_gather={c.overlap_param_gather}, "
            f"overlap_grad_reduce={c.overlap_grad_reduce}, use_distributed_optimizer={c.use_distributed_optimizer})")


def c_dp_no_ckpt_format():
    import dataclasses

    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.transformer.transformer_config import TransformerConfig

    c = DistributedDataParallelConfig(use_megatron_fsdp=True)
    fields = [f.name for cls in (TransformerConfig, DistributedDataParallelConfig)
              for f in dataclasses.fields(cls) if "ckpt" in f.name or "checkpoint_format" in f.name]
    return f"accepted: DistributedDataParallelConfig(use_megatron_fsdp={c.use_megatron_fsdp}); checkpoint-format fields: {fields}"


def c_ckpt_legacy_dir():
    import tempfile

    from megatron.core import dist_checkpointing

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "mp_rank_00").mkdir()
        (Path(tmp) / "mp_rank_00" / "model_optim_rng.pt").write_bytes(b"")
        return raised(lambda: dist_checkpointing.load_common_state_dict(tmp)).replace(tmp, "<dir>")


def c_dp_fsdp_connections():
    from megatron.core.distributed import DistributedDataParallelConfig

    old = os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    try:
        c = DistributedDataParallelConfig(use_megatron_fsdp=True)
    finally:
        os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS")
        if old is not None:
            os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = old
    return f"accepted: CUDA_DEVICE_MAX_CONNECTIONS=1 DistributedDataParallelConfig(use_megatron_fsdp={c.use_megatron_fsdp})"


def _hybrid(**kw):
    from megatron.core.models.hybrid.hybrid_layer_specs import hybrid_stack_spec
    from megatron.core.models.hybrid.hybrid_model import HybridModel

    init_mp()
    with log_records("megatron.core.models.hybrid.hybrid_model", "hybrid_override_pattern") as records:
        text = raised(lambda: HybridModel(config=tc(num_layers=2), hybrid_stack_spec=hybrid_stack_spec,
                                          vocab_size=128, max_sequence_length=32, **kw))
    return records[0] if records else text


def c_dep_hybrid_override():
    return _hybrid(hybrid_override_pattern="*-")


def c_dep_hybrid_both():
    return _hybrid(hybrid_override_pattern="*-", hybrid_layer_pattern="*-")


def c_dep_model_parallel_size():
    return raised(lambda: tc(model_parallel_size=2))


def c_dep_no_position_embedding():
    return raised(lambda: local_gpt_kw(no_position_embedding=True))


def local_gpt_kw(**kw):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    return GPTModel(config=tc(), transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=128,
                    max_sequence_length=32, **kw)


def c_dep_checkpoint_activations():
    return raised(lambda: tc(checkpoint_activations=True))


def g_moe_topk_silent():
    init_mp()
    cfg = tc(num_moe_experts=4, moe_router_topk=8, add_bias_linear=False)
    local_gpt(cfg, num_experts=4)
    return (
        f"accepted: TransformerConfig and GPTModel build with "
        f"num_moe_experts={cfg.num_moe_experts} moe_router_topk={cfg.moe_router_topk}"
    )


def g_ok_grad_accum_fusion_without_apex():
    """The layer GPTModel builds as its output layer, with the fusion on and no APEX extension."""
    import torch
    from megatron.core import tensor_parallel

    init_mp()
    cfg = tc(gradient_accumulation_fusion=True)
    return raised(
        lambda: tensor_parallel.ColumnParallelLinear(
            64, 128, config=cfg, init_method=torch.nn.init.xavier_normal_
        )
    )


def g_tp_more_groups_than_heads_silent():
    init_mp()
    cfg = tc(num_attention_heads=4, num_query_groups=8)
    model = local_gpt(cfg)
    qkv = model.decoder.layers[0].self_attention.linear_qkv.weight
    return (
        f"accepted: num_attention_heads={cfg.num_attention_heads} "
        f"num_query_groups={cfg.num_query_groups} kv_channels={cfg.kv_channels} -> "
        f"linear_qkv.weight {tuple(qkv.shape)}"
    )


def g_rt_interleaved_one_iterator():
    """PP=2, VPP=2: the interleaved schedule given one iterator instead of one per chunk."""
    import torch

    from megatron.core.pipeline_parallel import get_forward_backward_func

    init_mp(pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2)
    cfg = tc(num_layers=4, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2,
             pipeline_dtype=torch.float32)

    class Chunk(torch.nn.Module):  # the schedule reads only .config before the check
        def __init__(self):
            super().__init__()
            self.config = cfg

    schedule = get_forward_backward_func()
    return raised(
        lambda: schedule(
            forward_step_func=lambda data, model: None, data_iterator=iter([]),
            model=[Chunk(), Chunk()], num_microbatches=2, seq_length=8, micro_batch_size=1,
        )
    )


# --------------------------------------------------------------------------- fresh repros
# Each runs in its own interpreter. env: extra variables; PYTHONPATH entries are relative
# to tests/data/troubleshooting and go first.


def _import_failure(exc_type) -> str:
    """Import the GPT layer specs; report which megatron file let exc_type through."""
    try:
        import megatron.core.models.gpt.gpt_layer_specs  # noqa: F401
    except exc_type as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        last = [f.filename for f in frames if "site-packages/megatron/" in f.filename][-1]
        where = last.split("site-packages/", 1)[1]
        WHERE["where"] = where
        return (
            f"import megatron.core.models.gpt.gpt_layer_specs -> {type(exc).__name__} "
            f"propagated from {where}: {exc}"
        )
    return "<import succeeded>"


def f_ok_te_oserror():
    return _import_failure(OSError)


def f_ok_te_importerror():
    return _import_failure(ImportError)


def f_te_no_version():
    return _import_failure(AttributeError)


def f_te_no_pytorch():
    return _import_failure(ModuleNotFoundError)


HANG_TIMEOUT_S = 5  # the process-group timeout given to init_process_group
HANG_DUMP_AFTER_S = 12  # rank 0 dumps its stack (faulthandler) and exits after this long
FRAME_RE = re.compile(r'File "(?P<file>[^"]+)", line \d+ in (?P<func>\w+)')


def _hang_rank(rank: int, port: int) -> None:
    """One rank of HANG-01: rank 1 never calls initialize_model_parallel, rank 0 does."""
    import faulthandler
    import time
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
        timeout=timedelta(seconds=HANG_TIMEOUT_S),
    )
    if rank == 1:
        time.sleep(HANG_DUMP_AFTER_S + 5)  # alive but elsewhere, like a rank stuck in data loading
        os._exit(0)
    from megatron.core import parallel_state as ps

    faulthandler.dump_traceback_later(HANG_DUMP_AFTER_S, exit=True)
    ps.initialize_model_parallel()
    faulthandler.cancel_dump_traceback_later()
    print("initialize_model_parallel returned")


def _run_hang_ranks() -> list[str]:
    # free_port() only finds a port that is free now; another process of the suite may take it
    # before rank 0's store binds it. That is a race of the harness, not of Megatron: try again.
    for _ in range(3):
        port = free_port()
        procs = [
            subprocess.Popen(
                [PY, str(THIS), "hangrank", str(rank), str(port)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            )
            for rank in (0, 1)
        ]
        outs = [p.communicate(timeout=WORKER_TIMEOUT_S // 2)[0] for p in procs]
        if "EADDRINUSE" not in outs[0]:
            break
    return outs


def f_hang_startup():
    """HANG-01: start two ranks, return what rank 0's stack dump shows."""
    outs = _run_hang_ranks()
    if "initialize_model_parallel returned" in outs[0]:
        return "<no hang: initialize_model_parallel returned>"
    frames = [(site_relative(m["file"]), m["func"]) for m in FRAME_RE.finditer(outs[0])]
    if not any(func == "initialize_model_parallel" for _, func in frames):
        return "<no stack dump inside initialize_model_parallel> " + outs[0][-500:]
    # faulthandler lists the most recent call first.
    megatron = next(f"{f}:{fn}" for f, fn in frames if f.startswith("megatron/"))
    torch_new_group = next(
        (f"{f}:{fn}" for f, fn in frames if f.startswith("torch/distributed/") and fn == "new_group"),
        "<none>",
    )
    return (
        f"rank 0 still in initialize_model_parallel after {HANG_DUMP_AFTER_S} s "
        f"(process-group timeout {HANG_TIMEOUT_S} s); innermost megatron frame: {megatron}; "
        f"torch frame: {torch_new_group}"
    )


@functools.lru_cache(maxsize=None)
def _import_warnings() -> tuple[tuple[str, str], ...]:
    """Every warning emitted while megatron's GPT specs and optimizers are first imported."""
    with catch_warnings_with_origin() as caught:
        import megatron.core.models.gpt.gpt_layer_specs  # noqa: F401
        import megatron.core.optimizer  # noqa: F401
    return tuple((f"{cat.__name__}: {message}", origin) for cat, message, origin in caught)


def _first_import_warning(contains: str) -> str:
    for text, where in _import_warnings():
        if contains in text:
            WHERE["where"] = where
            return text
    return "<no warning>"


def f_ok_import_warnings():
    return _first_import_warning("Falling back to Torch optimizers")


def f_ok_apex_norm():
    return _first_import_warning("Falling back to Torch Norm")


# --------------------------------------------------------------------------- the table

REPROS: dict[str, tuple[str, object]] = {
    "TP-01": ("inproc", r_tp_heads),
    "TP-02": ("inproc", r_tp_query_groups),
    "TP-03": ("gloo", g_tp_ffn),
    "TP-04": ("gloo", g_tp_vocab),
    "TP-05": ("inproc", r_tp_vocab_padding_silent),
    "TP-06": ("gloo", g_tp_ckpt_shape),
    "TP-07": ("inproc", r_tp_sp_without_tp),
    "TP-08": ("gloo", g_tp_sp_split),
    "TP-09": ("inproc", r_tp_kv_channels_silent),
    "TP-10": ("inproc", r_tp_lm_hidden_heads),
    "PP-01": ("inproc", r_pp_dtype),
    "PP-02": ("inproc", r_pp_layers_core),
    "PP-03": ("inproc", r_pp_layers_lm),
    "PP-04": ("inproc", r_pp_uneven_mismatch),
    "PP-05": ("inproc", r_pp_uneven_middle),
    "PP-06": ("inproc", r_pp_uneven_vpp),
    "PP-07": ("inproc", r_pp_layout_conflict),
    "PP-08": ("inproc", r_pp_layout_count),
    "PP-09": ("inproc", r_pp_layout_stages),
    "PP-10": ("inproc", r_pp_layout_char),
    "PP-11": ("inproc", r_pp_layout_vpp),
    "PP-12": ("gloo", g_pp_vpp_without_pp),
    "PP-13": ("inproc", r_pp_lm_interleaved),
    "CP-01": ("inproc", r_cp_seq_lm),
    "CP-02": ("gloo", g_cp_needs_te),
    "CP-03": ("inproc", r_cp_comm_type_len),
    "CP-04": ("inproc", r_cp_a2a_p2p),
    "MOE-01": ("inproc", r_moe_ep_without_experts),
    "MOE-02": ("inproc", r_moe_lm_experts_ep),
    "MOE-03": ("gloo", g_moe_experts_not_divisible_core),
    "MOE-04": ("gloo", g_moe_expert_grid),
    "MOE-05": ("inproc", r_moe_bias_etp),
    "MOE-06": ("gloo", g_moe_tp_without_sp),
    "MOE-07": ("inproc", r_moe_allgather_varlen),
    "MOE-08": ("inproc", r_moe_deepep),
    "MOE-09": ("inproc", r_moe_topk1),
    "MOE-10": ("inproc", r_moe_ffn_without_experts),
    "MOE-11": ("inproc", r_moe_group_topk),
    "MOE-12": ("inproc", r_moe_a2a_overlap_ep),
    "DP-01": ("inproc", r_dp_global_batch),
    "DP-02": ("inproc", r_dp_overlap_param_gather),
    "DP-03": ("inproc", r_dp_overlap_param_gather_grad),
    "DP-04": ("inproc", r_dp_mfsdp_ckpt),
    "DP-05": ("inproc", r_dp_mfsdp_connections),
    "DP-06": ("inproc", r_dp_fsdp2_pp),
    "DP-07": ("inproc", r_dp_fsdp2_gaf),
    "DP-10": ("inproc", r_dp_buckets),
    "PG-01": ("inproc", r_pg_not_initialized),
    "PG-02": ("gloo", g_pg_world_not_divisible),
    "PG-03": ("inproc", r_pg_lm_world),
    "PG-04": ("gloo", g_pg_already_initialized),
    "PG-05": ("inproc", r_pg_unknown_attr),
    "PG-06": ("inproc", r_pg_invalid_required),
    "PG-07": ("inproc", r_pg_mpu_before_init_silent),
    "PG-08": ("inproc", r_pg_model_before_init),
    "PG-10": ("inproc", r_pg_init_without_torch_distributed),
    "CS-01": ("inproc", r_cs_connections_hopper),
    "CS-02": ("inproc", r_cs_connections_blackwell_silent),
    "OK-01": ("fresh", f_ok_import_warnings),
    "OK-02": ("fresh", f_ok_apex_norm),
    "OK-03": ("inproc", r_ok_te_spec_without_te),
    "OK-04": ("fresh", f_ok_te_oserror),
    "OK-05": ("fresh", f_ok_te_importerror),
    "OK-06": ("inproc", r_ok_mamba_ssm_missing),
    "OK-07": ("inproc", r_ok_kitchen_stub),
    "DEP-01": ("inproc", r_dep_mamba_model),
    "DEP-02": ("inproc", r_dep_lm_hybrid_override),
    "DEP-03": ("inproc", r_dep_lm_hybrid_both),
    "DEP-04": ("inproc", r_dep_lm_model_parallel_size),
    "DEP-05": ("inproc", r_dep_lm_no_position_embedding),
    "DEP-06": ("inproc", r_dep_lm_checkpoint_activations),
    "DEP-07": ("inproc", r_dep_inference_params),
    "DEP-08": ("gloo", g_dep_gptmodel),
    "CFG-01": ("inproc", r_cfg_recompute_typo),
    "CFG-02": ("inproc", r_cfg_full_scope_default),
    "CFG-03": ("inproc", r_cfg_fp16_bf16),
    "CFG-04": ("inproc", r_cfg_full_recompute_no_method),
    "CFG-05": ("inproc", r_cfg_full_recompute_no_layers),
    "MOE-14": ("gloo", g_moe_topk_silent),
    "HANG-01": ("fresh", f_hang_startup),
    "HANG-03": ("inproc", r_hang_a2a_overlap_old_torch),
    "RT-01": ("gloo", g_rt_interleaved_one_iterator),
    "TE-01": ("fresh", f_te_no_version),
    "TE-02": ("fresh", f_te_no_pytorch),
    "TP-11": ("gloo", g_tp_more_groups_than_heads_silent),
    "RT-09": ("inproc", r_rt_te_cross_entropy_fusion),
    "OK-09": ("gloo", g_ok_grad_accum_fusion_without_apex),
}

# What a direct Megatron Core user gets for a Megatron-LM-only entry (its **Core users get:**):
# run like REPROS, reported under "core:<id>"; the observed text must be quoted in that bullet.
CORE_REPROS: dict[str, tuple[str, object]] = {
    "TP-05": ("gloo", c_tp_unpadded_vocab),
    "TP-10": ("inproc", r_tp_kv_channels_silent),
    "PP-03": ("inproc", r_pp_layers_core),
    "PP-13": ("inproc", c_pp_vpp2_without_overlap),
    "CP-01": ("gloo", c_cp_batch_split),
    "CP-04": ("gloo", c_cp_hierarchical_groups),
    "MOE-02": ("gloo", g_moe_experts_not_divisible_core),
    "MOE-13": ("gloo", c_moe_grouped_gemm_spec),
    "DP-02": ("inproc", c_dp_overlap_param_gather),
    "DP-03": ("inproc", c_dp_param_gather_without_grad_reduce),
    "DP-04": ("inproc", c_dp_no_ckpt_format),
    "CKPT-03": ("inproc", c_ckpt_legacy_dir),
    "DP-05": ("inproc", c_dp_fsdp_connections),
    "PG-03": ("gloo", g_pg_world_not_divisible),
    "CS-01": ("gloo", g_cs_core_connections_warning),
    "CS-02": ("gloo", g_cs_core_connections_warning),
    "CS-03": ("gloo", g_cs_core_connections_warning),
    "DEP-02": ("gloo", c_dep_hybrid_override),
    "DEP-03": ("gloo", c_dep_hybrid_both),
    "DEP-04": ("inproc", c_dep_model_parallel_size),
    "DEP-05": ("inproc", c_dep_no_position_embedding),
    "DEP-06": ("inproc", c_dep_checkpoint_activations),
}

# Fake packages put first on PYTHONPATH for fresh repros (folders under DATA).
FRESH_PATHS: dict[str, list[str]] = {
    "OK-04": ["fake_te_oserror"],
    "OK-05": ["fake_te_importerror"],
    "TE-01": ["fake_te_noversion"],
    "TE-02": ["fake_te_nopytorch"],
}

# --------------------------------------------------------------------------- worker


def _run_one(fn) -> dict[str, str | None]:
    WHERE.clear()
    try:
        text = fn()
    except BaseException as exc:  # noqa: BLE001 - a broken repro must not hide the others
        text = "<repro crashed> " + exc_text(exc)
    return {"text": text, "where": WHERE.get("where")}


def _run_all(kind: str) -> dict[str, dict]:
    results = {}
    table = {**REPROS, **{f"core:{k}": v for k, v in CORE_REPROS.items()}}
    for entry_id, (runner, fn) in table.items():
        if runner != kind:
            continue
        results[entry_id] = _run_one(fn)
        if kind == "gloo":
            from megatron.core import parallel_state as ps

            ps.destroy_model_parallel()
    return results


def _gloo_main(rank: int, world: int, port: int) -> dict[str, str]:
    from datetime import timedelta

    import torch.distributed as dist

    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=60),
    )
    try:
        results = _run_all("gloo")
        dist.barrier()
        return results
    finally:
        dist.destroy_process_group()


def _write(out: str, results: dict[str, str]) -> None:
    Path(out).write_text(json.dumps(results, indent=1))


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")  # library warnings on stderr only add noise here
    kind = argv[0]
    if kind == "inproc":
        _write(argv[1], _run_all("inproc"))
    elif kind == "gloo":
        rank, world, port, out = int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
        results = _gloo_main(rank, world, port)
        if rank == 0:
            _write(out, results)
    elif kind == "hangrank":
        _hang_rank(int(argv[1]), int(argv[2]))
    elif kind == "fresh":
        ids, out = argv[1].split(","), argv[2]
        _write(out, {entry_id: _run_one(REPROS[entry_id][1]) for entry_id in ids})
    else:
        raise SystemExit(f"unknown worker kind {kind!r}")
    return 0


# --------------------------------------------------------------------------- pytest side


def _env(extra_paths=()):
    env = dict(os.environ)
    env.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    env["CUDA_VISIBLE_DEVICES"] = ""
    paths = [str(DATA / p) for p in extra_paths]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _launch_all(tmp: Path) -> list[tuple[subprocess.Popen, Path | None, str]]:
    jobs = []

    def start(args, out, label, extra_paths=()):
        log = open(tmp / f"{label}.log", "w")
        proc = subprocess.Popen(
            [PY, str(THIS), *args], cwd=tmp, env=_env(extra_paths), stdout=log, stderr=log
        )
        jobs.append((proc, out, label))

    start(["inproc", str(tmp / "inproc.json")], tmp / "inproc.json", "inproc")
    port = free_port()
    start(["gloo", "0", "2", str(port), str(tmp / "gloo.json")], tmp / "gloo.json", "gloo0")
    start(["gloo", "1", "2", str(port), str(tmp / "unused.json")], None, "gloo1")
    # Fresh repros that need the same PYTHONPATH share one interpreter.
    groups: dict[tuple[str, ...], list[str]] = {}
    for entry_id, (runner, _) in REPROS.items():
        if runner == "fresh":
            groups.setdefault(tuple(FRESH_PATHS.get(entry_id, ())), []).append(entry_id)
    for paths, ids in groups.items():
        label = "fresh-" + "-".join(ids)
        out = tmp / f"{label}.json"
        start(["fresh", ",".join(ids), str(out)], out, label, paths)
    return jobs


@pytest.fixture(scope="module")
def observed(tmp_path_factory) -> dict[str, dict]:
    """Run every repro once (three kinds of worker, concurrently) and collect their texts."""
    tmp = tmp_path_factory.mktemp("trouble")
    jobs = _launch_all(tmp)
    results: dict[str, dict] = {}
    failures = []
    try:
        for proc, out, label in jobs:
            try:
                proc.wait(timeout=WORKER_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                failures.append(f"{label}: timed out")
                continue
            if proc.returncode != 0:
                log = (tmp / f"{label}.log").read_text()[-3000:]
                failures.append(f"{label}: exit {proc.returncode}\n{log}")
            elif out is not None:
                results.update(json.loads(out.read_text()))
    finally:
        for proc, _, _ in jobs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert not failures, "\n".join(failures)
    return results


def _entries():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_troubleshooting import load_entries

    return load_entries()


def _reproduced_ids():
    if __name__ == "__main__" or not DOC.exists():  # worker mode: nothing to parametrize
        return []
    return [e.id for e in _entries() if e.status == "reproduced"]


def test_every_reproduced_entry_has_a_repro():
    missing = [i for i in _reproduced_ids() if i not in REPROS]
    assert not missing, f"entries marked reproduced without a repro: {missing}"


def test_no_orphan_repros():
    entries = {e.id: e for e in _entries()}
    orphans = [i for i in REPROS if i not in entries or entries[i].status != "reproduced"]
    assert not orphans, f"repros whose entry is missing or not marked reproduced: {orphans}"


@pytest.mark.slow
@pytest.mark.parametrize("entry_id", _reproduced_ids())
def test_documented_text_equals_library_output(entry_id, observed):
    entry = {e.id: e for e in _entries()}[entry_id]
    assert entry_id in observed, f"{entry_id}: no result from its worker"
    got = observed[entry_id]["text"]
    assert entry.text == got, f"{entry_id}: documented\n{entry.text}\n--- but the library gives\n{got}"


def _core_users_get(entry) -> str:
    """The **Core users get:** bullet with its continuation lines, whitespace collapsed."""
    m = re.search(r"^- \*\*Core users get:\*\*(.*?)(?=^- \*\*|^$)", entry.body, re.M | re.S)
    return re.sub(r"\s+", " ", m.group(1)).strip() if m else ""


def _absence_claim_sections() -> set[str]:
    import yaml

    data = yaml.safe_load((DATA / "absence_claims.yaml").read_text())
    return {c.get("section") for c in data["claims"]}


def test_tp05_megatron_lm_builds_gptmodel_with_the_padded_size():
    """TP-05's "the padded rows are part of the model": the wheel's model builder passes the
    output of calculate_padded_vocab_size to GPTModel(vocab_size=...)."""
    import ast
    import importlib.util

    path = Path(importlib.util.find_spec("megatron.training.models.gpt").origin)
    tree = ast.parse(path.read_text())
    padded_from = {
        a.value.func.id for a in ast.walk(tree)
        if isinstance(a, ast.Assign) and isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Name)
        and any(isinstance(t, ast.Name) and t.id == "padded_vocab_size" for t in a.targets)
    }
    assert "calculate_padded_vocab_size" in padded_from
    passed = [
        k.value.id for c in ast.walk(tree)
        if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "GPTModel"
        for k in c.keywords if k.arg == "vocab_size" and isinstance(k.value, ast.Name)
    ]
    assert passed == ["padded_vocab_size"], passed
    assert "megatron/training/models/gpt.py" in DOC.read_text().split("### TP-05", 1)[1].split("\n### ", 1)[0]


def test_every_megatron_lm_only_entry_says_what_core_users_get():
    """The field exists, and an observation (CORE_REPROS) or an absence scan (absence_claims.yaml) backs it."""
    lm_only = [e for e in _entries() if e.bullet("Layer").startswith("Megatron-LM only")]
    assert len(lm_only) >= 20
    lacking = [e.id for e in lm_only if not _core_users_get(e)]
    assert not lacking, f"Megatron-LM-only entries without **Core users get:**: {lacking}"
    scanned = _absence_claim_sections()
    unbacked = [e.id for e in lm_only if e.id not in CORE_REPROS and e.id not in scanned]
    assert not unbacked, f"**Core users get:** backed by neither a repro nor an absence scan: {unbacked}"
    stray = [i for i in CORE_REPROS if i not in {e.id for e in lm_only}]
    assert not stray, f"CORE_REPROS for entries that are not Megatron-LM only: {stray}"


@pytest.mark.slow
@pytest.mark.parametrize("entry_id", sorted(CORE_REPROS))
def test_core_users_get_what_the_entry_says(entry_id, observed):
    entry = {e.id: e for e in _entries()}[entry_id]
    got = re.sub(r"\s+", " ", observed[f"core:{entry_id}"]["text"])  # the bullet's spacing is Markdown's
    bullet = _core_users_get(entry)
    assert f"`{got}`" in bullet, f"{entry_id}: Core users get\n{bullet}\n--- but Megatron Core gives\n{got}"


@pytest.mark.slow
@pytest.mark.parametrize("entry_id", _reproduced_ids())
def test_documented_location_is_where_it_came_from(entry_id, observed):
    """Raised in names the file of the deepest site-packages frame (or warnings.warn caller)."""
    entry = {e.id: e for e in _entries()}[entry_id]
    where = observed[entry_id]["where"]
    if where is None:  # silent failures: nothing was raised, warned or logged
        assert entry.message_fences[0][0] == "text symptom", f"{entry_id}: no location recorded"
        return
    assert entry.raised_in == where, f"{entry_id}: documented {entry.raised_in}, came from {where}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What a direct Megatron Core user gets for each layout rule that only Megatron-LM's argument
parser enforces (references/parallelism-reference.md, "Rules only Megatron-LM checks").

Every rule of ``parallel_layout.rules`` whose source is only under ``megatron/training/`` has a
row; each row's kind and quoted text are what ``PROBES[rule]`` observes when it builds the
Megatron Core object with the rule's values (``TransformerConfig``, ``initialize_model_parallel``
in a 1-rank gloo world, a layer, ``DistributedDataParallelConfig``), in one fresh interpreter.

The probes run as ``python tests/test_layout_core_users.py OUT`` (JSON {rule: [kind, text]}).
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "scripts")]

from parallel_layout.verify import GroupOfSize  # noqa: E402  (stdlib at import)

DOC = ROOT / "references" / "parallelism-reference.md"
SECTION = "## Rules only Megatron-LM checks"
KINDS = ("nothing", "another message", "a later failure", "a later warning", "another default", "the same default",
         "not a Core setting")


def training_only_rules() -> list:
    from parallel_layout import rules

    return [r.id for r in rules.RULES
            if r.source.startswith("megatron/training/") and "megatron/core/" not in r.source]


# ------------------------------------------------------------------------------ probes (worker)

def _r():
    # The troubleshooting reproductions' general helpers: tc (a tiny TransformerConfig), raised
    # and warned (what the user sees), local_gpt, init_mp, exc_text.
    import test_troubleshooting_repro as R
    return R




def _accepted(obj, *names) -> str:
    return "accepted: " + " ".join(f"{n}={getattr(obj, n)!r}" for n in names)


def p_hidden_heads():
    cfg = _r().tc(hidden_size=100, num_attention_heads=3)
    return "nothing", (f"accepted: hidden_size={cfg.hidden_size} num_attention_heads="
                       f"{cfg.num_attention_heads} kv_channels={cfg.kv_channels} -> attention "
                       f"width {cfg.kv_channels * cfg.num_attention_heads} != hidden_size")


def p_ep_needs_experts():
    R = _r()
    return "another message", R.raised(lambda: R.tc(expert_model_parallel_size=2))


def p_experts_ep():
    # The expert-parallel group is a stand-in of size 2 (one process here); MoELayer reads only
    # its size before the check.
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.spec_utils import build_module

    R = _r()
    cfg = R.tc(num_moe_experts=3)
    pgs = ProcessGroupCollection.use_mpu_process_groups()
    pgs.ep = GroupOfSize(2)
    return "a later failure", R.raised(
        lambda: build_module(get_gpt_layer_local_spec(num_experts=3), config=cfg, pg_collection=pgs))


def p_seq_cp():
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = _r().tc(context_parallel_size=2)
    seq = sorted(f.name for f in dataclasses.fields(TransformerConfig) if f.name.startswith("seq"))
    return "not a Core setting", (f"accepted: context_parallel_size={cfg.context_parallel_size}; "
                                  f"fields named seq*: {', '.join(seq)}")


def _embed_past_table(max_sequence_length, seq):
    """A learned-position embedding table of max_sequence_length rows, fed seq positions."""
    import torch
    from megatron.core.models.common.embeddings.language_model_embedding import (
        LanguageModelEmbedding)

    R = _r()
    emb = LanguageModelEmbedding(R.tc(), vocab_size=128, max_sequence_length=max_sequence_length)
    tokens = torch.zeros(1, seq, dtype=torch.long)
    positions = torch.arange(seq).unsqueeze(0)
    return R.raised(lambda: emb(tokens, positions))


def p_max_position():
    return "a later failure", _embed_past_table(32, 64)


def p_decoder_seq_length():
    # Megatron-LM's --decoder-seq-length reaches Core as the pipeline schedules' decoder_seq_length
    # (the shape of the tensors sent between stages); --max-position-embeddings is the embedding's
    # max_sequence_length. The trigger's values: 128 and 64.
    from megatron.core.pipeline_parallel.schedules import get_tensor_shapes
    from megatron.core.process_groups_config import ProcessGroupCollection

    pgs = ProcessGroupCollection.use_mpu_process_groups()
    shapes = get_tensor_shapes(seq_length=64, micro_batch_size=1, decoder_seq_length=128,
                               config=_r().tc(), tp_group=pgs.tp, cp_group=pgs.cp)
    return "a later failure", (f"get_tensor_shapes(decoder_seq_length=128) -> {shapes}; "
                               f"LanguageModelEmbedding(max_sequence_length=64) on 128 positions: "
                               f"{_embed_past_table(64, 128)}")


def p_vpp_exclusive():
    from megatron.core.transformer.transformer_config import TransformerConfig

    names = [f.name for f in dataclasses.fields(TransformerConfig) if "virtual" in f.name]
    return "not a Core setting", "virtual-pipeline fields: " + ", ".join(names)


def p_layers_per_virtual_stage():
    import torch
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    R = _r()
    cfg = R.tc(num_layers=6, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2,
               pipeline_dtype=torch.float32)
    return "a later failure", R.raised(lambda: get_num_layers_to_build(cfg, vp_stage=0, pp_rank=0))


def p_layers_pp():
    import torch
    from megatron.core.transformer.transformer_block import get_num_layers_to_build

    R = _r()
    cfg = R.tc(num_layers=5, pipeline_model_parallel_size=2, pipeline_dtype=torch.bfloat16)
    return "a later failure", R.raised(lambda: get_num_layers_to_build(cfg, pp_rank=0))


def p_interleaved_needs_pp():
    R = _r()
    R.tc(virtual_pipeline_model_parallel_size=2)  # TransformerConfig accepts it
    try:
        return "another message", R.raised(
            lambda: R.init_mp(virtual_pipeline_model_parallel_size=2))
    finally:
        R.init_mp()


def p_mtp_position():
    R = _r()
    model = R.local_gpt(R.tc(mtp_num_layers=1))
    return "nothing", (f"accepted: GPTModel(position_embedding_type="
                       f"{model.position_embedding_type!r}, mtp_num_layers="
                       f"{model.config.mtp_num_layers})")


def p_recompute_selective_method():
    cfg = _r().tc(recompute_granularity="selective", recompute_method="uniform")
    return "nothing", _accepted(cfg, "recompute_granularity", "recompute_method")


def p_torch_fsdp2():
    # Megatron Core's wrapper cannot be built on CPU (a CUDA device mesh); its constructor's
    # checks are read from the installed source instead.
    import megatron.core.distributed.torch_fully_sharded_data_parallel as m

    tree = ast.parse(Path(m.__file__).read_text())
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    checks = [ast.literal_eval(n.msg) for n in ast.walk(init) if isinstance(n, ast.Assert) and n.msg]
    raises = [n for n in ast.walk(init) if isinstance(n, ast.Raise)]
    return "nothing", (f"TorchFullyShardedDataParallel.__init__ checks only: {checks[0]}"
                       if len(checks) == 1 and not raises else f"checks: {checks}, raises: {len(raises)}")


def _ckpt_fields():
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.transformer.transformer_config import TransformerConfig

    found = [f"{c.__name__}.{f.name}" for c in (TransformerConfig, DistributedDataParallelConfig)
             for f in dataclasses.fields(c) if "ckpt" in f.name or "format" in f.name]
    return "fields naming a checkpoint format in TransformerConfig and " \
           "DistributedDataParallelConfig: " + (", ".join(found) or "none")


def p_megatron_fsdp_ckpt():
    return "not a Core setting", _ckpt_fields()


def p_torch_dcp():
    return "not a Core setting", _ckpt_fields()


def p_incomplete():
    from megatron.core.transformer.transformer_config import TransformerConfig

    return "another message", _r().raised(TransformerConfig)


def p_sp_without_tp():
    R = _r()
    return "another message", R.raised(lambda: R.tc(sequence_parallel=True))


def p_query_groups_ignored():
    cfg = _r().tc(num_query_groups=2)
    return "nothing", f"num_query_groups={cfg.num_query_groups} (used as given)"


def p_moe_ffn_default():
    cfg = _r().tc(num_moe_experts=4, ffn_hidden_size=96)
    return "the same default", _accepted(cfg, "ffn_hidden_size", "moe_ffn_hidden_size")


def p_swiglu_ffn_default():
    cfg = _r().tc(gated_linear_unit=True)
    return "another default", _accepted(cfg, "hidden_size", "gated_linear_unit", "ffn_hidden_size")


def p_gqa_default_groups():
    cfg = _r().tc()
    return "another default", _accepted(cfg, "num_attention_heads", "num_query_groups")


def p_global_batch_default():
    from megatron.core import num_microbatches_calculator as calc

    R = _r()
    try:
        return "another message", R.raised(lambda: calc.init_num_microbatches_calculator(
            0, None, None, 1, 1))
    finally:
        calc.destroy_num_microbatches_calculator()


def p_vpp_one():
    import torch

    cfg = _r().tc(pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=1,
                  pipeline_dtype=torch.float32)
    return "nothing", _accepted(cfg, "pipeline_model_parallel_size",
                                "virtual_pipeline_model_parallel_size")


def p_cuda_max_connections():
    import os

    import torch
    from megatron.core.tensor_parallel import layers

    R = _r()
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    layers.linear_with_grad_accumulation_and_async_allreduce.warned = False
    x, w = torch.ones(2, 1, 4), torch.ones(3, 4)
    return "a later warning", R.warned(
        lambda: layers.linear_with_grad_accumulation_and_async_allreduce(
            x, w, None, gradient_accumulation_fusion=False, allreduce_dgrad=True,
            sequence_parallel=False), contains="CUDA_DEVICE_MAX_CONNECTIONS")


def p_megatron_fsdp_distopt():
    from megatron.core.distributed import DistributedDataParallelConfig

    cfg = DistributedDataParallelConfig(use_megatron_fsdp=True, use_distributed_optimizer=False)
    return "nothing", _accepted(cfg, "use_megatron_fsdp", "use_distributed_optimizer")


def p_fsdp_with_tp_cp():
    from megatron.core.distributed import DistributedDataParallelConfig

    ddp = DistributedDataParallelConfig(use_megatron_fsdp=True, use_distributed_optimizer=True)
    cfg = _r().tc(tensor_model_parallel_size=2, context_parallel_size=2)
    return "nothing", (_accepted(ddp, "use_megatron_fsdp") + " " +
                       " ".join(f"{n}={getattr(cfg, n)}" for n in
                                ("tensor_model_parallel_size", "context_parallel_size")))


def _hybrid_model(config, pattern, pp):
    """HybridModel built as pipeline rank 0 of pp: its pipeline group is a stand-in of that size
    (one process here), which torch.distributed's rank and size queries answer for;
    select_pipeline_segment reads only those two before its checks."""
    from unittest import mock

    import torch.distributed as dist
    from megatron.core.models.hybrid.hybrid_layer_specs import hybrid_stack_spec
    from megatron.core.models.hybrid.hybrid_model import HybridModel
    from megatron.core.process_groups_config import ProcessGroupCollection

    pgs = ProcessGroupCollection.use_mpu_process_groups()
    pgs.pp = stand_in = GroupOfSize(pp)
    rank, size = dist.get_rank, dist.get_world_size
    with mock.patch.object(dist, "get_rank", lambda g=None: 0 if g is stand_in else rank(g)), \
            mock.patch.object(dist, "get_world_size",
                              lambda g=None: stand_in.size() if g is stand_in else size(g)):
        return HybridModel(config, hybrid_stack_spec, vocab_size=128, max_sequence_length=64,
                           hybrid_layer_pattern=pattern, pg_collection=pgs)


def p_hybrid_conflicts():
    # The trigger: a pattern with '|' segments and a first-stage layer count, on PP=2.
    import torch

    R = _r()
    cfg = R.tc(num_layers=4, pipeline_model_parallel_size=2, num_layers_in_first_pipeline_stage=2,
               pipeline_dtype=torch.float32)
    return "a later failure", R.raised(lambda: _hybrid_model(cfg, "M-|M-", 2))


def p_hybrid_segments_pp():
    import torch

    R = _r()
    cfg = R.tc(num_layers=6, pipeline_model_parallel_size=2, pipeline_dtype=torch.float32)
    return "a later failure", R.raised(lambda: _hybrid_model(cfg, "M-|M-|M-", 2))


def p_unknown_flag():
    # Core has no argument parser: a setting reaches it as a keyword of a config dataclass. The
    # trigger's --DDP-impl (dest DDP_impl) belonged to data parallelism, whose Core config is
    # DistributedDataParallelConfig.
    from megatron.core.distributed import DistributedDataParallelConfig

    return "another message", _r().raised(lambda: DistributedDataParallelConfig(DDP_impl="local"))


def p_fp16_expert_parallel():
    # The rule is 0.12.3-0.15.3's validate_args; the Core of 0.19.2 is what is observed here.
    cfg = _r().tc(fp16=True, expert_model_parallel_size=2, num_moe_experts=4)
    return "nothing", _accepted(cfg, "fp16", "expert_model_parallel_size", "num_moe_experts")


def p_deterministic_mode():
    cfg = _r().tc(deterministic_mode=True, tp_comm_overlap=True, cross_entropy_loss_fusion=True)
    return "nothing", _accepted(cfg, "deterministic_mode", "tp_comm_overlap",
                                "cross_entropy_loss_fusion")


def p_flag_value():
    # Core takes Python values: a config dataclass neither converts nor checks a field's type
    # (the trigger's "12a", given to an int field of DistributedDataParallelConfig).
    from megatron.core.distributed import DistributedDataParallelConfig

    return "nothing", _accepted(DistributedDataParallelConfig(bucket_size="12a"), "bucket_size")


PROBES = {
    "flag-value": p_flag_value,
    "fp16-expert-parallel": p_fp16_expert_parallel,
    "deterministic-mode-options": p_deterministic_mode,
    "hidden-divisible-by-heads": p_hidden_heads,
    "ep-needs-experts": p_ep_needs_experts,
    "experts-divisible-by-ep": p_experts_ep,
    "seq-divisible-by-2cp": p_seq_cp,
    "max-position-covers-seq": p_max_position,
    "vpp-options-exclusive": p_vpp_exclusive,
    "layers-per-virtual-stage": p_layers_per_virtual_stage,
    "layers-divisible-by-pp": p_layers_pp,
    "interleaved-needs-pp": p_interleaved_needs_pp,
    "mtp-position-embedding": p_mtp_position,
    "recompute-selective-method": p_recompute_selective_method,
    "torch-fsdp2": p_torch_fsdp2,
    "megatron-fsdp-ckpt-format": p_megatron_fsdp_ckpt,
    "torch-dcp": p_torch_dcp,
    "incomplete-input": p_incomplete,
    "sp-without-tp": p_sp_without_tp,
    "query-groups-ignored": p_query_groups_ignored,
    "moe-ffn-default": p_moe_ffn_default,
    "swiglu-ffn-default": p_swiglu_ffn_default,
    "gqa-default-groups": p_gqa_default_groups,
    "global-batch-default": p_global_batch_default,
    "virtual-pipeline-is-one": p_vpp_one,
    "cuda-device-max-connections": p_cuda_max_connections,
    "megatron-fsdp-forces-distopt": p_megatron_fsdp_distopt,
    "fsdp-with-tp-cp": p_fsdp_with_tp_cp,
    "decoder-seq-length": p_decoder_seq_length,
    "hybrid-pattern-conflicts": p_hybrid_conflicts,
    "hybrid-segments-divisible-by-pp": p_hybrid_segments_pp,
    "unknown-flag": p_unknown_flag,
}


def worker(out: str) -> None:
    import torch.distributed as dist
    from procutil import free_port

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                            world_size=1)
    R = _r()
    R.init_mp()
    results = {}
    for rule, probe in PROBES.items():
        try:
            results[rule] = list(probe())
        except Exception as exc:  # noqa: BLE001 - a broken probe is reported, not hidden
            results[rule] = ["probe failed", R.exc_text(exc)]
    Path(out).write_text(json.dumps(results))


# ------------------------------------------------------------------------------ tests

def doc_rows() -> dict:
    text = DOC.read_text()
    assert SECTION in text
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `([a-z0-9-]+)` \| ([^|]+?) \| `(.+)` \|", line)
        if m:
            rows[m.group(1)] = (m.group(2).strip(), m.group(3))
    return rows


def test_every_training_only_rule_has_a_row_and_a_probe():
    ids = training_only_rules()
    assert len(ids) >= 20  # the table read as expected
    assert set(doc_rows()) == set(ids)
    assert set(PROBES) == set(ids)


def test_each_row_names_one_kind():
    for rule, (kind, _) in doc_rows().items():
        assert any(kind.startswith(k) for k in KINDS), (rule, kind)


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    out = tmp_path_factory.mktemp("core-users") / "out.json"
    r = subprocess.run([sys.executable, __file__, str(out)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("rule", sorted(PROBES))
def test_row_states_what_megatron_core_does(observed, rule):
    kind, text = doc_rows()[rule]
    got_kind, got_text = observed[rule]
    assert kind.startswith(got_kind), (rule, kind, got_kind, got_text)
    assert text == got_text.replace("|", "\\|"), (rule, got_text)


if __name__ == "__main__":
    worker(sys.argv[1])

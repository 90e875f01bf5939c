"""Parameters per GPU (parallel_layout.memory) equal sum(p.numel()) of the real
megatron-core 0.19.2 GPTModel of each pipeline stage, built on CPU with the
local layer spec (get_gpt_layer_local_spec) for a grid of TP, PP, biases,
SwiGLU, query groups, norms, tied/untied embeddings and MoE (EP, shared
experts).  The model is built as one TP rank sees it: a process-group stand-in
of the TP (ETP, EP) size, so every linear layer shards as on the real job."""

import itertools
import os
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import flags, memory, verify  # noqa: E402

H, HEADS, FFN, VOCAB, SEQ, LAYERS = 64, 8, 96, 512, 32, 4

DENSE = list(itertools.product([1, 2, 4], [1, 2], [True, False], [True, False], [None, 2],
                               [True, False], ["LayerNorm", "RMSNorm"]))
# tp, pp, bias, swiglu, query groups, untie, norm
MOE = [c for c in itertools.product([1, 2], [1, 2], [True, False], [0, 48], [True, False])
       if not (c[2] and c[3])]  # SharedExpertMLP asserts "bias is not supported in the shared experts"
# tp, ep, bias (then ETP 1), shared expert size, swiglu


def argv(tp, pp, bias, swiglu, groups, untie, norm, experts=None, ep=1, shared=0):
    out = ["--world-size", str(tp * pp * ep), "--tensor-model-parallel-size", str(tp),
           "--pipeline-model-parallel-size", str(pp), "--num-layers", str(LAYERS),
           "--hidden-size", str(H), "--num-attention-heads", str(HEADS),
           "--ffn-hidden-size", str(FFN), "--vocab-size", str(VOCAB),
           "--make-vocab-size-divisible-by", "1", "--seq-length", str(SEQ),
           "--max-position-embeddings", str(SEQ), "--micro-batch-size", "1",
           "--normalization", norm]
    if not bias:
        out.append("--disable-bias-linear")
    if swiglu:
        out.append("--swiglu")
    if groups:
        out += ["--group-query-attention", "--num-query-groups", str(groups)]
    if untie:
        out.append("--untie-embeddings-and-output-weights")
    if experts:
        out += ["--num-experts", str(experts), "--expert-model-parallel-size", str(ep),
                "--moe-ffn-hidden-size", "32"]
        if bias:
            out += ["--expert-tensor-parallel-size", "1"]
        if shared:
            out += ["--moe-shared-expert-intermediate-size", str(shared)]
    return out


@pytest.fixture(scope="module")
def build():
    """stage -> sum(p.numel()) of the real model of that pipeline stage on one GPU."""
    warnings.simplefilter("ignore")
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer import TransformerConfig
    verify._ensure_process_group()
    owned = not ps.model_parallel_is_initialized()
    if owned:
        ps.initialize_model_parallel()

    def count(layout, stage_layers, pre, post):
        experts = layout.num_experts
        config = TransformerConfig(
            num_layers=stage_layers, hidden_size=H, num_attention_heads=HEADS,
            num_query_groups=layout.num_query_groups if layout.group_query_attention else None,
            ffn_hidden_size=FFN, add_bias_linear=layout.add_bias_linear,
            gated_linear_unit=layout.swiglu, normalization=layout.normalization,
            tensor_model_parallel_size=layout.tensor_model_parallel_size,
            num_moe_experts=experts, moe_ffn_hidden_size=32 if experts else None,
            expert_model_parallel_size=layout.expert_model_parallel_size,
            expert_tensor_parallel_size=layout.expert_tensor_parallel_size,
            moe_shared_expert_intermediate_size=layout.moe_shared_expert_intermediate_size,
            use_cpu_initialization=True, perform_initialization=False)
        pg = ProcessGroupCollection.use_mpu_process_groups()
        tp = layout.tensor_model_parallel_size
        pg.tp = verify.GroupOfSize(tp)
        pg.ep = verify.GroupOfSize(layout.expert_model_parallel_size)
        pg.expt_tp = verify.GroupOfSize(layout.expert_tensor_parallel_size or tp)
        spec = get_gpt_layer_local_spec(num_experts=experts, normalization=layout.normalization)
        model = GPTModel(config, spec, vocab_size=VOCAB, max_sequence_length=SEQ,
                         pre_process=pre, post_process=post, pg_collection=pg,
                         share_embeddings_and_output_weights=not
                         layout.untie_embeddings_and_output_weights)
        return sum(p.numel() for p in model.parameters())
    yield count
    if owned:  # later tests (--verify's oracle) initialize their own
        ps.destroy_model_parallel()


def check(build, args):
    layout, _ = flags.parse_layout(args)
    pp = layout.pipeline_model_parallel_size
    ours = [int(params) for params, _ in memory.weight_bytes(layout)]
    real = [build(layout, LAYERS // pp, r == 0, r == pp - 1) for r in range(pp)]
    assert ours == real, (args, ours, real)


@pytest.mark.parametrize("case", DENSE, ids=lambda c: "-".join(map(str, c)))
def test_dense_parameters_per_gpu_equal_the_real_model(build, case):
    check(build, argv(*case))


@pytest.mark.parametrize("case", MOE, ids=lambda c: "-".join(map(str, c)))
def test_moe_parameters_per_gpu_equal_the_real_model(build, case):
    tp, ep, bias, shared, swiglu = case
    check(build, argv(tp, 1, bias, swiglu, None, True, "RMSNorm", experts=4, ep=ep,
                      shared=shared))

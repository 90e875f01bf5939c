#!/usr/bin/env python3
"""Write the field-task evals (issue 23) into evals/evals.json from the frozen material.

Every eval below is built from one item of evals/field_material.json (frozen 2026-12-01 before any
expectation was written): a public thread with its resolution, a downstream call site at its pinned
commit, a published layout with its throughput, or a release difference. Each expected value comes
from outside the bundle and carries a ``recompute`` spec that tests/test_evals_contract.py evaluates
against Megatron itself (installed 0.19.2, the 0.16.1 / 0.13.1 environments, the release tags) or
against the frozen published table; none is computed by the bundle's scripts.

  python3 evals/field_evals.py          rewrite the field evals (ids >= FIRST_ID) in evals/evals.json
  python3 evals/field_evals.py --check  exit 1 if evals/evals.json differs from what this writes
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
EVALS = HERE / "evals.json"
FIRST_ID = 101
TC = "megatron.core.transformer.transformer_config:TransformerConfig"
MLA = "megatron.core.transformer.transformer_config:MLATransformerConfig"
SPEC_TE = "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_with_transformer_engine_spec"
IMP = "megatron.core.parallel_state:initialize_model_parallel"
PS = "megatron/core/parallel_state.py"
MB = "NVIDIA-NeMo/Megatron-Bridge@067f987df03b8355b03192d88d70f1709fedf51a:"
SUMMARY, ARCHIVE = MB + "docs/performance-summary.md:", MB + "docs/performance-summary-archive.md:"
TINY = {"num_layers": 1, "hidden_size": 64, "num_attention_heads": 4}
MOE = {**TINY, "num_moe_experts": 8, "moe_router_topk": 2, "add_bias_linear": False}
TAGS = ["core_v0.12.0", "core_v0.13.0", "core_v0.14.0", "core_v0.15.0", "core_v0.16.0", "core_v0.17.0",
        "core_v0.18.0", "core_v0.19.0"]


def _check(c: dict, recompute) -> dict:
    # A check without recompute is proven by the eval's facts (each fact recomputes one claim).
    return dict(c, recompute=recompute) if recompute else c


def num(key, expected, expectation, recompute, tolerance=0):
    return _check({"kind": "answer_number", "key": key, "expected": expected, "tolerance": tolerance,
                   "expectation": expectation, "applies_to": "both"}, recompute)


def text(key, expected, expectation, recompute):
    return _check({"kind": "answer_text", "key": key, "expected": expected, "expectation": expectation,
                   "applies_to": "both"}, recompute)


def lst(key, expected, expectation, recompute, ordered=True):
    return _check({"kind": "answer_list", "key": key, "expected": expected, "expectation": expectation,
                   "ordered": ordered, "applies_to": "both"}, recompute)


def fact(claim, recompute, expect):
    return {"claim": claim, "recompute": recompute, "expect": expect}


def err(obj, kwargs, release=None):
    spec = {"kind": "call_error", "object": obj, "kwargs": kwargs}
    return dict(spec, release=release) if release else spec


def cell(row, field):
    return {"published": row, "field": field}


def arith(expr, **vars_):
    return {"kind": "arith", "expr": expr, "vars": vars_}


def src(contains, path=PS):
    return {"kind": "installed_source", "path": path, "contains": contains}


def fw(world, reads=None, rank=0, **kwargs):
    """Megatron's initialize_model_parallel on a fake world (tests/evals_probe.py): the getters' values or its error."""
    spec = {"kind": "fake_world", "world": world, "rank": rank, "kwargs": kwargs}
    if reads:
        spec["reads"] = {k: {"getter": v} for k, v in reads.items()}
    return spec


def ev(name, route, material, prompt, expected_output, expectations, keys, checks, facts, verified_by,
       user_release=None):
    return {"name": name, "route": route, "set": "field", "material": material, "user_release": user_release,
            "prompt": prompt, "expected_output": expected_output, "files": [], "expectations": expectations,
            "answer_keys": [{"key": k, "ask": a} for k, a in keys], "checks": checks, "facts": facts,
            "verified_by": verified_by, "negative_control": route in ("out-of-scope",) or route.startswith("sibling-")}


def layout_row(name, row, label, question_extra=""):
    """A published Megatron-Bridge layout: DP, microbatches per step, expert DP and aggregate throughput."""
    v = {k: cell(row, f) for k, f in (("gpus", "#-GPUs"), ("tp", "TP"), ("pp", "PP"), ("cp", "CP"),
                                       ("gbs", "GBS"), ("mbs", "MBS"), ("tok", "Tokens / sec / GPU"),
                                       ("seq", "Sequence Length"))}
    return v


EVAL_SPECS: list[dict] = []
add = EVAL_SPECS.append

# ------------------------------------------------------------------ threads (errors, config, pg)

add(ev("field-gqa-heads-not-divisible", "config", "TH-5755",
       "With megatron-core 0.19.2 I build `TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=32, "
       "num_query_groups=5)`. Does the constructor reject it? If not, what goes wrong and what should num_query_groups be?",
       "On 0.19.2 the constructor accepts it (TransformerConfig validates num_query_groups only against the tensor-parallel "
       "size), so the failure comes later, at the first forward pass, as a reshape error in attention. GQA needs "
       "num_attention_heads divisible by num_query_groups: use 1, 2, 4, 8, 16 or 32 groups. Upstream issue #5755 was closed "
       "by PR #5756, which adds the check after 0.19.2.",
       ["Says TransformerConfig in 0.19.2 accepts the config (no error at construction)",
        "Says num_attention_heads must be divisible by num_query_groups (32 % 5 != 0), so the failure comes in the forward pass",
        "Gives valid choices such as 4 or 8 query groups"],
       [("constructor_raises", "yes or no")],
       [text("constructor_raises", "no", 0, {"kind": "config_ok_negated", "cls": TC,
             "kwargs": dict(TINY, num_attention_heads=32, num_query_groups=5)})],
       [fact("0.13.1 accepts it too", dict(err(TC, dict(TINY, num_attention_heads=32, num_query_groups=5), "0.13.1")), "OK")],
       ["ran TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=32, num_query_groups=5) in .venv (0.19.2) and .venv-0131: both construct",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/5755 (closed by PR #5756) states the crash happens in the first forward pass"]))

add(ev("field-expert-bias-softmax", "errors", "TH-1971",
       "Training GPT-OSS style MoE with `--moe-router-enable-expert-bias --moe-router-score-function softmax` fails with:\n\n"
       "```\nFile \"megatron/core/transformer/transformer_config.py\", line 1307, in __post_init__\n    raise ValueError(\n"
       "ValueError: Expert bias for aux-loss-free routing only supports sigmoid score function. Please set "
       "--moe-router-score-function sigmoid for sigmoid score function.\n```\n\nWe are moving to megatron-core 0.19.2. Which score "
       "functions does 0.19.2 accept together with expert bias, and does softmax work there?",
       "The check lives in TransformerConfig.__post_init__. In 0.19.2 expert bias accepts 'sigmoid' and 'sqrtsoftplus' "
       "score functions; softmax is still rejected (ValueError: Expert bias for aux-loss-free routing only supports 'sigmoid' "
       "and 'sqrtsoftplus' score functions...). The quoted message is the older one (0.16.1 and 0.13.1 accept only sigmoid). "
       "Either switch to sigmoid/sqrtsoftplus or drop --moe-router-enable-expert-bias and use an aux loss.",
       ["Says softmax with expert bias is still rejected on 0.19.2",
        "Names sigmoid and sqrtsoftplus as the accepted score functions on 0.19.2",
        "Says the fix is to change the score function or turn off expert bias"],
       [("softmax_accepted_0192", "yes or no"), ("accepted_score_functions_0192", "comma-separated list")],
       [text("softmax_accepted_0192", "no", 0, {"kind": "config_ok", "cls": TC, "kwargs": dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="softmax")}),
        lst("accepted_score_functions_0192", ["sigmoid", "sqrtsoftplus"], 1,
            None, ordered=False)],
       [fact("0.19.2 accepts sqrtsoftplus with expert bias", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sqrtsoftplus")), "OK"),
        fact("0.19.2 accepts sigmoid with expert bias", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sigmoid")), "OK"),
        fact("0.19.2's message names both", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="softmax")),
             {"contains": "only supports 'sigmoid' and 'sqrtsoftplus' score functions"}),
        fact("0.16.1 rejects sqrtsoftplus (sigmoid only)", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sqrtsoftplus"), "0.16.1"),
             {"contains": "only supports sigmoid score function"})],
       ["ran TransformerConfig(..., moe_router_enable_expert_bias=True, moe_router_score_function=softmax|sigmoid|sqrtsoftplus) in .venv (0.19.2) and .venv-0161",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/1971 (the pasted log)"]))

add(ev("field-expert-dp-distopt-4gpu", "errors", "TH-4342",
       "On a 4-GPU node we run a MoE model with `--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 "
       "--expert-model-parallel-size 2 --num-distributed-optimizer-instances 2` (no --expert-tensor-parallel-size) and get:\n\n"
       "```\nFile \"/opt/megatron-lm/megatron/core/parallel_state.py\", line 1248, in initialize_model_parallel\n"
       "    expert_data_parallel_size % num_distributed_optimizer_instances == 0\n"
       "AssertionError: Expert data parallel size should be divisible by partial DistOpt shard factor\n```\n\n"
       "What is the expert data-parallel size here, and what would it be with --expert-tensor-parallel-size 1?",
       "initialize_model_parallel resolves an unset expert_tensor_parallel_size to the tensor-parallel size (2), so the expert "
       "grid is ETP*EP*PP = 2*2*1 = 4 and expert data parallel = 4/4 = 1, which is not divisible by 2 instances. With ETP=1 "
       "the expert grid is 2 and expert DP = 2, divisible by 2 (or use --num-distributed-optimizer-instances 1).",
       ["Says an unset expert tensor parallel size defaults to the tensor-parallel size (2)",
        "Computes expert data parallel size 1 = 4 / (2*2*1)",
        "Computes expert data parallel size 2 with ETP=1, which the 2 optimizer instances divide"],
       [("expert_data_parallel_size", "integer"), ("expert_data_parallel_size_etp1", "integer")],
       [num("expert_data_parallel_size", 1, 1, arith("world // (etp * ep * pp)", world=4, etp=2, ep=2, pp=1)),
        num("expert_data_parallel_size_etp1", 2, 2, arith("world // (etp * ep * pp)", world=4, etp=1, ep=2, pp=1))],
       [fact("ETP None becomes TP", src("if expert_tensor_parallel_size is None:\n        expert_tensor_parallel_size = tensor_model_parallel_size"), True),
        fact("expert DP = world // (ETP*EP*PP)", src("expert_data_parallel_size = world_size // expert_tensor_model_pipeline_parallel_size"), True),
        fact("the assertion quoted", src("Expert data parallel size should be divisible by partial DistOpt shard factor"), True),
        fact("Megatron on 4 ranks: the assertion", fw(4, tensor_model_parallel_size=2, expert_model_parallel_size=2, num_distributed_optimizer_instances=2),
             "AssertionError: Expert data parallel size should be divisible by partial DistOpt shard factor"),
        # The passing case is read with one optimizer instance: partial DistOpt groups import einops (absent here).
        fact("Megatron on 4 ranks with ETP=1", fw(4, {"edp": "get_expert_data_parallel_world_size"}, tensor_model_parallel_size=2, expert_model_parallel_size=2,
                                                  expert_tensor_parallel_size=1), {"edp": 2})],
       ["read megatron/core/parallel_state.py of the installed 0.19.2 (ETP default, expert DP formula, the assertion)",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/4342 (CI failure on a 1-node GB200 variant)"]))

add(ev("field-sp-first-dimension", "errors", "TH-VERL3296",
       "Our RL trainer on megatron-core (sequence parallel on, TP=8) dies in the forward pass with\n\n"
       "```\nAssertionError: First dimension of the tensor should be divisible by tensor parallel size\n```\n\n"
       "Which dimension is that and what must it be a multiple of?",
       "With sequence parallelism Megatron splits activations along the first dimension, the sequence dimension of the "
       "[s, b, h] tensor (tensor_parallel/mappings.py), so the (packed) sequence length must be a multiple of the "
       "tensor-parallel size (8 here); pad sequences to a multiple of TP.",
       ["Says the first dimension is the sequence dimension (activations are [s, b, h])",
        "Says the sequence length must be a multiple of the tensor-parallel size (8)",
        "Suggests padding the (packed) sequences to that multiple"],
       [("required_multiple", "integer")],
       [num("required_multiple", 8, 1, arith("tp", tp=8))],
       [fact("the message is Megatron's SP split", src("First dimension of the tensor should be divisible by tensor parallel size",
                                                        "megatron/core/tensor_parallel/mappings.py"), True)],
       ["read megatron/core/tensor_parallel/mappings.py of 0.19.2: _split_along_first_dim / reduce-scatter assert the first dim divisible by the TP world size",
        "thread https://github.com/verl-project/verl/issues/3296"]))

add(ev("field-router-padding-mask", "errors", "TH-6111",
       "Upstream issue: `TopKRouter` fails during a training forward when both a `padding_mask` and aux-loss-free expert bias "
       "are enabled, because `_apply_expert_bias` does\n\n```python\nif padding_mask is not None:\n    routing_map = routing_map & (~padding_mask)\n```\n\n"
       "We pinned megatron-core 0.19.2. Is our release affected?",
       "Yes. The installed 0.19.2 megatron/core/transformer/moe/router.py still applies padding_mask directly to routing_map "
       "in _apply_expert_bias; avoid passing padding_mask with expert bias (or patch in the fix) until a release that has it.",
       ["Says 0.19.2 is affected (the same line is in its router.py)", "Gives a workaround (no padding_mask with expert bias, or apply the upstream fix)"],
       [("affected_0192", "yes or no")],
       [text("affected_0192", "yes", 0, src("routing_map = routing_map & (~padding_mask)", "megatron/core/transformer/moe/router.py"))],
       [],
       ["read megatron/core/transformer/moe/router.py of the installed 0.19.2 (TopKRouter._apply_expert_bias)",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/6111 (closed upstream)"]))

add(ev("field-layout-init-missing-args", "errors", "TH-MB2424",
       "Exporting a checkpoint trained with a custom `pipeline_model_parallel_layout` fails with\n\n"
       "```\nTypeError: PipelineParallelLayerLayout.__init__() missing 2 required positional arguments: 'layout' and "
       "'pipeline_model_parallel_size'\n```\n\nWhat does Megatron Core 0.19.2's PipelineParallelLayerLayout need to be built?",
       "PipelineParallelLayerLayout(layout, pipeline_model_parallel_size) has two required arguments: the layout (a string "
       "such as 'Et|(tt|)*3tL' or a parsed list) and the pipeline-parallel size; the export code rebuilt it with no arguments "
       "(from a saved config), so pass both (or build it with PipelineParallelLayerLayout.from_str).",
       ["Names the two required arguments layout and pipeline_model_parallel_size", "Says the export re-created the object without them and how to pass them"],
       [("required_arguments", "comma-separated list")],
       [lst("required_arguments", ["layout", "pipeline_model_parallel_size"], 0,
            None)],
       [fact("the message reproduces on 0.19.2", err("megatron.core.transformer.pipeline_parallel_layer_layout:PipelineParallelLayerLayout", {}),
             "TypeError: PipelineParallelLayerLayout.__init__() missing 2 required positional arguments: 'layout' and 'pipeline_model_parallel_size'"),
        fact("parameters", {"kind": "param_at", "object": "megatron.core.transformer.pipeline_parallel_layer_layout:PipelineParallelLayerLayout.__init__", "index": 1},
             "pipeline_model_parallel_size")],
       ["ran PipelineParallelLayerLayout() in .venv (0.19.2): the quoted TypeError",
        "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/2424"]))

add(ev("field-layout-string-27", "errors", "TH-MB1880",
       "We load a model with `pipeline_model_parallel_layout = 'E,(t)*13|(t)*14,L'` and PP=2 and get an error. Is the layout "
       "string itself valid for megatron-core 0.19.2, and how many decoder layers does it put on each stage? Would it work with PP=4?",
       "The string parses in 0.19.2: stage 0 holds the embedding and 13 decoder layers, stage 1 holds 14 decoder layers and "
       "the loss (27 in total), so the model must have num_layers=27. With PP=4 Megatron rejects it: the layout has 2 stages "
       "and must be divisible by the pipeline size.",
       ["Says the string is valid with PP=2", "Gives 13 and 14 decoder layers (27 total)", "Says PP=4 is rejected (2 stages in the layout)"],
       [("decoder_layers_per_stage", "comma-separated list"), ("valid_with_pp4", "yes or no")],
       [lst("decoder_layers_per_stage", [13, 14], 1, {"kind": "layout_decoders", "layout": "E,(t)*13|(t)*14,L", "pp": 2}),
        text("valid_with_pp4", "no", 2, {"kind": "config_ok", "cls": "megatron.core.transformer.pipeline_parallel_layer_layout:PipelineParallelLayerLayout",
                                          "kwargs": {"layout": "E,(t)*13|(t)*14,L", "pipeline_model_parallel_size": 4}})],
       [fact("PP=4 message", err("megatron.core.transformer.pipeline_parallel_layer_layout:PipelineParallelLayerLayout",
                                 {"layout": "E,(t)*13|(t)*14,L", "pipeline_model_parallel_size": 4}),
             {"contains": "must be divisible by pipeline_model_parallel_size"})],
       ["parsed the layout with PipelineParallelLayerLayout in .venv (0.19.2)",
        "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1880"]))

add(ev("field-te-no-pytorch", "errors", "TH-COSMOS230",
       "Importing megatron.core fails with\n\n```\nFile \".../site-packages/megatron/core/extensions/transformer_engine.py\", "
       "line 94, in <module>\n    class TELinear(te.pytorch.Linear):\nAttributeError: module 'transformer_engine' has no attribute 'pytorch'\n```\n\n"
       "Which part of Megatron needs what here?",
       "megatron/core/extensions/transformer_engine.py subclasses Transformer Engine's PyTorch modules at import time "
       "(class TELinear(te.pytorch.Linear) is in 0.19.2 too), so the installed transformer_engine package has no usable "
       "PyTorch part (transformer_engine.pytorch). Install Transformer Engine with its PyTorch support for this torch build. "
       "(With such a TE, 0.19.2 itself already stops earlier, in megatron/core/fp8_utils.py, which imports "
       "transformer_engine.pytorch at module level: ModuleNotFoundError: No module named 'transformer_engine.pytorch'; "
       "TELinear is at line 855 of 0.19.2's file, so the pasted line 94 is an older release's.)",
       ["Says the TE extension module subclasses te.pytorch classes at import", "Says transformer_engine's PyTorch part is missing or broken and must be (re)installed for this torch"],
       [("failing_module", "dotted module name")],
       [text("failing_module", "megatron.core.extensions.transformer_engine", 0,
             None)],
       [fact("0.19.2 has the same class line", src("class TELinear(te.pytorch.Linear):", "megatron/core/extensions/transformer_engine.py"), True),
        fact("0.19.2's fp8_utils imports transformer_engine.pytorch at module level",
             src("from transformer_engine.pytorch.tensor import QuantizedTensor as FP8_TENSOR_CLASS", "megatron/core/fp8_utils.py"), True)],
       ["read megatron/core/extensions/transformer_engine.py of the installed 0.19.2",
        "imported megatron.core.extensions.transformer_engine and gpt_layer_specs in .venv (0.19.2) with a stand-in TE package "
        "without transformer_engine.pytorch (tests/data/troubleshooting/fake_te_nopytorch, and the same with __version__ 1.13.0): "
        "ModuleNotFoundError from megatron/core/fp8_utils.py both times",
        "thread https://github.com/nvidia-cosmos/cosmos-transfer1/issues/230"]))

add(ev("field-legacy-grouped-gemm-spec", "errors", "PV-slime-model_provider-167",
       "Our model provider (THUDM/slime@624b824a898a, slime/backends/megatron_utils/model_provider.py:167) builds the layer spec with\n\n"
       "```python\ntransformer_layer_spec = get_gpt_layer_with_transformer_engine_spec(\n    num_experts=args.num_experts,\n"
       "    moe_grouped_gemm=args.moe_grouped_gemm,\n    qk_layernorm=args.qk_layernorm,\n    multi_latent_attention=args.multi_latent_attention,\n"
       "    moe_use_legacy_grouped_gemm=args.moe_use_legacy_grouped_gemm,\n)\n```\n\nIt works with megatron-core 0.16.1. "
       "Will it run on 0.19.2, and if not, what exactly fails and what is the fix?",
       "No. 0.19.2 removed moe_use_legacy_grouped_gemm (from the spec functions and from TransformerConfig); the call raises "
       "TypeError: get_gpt_layer_with_transformer_engine_submodules() got an unexpected keyword argument "
       "'moe_use_legacy_grouped_gemm'. Drop the keyword (the legacy GroupedMLP path is gone); 0.16.1 and 0.13.1 accept it.",
       ["Says the call fails on 0.19.2 because moe_use_legacy_grouped_gemm no longer exists",
        "Quotes or paraphrases the TypeError about the unexpected keyword 'moe_use_legacy_grouped_gemm'",
        "Says to remove the keyword, and that 0.16.1 accepts it"],
       [("runs_on_0192", "yes or no"), ("rejected_keywords_0192", "comma-separated list")],
       [text("runs_on_0192", "no", 0, {"kind": "config_ok", "cls": SPEC_TE, "kwargs": {"num_experts": 8, "moe_grouped_gemm": True, "moe_use_legacy_grouped_gemm": False}}),
        lst("rejected_keywords_0192", ["moe_use_legacy_grouped_gemm"], 0,
            {"kind": "rejected_kwargs", "object": SPEC_TE, "keywords": ["num_experts", "moe_grouped_gemm", "qk_layernorm", "multi_latent_attention", "moe_use_legacy_grouped_gemm"]})],
       [fact("the TypeError on 0.19.2", {"kind": "call_error", "object": SPEC_TE, "kwargs": {"num_experts": 8, "moe_grouped_gemm": True, "moe_use_legacy_grouped_gemm": False}},
             "TypeError: get_gpt_layer_with_transformer_engine_submodules() got an unexpected keyword argument 'moe_use_legacy_grouped_gemm'"),
        fact("0.16.1 accepts the keyword", {"kind": "rejected_kwargs", "object": SPEC_TE, "keywords": ["moe_use_legacy_grouped_gemm"], "release": "0.16.1"}, [])],
       ["ran the call's keywords against get_gpt_layer_with_transformer_engine_spec in .venv (0.19.2: TypeError) and .venv-0161 (accepted)",
        "call site THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:slime/backends/megatron_utils/model_provider.py:167 (keywords only)"],
       user_release="0.16.1"))

add(ev("field-glm4-plugin-spec", "errors", "PV-slime-glm4-5",
       "A plugin (THUDM/slime@624b824a898a, slime_plugins/models/glm4.py:5) calls\n\n```python\nget_gpt_layer_with_transformer_engine_spec(\n"
       "    num_experts=args.num_experts, moe_grouped_gemm=args.moe_grouped_gemm, qk_layernorm=args.qk_layernorm,\n"
       "    multi_latent_attention=args.multi_latent_attention, moe_use_legacy_grouped_gemm=args.moe_use_legacy_grouped_gemm,\n"
       "    post_self_attn_layernorm=args.post_self_attn_layernorm, post_mlp_layernorm=args.post_mlp_layernorm)\n```\n\n"
       "Against stock megatron-core 0.19.2, which of these keywords are not accepted? Which of them does stock 0.16.1 not accept either?",
       "Stock 0.19.2 rejects moe_use_legacy_grouped_gemm, post_self_attn_layernorm and post_mlp_layernorm; stock 0.16.1 "
       "(and 0.13.1) rejects post_self_attn_layernorm and post_mlp_layernorm, which are not Megatron Core parameters at any of "
       "these releases (the plugin needs a patched Megatron).",
       ["Lists the three keywords 0.19.2 rejects", "Says post_self_attn_layernorm and post_mlp_layernorm are not stock Megatron Core parameters in 0.16.1 either"],
       [("rejected_0192", "comma-separated list"), ("rejected_0161", "comma-separated list")],
       [lst("rejected_0192", ["moe_use_legacy_grouped_gemm", "post_self_attn_layernorm", "post_mlp_layernorm"], 0,
            {"kind": "rejected_kwargs", "object": SPEC_TE, "keywords": ["num_experts", "moe_grouped_gemm", "qk_layernorm", "multi_latent_attention",
                                                                       "moe_use_legacy_grouped_gemm", "post_self_attn_layernorm", "post_mlp_layernorm"]}, ordered=False),
        lst("rejected_0161", ["post_self_attn_layernorm", "post_mlp_layernorm"], 1,
            {"kind": "rejected_kwargs", "release": "0.16.1", "object": SPEC_TE, "keywords": ["num_experts", "moe_grouped_gemm", "qk_layernorm", "multi_latent_attention",
                                                                                           "moe_use_legacy_grouped_gemm", "post_self_attn_layernorm", "post_mlp_layernorm"]}, ordered=False)],
       [],
       ["checked the call's keywords against the signature in .venv (0.19.2) and .venv-0161 (0.16.1)",
        "call site THUDM/slime@624b824a898ab0ec1fcb4d373004c7f3852bf515:slime_plugins/models/glm4.py:5 (keywords only)"]))

add(ev("field-config-removed-fields", "errors", "upgrade-TransformerConfig",
       "This config ran on megatron-core 0.13.1:\n\n```python\nTransformerConfig(num_layers=32, hidden_size=4096, num_attention_heads=32,\n"
       "    moe_extended_tp=False, async_tensor_model_parallel_allreduce=True, pipeline_model_parallel_split_rank=None)\n```\n\n"
       "What breaks on 0.19.2, exactly?",
       "All three keywords were removed from TransformerConfig (and ModelParallelConfig) by 0.19.2: the constructor raises "
       "TypeError: TransformerConfig.__init__() got an unexpected keyword argument 'moe_extended_tp' (the first one it meets); "
       "async_tensor_model_parallel_allreduce and pipeline_model_parallel_split_rank are gone too. Delete them.",
       ["Says moe_extended_tp, async_tensor_model_parallel_allreduce and pipeline_model_parallel_split_rank no longer exist in 0.19.2",
        "Says construction fails with a TypeError for an unexpected keyword argument", "Says to delete these arguments"],
       [("removed_keywords", "comma-separated list")],
       [lst("removed_keywords", ["moe_extended_tp", "async_tensor_model_parallel_allreduce", "pipeline_model_parallel_split_rank"], 0,
            {"kind": "rejected_kwargs", "object": TC + ".__init__", "keywords": ["num_layers", "hidden_size", "num_attention_heads", "moe_extended_tp",
                                                                               "async_tensor_model_parallel_allreduce", "pipeline_model_parallel_split_rank"]}, ordered=False)],
       [fact("0.19.2 TypeError", err(TC, dict(TINY, moe_extended_tp=False)), "TypeError: TransformerConfig.__init__() got an unexpected keyword argument 'moe_extended_tp'"),
        fact("0.13.1 accepted them", {"kind": "rejected_kwargs", "release": "0.13.1", "object": TC + ".__init__",
                                      "keywords": ["moe_extended_tp", "async_tensor_model_parallel_allreduce", "pipeline_model_parallel_split_rank"]}, [])],
       ["compared TransformerConfig's fields in .venv-0131 (0.13.1) and .venv (0.19.2); ran the constructor in 0.19.2"],
       user_release="0.13.1"))

add(ev("field-init-mp-removed-params", "errors", "upgrade-initialize_model_parallel",
       "Our launcher (written for megatron-core 0.13.1) calls\n\n```python\nparallel_state.initialize_model_parallel(\n    tensor_model_parallel_size=8, "
       "pipeline_model_parallel_size=4, pipeline_model_parallel_split_rank=None,\n    encoder_tensor_model_parallel_size=0, "
       "encoder_pipeline_model_parallel_size=0)\n```\n\nOn 0.19.2 it crashes immediately. Which parameters are gone?",
       "initialize_model_parallel in 0.19.2 no longer has pipeline_model_parallel_split_rank, encoder_tensor_model_parallel_size "
       "or encoder_pipeline_model_parallel_size: it raises TypeError: initialize_model_parallel() got an unexpected keyword "
       "argument 'pipeline_model_parallel_split_rank'. Remove them (the encoder-specific pipeline split was dropped).",
       ["Names the three removed parameters", "Says the call raises TypeError (unexpected keyword argument)"],
       [("removed_parameters", "comma-separated list")],
       [lst("removed_parameters", ["pipeline_model_parallel_split_rank", "encoder_tensor_model_parallel_size", "encoder_pipeline_model_parallel_size"], 0,
            {"kind": "rejected_kwargs", "object": IMP, "keywords": ["tensor_model_parallel_size", "pipeline_model_parallel_size", "pipeline_model_parallel_split_rank",
                                                                  "encoder_tensor_model_parallel_size", "encoder_pipeline_model_parallel_size"]}, ordered=False)],
       [fact("TypeError text", err(IMP, {"pipeline_model_parallel_split_rank": None}),
             "TypeError: initialize_model_parallel() got an unexpected keyword argument 'pipeline_model_parallel_split_rank'"),
        fact("0.13.1 had them", {"kind": "rejected_kwargs", "release": "0.13.1", "object": IMP,
                                 "keywords": ["pipeline_model_parallel_split_rank", "encoder_tensor_model_parallel_size", "encoder_pipeline_model_parallel_size"]}, [])],
       ["compared initialize_model_parallel's parameters in .venv-0131 and .venv; called it with the old keyword in 0.19.2"],
       user_release="0.13.1"))

add(ev("field-all-gather-group-removed", "errors", "upgrade-initialize_model_parallel-0161",
       "Code written against megatron-core 0.16.1 passes `create_all_gather_group=True` to "
       "`parallel_state.initialize_model_parallel`. What happens on 0.19.2?",
       "0.19.2 removed the parameter: TypeError: initialize_model_parallel() got an unexpected keyword argument "
       "'create_all_gather_group'. Remove it.",
       ["Says the parameter was removed between 0.16.1 and 0.19.2", "Says the call raises TypeError"],
       [("still_accepted_0192", "yes or no")],
       [text("still_accepted_0192", "no", 0, {"kind": "call", "object": "builtins:bool",
                                              "args": []}) if False else
        text("still_accepted_0192", "no", 0, None)],
       [fact("TypeError on 0.19.2", err(IMP, {"create_all_gather_group": True}),
             "TypeError: initialize_model_parallel() got an unexpected keyword argument 'create_all_gather_group'"),
        fact("0.16.1 had it", {"kind": "rejected_kwargs", "release": "0.16.1", "object": IMP, "keywords": ["create_all_gather_group"]}, [])],
       ["called initialize_model_parallel(create_all_gather_group=True) in .venv (0.19.2); read the 0.16.1 signature in .venv-0161"],
       user_release="0.16.1"))

add(ev("field-mla-max-position", "errors", "TH-MBR32",
       "Our DeepSeek-style config worked on megatron-core 0.13.1:\n\n```python\nMLATransformerConfig(num_layers=4, hidden_size=512, "
       "num_attention_heads=8, max_position_embeddings=4096)\n```\n\nOn 0.19.2 it raises. Why, and which field replaces it?",
       "MLATransformerConfig renamed its max_position_embeddings field to original_max_position_embeddings in 0.14.0, so on "
       "0.19.2: TypeError: MLATransformerConfig.__init__() got an unexpected keyword argument 'max_position_embeddings'. "
       "Pass original_max_position_embeddings instead.",
       ["Says max_position_embeddings is not a field of MLATransformerConfig in 0.19.2", "Names original_max_position_embeddings as the replacement",
        "Says the change came in 0.14.0"],
       [("replacement_field", "field name"), ("first_release_with_new_field", "version")],
       [text("replacement_field", "original_max_position_embeddings", 1, None),
        text("first_release_with_new_field", "0.14.0", 2, {"kind": "first_release", "refs": TAGS, "path": "megatron/core/transformer/transformer_config.py",
                                                            "contains": "original_max_position_embeddings: int"})],
       [fact("the 0.19.2 field", {"kind": "config_fields", "cls": MLA, "contains": "max_position"}, ["original_max_position_embeddings"]),
        fact("TypeError on 0.19.2", err(MLA, dict(TINY, max_position_embeddings=4096)),
             "TypeError: MLATransformerConfig.__init__() got an unexpected keyword argument 'max_position_embeddings'"),
        fact("0.13.1 accepted it", err(MLA, dict(TINY, max_position_embeddings=4096), "0.13.1"), "OK")],
       ["ran MLATransformerConfig(max_position_embeddings=4096) in .venv (TypeError) and .venv-0131 (OK); scanned the tags core_v0.12.0..core_v0.19.0",
        "thread https://github.com/ISEEKYAN/mbridge/pull/32"],
       user_release="0.13.1"))

add(ev("field-fsdp-disable-bucketing", "errors", "TH-1434",
       "We are on megatron-core 0.13.1. Wrapping the model with `TorchFullyShardedDataParallel(config, ddp_config, module, "
       "disable_bucketing=True)` fails. Why, and from which release is that argument accepted?",
       "TorchFullyShardedDataParallel.__init__ in 0.13.1 has no disable_bucketing parameter (TypeError: ... got an unexpected "
       "keyword argument 'disable_bucketing'); it exists from 0.14.0 (and in 0.19.2). Upgrade or do not pass it on 0.13.1.",
       ["Says 0.13.1's TorchFullyShardedDataParallel does not accept disable_bucketing (TypeError)", "Says it is accepted from 0.14.0"],
       [("accepted_in_0131", "yes or no"), ("first_release", "version")],
       [text("accepted_in_0131", "no", 0, None),
        text("first_release", "0.14.0", 1, {"kind": "first_release", "refs": TAGS, "path": "megatron/core/distributed/torch_fully_sharded_data_parallel.py",
                                             "contains": "disable_bucketing"})],
       [fact("0.13.1 TypeError", err("megatron.core.distributed.torch_fully_sharded_data_parallel:TorchFullyShardedDataParallel",
                                     {"config": None, "ddp_config": None, "module": None, "disable_bucketing": True}, "0.13.1"),
             "TypeError: TorchFullyShardedDataParallel.__init__() got an unexpected keyword argument 'disable_bucketing'")],
       ["called TorchFullyShardedDataParallel(..., disable_bucketing=True) in .venv-0131; scanned the tags for the parameter",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/1434"],
       user_release="0.13.1"))

add(ev("field-recompute-full-no-method", "errors", "TH-1487",
       "I switched `--recompute-granularity selective` to `full` to save more memory and now config construction fails with\n\n"
       "```\nValueError: Using recompute_granularity: full so recompute_method must be \"block\" or \"uniform\"\n```\n\n"
       "What else do I have to set, and what does `--recompute-activations` set?",
       "Full recompute needs recompute_method ('uniform' or 'block') and recompute_num_layers (between 1 and the layers per "
       "pipeline rank); --recompute-activations only "
       "sets recompute_granularity='selective' (megatron/training/arguments.py), which recomputes core attention by default "
       "(recompute_modules ['core_attn']).",
       ["Says recompute_method (uniform or block) and recompute_num_layers must be set for full", "Says --recompute-activations means selective granularity",
        "Says selective recomputes core_attn by default"],
       [("recompute_activations_sets", "granularity value"), ("default_recompute_modules", "comma-separated list")],
       [text("recompute_activations_sets", "selective", 1, None),
        lst("default_recompute_modules", ["core_attn"], 2, {"kind": "config", "cls": TC, "kwargs": dict(TINY, recompute_granularity="selective"), "attr": "recompute_modules"})],
       [fact("full also needs recompute_num_layers", err(TC, dict(TINY, num_layers=2, recompute_granularity="full", recompute_method="uniform")),
             "ValueError: When using recompute_granularity: full recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 2"),
        fact("arguments.py sets selective", src("if args.recompute_activations:\n        args.recompute_granularity = 'selective'", "megatron/training/arguments.py"), True),
        fact("the message reproduces on 0.19.2", err(TC, dict(TINY, recompute_granularity="full")),
             'ValueError: Using recompute_granularity: full so recompute_method must be "block" or "uniform"')],
       ["ran TransformerConfig(recompute_granularity='full') and ('selective') in .venv (0.19.2); read megatron/training/arguments.py",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/1487 (maintainer's answer, 2026-06-03)"]))

add(ev("field-moe-bias-etp", "errors", "TH-MB4007",
       "MoE config on megatron-core 0.19.2: `TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, "
       "num_moe_experts=8, moe_router_topk=2, tensor_model_parallel_size=2, expert_model_parallel_size=4, sequence_parallel=True)` "
       "raises `AssertionError: Bias in Moe is only supported when ETP==1`. I never set ETP. What value did it take, and what are the two fixes?",
       "expert_tensor_parallel_size left unset resolves to the tensor-parallel size (2), and add_bias_linear defaults to True; "
       "biases in MoE need ETP==1. Either set expert_tensor_parallel_size=1 or add_bias_linear=False (with the latter, ETP stays 2).",
       ["Says ETP took the tensor-parallel size, 2", "Gives both fixes: expert_tensor_parallel_size=1 or add_bias_linear=False"],
       [("effective_etp", "integer")],
       [num("effective_etp", 2, 0, {"kind": "config", "cls": TC, "kwargs": dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4, sequence_parallel=True),
                                    "attr": "expert_tensor_parallel_size"})],
       [fact("the assertion on 0.19.2", err(TC, {k: v for k, v in dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4, sequence_parallel=True).items() if k != "add_bias_linear"}),
             "AssertionError: Bias in Moe is only supported when ETP==1"),
        fact("ETP=1 fixes it", err(TC, {k: v for k, v in dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4, sequence_parallel=True, expert_tensor_parallel_size=1).items() if k != "add_bias_linear"}), "OK")],
       ["ran the config in .venv (0.19.2) with and without expert_tensor_parallel_size=1 and add_bias_linear=False",
        "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/4007 (maintainer: ETP=None resolves to TP)"]))

add(ev("field-moe-bias-0131", "errors", "TH-MB4007",
       "We still run megatron-core 0.13.1. `TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, num_moe_experts=8, "
       "moe_router_topk=2)` fails. What is the error on 0.13.1, and does the same config construct on 0.19.2?",
       "On 0.13.1: AssertionError: Bias is not supported for MoE (add_bias_linear defaults to True). On 0.19.2 the same "
       "config constructs (MoE biases are allowed when ETP==1, which holds here with TP=1). On 0.13.1 set add_bias_linear=False.",
       ["Quotes the 0.13.1 assertion 'Bias is not supported for MoE'", "Says 0.19.2 accepts the same config", "Says add_bias_linear=False fixes 0.13.1"],
       [("constructs_on_0131", "yes or no"), ("constructs_on_0192", "yes or no")],
       [text("constructs_on_0131", "no", 0, {"kind": "config_ok", "cls": TC, "kwargs": {k: v for k, v in MOE.items() if k != "add_bias_linear"}, "release": "0.13.1"}),
        text("constructs_on_0192", "yes", 1, {"kind": "config_ok", "cls": TC, "kwargs": {k: v for k, v in MOE.items() if k != "add_bias_linear"}})],
       [fact("0.13.1 message", err(TC, {k: v for k, v in MOE.items() if k != "add_bias_linear"}, "0.13.1"), "AssertionError: Bias is not supported for MoE")],
       ["ran the config in .venv-0131 (0.13.1) and .venv (0.19.2)"],
       user_release="0.13.1"))

add(ev("field-moe-act-recompute", "layout", "TH-3221",
       "Full recompute does not free our MoE activations, so following the maintainer's advice we switched to selective recompute "
       "with `recompute_modules=['mlp', 'moe_act']` on megatron-core 0.19.2 (no grouped GEMM). Config construction now fails. "
       "Why, and what must we add?",
       "0.19.2 raises ValueError: moe_act in recompute_modules is only supported with moe_grouped_gemm. Enable "
       "moe_grouped_gemm=True (then the same recompute_modules construct) or drop moe_act from the list.",
       ["Quotes or paraphrases 'moe_act in recompute_modules is only supported with moe_grouped_gemm'", "Says to enable moe_grouped_gemm (or drop moe_act)"],
       [("needs_grouped_gemm", "yes or no")],
       [text("needs_grouped_gemm", "yes", 1, {"kind": "config_ok_negated", "cls": TC,
                                               "kwargs": dict(MOE, recompute_granularity="selective", recompute_modules=["mlp", "moe_act"])})],
       [fact("message", err(TC, dict(MOE, recompute_granularity="selective", recompute_modules=["mlp", "moe_act"])),
             "ValueError: moe_act in recompute_modules is only supported with moe_grouped_gemm."),
        fact("with grouped GEMM it constructs", err(TC, dict(MOE, moe_grouped_gemm=True, recompute_granularity="selective", recompute_modules=["mlp", "moe_act"])), "OK")],
       ["ran TransformerConfig(recompute_modules=['mlp','moe_act']) with and without moe_grouped_gemm in .venv (0.19.2)",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/3221 (maintainer's workaround)"]))

add(ev("field-local-spec-legacy-kw", "errors", "upgrade-get_gpt_layer_local_spec",
       "Our CPU test harness builds `get_gpt_layer_local_spec(num_experts=8, moe_grouped_gemm=True, moe_use_legacy_grouped_gemm=False)`; "
       "it passed on megatron-core 0.16.1. What does 0.19.2 raise?",
       "TypeError: get_gpt_layer_local_submodules() got an unexpected keyword argument 'moe_use_legacy_grouped_gemm': the "
       "keyword was removed by 0.19.2 and the spec function forwards its arguments to get_gpt_layer_local_submodules. Remove it.",
       ["Says the keyword was removed in 0.19.2 and the call raises TypeError", "Names get_gpt_layer_local_submodules as the function in the message (or quotes the message)"],
       [("raises_on_0192", "yes or no")],
       [text("raises_on_0192", "yes", 0, {"kind": "config_ok_negated", "cls": "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_local_spec",
                                           "kwargs": {"num_experts": 8, "moe_grouped_gemm": True, "moe_use_legacy_grouped_gemm": False}})],
       [fact("message", err("megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_local_spec", {"num_experts": 8, "moe_grouped_gemm": True, "moe_use_legacy_grouped_gemm": False}),
             "TypeError: get_gpt_layer_local_submodules() got an unexpected keyword argument 'moe_use_legacy_grouped_gemm'"),
        fact("0.16.1 accepts it", err("megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_local_spec", {"num_experts": 8, "moe_grouped_gemm": True, "moe_use_legacy_grouped_gemm": False}, "0.16.1"), "OK")],
       ["called get_gpt_layer_local_spec with the keyword in .venv (0.19.2) and .venv-0161"],
       user_release="0.16.1"))

add(ev("field-world-not-divisible-expert", "errors", "TH-MB3509",
       "8 GPUs, `--tensor-model-parallel-size 2 --expert-model-parallel-size 3` (no ETP, PP=1). initialize_model_parallel raises a "
       "RuntimeError. What does megatron-core 0.19.2 say, and what is the smallest world size that works for this TP/EP?",
       "The expert grid is ETP*EP*PP = 2*3*1 = 6 (ETP defaults to TP): RuntimeError: world_size (8) is not divisible by "
       "expert_tensor_model_pipeline_parallel size (6). The dense grid TP*PP*CP = 2 must also divide the world size, so the "
       "smallest world is lcm(2, 6) = 6 GPUs (or set ETP=1: grid 3, smallest world lcm(2, 3) = 6 as well).",
       ["Gives the RuntimeError about the expert grid of size 6", "Says ETP defaults to TP", "Gives 6 as the smallest world size"],
       [("expert_grid_size", "integer"), ("smallest_world_size", "integer")],
       [num("expert_grid_size", 6, 0, arith("etp * ep * pp", etp=2, ep=3, pp=1)),
        num("smallest_world_size", 6, 2, arith("lcm(tp * pp * cp, etp * ep * pp)", tp=2, pp=1, cp=1, etp=2, ep=3))],
       [fact("message in 0.19.2", src('f"world_size ({world_size}) is not divisible by expert_tensor_model_pipeline_parallel size ({expert_tensor_model_pipeline_parallel_size})"'), True),
        fact("dense divisibility", src('raise RuntimeError(f"world_size ({world_size}) is not divisible by {model_size}")'), True),
        fact("Megatron on 8 ranks", fw(8, tensor_model_parallel_size=2, expert_model_parallel_size=3),
             "RuntimeError: world_size (8) is not divisible by expert_tensor_model_pipeline_parallel size (6)"),
        fact("Megatron on 6 ranks", fw(6, {"edp": "get_expert_data_parallel_world_size"}, tensor_model_parallel_size=2, expert_model_parallel_size=3), {"edp": 1})],
       ["read initialize_model_parallel in the installed 0.19.2 parallel_state.py (both divisibility checks, ETP default)",
        "ran initialize_model_parallel on fake worlds of 8 and 6 ranks (tests/evals_probe.py fake_world)"]))

add(ev("field-dense-distopt-instances", "errors", "upgrade-distopt",
       "8 GPUs, TP=4, PP=1, CP=1, `--num-distributed-optimizer-instances 4`. initialize_model_parallel asserts. What is the data-parallel "
       "size, which assertion fires, and what instance counts are allowed?",
       "DP = 8/(4*1*1) = 2; Megatron asserts (data_parallel_size * context_parallel_size) % num_distributed_optimizer_instances == 0: "
       "'Data parallel size should be divisible by partial DistOpt shard factor'. With DP*CP = 2, use 1 or 2 instances.",
       ["Computes DP = 2", "Names the 'Data parallel size should be divisible by partial DistOpt shard factor' assertion", "Says 1 or 2 instances work"],
       [("data_parallel_size", "integer"), ("allowed_instances", "comma-separated list")],
       [num("data_parallel_size", 2, 0, arith("world // (tp * pp * cp)", world=8, tp=4, pp=1, cp=1)),
        lst("allowed_instances", [1, 2], 2, None)],
       [fact("assertion text", src("Data parallel size should be divisible by partial DistOpt shard factor"), True),
        fact("assertion uses dp*cp", src("data_parallel_size * context_parallel_size\n    ) % num_distributed_optimizer_instances == 0"), True),
        fact("Megatron on 8 ranks, 4 instances", fw(8, tensor_model_parallel_size=4, num_distributed_optimizer_instances=4),
             "AssertionError: Data parallel size should be divisible by partial DistOpt shard factor"),
        fact("Megatron on 8 ranks (DP read with one instance)", fw(8, {"dp": "get_data_parallel_world_size"}, tensor_model_parallel_size=4), {"dp": 2})],
       ["read initialize_model_parallel in the installed 0.19.2 parallel_state.py"]))

add(ev("field-legacy-gemm-config", "errors", "upgrade-TransformerConfig-0161",
       "On megatron-core 0.16.1 we set `moe_use_legacy_grouped_gemm=True` in TransformerConfig. After upgrading to 0.19.2 the "
       "constructor fails. What is the message and what replaces the legacy path?",
       "TypeError: TransformerConfig.__init__() got an unexpected keyword argument 'moe_use_legacy_grouped_gemm': the legacy "
       "grouped-GEMM option was removed by 0.19.2. Drop the field.",
       ["Gives the TypeError for moe_use_legacy_grouped_gemm", "Says the field was removed and to drop it"],
       [("field_exists_0192", "yes or no")],
       [text("field_exists_0192", "no", 0, {"kind": "config_ok", "cls": TC, "kwargs": dict(TINY, moe_use_legacy_grouped_gemm=True)})],
       [fact("message", err(TC, dict(TINY, moe_use_legacy_grouped_gemm=True)),
             "TypeError: TransformerConfig.__init__() got an unexpected keyword argument 'moe_use_legacy_grouped_gemm'"),
        fact("0.16.1 had the field", {"kind": "config_fields", "cls": TC, "contains": "legacy_grouped", "release": "0.16.1"}, ["moe_use_legacy_grouped_gemm"])],
       ["ran TransformerConfig(moe_use_legacy_grouped_gemm=True) in .venv (0.19.2); listed the 0.16.1 fields in .venv-0161"],
       user_release="0.16.1"))

add(ev("field-expert-bias-0131-user", "errors", "TH-1971",
       "We are on megatron-core 0.13.1 and want DeepSeek-style aux-loss-free routing with a sqrtsoftplus score function: "
       "`moe_router_enable_expert_bias=True, moe_router_score_function='sqrtsoftplus'` (MoE, add_bias_linear=False). Does 0.13.1 accept it? "
       "Which release is the first that does?",
       "No: 0.13.1 (and 0.16.1) allow expert bias only with the sigmoid score function (ValueError: Expert bias for aux-loss-free "
       "routing only supports sigmoid score function...). sqrtsoftplus appears in 0.18.0; 0.19.2 accepts it with expert bias.",
       ["Says 0.13.1 rejects it (sigmoid only)", "Says sqrtsoftplus first appears in 0.18.0", "Says 0.19.2 accepts it"],
       [("accepted_0131", "yes or no"), ("first_release", "version")],
       [text("accepted_0131", "no", 0, {"kind": "config_ok", "release": "0.13.1", "cls": TC,
                                        "kwargs": dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sqrtsoftplus")}),
        text("first_release", "0.18.0", 1, {"kind": "first_release", "refs": TAGS, "path": "megatron/core/transformer/transformer_config.py", "contains": "sqrtsoftplus"})],
       [fact("0.19.2 accepts", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sqrtsoftplus")), "OK")],
       ["ran the config in .venv-0131 and .venv; scanned transformer_config.py at the tags for sqrtsoftplus",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/1971"],
       user_release="0.13.1"))

# ------------------------------------------------------------------ config

VPAD = "megatron.core.tokenizers.utils.build_tokenizer:vocab_size_with_padding"


def _vpad(vocab, div, tp):
    return {"kind": "call", "object": VPAD, "args": [vocab, {"__ns__": {"make_vocab_size_divisible_by": div, "tensor_model_parallel_size": tp, "rank": 1}}]}


add(ev("field-vocab-pad-tp2", "config", "TH-1754",
       "GPT-2 vocab (50257 tokens), `--make-vocab-size-divisible-by 1`, and I compare TP=1 with TP=2. What padded vocabulary "
       "size does Megatron build in each case, and why can the two runs differ?",
       "Megatron pads the vocab to a multiple of make_vocab_size_divisible_by * TP: 50257 with TP=1, 50258 with TP=2 (one "
       "dummy row). The output layer/softmax then covers one extra (untrained) logit with TP=2, so the two runs are not the "
       "same model. The padded size is equal across TP sizes only when make_vocab_size_divisible_by * TP is (2 at TP=1 and "
       "1 at TP=2 both give 50258); the default 128 gives 50304 at TP=1 and 50432 at TP=2.",
       ["Gives 50257 for TP=1 and 50258 for TP=2", "Says the multiple is make_vocab_size_divisible_by times TP", "Says the extra padded row changes the model between the runs"],
       [("padded_vocab_tp1", "integer"), ("padded_vocab_tp2", "integer")],
       [num("padded_vocab_tp1", 50257, 0, _vpad(50257, 1, 1)), num("padded_vocab_tp2", 50258, 0, _vpad(50257, 1, 2))],
       # Corrected 2026-12-02: the reference said "(e.g. 128)" keeps the sizes equal; two graders of the
       # 2026-12-02 run showed it does not. Each number of the new sentence is recomputed.
       [fact("divisor 2 at TP=1 gives 50258", _vpad(50257, 2, 1), 50258),
        fact("the default 128 gives 50304 at TP=1", _vpad(50257, 128, 1), 50304),
        fact("the default 128 gives 50432 at TP=2", _vpad(50257, 128, 2), 50432)],
       ["ran megatron.core.tokenizers.utils.build_tokenizer.vocab_size_with_padding in .venv (0.19.2)",
            "thread https://github.com/NVIDIA/Megatron-LM/issues/1754"]))

add(ev("field-vocab-pad-qwen-tp8", "config", "TH-MB1853",
       "Qwen vocabulary of 151936 tokens, `--make-vocab-size-divisible-by 128`, TP=8. What padded vocabulary size does "
       "Megatron use, how many rows does each TP rank hold, and why does that matter when loading HF weights?",
       "Padded to a multiple of 128*8 = 1024: 152576 (640 dummy rows); each TP rank holds 152576/8 = 19072 rows. HF "
       "checkpoints have 151936 rows, so a converter must pad/unpad the embedding and output layer.",
       ["Gives 152576", "Gives 19072 rows per TP rank", "Says the HF checkpoint's 151936 rows must be padded on load / unpadded on export"],
       [("padded_vocab", "integer"), ("rows_per_tp_rank", "integer")],
       [num("padded_vocab", 152576, 0, _vpad(151936, 128, 8)), num("rows_per_tp_rank", 19072, 1, arith("152576 // 8"))],
       [], ["ran vocab_size_with_padding(151936, make_vocab_size_divisible_by=128, tp=8) in .venv (0.19.2)",
            "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1853 (maintainer: make_vocab_size_divisible_by pads)"]))

add(ev("field-expert-bias-why-sigmoid", "config", "TH-1971",
       "Why does Megatron Core refuse `moe_router_enable_expert_bias` with the softmax score function, and what score functions "
       "can I combine with expert bias in 0.19.2 and in 0.16.1?",
       "TransformerConfig.__post_init__ allows aux-loss-free expert bias only with some score functions: 0.19.2 accepts "
       "'sigmoid' and 'sqrtsoftplus', 0.16.1 only 'sigmoid'; softmax is rejected by both.",
       ["Says 0.19.2 accepts sigmoid and sqrtsoftplus", "Says 0.16.1 accepts only sigmoid", "Says softmax is rejected in both"],
       [("functions_0192", "comma-separated list"), ("functions_0161", "comma-separated list")],
       [lst("functions_0192", ["sigmoid", "sqrtsoftplus"], 0, None, ordered=False), lst("functions_0161", ["sigmoid"], 1, None)],
       [fact("0.19.2 sqrtsoftplus", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sqrtsoftplus")), "OK"),
        fact("0.16.1 sqrtsoftplus rejected", {"kind": "config_ok", "release": "0.16.1", "cls": TC,
                                              "kwargs": dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sqrtsoftplus")}, False),
        fact("0.16.1 sigmoid", err(TC, dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="sigmoid"), "0.16.1"), "OK"),
        fact("softmax rejected 0.19.2", {"kind": "config_ok", "cls": TC, "kwargs": dict(MOE, moe_router_enable_expert_bias=True, moe_router_score_function="softmax")}, False)],
       ["ran the config with each score function in .venv and .venv-0161", "thread https://github.com/NVIDIA/Megatron-LM/issues/1693 and /1971"],
       user_release="0.16.1"))

add(ev("field-gqa-0131-user", "config", "TH-5755",
       "We are on megatron-core 0.13.1. Does TransformerConfig there reject num_attention_heads=32 with num_query_groups=5 "
       "(hidden 64, 1 layer)? And with num_query_groups=8 and tensor_model_parallel_size=16?",
       "0.13.1 accepts 32 heads / 5 groups (no heads-vs-groups check, the forward would fail). With 8 groups and TP=16 it rejects: "
       "num_query_groups must be a multiple of the tensor-parallel size (ValueError naming both).",
       ["Says 0.13.1 accepts 32/5", "Says 8 groups with TP=16 is rejected (groups must be a multiple of TP)"],
       [("accepts_32_5", "yes or no"), ("accepts_8_groups_tp16", "yes or no")],
       [text("accepts_32_5", "yes", 0, {"kind": "config_ok", "release": "0.13.1", "cls": TC, "kwargs": dict(TINY, num_attention_heads=32, num_query_groups=5)}),
        text("accepts_8_groups_tp16", "no", 1, {"kind": "config_ok", "release": "0.13.1", "cls": TC,
                                                 "kwargs": dict(TINY, hidden_size=512, num_attention_heads=32, num_query_groups=8, tensor_model_parallel_size=16)})],
       [], ["ran both configs in .venv-0131 (0.13.1)", "thread https://github.com/NVIDIA/Megatron-LM/issues/5755"],
       user_release="0.13.1"))

add(ev("field-selective-default-modules", "config", "TH-1487",
       "With `recompute_granularity='selective'` and nothing else on megatron-core 0.19.2, which submodules are recomputed, and "
       "does `--recompute-activations` select anything different?",
       "recompute_modules defaults to ['core_attn'] (core attention only); --recompute-activations just sets "
       "recompute_granularity='selective', so the same.",
       ["Says the default is core_attn only", "Says --recompute-activations is the same selective setting"],
       [("recomputed_modules", "comma-separated list")],
       [lst("recomputed_modules", ["core_attn"], 0, {"kind": "config", "cls": TC, "kwargs": dict(TINY, recompute_granularity="selective"), "attr": "recompute_modules"})],
       [fact("arguments.py", src("if args.recompute_activations:\n        args.recompute_granularity = 'selective'", "megatron/training/arguments.py"), True)],
       ["ran TransformerConfig(recompute_granularity='selective') in .venv (0.19.2); read megatron/training/arguments.py",
        "thread https://github.com/NVIDIA/Megatron-LM/issues/1487"]))

add(ev("field-moe-bias-etp-fix-config", "config", "TH-MB4007",
       "For a MoE TransformerConfig with TP=2, EP=4 and sequence parallel on megatron-core 0.19.2, I want to keep linear biases. "
       "What must expert_tensor_parallel_size be, and what is it if I leave it unset and turn biases off?",
       "Biases in MoE need ETP == 1, so set expert_tensor_parallel_size=1. Left unset it becomes the tensor-parallel size, 2.",
       ["Says ETP must be 1 to keep biases", "Says unset ETP becomes 2 (= TP)"],
       [("etp_for_biases", "integer"), ("etp_if_unset", "integer")],
       [num("etp_for_biases", 1, 0, None),
        num("etp_if_unset", 2, 1, {"kind": "config", "cls": TC, "kwargs": dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4, sequence_parallel=True),
                                   "attr": "expert_tensor_parallel_size"})],
       [fact("biases with ETP=1 construct", {"kind": "config_ok", "cls": TC, "kwargs": {k: v for k, v in dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4,
                                                                                                       sequence_parallel=True, expert_tensor_parallel_size=1).items() if k != "add_bias_linear"}}, True)],
       ["ran the configs in .venv (0.19.2)", "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/4007"]))

# ------------------------------------------------------------------ versions

add(ev("field-training-models-gpt", "versions", "TH-MB5193",
       "Our package imports `megatron.training.models.gpt`. Which Megatron-LM releases have that module (checking the tags from "
       "0.12.0 to 0.19.0), and does 0.18.2 have it?",
       "megatron/training/models/gpt.py first appears in core_v0.19.0; 0.18.x (0.18.0 and 0.18.2) has megatron/training/models/ "
       "without gpt.py, so the import fails there.",
       ["Says the module first appears in 0.19.0", "Says 0.18.2 does not have it"],
       [("first_release", "version"), ("in_0182", "yes or no")],
       [text("first_release", "0.19.0", 0, {"kind": "first_release", "refs": TAGS, "path": "megatron/training/models/gpt.py"}),
        text("in_0182", "no", 1, {"kind": "upstream_source", "ref": "core_v0.18.2", "path": "megatron/training/models/gpt.py"})],
       [], ["read git ls-tree of the Megatron-LM tags core_v0.12.0..core_v0.19.0 and core_v0.18.2",
            "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/5193"]))

add(ev("field-spec-sixth-positional", "versions", "TH-MILES324",
       "Code written for megatron-core 0.13 calls `get_gpt_layer_with_transformer_engine_spec(8, True, True, False, None, True)` "
       "positionally. What parameter does the sixth argument bind to on 0.13.1, on 0.16.1 and on 0.19.2?",
       "On 0.13.1 and 0.16.1 the sixth parameter is moe_use_legacy_grouped_gemm; 0.19.2 removed it, so the sixth is now "
       "qk_l2_norm: the call silently turns on QK L2 norm instead of the legacy grouped GEMM. Pass keywords.",
       ["Says the sixth parameter is moe_use_legacy_grouped_gemm in 0.13.1 and 0.16.1", "Says it is qk_l2_norm in 0.19.2", "Recommends keyword arguments"],
       [("sixth_param_0131", "name"), ("sixth_param_0192", "name")],
       [text("sixth_param_0131", "moe_use_legacy_grouped_gemm", 0, {"kind": "param_at", "object": SPEC_TE, "index": 5, "release": "0.13.1"}),
        text("sixth_param_0192", "qk_l2_norm", 1, {"kind": "param_at", "object": SPEC_TE, "index": 5})],
       [fact("0.16.1 too", {"kind": "param_at", "object": SPEC_TE, "index": 5, "release": "0.16.1"}, "moe_use_legacy_grouped_gemm")],
       ["read inspect.signature of get_gpt_layer_with_transformer_engine_spec in .venv-0131, .venv-0161 and .venv",
        "thread https://github.com/radixark/miles/pull/324"],
       user_release="0.13.1"))

add(ev("field-hybridmodel-first", "versions", "upgrade-HybridModel",
       "We build Mamba hybrids with `MambaModel` on megatron-core 0.16.1 and read that newer releases have `HybridModel`. In which "
       "release does megatron/core/models/hybrid/hybrid_model.py first appear, and can 0.16.1 import HybridModel?",
       "hybrid_model.py first appears in 0.18.0; 0.16.1 cannot import it (ModuleNotFoundError). In 0.19.2 MambaModel is a "
       "backward-compatible wrapper around HybridModel.",
       ["Says HybridModel first appears in 0.18.0", "Says 0.16.1 cannot import it"],
       [("first_release", "version"), ("importable_0161", "yes or no")],
       [text("first_release", "0.18.0", 0, {"kind": "first_release", "refs": TAGS, "path": "megatron/core/models/hybrid/hybrid_model.py"}),
        text("importable_0161", "no", 1, {"kind": "import_ok", "stmt": "from megatron.core.models.hybrid.hybrid_model import HybridModel", "release": "0.16.1"})],
       [fact("0.19.2 imports it", {"kind": "import_ok", "stmt": "from megatron.core.models.hybrid.hybrid_model import HybridModel"}, True)],
       ["scanned the tags for hybrid_model.py; imported it in .venv-0161 and .venv"], user_release="0.16.1"))

add(ev("field-pg-collection-rename", "versions", "upgrade-ProcessGroupCollection",
       "Code from megatron-core 0.13.1 imports `ModelCommProcessGroups` from megatron.core.process_groups_config. What is its name "
       "on 0.19.2, since which release, and does the old name still import?",
       "It is ProcessGroupCollection (class ProcessGroupCollection first appears in 0.15.0); on 0.19.2 "
       "`from megatron.core.process_groups_config import ModelCommProcessGroups` fails (ImportError), and models take pg_collection.",
       ["Names ProcessGroupCollection", "Says it appears in 0.15.0", "Says the old name does not import on 0.19.2"],
       [("new_name", "class name"), ("first_release", "version"), ("old_name_imports_0192", "yes or no")],
       [text("new_name", "ProcessGroupCollection", 0, None),
        text("first_release", "0.15.0", 1, {"kind": "first_release", "refs": TAGS, "path": "megatron/core/process_groups_config.py", "contains": "class ProcessGroupCollection"}),
        text("old_name_imports_0192", "no", 2, {"kind": "import_ok", "stmt": "from megatron.core.process_groups_config import ModelCommProcessGroups"})],
       [fact("0.13.1 had the old name", {"kind": "import_ok", "stmt": "from megatron.core.process_groups_config import ModelCommProcessGroups", "release": "0.13.1"}, True),
        fact("0.19.2 has the new one", {"kind": "import_ok", "stmt": "from megatron.core.process_groups_config import ProcessGroupCollection"}, True)],
       ["imported both names in .venv-0131 and .venv; scanned process_groups_config.py at the tags"], user_release="0.13.1"))

add(ev("field-removed-config-fields-0161", "versions", "upgrade-TransformerConfig-0161",
       "Which TransformerConfig fields of megatron-core 0.16.1 no longer exist in 0.19.2?",
       "moe_extended_tp, async_tensor_model_parallel_allreduce and moe_use_legacy_grouped_gemm (the first two come from "
       "ModelParallelConfig); passing any of them raises TypeError on 0.19.2.",
       ["Lists exactly moe_extended_tp, async_tensor_model_parallel_allreduce, moe_use_legacy_grouped_gemm"],
       [("removed_fields", "comma-separated list")],
       [lst("removed_fields", ["moe_extended_tp", "async_tensor_model_parallel_allreduce", "moe_use_legacy_grouped_gemm"], 0,
            {"kind": "rejected_kwargs", "object": TC + ".__init__", "keywords": ["moe_extended_tp", "async_tensor_model_parallel_allreduce", "moe_use_legacy_grouped_gemm",
                                                                               "num_layers", "hidden_size", "sequence_parallel", "moe_router_topk"]}, ordered=False)],
       [fact("all three existed in 0.16.1", {"kind": "rejected_kwargs", "release": "0.16.1", "object": TC + ".__init__",
                                             "keywords": ["moe_extended_tp", "async_tensor_model_parallel_allreduce", "moe_use_legacy_grouped_gemm"]}, [])],
       ["compared dataclasses.fields(TransformerConfig) in .venv-0161 and .venv"], user_release="0.16.1"))

# ------------------------------------------------------------------ process groups

add(ev("field-use-mpu-groups", "process-groups", "TH-5259",
       "In megatron-core 0.19.2, after `parallel_state.initialize_model_parallel()`, I call "
       "`ProcessGroupCollection.use_mpu_process_groups()` with no arguments. Does the collection have the model-parallel group "
       "`mp`, the pipeline group `pp`, and the data+context group `dp_cp` filled in? Does it have `tp`, `ep` and `expt_dp`?",
       "Yes to all: called with no arguments it fills mp, pp, dp_cp, tp, ep and expt_dp (and also cp, dp, embd, pos_embd, "
       "tp_cp, tp_ep, intra_dp_cp, ...).",
       ["Says mp, pp and dp_cp are filled", "Says tp, ep and expt_dp are filled too"],
       [("has_mp_pp_dp_cp", "yes or no"), ("has_tp_ep_expt_dp", "yes or no")],
       [text("has_mp_pp_dp_cp", "yes", 0, None), text("has_tp_ep_expt_dp", "yes", 1, None)],
       [fact("fields filled (1-rank gloo)", {"kind": "pg_fields"}, {"matches": r"'dp_cp'.*'ep'.*'expt_dp'.*'mp'.*'pp'.*'tp'"})],
       ["called ProcessGroupCollection.use_mpu_process_groups() after a 1-rank gloo initialize_model_parallel in .venv (0.19.2)",
        "PR https://github.com/NVIDIA/Megatron-LM/pull/5259 (review thread)"]))

add(ev("field-etp-default-groups", "process-groups", "TH-MB4007",
       "16 GPUs, TP=2, PP=1, CP=1, EP=4 and expert_tensor_parallel_size not passed to initialize_model_parallel (0.19.2). What are "
       "the sizes of the data-parallel group, the expert-tensor-parallel group and the expert data-parallel group?",
       "DP = 16/(2*1*1) = 8. ETP unset becomes TP = 2, so the expert grid is ETP*EP*PP = 8 and expert DP = 16/8 = 2.",
       ["DP 8", "ETP 2 (= TP, because unset)", "Expert DP 2"],
       [("data_parallel_size", "integer"), ("expert_tensor_parallel_size", "integer"), ("expert_data_parallel_size", "integer")],
       [num("data_parallel_size", 8, 0, arith("w // (tp*pp*cp)", w=16, tp=2, pp=1, cp=1)),
        num("expert_tensor_parallel_size", 2, 1, None),
        num("expert_data_parallel_size", 2, 2, arith("w // (etp*ep*pp)", w=16, etp=2, ep=4, pp=1))],
       [fact("ETP default", src("if expert_tensor_parallel_size is None:\n        expert_tensor_parallel_size = tensor_model_parallel_size"), True),
        fact("expert DP formula", src("expert_data_parallel_size = world_size // expert_tensor_model_pipeline_parallel_size"), True),
        fact("Megatron on 16 ranks", fw(16, {"dp": "get_data_parallel_world_size", "etp": "get_expert_tensor_parallel_world_size",
                                             "edp": "get_expert_data_parallel_world_size"}, tensor_model_parallel_size=2, expert_model_parallel_size=4),
             {"dp": 8, "etp": 2, "edp": 2})],
       ["read initialize_model_parallel in the installed 0.19.2; ran it on a fake world of 16 ranks", "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/4007"]))

# ------------------------------------------------------------------ provider review

add(ev("field-roll-positional-spec", "provider-review", "PV-ROLL-model_factory-392",
       "Review this call from our model factory (alibaba/ROLL@8eb27cc2dc34, mcore_adapter/src/mcore_adapter/models/model_factory.py:392) "
       "for megatron-core 0.13.1 through 0.19.2:\n\n```python\nreturn get_gpt_layer_with_transformer_engine_spec(\n"
       "    config.num_moe_experts, config.moe_grouped_gemm, qk_layernorm=config.qk_layernorm\n)\n```\n\n"
       "Do the positional arguments still bind to the right parameters on each release? Is a change required?",
       "Yes: on 0.13.1, 0.16.1 and 0.19.2 the first two parameters are num_experts and moe_grouped_gemm, and qk_layernorm is "
       "passed by keyword, so the call binds the same way everywhere; no change is required (only positions 6 and later moved).",
       ["Says the first two positional parameters are num_experts and moe_grouped_gemm on every release listed", "Says no change is required (does not invent a defect)"],
       [("change_required", "yes or no"), ("first_two_params_0192", "comma-separated list")],
       [text("change_required", "no", 1, None),
        lst("first_two_params_0192", ["num_experts", "moe_grouped_gemm"], 0, None)],
       [fact("0.19.2 param 0", {"kind": "param_at", "object": SPEC_TE, "index": 0}, "num_experts"),
        fact("0.19.2 param 1", {"kind": "param_at", "object": SPEC_TE, "index": 1}, "moe_grouped_gemm"),
        fact("0.13.1 param 1", {"kind": "param_at", "object": SPEC_TE, "index": 1, "release": "0.13.1"}, "moe_grouped_gemm"),
        fact("keyword accepted everywhere", {"kind": "rejected_kwargs", "object": SPEC_TE, "keywords": ["qk_layernorm"]}, [])],
       ["read the signature in .venv-0131, .venv-0161 and .venv",
        "call site alibaba/ROLL@8eb27cc2dc34ea4f7c74ff6bf9db1bf1e99ad9c7 (see evals/field_material.json):mcore_adapter/src/mcore_adapter/models/model_factory.py:392"]))

add(ev("field-verl-gptmodel-kwargs", "provider-review", "PV-verl-model_initializer-74",
       "Our initializer (volcengine/verl@b178a3cd56f5, verl/models/mcore/model_initializer.py:74) builds\n\n```python\nGPTModel(config=tfconfig, "
       "transformer_layer_spec=spec, vocab_size=V, max_sequence_length=S, pre_process=pre, post_process=post,\n"
       "         share_embeddings_and_output_weights=tie, position_embedding_type='rope', rotary_base=theta,\n"
       "         **rope_scaling_args, mtp_block_spec=mtp_spec, **extra)\n```\n\nAre all the named keywords accepted by GPTModel on "
       "megatron-core 0.13.1 and on 0.19.2?",
       "Yes: every named keyword (config, transformer_layer_spec, vocab_size, max_sequence_length, pre_process, post_process, "
       "share_embeddings_and_output_weights, position_embedding_type, rotary_base, mtp_block_spec) is a GPTModel parameter on "
       "both releases; only the **-expanded dicts cannot be checked statically. 0.19.2 adds pg_collection, which this call "
       "does not pass (it then uses the global parallel_state groups).",
       ["Says all named keywords are accepted on both releases", "Does not invent a rejected keyword"],
       [("rejected_named_keywords", "comma-separated list, or none")],
       [text("rejected_named_keywords", "none", 0, None)],
       [fact("no pg_collection: the global groups", src("if pg_collection is None:\n            pg_collection = ProcessGroupCollection.use_mpu_process_groups()",
                                                        "megatron/core/models/common/language_module/language_module.py"), True),
        fact("0.19.2", {"kind": "rejected_kwargs", "object": "megatron.core.models.gpt.gpt_model:GPTModel.__init__",
                        "keywords": ["config", "transformer_layer_spec", "vocab_size", "max_sequence_length", "pre_process", "post_process",
                                     "share_embeddings_and_output_weights", "position_embedding_type", "rotary_base", "mtp_block_spec"]}, []),
        fact("0.13.1", {"kind": "rejected_kwargs", "release": "0.13.1", "object": "megatron.core.models.gpt.gpt_model:GPTModel.__init__",
                        "keywords": ["config", "transformer_layer_spec", "vocab_size", "max_sequence_length", "pre_process", "post_process",
                                     "share_embeddings_and_output_weights", "position_embedding_type", "rotary_base", "mtp_block_spec"]}, [])],
       ["checked the named keywords against GPTModel.__init__ in .venv-0131 and .venv",
        "call site volcengine/verl@b178a3cd56f5 (see evals/field_material.json):verl/models/mcore/model_initializer.py:74"]))

# ------------------------------------------------------------------ negative control

add(ev("field-neg-autobridge-config", "out-of-scope", "census:NVIDIA-NeMo/Megatron-Bridge/issues/1288",
       "`AutoBridge(Qwen3Config.from_pretrained(...)).to_megatron_provider()` throws because the bridge expects a "
       "PreTrainedCausalLM. How do I build a Megatron provider from just an HF config with Megatron-Bridge?",
       "This is Megatron-Bridge's HF conversion API, not Megatron Core: route to the checkpointing-and-conversion skill (or say "
       "this skill does not cover it) rather than answering from Megatron Core's APIs.",
       ["[with skill] Routes to checkpointing-and-conversion, or says this skill does not cover Megatron-Bridge's conversion API",
        "Does not present invented Megatron-Bridge API calls as verified"],
       [], [{"kind": "regex", "pattern": "checkpointing-and-conversion", "must": True, "expectation": 0, "applies_to": "with_skill"}], [],
       ["SKILL.md routes HF conversion to checkpointing-and-conversion; thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/1288"]))

# ------------------------------------------------------------------ published layouts (layout route)


def _row(source: str) -> dict:
    tables = json.loads((HERE / "field_material.json").read_text())["published_layouts"]
    return next(r for r in tables["megatron_bridge_performance_summary"] if r["source"] == source)


def _cells(row):
    names = {"gpus": "#-GPUs", "tp": "TP", "pp": "PP", "cp": "CP", "gbs": "GBS", "mbs": "MBS", "tok": "Tokens / sec / GPU",
             "seq": "Sequence Length", "ep": "EP"}
    return {k: cell(row, f) for k, f in names.items()}


def _int(row, field):
    return int(str(_row(row)[field]).replace(",", ""))


MICRO = "megatron.core.num_microbatches_calculator:ConstantNumMicroBatchesCalculator"


def published(name, row, model_text, extra_q="", extra_keys=(), extra_checks=(), extra_exp=(), expected_extra=""):
    """A published layout: DP, microbatches (Megatron's own calculator) and step time from the table's throughput."""
    c = _cells(row)
    gpus, tp, pp, cp, gbs, mbs, seq, tok = (_int(row, f) for f in ("#-GPUs", "TP", "PP", "CP", "GBS", "MBS", "Sequence Length", "Tokens / sec / GPU"))
    dp = gpus // (tp * pp * cp)
    micro = {"kind": "call", "object": MICRO, "attr": "num_micro_batches",
             "kwargs": {"global_batch_size": gbs, "micro_batch_size": mbs, "data_parallel_size": dp, "decrease_batch_size_if_needed": False, "rank": 1}}
    step = round(gbs * seq / (tok * gpus), 2)
    keys = [("data_parallel_size", "integer"), ("num_microbatches", "integer"), ("step_time_seconds", "number")] + list(extra_keys)
    checks = [num("data_parallel_size", dp, 0, arith("gpus // (tp * pp * cp)", **{k: c[k] for k in ("gpus", "tp", "pp", "cp")})),
              num("num_microbatches", gbs // (mbs * dp), 1, micro),
              num("step_time_seconds", step, 2, arith("gbs * seq / (tok * gpus)", **{k: c[k] for k in ("gbs", "seq", "tok", "gpus")}),
                  tolerance=round(0.02 * step, 2))] + list(extra_checks)
    return ev(name, "layout", "published:" + row,
              f"Megatron-Bridge's published performance table lists {model_text}. For this layout, what are the data-parallel size, "
              f"the number of microbatches per global batch on each data-parallel rank, and the time per training step implied by the "
              f"throughput?{extra_q}",
              f"DP = {gpus}/({tp}*{pp}*{cp}) = {dp}; microbatches = {gbs}/({mbs}*{dp}) = {gbs // (mbs * dp)} (Megatron's "
              f"ConstantNumMicroBatchesCalculator); step time = {gbs}*{seq}/({tok}*{gpus}) = {step} s." + expected_extra,
              ["Gives the data-parallel size", "Gives the number of microbatches", "Gives the step time implied by the published throughput"] + list(extra_exp),
              keys, checks,
              [fact("DP rule in 0.19.2", src("data_parallel_size: int = world_size // model_size"), True)],
              [f"published table {row}", "ran ConstantNumMicroBatchesCalculator in .venv (0.19.2); DP rule read in parallel_state.py"])


def _edp(row, etp=1):
    gpus, pp, ep = (_int(row, f) for f in ("#-GPUs", "PP", "EP"))
    return gpus // (etp * ep * pp)


R405 = ARCHIVE + "106"
add(published("field-pub-llama405b-h100", R405, "Llama 3.1 405B pre-training on 1024 DGX-H100 GPUs, FP8, GBS 1536, MBS 1, sequence "
              "length 8192, TP 8, PP 8, CP 2, VP 8, at 326 tokens/s/GPU"))
add(published("field-pub-qwen235b-gb300", SUMMARY + "73", "Qwen3 235B-A22B pre-training on 256 DGX-GB300 GPUs, MXFP8, GBS 8192, MBS 2, "
              "sequence 4096, TP 1, PP 4, CP 1, VP 12, EP 32, at 8816 tokens/s/GPU",
              " Also: with expert tensor parallel 1, what is the expert data-parallel size?",
              [("expert_data_parallel_size", "integer")],
              [num("expert_data_parallel_size", _edp(SUMMARY + "73"), 3, arith("gpus // (1 * ep * pp)", **{k: _cells(SUMMARY + "73")[k] for k in ("gpus", "ep", "pp")}))],
              ["Gives the expert data-parallel size GPUs/(ETP*EP*PP)"], f" Expert DP = 256/(1*32*4) = {_edp(SUMMARY + '73')}."))
add(published("field-pub-qwen235b-gb200", SUMMARY + "74", "Qwen3 235B-A22B pre-training on 256 DGX-GB200 GPUs, MXFP8, GBS 8192, MBS 1, "
              "sequence 4096, TP 1, PP 8, CP 1, VP 3, EP 32, at 7280 tokens/s/GPU"))
add(published("field-pub-deepseekv3-gb300", SUMMARY + "45", "DeepSeek-V3 pre-training on 256 DGX-GB300 GPUs, MXFP8, GBS 4096, MBS 1, "
              "sequence 4096, TP 1, PP 2, CP 1, VP 8, EP 32, at 6288 tokens/s/GPU",
              " With expert tensor parallel 1, what is the expert data-parallel size?",
              [("expert_data_parallel_size", "integer")],
              [num("expert_data_parallel_size", _edp(SUMMARY + "45"), 3, arith("gpus // (1 * ep * pp)", **{k: _cells(SUMMARY + "45")[k] for k in ("gpus", "ep", "pp")}))],
              ["Gives the expert data-parallel size"], f" Expert DP = 256/(32*2) = {_edp(SUMMARY + '45')}."))
add(published("field-pub-gptoss-gb200", SUMMARY + "60", "GPT-OSS 120B pre-training on 64 DGX-GB200 GPUs, MXFP8, GBS 1280, MBS 4, "
              "sequence 4096, TP 1, PP 1, CP 1, EP 64, at 28672 tokens/s/GPU"))
add(published("field-pub-kimi-gb300", ARCHIVE + "145", "Kimi-K2 pre-training on 256 DGX-GB300 GPUs, MXFP8, GBS 4096, MBS 2, sequence 4096, "
              "TP 1, PP 4, CP 1, VP 4, EP 64, at 5372 tokens/s/GPU",
              " With expert tensor parallel 1, what is the expert data-parallel size?",
              [("expert_data_parallel_size", "integer")],
              [num("expert_data_parallel_size", _edp(ARCHIVE + "145"), 3, arith("gpus // (1 * ep * pp)", **{k: _cells(ARCHIVE + "145")[k] for k in ("gpus", "ep", "pp")}))],
              ["Gives the expert data-parallel size"], f" Expert DP = 256/(64*4) = {_edp(ARCHIVE + '145')}."))
add(published("field-pub-llama70b-h100", ARCHIVE + "179", "Llama 3 70B on 32 DGX-H100 GPUs, FP8, GBS 32, MBS 1, sequence 4096, TP 4, "
              "PP 4, CP 1, VP 5, at 1638 tokens/s/GPU"))
add(published("field-pub-nemotron-super-gb200", SUMMARY + "94", "Nemotron 3 Super pre-training on 64 DGX-GB200 GPUs, MXFP8, GBS 512, "
              "MBS 1, sequence 8192, TP 2, PP 1, CP 1, EP 64, at 7040 tokens/s/GPU",
              " The table does not list expert tensor parallelism: could this layout run with ETP left unset (= TP) on 64 GPUs?",
              [("runs_with_etp_unset", "yes or no")],
              [text("runs_with_etp_unset", "no", 3, None)],
              ["Says ETP unset would make the expert grid 2*64 = 128 > 64 GPUs (world not divisible), so ETP must be 1"],
              " With ETP unset (= TP = 2) the expert grid would be 2*64*1 = 128, which does not divide 64 GPUs; the recipe must set ETP = 1."))
EVAL_SPECS[-1]["facts"] += [fact("64 GPUs are not a multiple of the expert grid with ETP = TP = 2",
                                 arith("gpus % (2 * ep * pp)", **{k: _cells(SUMMARY + "94")[k] for k in ("gpus", "ep", "pp")}), 64),
                            fact("ETP default", src("if expert_tensor_parallel_size is None:\n        expert_tensor_parallel_size = tensor_model_parallel_size"), True)]
add(published("field-pub-qwen30b-h100", ARCHIVE + "132", "Qwen3 30B-A3B pre-training on 16 DGX-H100 GPUs, FP8, GBS 1024, MBS 1, "
              "sequence 4096, TP 1, PP 1, CP 1, EP 16, at 8826 tokens/s/GPU"))


def ptdp(name, row, extra=""):
    """PTD-P Table 2 (Narayanan et al. 2021): microbatches and the 1F1B bubble fraction (p-1)/m."""
    r = next(x for x in json.loads((HERE / "field_material.json").read_text())["published_layouts"]["ptdp_table2"] if x["name"] == row)
    dp, m = r["dp"], r["global_batch_size"] // (r["micro_batch_size"] * r["dp"])
    agg = round(r["reported_tflops_per_gpu"] * r["world_size"] / 1000, 1)
    return ev(name, "layout", "published:" + row,
              f"The PTD-P paper (Narayanan et al. 2021, Table 2) trains {r['name'].split('Table 2 ')[1]} with TP {r['tp']}, PP {r['pp']}, "
              f"data-parallel {dp}, micro-batch 1 and global batch {r['global_batch_size']}, reporting {r['reported_tflops_per_gpu']} TFLOP/s per GPU. "
              f"How many microbatches does each pipeline run per batch, what is the pipeline bubble fraction of the (non-interleaved) 1F1B "
              f"schedule, and what aggregate PFLOP/s does that throughput mean?{extra}",
              f"m = {r['global_batch_size']}/(1*{dp}) = {m}; bubble = (p-1)/m = {r['pp'] - 1}/{m} = {round((r['pp'] - 1) / m, 4)}; "
              f"aggregate = {r['reported_tflops_per_gpu']} * {r['world_size']} / 1000 = {agg} PFLOP/s.",
              ["Gives m", "Gives the bubble fraction (p-1)/m", "Gives the aggregate PFLOP/s"],
              [("num_microbatches", "integer"), ("bubble_fraction", "number"), ("aggregate_pflops", "number")],
              [num("num_microbatches", m, 0, {"kind": "call", "object": MICRO, "attr": "num_micro_batches",
                                              "kwargs": {"global_batch_size": r["global_batch_size"], "micro_batch_size": 1, "data_parallel_size": dp,
                                                         "decrease_batch_size_if_needed": False, "rank": 1}}),
               num("bubble_fraction", round((r["pp"] - 1) / m, 4), 1, {"kind": "bubble", "pp": r["pp"], "vpp": 1, "m": m}, tolerance=0.002),
               num("aggregate_pflops", agg, 2, arith("t * n / 1000", t=cell(row, "reported_tflops_per_gpu"), n=cell(row, "world_size")), tolerance=0.5)],
              [], [f"published: {r['source'][:120]}", "ran ConstantNumMicroBatchesCalculator in .venv (0.19.2); bubble (p-1)/m from the same paper"])


add(ptdp("field-pub-ptdp-gpt3-1536", "PTD-P Table 2 GPT-3 174.6B @ 1536 GPUs"))
add(ptdp("field-pub-ptdp-530b-2240", "PTD-P Table 2 GPT 529.6B @ 2240 GPUs"))

add(ev("field-uneven-last-stage-61", "layout", "TH-MILES1102",
       "DeepSeek-R1 has 61 decoder layers. With PP=4 and `--decoder-last-pipeline-num-layers 13` (num_layers_in_last_pipeline_stage=13) "
       "on megatron-core 0.19.2, how many decoder layers does each pipeline rank build?",
       "The last stage takes 13; the remaining 48 are split evenly over the other 3 ranks: 16, 16, 16, 13 (the extra layers sit on "
       "the first three stages, not the last).",
       ["Gives 16, 16, 16, 13", "Says the last stage has fewer layers, not more"],
       [("layers_per_pp_rank", "comma-separated list")],
       [lst("layers_per_pp_rank", [16, 16, 16, 13], 0, {"kind": "layers_per_rank", "cls": TC,
                                                        "kwargs": {"num_layers": 61, "hidden_size": 64, "num_attention_heads": 4, "pipeline_model_parallel_size": 4,
                                                                   "num_layers_in_last_pipeline_stage": 13, "pipeline_dtype": "torch.bfloat16"}})],
       [], ["ran get_num_layers_to_build(config, vp_stage=None, pp_rank=r) for r in 0..3 in .venv (0.19.2)",
            "PR https://github.com/radixark/miles/pull/1102 (review comment: 16, 16, 16, 13)"]))

add(ev("field-min-gpus-dense-moe", "layout", "TH-MB3509",
       "A docs page says the minimum GPU count for dense + MoE parallelism is `PP * max(TP * CP, EP * ETP)`. For TP=4, CP=1, PP=1, "
       "EP=6, ETP=1, what does that formula give, and what is the smallest world size megatron-core 0.19.2's initialize_model_parallel "
       "actually accepts?",
       "The formula gives max(4, 6) = 6, but Megatron requires the world size to be divisible by both TP*PP*CP (4) and "
       "ETP*EP*PP (6), so the smallest accepted world is lcm(4, 6) = 12. The max formula only holds when one grid divides the other.",
       ["Says the formula gives 6", "Says Megatron needs divisibility by both grids", "Gives 12"],
       [("formula_value", "integer"), ("smallest_world_size", "integer")],
       [num("formula_value", 6, 0, arith("pp * max(tp * cp, ep * etp)", pp=1, tp=4, cp=1, ep=6, etp=1)),
        num("smallest_world_size", 12, 2, arith("lcm(tp * pp * cp, etp * ep * pp)", tp=4, pp=1, cp=1, etp=1, ep=6))],
       [fact("dense check", src('raise RuntimeError(f"world_size ({world_size}) is not divisible by {model_size}")'), True),
        fact("expert check", src("is not divisible by expert_tensor_model_pipeline_parallel size"), True),
        fact("Megatron on 6 ranks", fw(6, tensor_model_parallel_size=4, expert_model_parallel_size=6, expert_tensor_parallel_size=1),
             "RuntimeError: world_size (6) is not divisible by 4"),
        fact("Megatron on 12 ranks", fw(12, {"dp": "get_data_parallel_world_size", "edp": "get_expert_data_parallel_world_size"},
                                        tensor_model_parallel_size=4, expert_model_parallel_size=6, expert_tensor_parallel_size=1), {"dp": 3, "edp": 2})],
       ["read both world-size checks of initialize_model_parallel in the installed 0.19.2",
        "PR https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3509 (the docs formula)"]))

add(ev("field-etp-unset-mesh", "layout", "TH-MB4007",
       "A MoE recipe sets TP=2 and EP=4 but leaves expert_tensor_parallel_size unset. On megatron-core 0.19.2, what ETP is used, how "
       "many GPUs does one expert-parallel x expert-tensor-parallel mesh span, and what is it with ETP=1?",
       "Unset ETP is resolved to the tensor-parallel size, 2, so the expert mesh spans EP*ETP = 8 GPUs; with ETP=1 it spans 4.",
       ["Says unset ETP becomes TP = 2", "Gives 8 GPUs", "Gives 4 GPUs with ETP=1"],
       [("effective_etp", "integer"), ("expert_mesh_gpus", "integer"), ("expert_mesh_gpus_etp1", "integer")],
       [num("effective_etp", 2, 0, {"kind": "config", "cls": TC, "kwargs": dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4, sequence_parallel=True),
                                    "attr": "expert_tensor_parallel_size"}),
        num("expert_mesh_gpus", 8, 1, arith("ep * etp", ep=4, etp=2)), num("expert_mesh_gpus_etp1", 4, 2, arith("ep * etp", ep=4, etp=1))],
       [fact("parallel_state default", src("if expert_tensor_parallel_size is None:\n        expert_tensor_parallel_size = tensor_model_parallel_size"), True)],
       ["ran TransformerConfig(TP=2, EP=4) in .venv (0.19.2): expert_tensor_parallel_size == 2; read initialize_model_parallel",
        "thread https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/4007"]))


# ------------------------------------------------------------------ common config errors (PR-5768 addendum)

T2 = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4}


def config_error(name, material, prompt, message, expected_output, expectations, keys, checks, kwargs, extra_facts=(), release=None, user_release=None):
    facts = [fact("the message on " + (release or "0.19.2"), err(TC, kwargs, release), message)] + list(extra_facts)
    return ev(name, "errors", material, prompt, expected_output, expectations, keys, checks, facts,
              [f"ran TransformerConfig({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) in {'.venv-0131' if release == '0.13.1' else '.venv (0.19.2)'}",
               "error list of PR https://github.com/NVIDIA/Megatron-LM/pull/5768 (frozen addendum)"], user_release=user_release)


add(config_error("field-sp-without-tp-0131", "PR-5768",
    "On megatron-core 0.13.1 our single-GPU debug run fails with `ValueError: Can not use sequence paralllelism without tensor parallelism`. "
    "We are about to move to 0.19.2: will the same settings fail there, with what message, and what is the fix?",
    "ValueError: Can not use sequence paralllelism without tensor parallelism",
    "Yes. sequence_parallel=True needs tensor_model_parallel_size > 1; 0.19.2 raises ValueError: Cannot use sequence parallelism "
    "without tensor parallelism (0.13.1's message has the typo 'paralllelism'). Turn sequence_parallel off when TP=1.",
    ["Says 0.19.2 also rejects sequence parallelism with TP=1", "Gives the 0.19.2 wording (or says it is the same check with corrected spelling)", "Says to disable sequence_parallel for TP=1"],
    [("fails_on_0192", "yes or no")],
    [text("fails_on_0192", "yes", 0, {"kind": "config_ok_negated", "cls": TC, "kwargs": dict(T2, sequence_parallel=True)})],
    dict(T2, sequence_parallel=True), release="0.13.1", user_release="0.13.1",
    extra_facts=[fact("0.19.2 message", err(TC, dict(T2, sequence_parallel=True)), "ValueError: Cannot use sequence parallelism without tensor parallelism")]))

add(config_error("field-heads-not-multiple-tp", "PR-5768",
    "`ValueError: num_attention_heads (4) must be a multiple of tensor_model_parallel_size (3).` We have 4 heads and wanted TP=3 "
    "on 3 GPUs. Which TP sizes are valid for 4 heads, and is this message the same on 0.13.1 and 0.19.2?",
    "ValueError: num_attention_heads (4) must be a multiple of tensor_model_parallel_size (3).",
    "Heads are split across TP ranks, so TP must divide num_attention_heads: 1, 2 or 4. The message is identical on 0.13.1 and 0.19.2.",
    ["Says TP must divide the number of heads", "Lists 1, 2, 4", "Says the message is the same on both releases"],
    [("valid_tp_sizes", "comma-separated list")],
    [lst("valid_tp_sizes", [1, 2, 4], 1, None, ordered=False)],
    dict(T2, tensor_model_parallel_size=3),
    extra_facts=[fact("0.13.1 same", err(TC, dict(T2, tensor_model_parallel_size=3), "0.13.1"),
                      "ValueError: num_attention_heads (4) must be a multiple of tensor_model_parallel_size (3)."),
                 fact("TP=4 constructs", err(TC, dict(T2, tensor_model_parallel_size=4)), "OK"),
                 fact("TP=2 constructs", err(TC, dict(T2, tensor_model_parallel_size=2)), "OK")]))

add(config_error("field-ep-without-experts", "PR-5768",
    "`ValueError: num_moe_experts must be non None to use expert-parallel.` We set `--expert-model-parallel-size 2` on a dense model "
    "config. What does Megatron want, and does 0.13.1 say the same?",
    "ValueError: num_moe_experts must be non None to use expert-parallel.",
    "expert_model_parallel_size > 1 needs a MoE model (num_moe_experts set); for a dense model keep EP=1. 0.13.1 raises the same message.",
    ["Says EP>1 requires num_moe_experts (a MoE model)", "Says to keep EP=1 for dense models", "Says 0.13.1 gives the same message"],
    [],
    [{"kind": "regex", "pattern": r"(?i)(expert[-_ ]model[-_ ]parallel[-_ ]size|\bEP\b)\s*(=|to|of)?\s*1|num_moe_experts", "must": True, "expectation": 1, "applies_to": "both"}],
    dict(T2, expert_model_parallel_size=2),
    extra_facts=[fact("0.13.1 same", err(TC, dict(T2, expert_model_parallel_size=2), "0.13.1"), "ValueError: num_moe_experts must be non None to use expert-parallel.")]))

add(config_error("field-fp16-bf16", "PR-5768",
    "Config construction fails with `ValueError: Only one of self.fp16: True and self.bf16 True should be True.` What did we set and what "
    "should we set for bf16 training?",
    "ValueError: Only one of self.fp16: True and self.bf16 True should be True.",
    "Both fp16=True and bf16=True were passed; they are exclusive. For bf16 training set bf16=True and fp16=False (params_dtype "
    "torch.bfloat16).",
    ["Says both fp16 and bf16 were True and they are exclusive", "Says to keep only bf16=True"],
    [("fp16", "true or false"), ("bf16", "true or false")],
    [text("fp16", "false", 1, None), text("bf16", "true", 1, None)],
    dict(T2, fp16=True, bf16=True),
    extra_facts=[fact("bf16 only constructs", err(TC, dict(T2, bf16=True)), "OK")]))

add(config_error("field-pipeline-dtype", "PR-5768",
    "With `pipeline_model_parallel_size=2` our TransformerConfig fails: `ValueError: When using pipeline parallelism, pipeline_dtype must "
    "be specified`. What is pipeline_dtype for and what do we set for bf16 training?",
    "ValueError: When using pipeline parallelism, pipeline_dtype must be specified",
    "pipeline_dtype is the dtype of the activations sent between pipeline stages (p2p buffers); set it to the training dtype, "
    "torch.bfloat16 for bf16. The same check exists in 0.13.1.",
    ["Says pipeline_dtype is the dtype of tensors communicated between stages", "Says to set torch.bfloat16"],
    [("pipeline_dtype", "torch dtype")],
    [text("pipeline_dtype", "torch.bfloat16", 1, None)],
    dict(T2, pipeline_model_parallel_size=2),
    extra_facts=[fact("bf16 constructs", err(TC, dict(T2, pipeline_model_parallel_size=2, pipeline_dtype="torch.bfloat16")), "OK"),
                 fact("what pipeline_dtype is", src('pipeline_dtype: torch.dtype = None\n    """dtype used in p2p communication, usually params_dtype"""',
                                                    "megatron/core/model_parallel_config.py"), True),
                 fact("0.13.1 same", err(TC, dict(T2, pipeline_model_parallel_size=2), "0.13.1"), "ValueError: When using pipeline parallelism, pipeline_dtype must be specified")]))

add(ev("field-interleaved-pp1", "errors", "PR-5768",
       "`RuntimeError: pipeline-model-parallel size should be greater than 1 with interleaved schedule` from initialize_model_parallel. "
       "We passed `--num-layers-per-virtual-pipeline-stage` with PP=1. What do we change?",
       "The interleaved (virtual pipeline) schedule needs PP > 1: either drop the virtual-pipeline setting (and "
       "--num-layers-per-virtual-pipeline-stage) for PP=1, or use PP >= 2.",
       ["Says a virtual pipeline size is only valid with PP > 1", "Says to drop the virtual pipeline setting or raise PP"],
       [("min_pipeline_size_for_interleaving", "integer")],
       [num("min_pipeline_size_for_interleaving", 2, 0, None)],
       [fact("message in 0.19.2", src('"pipeline-model-parallel size should be greater than 1 with interleaved schedule"'), True),
        fact("condition", src("if not pipeline_model_parallel_size > 1:"), True),
        fact("Megatron on 4 ranks", fw(4, virtual_pipeline_model_parallel_size=2), "RuntimeError: pipeline-model-parallel size should be greater than 1 with interleaved schedule")],
       ["read initialize_model_parallel in the installed 0.19.2 parallel_state.py", "error list of PR https://github.com/NVIDIA/Megatron-LM/pull/5768"]))

add(ev("field-world-not-divisible-dense", "errors", "PR-5768",
       "6 GPUs, `--tensor-model-parallel-size 4`: `RuntimeError: world_size (6) is not divisible by 4`. Which TP x PP x CP products can 6 GPUs use?",
       "initialize_model_parallel needs world_size divisible by TP*PP*CP; with 6 GPUs the product must be 1, 2, 3 or 6 (for example "
       "TP=2 with DP=3, or TP=2 PP=3).",
       ["Says TP*PP*CP must divide the world size", "Lists 1, 2, 3, 6"],
       [("valid_model_parallel_sizes", "comma-separated list")],
       [lst("valid_model_parallel_sizes", [1, 2, 3, 6], 1, None, ordered=False)],
       [fact("message in 0.19.2", src('raise RuntimeError(f"world_size ({world_size}) is not divisible by {model_size}")'), True),
        fact("Megatron on 6 ranks, TP=4", fw(6, tensor_model_parallel_size=4), "RuntimeError: world_size (6) is not divisible by 4"),
        fact("Megatron on 6 ranks, TP=2 PP=3", fw(6, {"dp": "get_data_parallel_world_size"}, tensor_model_parallel_size=2, pipeline_model_parallel_size=3), {"dp": 1})],
       ["read initialize_model_parallel in the installed 0.19.2 (model_size = TP*PP*CP*gtp_remat)", "error list of PR https://github.com/NVIDIA/Megatron-LM/pull/5768"]))

add(ev("field-layers-not-divisible-pp", "errors", "upgrade-layers",
       "GPT with 30 layers, PP=4, no uneven-stage flags, megatron-core 0.19.2. TransformerConfig constructs, but building the model fails. "
       "With what message, and which setting makes 30 layers work on PP=4?",
       "get_num_layers_to_build asserts: num_layers=30 should be divisible by config.pipeline_model_parallel_size=4. Use uneven "
       "stages (num_layers_in_first_pipeline_stage / num_layers_in_last_pipeline_stage, e.g. first=6 so the other three get 8 each) "
       "or a pipeline_model_parallel_layout.",
       ["Quotes the divisibility assertion (30 not divisible by 4) raised when building layers", "Says TransformerConfig itself accepts it",
        "Offers uneven first/last stage sizes or a layout"],
       # The ask named no stage until 2026-12-02: answers that chose first=last=7 read "first6" as
       # "the first six ranks" (runs 2026-12-02-field-a/b); the key's meaning is now in the ask.
       [("config_constructs", "yes or no"),
        ("layers_per_rank_first6", "layers per pipeline rank with num_layers_in_first_pipeline_stage=6, comma-separated")],
       [text("config_constructs", "yes", 1, {"kind": "config_ok", "cls": TC, "kwargs": dict(T2, num_layers=30, pipeline_model_parallel_size=4, pipeline_dtype="torch.bfloat16")}),
        lst("layers_per_rank_first6", [6, 8, 8, 8], 2, {"kind": "layers_per_rank", "cls": TC, "kwargs": dict(T2, num_layers=30, pipeline_model_parallel_size=4,
                                                                                                         pipeline_dtype="torch.bfloat16", num_layers_in_first_pipeline_stage=6)})],
       [fact("the assertion", {"kind": "layers_per_rank_error", "cls": TC, "kwargs": dict(T2, num_layers=30, pipeline_model_parallel_size=4, pipeline_dtype="torch.bfloat16")},
             "AssertionError: num_layers=30 should be divisible by config.pipeline_model_parallel_size=4")],
       ["ran get_num_layers_to_build for each pp_rank in .venv (0.19.2) with and without num_layers_in_first_pipeline_stage=6"]))

add(ev("field-vp-not-divisible", "errors", "upgrade-layers",
       "8 layers, PP=2, virtual pipeline 3 on megatron-core 0.19.2: the model build fails. Why, and which virtual sizes work for 8 layers on PP=2?",
       "Each pipeline rank has 8/2 = 4 layers, which must split evenly into the virtual stages: num_layers_per_pipeline_rank 4 should "
       "be divisible by vp_size 3. VP 1, 2 or 4 work.",
       ["Says 4 layers per rank are not divisible by 3", "Lists 2 and 4 (and 1) as working virtual sizes"],
       [("layers_per_rank", "integer"),
        # The ask did not say whether 1 counts until 2026-12-02 (Megatron-LM turns VP=1 into no
        # interleaving); both with-skill answers of that day's runs left it out and failed the check.
        ("valid_vp_sizes", "every virtual size for which the build succeeds, 1 included, comma-separated")],
       [num("layers_per_rank", 4, 0, arith("8 // 2")), lst("valid_vp_sizes", [1, 2, 4], 1, None, ordered=False)],
       [fact("the assertion", {"kind": "layers_per_rank_error", "cls": TC, "kwargs": dict(T2, num_layers=8, pipeline_model_parallel_size=2,
                                                                                       virtual_pipeline_model_parallel_size=3, pipeline_dtype="torch.bfloat16")},
             {"contains": "num_layers_per_pipeline_rank 4"}),
        fact("VP 2 builds", {"kind": "layers_per_rank", "cls": TC, "kwargs": dict(T2, num_layers=8, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2,
                                                                                  pipeline_dtype="torch.bfloat16")}, [2, 2]),
        fact("VP 4 builds", {"kind": "layers_per_rank", "cls": TC, "kwargs": dict(T2, num_layers=8, pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=4,
                                                                                  pipeline_dtype="torch.bfloat16")}, [1, 1])],
       ["ran get_num_layers_to_build in .venv (0.19.2) for VP 2, 3, 4"]))

# ------------------------------------------------------------------ more release differences

add(ev("field-num-layers-to-build-pp-rank", "versions", "upgrade-get_num_layers_to_build",
       "Our code calls `get_num_layers_to_build(config, vp_stage)` (megatron-core 0.13.1). On 0.19.2 is there a new parameter, and is "
       "the old call still valid?",
       "0.19.2 adds an optional pp_rank parameter (default None: the current pipeline rank from parallel_state); the old "
       "two-argument call still works.",
       ["Names pp_rank as the new parameter", "Says it is optional (default None), so the old call still works"],
       [("new_parameter", "name"), ("old_call_valid", "yes or no")],
       [text("new_parameter", "pp_rank", 0, {"kind": "param_at", "object": "megatron.core.transformer.transformer_block:get_num_layers_to_build", "index": 2}),
        text("old_call_valid", "yes", 1, None)],
       [fact("default None", {"kind": "signature", "object": "megatron.core.transformer.transformer_block:get_num_layers_to_build", "param": "pp_rank"}, "None"),
        fact("0.13.1 had two parameters", {"kind": "rejected_kwargs", "release": "0.13.1", "object": "megatron.core.transformer.transformer_block:get_num_layers_to_build",
                                           "keywords": ["pp_rank"]}, ["pp_rank"])],
       ["read the signature in .venv (0.19.2) and .venv-0131"], user_release="0.13.1"))

add(ev("field-mamba-wrapper-0192", "versions", "upgrade-HybridModel",
       "On megatron-core 0.13.1 `MambaModel.__init__` took (config, mamba_stack_spec, vocab_size, max_sequence_length, ..., "
       "hybrid_override_pattern, ...). What is MambaModel's signature on 0.19.2 and which class does the work now?",
       "In 0.19.2 MambaModel is a thin backward-compatible wrapper: MambaModel(*args, mamba_stack_spec=..., **kwargs) forwarding to "
       "HybridModel, whose spec parameter is hybrid_stack_spec and which takes hybrid_layer_pattern (hybrid_override_pattern is the "
       "deprecated name).",
       ["Says MambaModel takes *args/**kwargs with mamba_stack_spec keyword-only and forwards to HybridModel", "Names hybrid_stack_spec / hybrid_layer_pattern on HybridModel"],
       [("mamba_stack_spec_kind", "positional or keyword-only"), ("hybridmodel_pattern_param", "name")],
       [text("mamba_stack_spec_kind", "keyword-only", 0, None),
        text("hybridmodel_pattern_param", "hybrid_layer_pattern", 1, {"kind": "param_at", "object": "megatron.core.models.hybrid.hybrid_model:HybridModel.__init__", "index": 4})],
       [fact("hybrid_override_pattern deprecated", src("hybrid_override_pattern (str, optional): Deprecated. Use hybrid_layer_pattern instead.",
                                                       "megatron/core/models/hybrid/hybrid_model.py"), True),
        fact("HybridModel spec param", {"kind": "param_at", "object": "megatron.core.models.hybrid.hybrid_model:HybridModel.__init__", "index": 1}, "hybrid_stack_spec"),
        fact("MambaModel accepts anything by keyword", {"kind": "rejected_kwargs", "object": "megatron.core.models.mamba.mamba_model:MambaModel.__init__",
                                                      "keywords": ["hybrid_override_pattern", "vocab_size"]}, [])],
       ["read MambaModel.__init__ and HybridModel.__init__ signatures in .venv (0.19.2) and .venv-0131"], user_release="0.13.1"))


# ------------------------------------------------------------------ more census threads (addendum)

GPT = "megatron.core.models.gpt.gpt_model:GPTModel"

add(ev("field-packed-seq-tp-reduce-scatter", "errors", "TH-RL2110",
       "RL training with TP=2, PP=2, sequence parallel and sequence packing fails in the embedding:\n\n```\n"
       "  File \"megatron/core/tensor_parallel/layers.py\", line 297, in forward\n    output = reduce_scatter_to_sequence_parallel_region(\n"
       "  File \"megatron/core/tensor_parallel/mappings.py\", line 365, in forward\n    return _reduce_scatter_along_first_dim(\n```\n\n"
       "Our packed batch is 4097 tokens long. What is being checked, and how long must the packed sequence be (no context parallelism)?",
       "With sequence parallelism the word-embedding output is reduce-scattered along its first (sequence) dimension, which "
       "Megatron asserts is divisible by the tensor-parallel size ('First dimension of the tensor should be divisible by tensor "
       "parallel size'); 4097 is odd, so pad the packed sequence to a multiple of TP = 2, i.e. 4098.",
       ["Says the reduce-scatter splits the sequence dimension across the TP ranks", "Says the packed length must be a multiple of TP (2): pad 4097 to 4098"],
       [("padded_length", "integer")],
       [num("padded_length", 4098, 1, arith("ceil(n / tp) * tp", n=4097, tp=2))],
       [fact("the reduce-scatter's assertion", src("First dimension of the tensor should be divisible by tensor parallel size", "megatron/core/tensor_parallel/mappings.py"), True),
        fact("the embedding reduce-scatters with SP", src("reduce_scatter_to_sequence_parallel_region(", "megatron/core/tensor_parallel/layers.py"), True)],
       ["read megatron/core/tensor_parallel/mappings.py and layers.py of the installed 0.19.2", "thread https://github.com/NVIDIA-NeMo/RL/issues/2110"]))

add(ev("field-gptmodel-forward-mm-kwarg", "errors", "TH-ROLL457",
       "Our Qwen3.5 VL RL pipeline crashes with `TypeError: GPTModel.forward() got an unexpected keyword argument 'mm_token_type_ids'`. "
       "Does megatron-core 0.19.2's GPTModel.forward take any multimodal arguments, and what is the fix?",
       "No: GPTModel.forward (input_ids, position_ids, attention_mask, decoder_input, labels, inference_context, packed_seq_params, "
       "extra_block_kwargs, ...) has no mm_token_type_ids or other multimodal parameter. The multimodal batch keys must be consumed "
       "by the VLM wrapper (or dropped) before calling the language model's GPTModel.",
       ["Says GPTModel.forward has no mm_token_type_ids parameter", "Says the VLM wrapper must consume (or drop) the multimodal keys before GPTModel"],
       [("accepts_mm_token_type_ids", "yes or no")],
       [text("accepts_mm_token_type_ids", "no", 0, None)],
       [fact("0.19.2 GPTModel.forward rejects it", {"kind": "rejected_kwargs", "object": GPT + ".forward", "keywords": ["input_ids", "position_ids", "attention_mask", "mm_token_type_ids"]},
             ["mm_token_type_ids"])],
       ["read GPTModel.forward's signature in .venv (0.19.2)", "thread https://github.com/alibaba/ROLL/issues/457"]))

add(ev("field-etp-differs-from-tp", "errors", "TH-VERL1638",
       "A downstream RL framework reports that with EP > 1 and TP > 1 training only works when expert tensor parallel equals tensor "
       "parallel. On megatron-core 0.19.2, may ETP differ from TP? Check TP=2, EP=4, ETP=1 on 8 GPUs: does initialize_model_parallel "
       "accept it, and what are the expert data-parallel and data-parallel sizes?",
       "Yes: 0.19.2 accepts ETP != TP. With TP=2, EP=4, ETP=1 on 8 GPUs initialize_model_parallel succeeds with DP = 8/2 = 4 and "
       "expert DP = 8/(1*4*1) = 2; TransformerConfig also accepts it (MoE biases even need ETP=1).",
       ["Says ETP may differ from TP in 0.19.2", "Gives DP 4 and expert DP 2"],
       [("accepted", "yes or no"), ("data_parallel_size", "integer"), ("expert_data_parallel_size", "integer")],
       [text("accepted", "yes", 0, {"kind": "config_ok", "cls": TC, "kwargs": dict(MOE, tensor_model_parallel_size=2, expert_model_parallel_size=4,
                                                                            expert_tensor_parallel_size=1, sequence_parallel=True)}),
        num("data_parallel_size", 4, 1, None), num("expert_data_parallel_size", 2, 1, None)],
       [fact("Megatron on 8 ranks", fw(8, {"dp": "get_data_parallel_world_size", "edp": "get_expert_data_parallel_world_size", "etp": "get_expert_tensor_parallel_world_size"},
                                       tensor_model_parallel_size=2, expert_model_parallel_size=4, expert_tensor_parallel_size=1), {"dp": 4, "edp": 2, "etp": 1})],
       ["ran TransformerConfig and initialize_model_parallel (fake world of 8 ranks) in .venv (0.19.2)", "thread https://github.com/verl-project/verl/pull/1638"]))


def build() -> list[dict]:
    out = []
    for i, e in enumerate(EVAL_SPECS):
        e = {"id": FIRST_ID + i, **e}
        if e["user_release"] is None:
            del e["user_release"]
        out.append(e)
    return out


def main(argv: list[str]) -> int:
    doc = json.loads(EVALS.read_text())
    core = [e for e in doc["evals"] if e["id"] < FIRST_ID]
    new = dict(doc, evals=core + build())
    text = json.dumps(new, indent=1, ensure_ascii=False) + "\n"
    if "--check" in argv:
        same = EVALS.read_text() == text
        print("evals.json is up to date" if same else "evals.json differs from evals/field_evals.py", file=sys.stderr)
        return 0 if same else 1
    EVALS.write_text(text)
    print(f"wrote {len(new['evals'])} evals ({len(new['evals']) - len(core)} field tasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

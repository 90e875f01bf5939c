"""Megatron-LM command-line flags understood by the layout checker.

``FLAGS`` is the table: each flag is spelled, stored (``dest``) and defaulted
as ``megatron.training.arguments.add_megatron_arguments`` does in
megatron-core 0.19.2 (tests/test_layout_flags.py asks the real parser).
Where Megatron accepts any int, the checker is stricter and rejects values
that can never work (zero or negative sizes) as bad input.

Public API (stable, shared with scripts/inspector/cluster/):
  add_layout_arguments(parser, world=True)  -> parser
  parse_layout(argv)                        -> (LayoutInput, unknown_flags)
  layout_from_namespace(ns)                 -> LayoutInput
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import NamedTuple, Optional

from .errors import BadInput

# kind: "size" (int >= 1), "count" (int >= 0), "true"/"false" (store_true /
# store_false), "choice", "enum" (a choice Megatron stores as an enum member
# of that name), "float" (>= 0), "str", "freq" (int or Python list literal of 0/1).
class Flag(NamedTuple):
    option: str
    dest: str
    kind: str
    default: object = None
    choices: Optional[tuple] = None
    help: str = ""

FLAGS = (
    # Parallel sizes.
    Flag("--tensor-model-parallel-size", "tensor_model_parallel_size", "size", 1, help="TP"),
    Flag("--pipeline-model-parallel-size", "pipeline_model_parallel_size", "size", 1, help="PP"),
    Flag("--context-parallel-size", "context_parallel_size", "size", 1, help="CP"),
    Flag("--expert-model-parallel-size", "expert_model_parallel_size", "size", 1, help="EP"),
    Flag("--expert-tensor-parallel-size", "expert_tensor_parallel_size", "size", None,
         help="ETP (default: TP)"),
    Flag("--num-layers-per-virtual-pipeline-stage", "num_layers_per_virtual_pipeline_stage",
         "size", None),
    Flag("--num-virtual-stages-per-pipeline-rank", "num_virtual_stages_per_pipeline_rank",
         "size", None, help="VPP"),
    Flag("--microbatch-group-size-per-virtual-pipeline-stage",
         "microbatch_group_size_per_vp_stage", "size", None),
    Flag("--decoder-first-pipeline-num-layers", "decoder_first_pipeline_num_layers", "count", None),
    Flag("--decoder-last-pipeline-num-layers", "decoder_last_pipeline_num_layers", "count", None),
    Flag("--pipeline-model-parallel-layout", "pipeline_model_parallel_layout", "str", None,
         help='e.g. "Et*3|(tt|)*6,tL"'),
    Flag("--account-for-embedding-in-pipeline-split", "account_for_embedding_in_pipeline_split",
         "true", False),
    Flag("--account-for-loss-in-pipeline-split", "account_for_loss_in_pipeline_split",
         "true", False),
    Flag("--sequence-parallel", "sequence_parallel", "true", False),
    Flag("--use-distributed-optimizer", "use_distributed_optimizer", "true", False),
    Flag("--num-distributed-optimizer-instances", "num_distributed_optimizer_instances",
         "size", 1),
    Flag("--use-megatron-fsdp", "use_megatron_fsdp", "true", False),
    Flag("--use-torch-fsdp2", "use_torch_fsdp2", "true", False),
    Flag("--data-parallel-sharding-strategy", "data_parallel_sharding_strategy", "choice",
         "optim_grads_params", ("no_shard", "optim", "optim_grads", "optim_grads_params")),
    Flag("--ckpt-format", "ckpt_format", "choice", "torch_dist",
         ("torch", "torch_dist", "torch_dcp", "fsdp_dtensor")),
    Flag("--no-overlap-p2p-communication", "overlap_p2p_comm", "false", True),
    Flag("--no-gradient-accumulation-fusion", "gradient_accumulation_fusion", "false", True),
    # Model.
    Flag("--num-layers", "num_layers", "size", None),
    Flag("--hidden-size", "hidden_size", "size", None),
    Flag("--ffn-hidden-size", "ffn_hidden_size", "size", None),
    Flag("--num-attention-heads", "num_attention_heads", "size", None),
    Flag("--group-query-attention", "group_query_attention", "true", False),
    Flag("--num-query-groups", "num_query_groups", "size", 1),
    Flag("--kv-channels", "kv_channels", "size", None),
    Flag("--seq-length", "seq_length", "size", None),
    Flag("--max-position-embeddings", "max_position_embeddings", "size", None),
    Flag("--position-embedding-type", "position_embedding_type", "choice", "learned_absolute",
         ("learned_absolute", "rope", "yarn", "mrope", "relative", "none")),
    Flag("--vocab-size", "vocab_size", "size", None),
    Flag("--make-vocab-size-divisible-by", "make_vocab_size_divisible_by", "size", 128),
    Flag("--swiglu", "swiglu", "true", False),
    Flag("--disable-bias-linear", "add_bias_linear", "false", True),
    Flag("--untie-embeddings-and-output-weights", "untie_embeddings_and_output_weights",
         "true", False),
    Flag("--normalization", "normalization", "choice", "LayerNorm", ("LayerNorm", "RMSNorm")),
    Flag("--mtp-num-layers", "mtp_num_layers", "count", None),
    # MoE.
    Flag("--num-experts", "num_experts", "count", None),
    Flag("--moe-ffn-hidden-size", "moe_ffn_hidden_size", "size", None),
    Flag("--moe-shared-expert-intermediate-size", "moe_shared_expert_intermediate_size",
         "size", None),
    Flag("--moe-router-topk", "moe_router_topk", "size", 2),
    Flag("--moe-layer-freq", "moe_layer_freq", "freq", 1),
    # Batch, precision, recompute.
    Flag("--micro-batch-size", "micro_batch_size", "size", None),
    Flag("--global-batch-size", "global_batch_size", "size", None),
    Flag("--bf16", "bf16", "true", False),
    Flag("--fp16", "fp16", "true", False),
    Flag("--recompute-granularity", "recompute_granularity", "choice", None,
         ("full", "selective")),
    Flag("--recompute-method", "recompute_method", "choice", None, ("uniform", "block")),
    Flag("--recompute-num-layers", "recompute_num_layers", "size", None),
    Flag("--recompute-activations", "recompute_activations", "true", False),
    # Activation memory (parallel_layout.activations).
    Flag("--attention-backend", "attention_backend", "enum", "auto",
         ("flash", "fused", "unfused", "local", "auto"),
         help="flash/fused/auto keep no s x s scores; unfused/local do"),
    Flag("--transformer-impl", "transformer_impl", "choice", "transformer_engine",
         ("local", "transformer_engine", "inference_optimized")),
    Flag("--attention-dropout", "attention_dropout", "float", 0.1),
    Flag("--hidden-dropout", "hidden_dropout", "float", 0.1),
    Flag("--attention-softmax-in-fp32", "attention_softmax_in_fp32", "true", False,
         help="Megatron-LM's default is off; TransformerConfig's own default is on"),
    Flag("--apply-query-key-layer-scaling", "apply_query_key_layer_scaling", "true", False,
         help="also turns --attention-softmax-in-fp32 on (validate_args)"),
    Flag("--multi-latent-attention", "multi_latent_attention", "true", False),
    Flag("--qk-head-dim", "qk_head_dim", "size", 128),
    Flag("--qk-pos-emb-head-dim", "qk_pos_emb_head_dim", "count", 64),
    Flag("--v-head-dim", "v_head_dim", "size", 128),
    Flag("--q-lora-rank", "q_lora_rank", "size", None),
    Flag("--kv-lora-rank", "kv_lora_rank", "size", 32),
    # Flags that change a verdict, a derived size or the rank order.
    Flag("--hybrid-layer-pattern", "hybrid_layer_pattern", "str", None,
         help='hybrid model layers, "|" between pipeline segments, e.g. "M-M-|M-M*-"'),
    Flag("--hybrid-override-pattern", "hybrid_override_pattern", "str", None,
         help="deprecated alias of --hybrid-layer-pattern (from 0.17.1)"),
    Flag("--step-batch-size-schedule", "step_batch_size_schedule", "str", None,
         help='e.g. "0:768 250B:1536" (excludes --global-batch-size)'),
    Flag("--use-tp-pp-dp-mapping", "use_tp_pp_dp_mapping", "true", False,
         help="rank order tp-cp-ep-pp-dp instead of tp-cp-ep-dp-pp"),
    Flag("--overlap-moe-expert-parallel-comm", "overlap_moe_expert_parallel_comm", "true",
         False),
    Flag("--decoder-seq-length", "decoder_seq_length", "size", None),
    # --deterministic-mode's requirements (rules.deterministic_mode)
    Flag("--deterministic-mode", "deterministic_mode", "true", False),
    Flag("--tp-comm-overlap", "tp_comm_overlap", "true", False),
    Flag("--cross-entropy-loss-fusion", "cross_entropy_loss_fusion", "true", False),
    Flag("--use-flash-attn", "use_flash_attn", "true", False),
)

# Flags of the checker itself (not Megatron's): the cluster shape.
WORLD_FLAGS = (
    Flag("--world-size", "world_size", "size", None, help="total GPUs"),
    Flag("--nnodes", "nnodes", "size", None, help="nodes (with --nproc-per-node)"),
    Flag("--nproc-per-node", "nproc_per_node", "size", None, help="GPUs per node"),
    Flag("--gpus-per-node", "gpus_per_node", "size", None,
         help="GPUs per NVLink node (default: --nproc-per-node, else 8)"),
    Flag("--gpu-memory-gib", "gpu_memory_gib", "gib", None, help="memory per GPU in GiB (--plan assumes 80 when not given)"),
)

DEFAULT_GPUS_PER_NODE = 8


# Not flags: the release the rules follow (--megatron-version, resolved), the
# pasted arguments the checker did not parse (other Megatron-LM flags) and the
# entry script (--entry; None: pretrain_gpt.py, parallel_layout.entries).
EXTRA_FIELDS = (("megatron_version", None), ("other_flags", ()), ("entry", None))


def _fields():
    spec = [(f.dest, Optional[object], dataclasses.field(default=f.default))
            for f in FLAGS + WORLD_FLAGS]
    spec += [(name, Optional[object], dataclasses.field(default=default))
             for name, default in EXTRA_FIELDS]
    return spec


LayoutInput = dataclasses.make_dataclass("LayoutInput", _fields())
LayoutInput.__doc__ = (
    "Parsed layout: one attribute per flag, named like Megatron's args "
    "(``tensor_model_parallel_size``...), plus world_size, nnodes, "
    "nproc_per_node, gpus_per_node, gpu_memory_gib."
)


# Every integer flag is bounded: no real layout needs a size beyond 2**31 - 1
# (torch's int32 tensor sizes), and unbounded sizes make the fix search slow.
MAX_INT = (1 << 31) - 1


def _int_type(minimum):
    def convert(text):
        if not re.fullmatch(r"\s*[+-]?\d{1,30}\s*", text or ""):
            raise argparse.ArgumentTypeError(f"expected an integer, got {_shown(text or '')}")
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if value > MAX_INT:
            raise argparse.ArgumentTypeError(f"must be <= {MAX_INT:,}, got {value}")
        return value
    convert.__name__ = "int"
    return convert


MAX_GIB = 1 << 20  # GPU memory in GiB: a mebi-GiB is beyond any GPU
MAX_TEXT = 10_000  # characters of a string flag (a layout or hybrid pattern of thousands of layers)


def _shown(text, limit=40):
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _gib(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_shown(text)}") from None
    if not 0 < value <= MAX_GIB:
        raise argparse.ArgumentTypeError(f"must be a positive number up to {MAX_GIB}, "
                                         f"got {_shown(text)}")
    return value


def _text(text):
    if len(text) > MAX_TEXT:
        raise argparse.ArgumentTypeError(f"at most {MAX_TEXT:,} characters, got {len(text):,}: "
                                         f"{_shown(text)}")
    return text


def _freq(text):
    """Megatron's moe_freq_type: an int N (every N-th layer is MoE) or a list."""
    if re.fullmatch(r"\s*\d+\s*", text):
        value = int(text)
        if value < 1:
            raise argparse.ArgumentTypeError("must be >= 1")
        return value
    body = text.strip()
    if not re.fullmatch(r"[\[\]\(\)01,\s*+\d]+", body) or len(body) > 2000:
        raise argparse.ArgumentTypeError(f"expected an int or a list of 0/1, got {_shown(text)}")
    try:
        value = _eval_pattern(body)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise argparse.ArgumentTypeError(f"cannot read the pattern {_shown(text)}") from None
    if not (isinstance(value, list) and value and all(v in (0, 1) for v in value)):
        raise argparse.ArgumentTypeError(f"expected a list of 0/1, got {_shown(text)}")
    return value


def _eval_pattern(text):
    """Evaluate list-literal arithmetic like ([1]*3+[0])*2 without eval()."""
    import ast

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.List):
            return [ev(e) for e in node.elts]
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Mult) and isinstance(right, int) and right > 100000:
                raise ValueError("too long")
            result = left + right if isinstance(node.op, ast.Add) else left * right
            if isinstance(result, list) and len(result) > 100000:
                raise ValueError("too long")
            return result
        raise ValueError("unsupported")

    return ev(ast.parse(text, mode="eval"))


def _fraction(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_shown(text)}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {_shown(text)}")
    return value


_TYPES = {"size": _int_type(1), "count": _int_type(0), "gib": _gib, "freq": _freq, "str": _text,
          "float": _fraction}


def _add(parser, flag):
    if flag.kind == "true":
        parser.add_argument(flag.option, dest=flag.dest, action="store_true", help=flag.help)
    elif flag.kind == "false":
        parser.add_argument(flag.option, dest=flag.dest, action="store_false", help=flag.help)
    elif flag.kind in ("choice", "enum"):
        parser.add_argument(flag.option, dest=flag.dest, choices=flag.choices,
                            default=flag.default, help=flag.help)
    else:
        parser.add_argument(flag.option, dest=flag.dest, type=_TYPES[flag.kind],
                            default=flag.default,
                            metavar={"str": "STR", "float": "P"}.get(flag.kind, "N"),
                            help=flag.help)


def add_layout_arguments(parser, world: bool = True):
    """Add every understood Megatron-LM flag (and, if ``world``, --world-size,
    --nnodes, --nproc-per-node, --gpus-per-node, --gpu-memory-gib) to
    ``parser``.  Returns the parser."""
    group = parser.add_argument_group(
        "Megatron-LM flags (spelled as in megatron-core 0.19.2)",
        "Same spelling, meaning and defaults as Megatron-LM's own parser. Values are "
        "positive integers (0 is also accepted for --num-experts, --mtp-num-layers and "
        "the first/last pipeline stage sizes). Other Megatron-LM flags are accepted, "
        "listed and ignored.")
    for flag in FLAGS:
        _add(group, flag)
    if world:
        wgroup = parser.add_argument_group(
            "cluster shape", "The checker's own flags: --world-size, or --nnodes with "
            "--nproc-per-node (GPUs per node default to --nproc-per-node, else 8).")
        for flag in WORLD_FLAGS:
            _add(wgroup, flag)
    return parser


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(message)

    def exit(self, status=0, message=None):
        raise BadInput(message or f"argument parsing stopped (status {status})")


def make_parser(**kwargs):
    """A parser whose errors raise BadInput instead of exiting."""
    kwargs.setdefault("allow_abbrev", False)
    kwargs.setdefault("add_help", False)
    return add_layout_arguments(_RaisingParser(**kwargs))


def layout_from_namespace(ns) -> "LayoutInput":
    """Build a LayoutInput from a namespace filled by add_layout_arguments();
    resolves the world size and raises BadInput on contradictions."""
    values = {f.name: getattr(ns, f.name, f.default) for f in dataclasses.fields(LayoutInput)}
    layout = LayoutInput(**values)
    _hybrid_layers(layout)
    _resolve_world(layout)
    _check_contradictions(layout)
    return layout


def _resolve_world(layout):
    nnodes, nproc = layout.nnodes, layout.nproc_per_node
    if (nnodes is None) != (nproc is None) and layout.world_size is None:
        raise BadInput("--nnodes and --nproc-per-node must be given together "
                       "(or give --world-size)")
    if nnodes is not None and nproc is not None:
        if layout.world_size is not None and layout.world_size != nnodes * nproc:
            raise BadInput(f"--world-size {layout.world_size} contradicts --nnodes {nnodes} x "
                           f"--nproc-per-node {nproc} = {nnodes * nproc}")
        layout.world_size = nnodes * nproc
    if layout.world_size is None:
        raise BadInput("the world size is required: give --world-size N "
                       "(or --nnodes and --nproc-per-node)")
    if layout.gpus_per_node is None:
        layout.gpus_per_node = nproc or DEFAULT_GPUS_PER_NODE
    elif nproc is not None and layout.gpus_per_node != nproc:
        raise BadInput(f"--gpus-per-node {layout.gpus_per_node} contradicts "
                       f"--nproc-per-node {nproc}")
    if layout.world_size > 1 << 24:
        raise BadInput(f"--world-size {layout.world_size} is beyond 16,777,216 GPUs")


HYBRID_SYMBOLS = frozenset("MG*D+-E")


def _hybrid_layers(layout):
    """validate_args: --hybrid-layer-pattern sets num_layers to the pattern's
    layer count (main pattern before the first '/', without '|'); from 0.17.1
    the deprecated --hybrid-override-pattern is copied into it (earlier
    releases pass it to the Mamba model as it is: not modelled)."""
    old = (layout.megatron_version or "0.19.2").split(".")[:2]
    if layout.hybrid_override_pattern is not None and layout.hybrid_layer_pattern is None \
            and tuple(int(x) for x in old) >= (0, 17):
        layout.hybrid_layer_pattern = layout.hybrid_override_pattern
        layout._hybrid_from_override = True
    pattern = layout.hybrid_layer_pattern
    if pattern is None:
        return
    # (invalid symbols are the rule hybrid-layer-pattern's to report)
    layout.num_layers = len(pattern.split("/")[0].replace("|", ""))


def resolve_release_dependent(layout):
    """Re-derive what depends on the release once ``megatron_version`` is set."""
    if getattr(layout, "_hybrid_from_override", False):
        layout.hybrid_layer_pattern = None
        layout._hybrid_from_override = False
    _hybrid_layers(layout)


def _check_contradictions(layout):
    if layout.fp16 and layout.bf16:
        raise BadInput("--fp16 and --bf16 contradict each other: choose one")
    if layout.use_megatron_fsdp and layout.use_torch_fsdp2:
        raise BadInput("--use-megatron-fsdp and --use-torch-fsdp2 contradict each other: "
                       "choose one FSDP implementation")


def parse_layout(argv):
    """Parse Megatron-LM flags plus the cluster shape.

    Returns ``(LayoutInput, unknown)`` where ``unknown`` lists the arguments
    not understood (other Megatron flags and their values), in order.
    Raises BadInput (one-line message) on malformed or contradictory input."""
    argv = [str(a) for a in argv]
    for arg in argv:
        if "\x00" in arg:
            raise BadInput("arguments must not contain NUL bytes")
    parser = make_parser()
    ns, unknown = parser.parse_known_args(argv)
    layout = layout_from_namespace(ns)
    layout.other_flags = tuple(unknown)
    return layout, unknown

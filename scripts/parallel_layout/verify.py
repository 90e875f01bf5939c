"""Ask the installed Megatron whether it accepts a layout (``--verify``).

Imports torch and megatron (seconds), so only ``--verify`` and the tests use
it.  The same flags go through Megatron's own code, in the order a
Megatron-LM launch meets them:

1. ``megatron.training.arguments``: the real parser (``add_megatron_arguments``)
   and ``validate_args`` with ``WORLD_SIZE`` set;
2. ``core_transformer_config_from_args`` -> ``TransformerConfig.__post_init__``;
3. ``parallel_state.initialize_model_parallel`` with ``local_world_size`` set
   to the world size, on a one-process gloo group, run to its end with stand-in
   process groups (group creation is all that is replaced: the expert data-parallel
   check against ``num_distributed_optimizer_instances`` comes after the groups);
4. ``ConstantNumMicroBatchesCalculator`` (global batch divisibility);
5. ``transformer_block.get_num_layers_to_build`` for every pipeline rank and
   virtual stage (the model-build layer split).

On CPU, ``validate_args`` cannot read the GPU generation; it is told Hopper
(compute capability 9), and ``CUDA_DEVICE_MAX_CONNECTIONS`` is set as
Megatron-LM demands for that generation (1, or unset with FSDP).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

STAGES = ("validate_args", "TransformerConfig", "initialize_model_parallel",
          "num_microbatches_calculator", "get_num_layers_to_build", "hybrid_segments",
          "layer_specs",
          "linear_layers",
          "interleaved_schedule", "sequence_parallel_split", "attention_forward")

# What validate_args asks the GPU, answered as an H100 would (compute
# capability 9.0): get_device_arch_version (CUDA_DEVICE_MAX_CONNECTIONS
# checks) and torch.cuda.get_device_capability (--moe-grouped-gemm).
# tests/test_layout_launch_cases.py scans validate_args for every other CUDA query.
DEVICE_CAPABILITY = (9, 0)

# Largest linear layer (elements per rank) the oracle builds on CPU.
MAX_BUILD_ELEMENTS = 5_000_000


class GroupOfSize:
    """Stands in for a process group of a given size, as seen from its rank 0 (the tests'
    Megatron Core probes use it too)."""

    def __init__(self, size):
        self._size = size

    def size(self):
        return self._size

    def rank(self):
        return 0


class _PastChecks:
    """A P2P communicator that stops the schedule right after its checks."""

    def __init__(self, config, pp):
        self.config = config
        self.pp_group = GroupOfSize(pp)

    def __getattr__(self, name):
        raise _Reached()


class _Reached(Exception):
    """A stage got past the checks it is run for."""


def megatron_argv(layout):
    """The Megatron-LM flags equivalent to a LayoutInput."""
    from .flags import FLAGS
    argv = []
    for flag in FLAGS:
        value = getattr(layout, flag.dest)
        if flag.kind == "true":
            if value:
                argv.append(flag.option)
        elif flag.kind == "false":
            if not value:
                argv.append(flag.option)
        elif flag.dest == "num_layers" and layout.hybrid_layer_pattern is not None:
            continue  # validate_args derives it from the pattern
        elif flag.dest == "hybrid_layer_pattern" and getattr(layout, "_hybrid_from_override",
                                                             False):
            continue  # the user gave --hybrid-override-pattern; validate_args copies it
        elif value is not None and value != flag.default:
            if flag.kind == "freq" and isinstance(value, list):
                value = "[" + ",".join(str(v) for v in value) + "]"
            argv += [flag.option, str(value)]
    return argv


@contextlib.contextmanager
def _environment(layout):
    """The environment Megatron-LM reads, restored afterwards (validate_args
    also sets variables: --deterministic-mode's NCCL_ALGO, ...), and torch's
    global deterministic switch left as it was."""
    import torch
    saved_all = dict(os.environ)
    deterministic = torch.are_deterministic_algorithms_enabled()
    os.environ["WORLD_SIZE"] = str(layout.world_size)
    os.environ["RANK"] = "0"
    if layout.use_megatron_fsdp or layout.use_torch_fsdp2:
        os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    else:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_all)
        torch.use_deterministic_algorithms(deterministic)


def _ensure_process_group():
    import torch.distributed as dist
    if dist.is_initialized():
        return
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                            world_size=1)


_PARSERS = {}


def megatron_parser(entry=None):
    """The real Megatron-LM parser (built once per entry script: it introspects
    dataclass sources); a parse error raises ValueError with argparse's message
    ("unrecognized arguments: ...") instead of exiting.  The arguments a known
    entry script adds (parallel_layout.entries: recorded from its
    extra_args_provider, which the wheel does not ship) are added as the
    provider declares them: a switch, or an option taking values."""
    from .entries import resolve
    entry = resolve(entry)
    key = entry.path
    if key not in _PARSERS:
        import argparse
        import megatron.training.arguments as A

        class Parser(argparse.ArgumentParser):
            def error(self, message):
                raise ValueError(message)

        parser = Parser(allow_abbrev=False)
        A.add_megatron_arguments(parser)
        known = {o for a in parser._actions for o in a.option_strings}
        group = parser.add_argument_group(f"entry {entry.path}")
        for option, takes_value in entry.flags.items():
            if option in known:
                continue
            if takes_value:
                group.add_argument(option, nargs="*")
            else:
                group.add_argument(option, action="store_true")
        _PARSERS[key] = parser
    return _PARSERS[key]


def _validate(layout):
    from unittest import mock
    import megatron.training.arguments as A
    # Kernel fusions default on and need Transformer Engine, which a CPU
    # environment lacks; they do not change the layout rules.
    argv = megatron_argv(layout) + ["--no-rope-fusion"] + list(layout.other_flags or ())
    args = megatron_parser(layout.entry).parse_args(argv)
    args._is_global_batch_size_explicitly_specified = args.global_batch_size is not None
    args.rank, args.world_size = 0, layout.world_size
    # _print_args only prints (and dominates the run time); the GPU generation
    # cannot be read on CPU.
    with mock.patch.object(A, "get_device_arch_version", lambda: DEVICE_CAPABILITY[0]), \
            mock.patch.object(A.torch.cuda, "get_device_capability",
                              lambda *a, **k: DEVICE_CAPABILITY), \
            mock.patch.object(A, "_print_args", lambda *a, **k: None):
        A.validate_args(args)
    return args


def _init_model_parallel(args, vpp):
    import torch.distributed as dist
    from unittest import mock
    from megatron.core import parallel_state as ps
    _ensure_process_group()

    # Process groups of the full world cannot be created in one process: stand-ins take their
    # place, so the function runs to its end and every check it makes after building groups
    # (the expert data-parallel size against num_distributed_optimizer_instances) is Megatron's
    # verdict too. Nothing else is replaced.
    def group(*a, **k):
        return object()

    def hierarchical(*a, **k):
        return [object(), object()], [None, None]

    try:
        with mock.patch.object(dist, "new_group", group), \
                mock.patch.object(ps.torch.distributed, "new_group", group), \
                mock.patch.object(ps, "create_hierarchical_groups", hierarchical):
            ps.initialize_model_parallel(
                tensor_model_parallel_size=args.tensor_model_parallel_size,
                pipeline_model_parallel_size=args.pipeline_model_parallel_size,
                virtual_pipeline_model_parallel_size=vpp,
                context_parallel_size=args.context_parallel_size,
                expert_model_parallel_size=args.expert_model_parallel_size,
                expert_tensor_parallel_size=args.expert_tensor_parallel_size,
                num_distributed_optimizer_instances=args.num_distributed_optimizer_instances,
                local_world_size=args.world_size,
                create_gloo_process_groups=False,
                # as megatron/training/initialize.py _initialize_distributed passes it
                order="tp-cp-ep-pp-dp" if getattr(args, "use_tp_pp_dp_mapping", False)
                else "tp-cp-ep-dp-pp",
            )
    finally:
        ps.destroy_model_parallel()


def _microbatches(args):
    from megatron.core import num_microbatches_calculator as N
    if getattr(args, "step_batch_size_schedule", None):
        calc = N.StepBatchsizeNumMicroBatchesCalculator(
            args.micro_batch_size, args.data_parallel_size, False, 0,
            args.step_batch_size_schedule, args.seq_length)
        for threshold, _ in calc.schedule:  # what training reaches, checked on the way
            calc.update(threshold, consistency_check=True)
        return
    N.ConstantNumMicroBatchesCalculator(args.global_batch_size, args.micro_batch_size,
                                        args.data_parallel_size, False, 0)


def _hybrid_segments(args):
    """hybrid_layer_allocation.select_pipeline_segment for every pipeline rank
    (the hybrid model build), with the rank read from a stand-in group."""
    if not getattr(args, "hybrid_layer_pattern", None):
        return
    from unittest import mock
    import torch.distributed as dist
    from megatron.core.models.hybrid import hybrid_layer_allocation as H
    main = args.hybrid_layer_pattern.split(H.Symbols.MTP_SEPARATOR)[0]
    pp = args.pipeline_model_parallel_size
    vpp = args.virtual_pipeline_model_parallel_size
    for rank in range(pp):
        group = GroupOfSize(pp)
        with mock.patch.object(dist, "get_rank", lambda g=None, r=rank: r), \
                mock.patch.object(dist, "get_world_size", lambda g=None: pp), \
                mock.patch.object(H, "log_on_each_pipeline_stage", lambda *a, **k: None), \
                mock.patch.object(H, "log_single_rank", lambda *a, **k: None):
            for vp_stage in range(vpp or 1):
                H.select_pipeline_segment(main, group, vp_stage if vpp else None,
                                          args.decoder_first_pipeline_num_layers,
                                          args.decoder_last_pipeline_num_layers)


def _layers_to_build(config):
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    if config.pipeline_model_parallel_layout is not None:
        return  # an explicit layout was validated by TransformerConfig (validate_layer_layout)
    vpp = config.virtual_pipeline_model_parallel_size
    for pp_rank in range(config.pipeline_model_parallel_size):
        for vp_stage in range(vpp or 1):
            get_num_layers_to_build(config, vp_stage=vp_stage if vpp else None, pp_rank=pp_rank)


def _layer_specs(config):
    """The GPT decoder block spec of the first pipeline rank
    (core/models/gpt/gpt_layer_specs.py get_gpt_decoder_block_spec), which
    expands --moe-layer-freq into the per-layer MoE pattern."""
    if not config.num_moe_experts:
        return
    if getattr(config, "experimental_attention_variant", None) is not None:
        return  # gpt_builders.py builds those with another spec function (needs TE)
    from unittest import mock
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    vpp = config.virtual_pipeline_model_parallel_size
    # As seen from pipeline rank 0 (a layout asks parallel_state for its rank).
    with mock.patch.object(ps, "get_pipeline_model_parallel_rank", lambda *a, **k: 0), \
            mock.patch.object(ps, "get_virtual_pipeline_model_parallel_world_size",
                              lambda *a, **k: vpp):
        get_gpt_decoder_block_spec(config, use_transformer_engine=False,
                                   vp_stage=0 if vpp else None, pp_rank=0)


def _linear_layers(args, config):
    """Build the MLP's linear layers (ColumnParallelLinear fc1, RowParallelLinear
    fc2) with a TP-sized group, and the experts' with an ETP-sized group: their
    constructors divide the sizes (core/tensor_parallel/layers.py)."""
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer import TransformerConfig
    gate = 2 if args.swiglu else 1
    freq = args.moe_layer_freq
    all_moe = args.num_experts and (freq == 1 or (isinstance(freq, list) and 0 not in freq)
                                    or args.num_layers == 1)
    shapes = [] if all_moe else [(args.ffn_hidden_size, args.tensor_model_parallel_size)]
    if args.num_experts:
        shapes.append((args.moe_ffn_hidden_size, args.expert_tensor_parallel_size))
    for ffn, tp in shapes:
        if args.hidden_size * ffn * gate // tp > MAX_BUILD_ELEMENTS:
            return "skipped (too large to build on CPU)"
        small = TransformerConfig(num_layers=1, hidden_size=args.hidden_size,
                                  num_attention_heads=1, use_cpu_initialization=True,
                                  perform_initialization=False)
        group = GroupOfSize(tp)
        ColumnParallelLinear(args.hidden_size, ffn * gate, config=small, init_method=_no_init,
                             bias=False, gather_output=False, tp_group=group)
        RowParallelLinear(ffn, args.hidden_size, config=small, init_method=_no_init,
                          bias=False, input_is_parallel=True, skip_bias_add=True,
                          tp_group=group)
    return None


def _no_init(weight):
    return weight


def _interleaved_schedule(args, config):
    """Run forward_backward_pipelining_with_interleaving up to its
    microbatch-group checks (core/pipeline_parallel/schedules.py).  On CPU the
    one CUDA tensor it makes before them is made on the CPU."""
    import types
    from unittest import mock
    import torch
    from megatron.core.enums import ModelType
    from megatron.core.pipeline_parallel import schedules
    vpp = config.virtual_pipeline_model_parallel_size
    if not vpp:
        return
    chunks = []
    for _ in range(vpp):
        chunk = torch.nn.Module()
        chunk.config, chunk.model_type = config, ModelType.encoder_or_decoder
        chunks.append(chunk)
    zeros = torch.zeros

    def cpu_zeros(*a, **k):
        k.pop("device", None)
        return zeros(*a, **k)

    for num_microbatches in _step_microbatches(args):
        try:
            with mock.patch.object(torch, "zeros", cpu_zeros):
                schedules.forward_backward_pipelining_with_interleaving(
                    forward_step_func=None, data_iterator=[None] * vpp, model=chunks,
                    num_microbatches=num_microbatches, seq_length=args.seq_length,
                    micro_batch_size=args.micro_batch_size,
                    p2p_communicator=_PastChecks(config, args.pipeline_model_parallel_size),
                    pg_collection=types.SimpleNamespace(tp=GroupOfSize(1), cp=GroupOfSize(1)))
        except _Reached:
            pass


def _step_microbatches(args):
    """The microbatch counts training passes to the schedule: the constant one, or,
    with --step-batch-size-schedule, the calculator's at each step of the schedule
    (training reads get_num_microbatches(), not args.global_batch_size)."""
    from megatron.core import num_microbatches_calculator as N
    if not getattr(args, "step_batch_size_schedule", None):
        return [args.global_batch_size // (args.micro_batch_size * args.data_parallel_size)]
    calc = N.StepBatchsizeNumMicroBatchesCalculator(
        args.micro_batch_size, args.data_parallel_size, False, 0,
        args.step_batch_size_schedule, args.seq_length)
    counts = []
    for threshold, _ in calc.schedule:
        calc.update(threshold, consistency_check=False)
        counts.append(calc.get())
    return sorted(set(counts))


def _sequence_parallel_split(args):
    """The scatter into the sequence-parallel region of the first forward pass
    (core/tensor_parallel/mappings.py _split_along_first_dim)."""
    import torch
    from megatron.core.tensor_parallel import mappings
    if not args.sequence_parallel:
        return
    local = torch.empty(args.seq_length // args.context_parallel_size, 1, 1)
    mappings._split_along_first_dim(local, group=GroupOfSize(args.tensor_model_parallel_size))


def _attention_forward(args, config):
    """The first step of a real SelfAttention's forward (the local spec) with
    the sizes of one TP rank (heads and query groups divided by TP):
    get_query_key_value_tensors reshapes the fused QKV output by query group.
    Only the output width matters, so the input is 8 wide."""
    import types
    import torch
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.spec_utils import build_module
    tp = args.tensor_model_parallel_size
    heads, groups = config.num_attention_heads, config.num_query_groups
    if config.multi_latent_attention or groups < tp:
        return
    small = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=heads // tp,
                              num_query_groups=groups // tp, kv_channels=config.kv_channels,
                              use_cpu_initialization=True, perform_initialization=False,
                              add_bias_linear=False)
    spec = get_gpt_layer_local_spec().submodules.self_attention
    attention = build_module(spec, config=small, layer_number=1,
                             pg_collection=types.SimpleNamespace(tp=GroupOfSize(1),
                                                                 cp=GroupOfSize(1)))
    s, b = args.seq_length // args.context_parallel_size, args.micro_batch_size or 1
    if s * b * (heads + 2 * groups) // tp * config.kv_channels > MAX_BUILD_ELEMENTS:
        s, b = 16, 1  # the reshape fails or not whatever the sequence: keep it small
    with torch.no_grad():  # the forward's first step (the core attention needs CUDA buffers)
        attention.get_query_key_value_tensors(torch.zeros(s, b, 8))


def megatron_verdict(layout):
    """``{"accepted": bool, "stage": name or None, "error": message or None}``."""
    from megatron.training.argument_utils import core_transformer_config_from_args
    stage = STAGES[0]
    sink = io.StringIO()
    try:
        with _environment(layout), contextlib.redirect_stdout(sink):
            args = _validate(layout)
            stage = STAGES[1]
            config = core_transformer_config_from_args(args)
            stage = STAGES[2]
            _init_model_parallel(args, args.virtual_pipeline_model_parallel_size)
            stage = STAGES[3]
            _microbatches(args)
            stage = STAGES[4]
            if not getattr(args, "hybrid_layer_pattern", None):
                _layers_to_build(config)
            stage = STAGES[5]
            _hybrid_segments(args)
            stage = STAGES[6]
            _layer_specs(config)
            stage = STAGES[7]
            skipped = _linear_layers(args, config)
            stage = STAGES[8]
            _interleaved_schedule(args, config)
            stage = STAGES[9]
            _sequence_parallel_split(args)
            stage = STAGES[10]
            _attention_forward(args, config)
    except (AssertionError, ValueError, RuntimeError, ZeroDivisionError, TypeError,
            NotImplementedError, KeyError, SystemExit) as exc:
        message = str(exc) or f"{type(exc).__name__} (no message)"
        return {"accepted": False, "stage": stage, "error": message,
                "exception": type(exc).__name__, "skipped": []}
    return {"accepted": True, "stage": None, "error": None, "exception": None,
            "skipped": [STAGES[7]] if skipped else []}


def verify(layout, result):
    """Compare our verdict with Megatron's; JSON-ready dict."""
    try:
        import megatron.core  # noqa: F401
        import megatron.training  # noqa: F401
    except ImportError as exc:
        return {"available": False, "reason": f"megatron not importable: {exc}"}
    import megatron.core
    installed = getattr(megatron.core, "__version__", None)
    verdict = megatron_verdict(layout)
    ours = [v.rule for v in result.violations if not _is_stricter(v.rule)]
    agrees = verdict["accepted"] == (not ours)
    from .entries import known, resolve
    if not agrees and not known(resolve(layout.entry)) and verdict["stage"] == STAGES[0] \
            and (verdict["error"] or "").startswith("unrecognized arguments"):
        # Megatron's parser lacks the unknown entry script's own arguments: undecided
        return {"available": True, "installed_version": installed,
                "checked_version": layout.megatron_version, "megatron": verdict,
                "checker": {"valid": result.valid,
                            "violations": [v.rule for v in result.violations]},
                "agrees": None,
                "note": f"undecided: {layout.entry} is not an entry script the checker knows, "
                        "so Megatron's parser was run without its arguments"}
    checker = {"valid": result.valid, "violations": [v.rule for v in result.violations]}
    return {"available": True, "installed_version": installed,
            "checked_version": layout.megatron_version, "megatron": verdict,
            "checker": checker, "agrees": agrees,
            "note": None if agrees else
            "disagreement: the checker and the installed Megatron disagree (exit 1); "
            "please report it"}


def _is_stricter(rule_id):
    from .rules import RULES_BY_ID
    return RULES_BY_ID[rule_id].stricter is not None


if __name__ == "__main__":  # pragma: no cover - manual use
    from .flags import parse_layout
    layout, _ = parse_layout(sys.argv[1:])
    print(megatron_verdict(layout))

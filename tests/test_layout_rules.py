"""One triggering example per rule of parallel_layout.rules.RULES.

For every error rule that Megatron checks before training starts, the
installed megatron-core 0.19.2 rejects the same example with the same
message (verify.megatron_verdict runs validate_args, TransformerConfig,
initialize_model_parallel, the microbatch calculator and
get_num_layers_to_build).  Rules marked ``stricter`` fire in Megatron only
on a GPU (model build, first step): their message text is checked against
the installed source, and reproduced by calling the raising function where
that is possible on CPU.  Quoted warnings are found in the installed source."""

import inspect
import os
import re
import sys
import warnings

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import flags, rules, verify  # noqa: E402

BASE = ("--world-size 8 --num-layers 8 --hidden-size 64 --num-attention-heads 8 "
        "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 --vocab-size 100")
MOE = " --num-experts 8 --disable-bias-linear --moe-ffn-hidden-size 32"

TRIGGERS = {
    "unknown-flag": " --DDP-impl local",
    "hybrid-layer-pattern": " --hybrid-layer-pattern *-+-",
    "hybrid-pattern-conflicts": " --hybrid-layer-pattern M-|M- --pipeline-model-parallel-size 2 "
                                "--decoder-first-pipeline-num-layers 2",
    "hybrid-segments-divisible-by-pp": " --hybrid-layer-pattern M-|M-|M- "
                                       "--pipeline-model-parallel-size 2",
    "hybrid-pipeline-split": " --hybrid-layer-pattern M-M-M- --pipeline-model-parallel-size 4",
    "step-batch-size-schedule": " --step-batch-size-schedule 0:8 --global-batch-size 8",
    "step-batch-size-divisible": " --step-batch-size-schedule 0:8,100:12",
    "decoder-seq-length": " --decoder-seq-length 128",
    "world-divisible": " --tensor-model-parallel-size 3",
    "expert-grid-divisible": " --tensor-model-parallel-size 2 --expert-model-parallel-size 8" + MOE,
    "heads-divisible-by-tp": " --tensor-model-parallel-size 8 --num-attention-heads 4 "
                             "--hidden-size 64",
    "query-groups-vs-tp": " --tensor-model-parallel-size 4 --group-query-attention "
                          "--num-query-groups 6 --num-attention-heads 12 --hidden-size 96",
    "hidden-divisible-by-heads": " --hidden-size 60",
    "ep-needs-experts": " --expert-model-parallel-size 2",
    "experts-divisible-by-ep": " --expert-model-parallel-size 4 --num-experts 6 "
                               "--disable-bias-linear",
    "seq-divisible-by-2cp": " --context-parallel-size 2 --seq-length 66 "
                            "--max-position-embeddings 66",
    "max-position-covers-seq": " --max-position-embeddings 32",
    "vpp-options-exclusive": " --pipeline-model-parallel-size 2 "
                             "--num-layers-per-virtual-pipeline-stage 2 "
                             "--num-virtual-stages-per-pipeline-rank 2",
    "pipeline-layout": " --pipeline-model-parallel-size 2 "
                       "--pipeline-model-parallel-layout Etttt|tttL",
    "pipeline-layout-conflicts": " --pipeline-model-parallel-size 2 "
                                 "--pipeline-model-parallel-layout Etttt|ttttL "
                                 "--account-for-loss-in-pipeline-split",
    "uneven-with-account-split": " --pipeline-model-parallel-size 2 "
                                 "--decoder-first-pipeline-num-layers 3 "
                                 "--account-for-embedding-in-pipeline-split",
    "layers-per-virtual-stage": " --pipeline-model-parallel-size 2 "
                                "--num-layers-per-virtual-pipeline-stage 3",
    "layers-divisible-by-pp": " --pipeline-model-parallel-size 3",
    "uneven-stages": " --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 3",
    "uneven-stages-overflow": " --pipeline-model-parallel-size 4 "
                              "--decoder-first-pipeline-num-layers 5 "
                              "--decoder-last-pipeline-num-layers 5",
    "account-split-with-vpp": " --pipeline-model-parallel-size 4 "
                              "--num-virtual-stages-per-pipeline-rank 2 "
                              "--account-for-embedding-in-pipeline-split",
    "vpp-layers-at-build": " --pipeline-model-parallel-size 2 "
                           "--num-virtual-stages-per-pipeline-rank 3",
    "moe-bias-needs-etp1": " --tensor-model-parallel-size 2 --num-experts 8",
    "moe-ffn-without-experts": " --moe-ffn-hidden-size 32",
    "moe-layer-pattern-length": MOE + " --moe-layer-freq [1,0,1,0]",
    "interleaved-needs-pp": " --pipeline-model-parallel-size 2 "
                            "--num-virtual-stages-per-pipeline-rank 2 "
                            "--no-overlap-p2p-communication",
    "global-batch-divisible": " --global-batch-size 12",
    "distributed-optimizer-instances": " --use-distributed-optimizer "
                                       "--num-distributed-optimizer-instances 3",
    "expert-distributed-optimizer-instances": MOE + " --tensor-model-parallel-size 2 "
                                              "--expert-model-parallel-size 4 --sequence-parallel "
                                              "--use-distributed-optimizer "
                                              "--num-distributed-optimizer-instances 2",
    "interleaved-microbatch-group": " --pipeline-model-parallel-size 4 "
                                    "--num-virtual-stages-per-pipeline-rank 2 "
                                    "--global-batch-size 12",
    "ffn-divisible-by-tp": " --tensor-model-parallel-size 4 --ffn-hidden-size 30",
    "moe-ffn-divisible-by-etp": MOE.replace("32", "30") + " --expert-tensor-parallel-size 4",
    "sequence-parallel-seq-divisible": " --tensor-model-parallel-size 8 --sequence-parallel "
                                       "--seq-length 68 --max-position-embeddings 68",
    "mtp-position-embedding": " --mtp-num-layers 1",
    "recompute-selective-method": " --recompute-activations --recompute-method uniform",
    "recompute-full-settings": " --recompute-granularity full",
    "recompute-selective-layers": " --recompute-granularity selective --recompute-num-layers 1",
    "torch-fsdp2": " --use-torch-fsdp2 --pipeline-model-parallel-size 2",
    "megatron-fsdp-ckpt-format": " --use-megatron-fsdp",
    "torch-dcp": " --ckpt-format torch_dcp",
    "incomplete-input": "|drop:--hidden-size 64",
    "sp-without-tp": " --sequence-parallel",
    "moe-tp-without-sp": " --tensor-model-parallel-size 2 --expert-model-parallel-size 4 "
                         "--expert-tensor-parallel-size 1" + MOE,
    "tp-without-sp": " --tensor-model-parallel-size 2",
    "tp-across-nodes": " --tensor-model-parallel-size 8 --gpus-per-node 4",
    "query-groups-ignored": " --num-query-groups 4",
    "moe-ffn-default": " --num-experts 8 --disable-bias-linear",
    "global-batch-default": "",
    "swiglu-ffn-default": " --swiglu --hidden-size 4096 --num-attention-heads 32",
    "gqa-default-groups": " --group-query-attention",
    "virtual-pipeline-is-one": " --pipeline-model-parallel-size 2 "
                               "--num-layers-per-virtual-pipeline-stage 4",
    "few-microbatches": " --pipeline-model-parallel-size 4 --global-batch-size 4",
    "cuda-device-max-connections": " --tensor-model-parallel-size 2",
    "megatron-fsdp-forces-distopt": " --use-megatron-fsdp --ckpt-format fsdp_dtensor",
    "fsdp-with-tp-cp": " --use-megatron-fsdp --ckpt-format fsdp_dtensor "
                       "--tensor-model-parallel-size 2",
    "heads-divisible-by-query-groups": " --num-attention-heads 6 --hidden-size 48 "
                                       "--group-query-attention --num-query-groups 4",
    "fp16-expert-parallel": " --fp16 --expert-model-parallel-size 2" + MOE + "|version:0.15.3",
    "tp-pp-dp-mapping-expert-dp": " --world-size 16 --tensor-model-parallel-size 2 "
                                  "--pipeline-model-parallel-size 2 "
                                  "--expert-model-parallel-size 4 "
                                  "--expert-tensor-parallel-size 1 --use-tp-pp-dp-mapping "
                                  "--sequence-parallel" + MOE,
    "deterministic-mode-options": " --deterministic-mode --cross-entropy-loss-fusion",
    "flag-value": " --seed 12a",
    "ep-tp-needs-sp": " --tensor-model-parallel-size 2 --expert-model-parallel-size 2" + MOE
                      + "|version:0.14.0",
    "unknown-flag-entry": " --freeze-LM|entry:my_train.py",
    "entry-conditional-flags": " --export-te-mcore-model",
    "memory-fits": " --hidden-size 8192 --num-attention-heads 64 --seq-length 8192 "
                   "--max-position-embeddings 8192 --gpu-memory-gib 80",
    "memory-over-assumed-gpu": " --hidden-size 8192 --num-attention-heads 64 --seq-length 8192 "
                               "--max-position-embeddings 8192",
}
# Rules of earlier releases only: their trigger names the release (--megatron-version).
OLD_RELEASE = {k for k, v in TRIGGERS.items() if v and "|version:" in v}
PASTED = {"unknown-flag": ["--DDP-impl", "local"], "flag-value": ["--seed", "12a"], "unknown-flag-entry": ["--freeze-LM"],
          "entry-conditional-flags": ["--export-te-mcore-model"]}

# Fixed text of Megatron's own warnings that our warnings quote.
QUOTED_WARNINGS = {
    "sp-without-tp": ("megatron.training.arguments",
                      "Disabling sequence parallelism because tensor model parallelism is disabled"),
    "moe-tp-without-sp": ("megatron.core.model_parallel_config",
                          "When using expert parallelism and tensor parallelism for training, "),
    "moe-ffn-default": ("megatron.training.arguments",
                        "moe_ffn_hidden_size is not set, using ffn_hidden_size for MoE instead."),
    "global-batch-default": ("megatron.training.arguments", "setting global batch size to {}"),
    "megatron-fsdp-forces-distopt": ("megatron.training.arguments",
                                     "Megatron-FSDP is only compatible with "
                                     "--use-distributed-optimizer. Using DistributedOptimizer..."),
    "cuda-device-max-connections": ("megatron.training.arguments",
                                    "FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset."),
}

SOURCES = {
    "ffn-divisible-by-tp": "megatron.core.utils",
    "moe-ffn-divisible-by-etp": "megatron.core.utils",
    "sequence-parallel-seq-divisible": "megatron.core.tensor_parallel.mappings",
    "interleaved-microbatch-group": "megatron.core.pipeline_parallel.schedules",
    "uneven-stages-overflow": None,
}


def argv_for(rule_id):
    extra = TRIGGERS[rule_id].split("|version:")[0].split("|entry:")[0]
    base = BASE
    if "|drop:" in extra:
        extra, drop = extra.split("|drop:")
        base = base.replace(drop, "")
    parts = (base + extra).split()
    return parts  # a repeated flag: the later value wins, as in argparse


def fired(rule_id):
    layout, unknown = flags.parse_layout(argv_for(rule_id))
    assert unknown == PASTED.get(rule_id, [])
    trigger = TRIGGERS[rule_id] or ""
    if "|version:" in trigger:
        layout.megatron_version = trigger.split("|version:")[1]
    if "|entry:" in trigger:
        layout.entry = trigger.split("|entry:")[1]
    result = rules.check(layout)
    return layout, result


def test_every_rule_has_a_trigger():
    assert set(TRIGGERS) == set(rules.RULES_BY_ID)


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda r: r.id)
def test_rule_fires_on_its_example(rule):
    _, result = fired(rule.id)
    ids = [v.rule for v in result.violations] + [w.rule for w in result.warnings]
    assert rule.id in ids, (ids, argv_for(rule.id))
    if rule.kind == "error":
        v = next(v for v in result.violations if v.rule == rule.id)
        assert v.message and v.fix and v.source == rule.source


def test_valid_base_layout_has_no_violation():
    layout, _ = flags.parse_layout(BASE.split())
    assert rules.check(layout).valid


ERRORS = [r for r in rules.RULES if r.kind == "error" and r.stricter is None
          and r.id not in OLD_RELEASE]


@pytest.mark.slow
@pytest.mark.parametrize("rule", ERRORS, ids=lambda r: r.id)
def test_megatron_rejects_with_the_same_message(rule):
    layout, result = fired(rule.id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = verify.megatron_verdict(layout)
    assert not verdict["accepted"], verdict
    ours = {v.rule: " ".join(v.message.split()) for v in result.violations}
    error = " ".join(verdict["error"].split())
    matching = [r for r, m in ours.items() if m == error or m.startswith(error + ":")]
    assert matching, (verdict, ours)


STRICTER = [r for r in rules.RULES if r.stricter is not None]


@pytest.mark.slow
@pytest.mark.parametrize("rule", STRICTER, ids=lambda r: r.id)
def test_stricter_rule_is_accepted_by_validation_and_documented(rule):
    """Megatron's pre-training validation lets these through (that is why they
    are listed as stricter); the reference explains each one."""
    layout, _ = fired(rule.id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = verify.megatron_verdict(layout)
    assert verdict["accepted"], verdict
    reference = open(os.path.join(ROOT, "references", "parallelism-reference.md")).read()
    assert f"`{rule.id}`" in reference


@pytest.mark.slow
@pytest.mark.parametrize("rule_id", [k for k, v in SOURCES.items() if v])
def test_stricter_message_text_is_in_installed_source(rule_id):
    import importlib
    _, result = fired(rule_id)
    message = next(v.message for v in result.violations if v.rule == rule_id)
    source = inspect.getsource(importlib.import_module(SOURCES[rule_id]))
    # Join string literals that Megatron splits over lines ('...' 'more', msg += '...').
    source = re.sub(r"['\"]\s*\n\s*(?:msg \+= )?f?['\"]", "", source)
    fixed = [part for part in re.split(r"\d+", message) if len(part.strip()) > 12]
    if not fixed:  # "{} is not divisible by {}": the format string itself
        fixed = ["is not divisible by"]
    for part in fixed:
        assert part.strip()[:40] in source, part


@pytest.mark.slow
def test_divisibility_messages_reproduced_by_megatron_divide():
    from megatron.core.utils import divide
    for rule_id in ("ffn-divisible-by-tp", "moe-ffn-divisible-by-etp"):
        layout, result = fired(rule_id)
        message = next(v.message for v in result.violations if v.rule == rule_id)
        a, b = (int(x) for x in re.findall(r"\d+", message))
        with pytest.raises(AssertionError) as exc:
            divide(a, b)
        assert str(exc.value) == message


@pytest.mark.slow
@pytest.mark.parametrize("rule_id", sorted(QUOTED_WARNINGS))
def test_quoted_warnings_are_in_installed_source(rule_id):
    import importlib
    module, text = QUOTED_WARNINGS[rule_id]
    source = inspect.getsource(importlib.import_module(module))
    flat = re.sub(r"['\"]\s*\n\s*['\"]", "", source)
    assert text in flat or text in source, (module, text)


@pytest.mark.slow
def test_cuda_device_max_connections_condition_in_source():
    """The decision rule stated in the reference: validate_args asserts
    CUDA_DEVICE_MAX_CONNECTIONS == "1" when TP > 1 or CP > 1 on compute
    capability < 10 unless FSDP or overlap_moe_expert_parallel_comm is used."""
    import megatron.training.arguments as A
    src = inspect.getsource(A.validate_args)
    i = src.index("and get_device_arch_version() < 10:")
    block = src[src.rindex("if (args.tensor_model_parallel_size > 1", 0, i):i + 2000]
    assert "args.context_parallel_size > 1" in block
    assert "if args.use_torch_fsdp2 or args.use_megatron_fsdp:" in block
    assert "elif args.overlap_moe_expert_parallel_comm:" in block
    assert "os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS') == \"1\"" in block


DERIVED_CASES = [
    BASE + " --swiglu --hidden-size 4096 --num-attention-heads 32",
    BASE + " --tensor-model-parallel-size 2 --group-query-attention --num-query-groups 2 "
           "--global-batch-size 16",
    BASE + " --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2 "
           "--global-batch-size 8",
    BASE + " --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout "
           "Ett|tt|tt|ttL --global-batch-size 8",
    BASE + " --num-experts 8 --expert-model-parallel-size 4 --disable-bias-linear "
           "--tensor-model-parallel-size 2 --expert-tensor-parallel-size 1",
]


@pytest.mark.slow
@pytest.mark.parametrize("argv", DERIVED_CASES)
def test_derived_sizes_match_megatron(argv):
    """Defaults and derived sizes equal what validate_args, TransformerConfig,
    vocab_utils and the microbatch calculator compute."""
    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator
    from megatron.training.argument_utils import core_transformer_config_from_args
    from megatron.training.vocab_utils import calculate_padded_vocab_size
    layout, _ = flags.parse_layout(argv.split())
    d = rules.check(layout).derived
    with warnings.catch_warnings(), verify._environment(layout):
        warnings.simplefilter("ignore")
        args = verify._validate(layout)
        config = core_transformer_config_from_args(args)
    calc = ConstantNumMicroBatchesCalculator(args.global_batch_size, args.micro_batch_size,
                                             args.data_parallel_size, False, 0)
    assert d["data_parallel_size"] == args.data_parallel_size
    assert d["ffn_hidden_size"] == args.ffn_hidden_size == config.ffn_hidden_size
    assert d["kv_channels"] == args.kv_channels == config.kv_channels
    assert d["num_query_groups"] == config.num_query_groups
    assert d["virtual_pipeline_model_parallel_size"] == args.virtual_pipeline_model_parallel_size
    assert d["expert_tensor_parallel_size"] == args.expert_tensor_parallel_size
    assert d["global_batch_size"] == args.global_batch_size
    assert d["num_microbatches"] == calc.get()
    assert d["padded_vocab_size"] == calculate_padded_vocab_size(
        args.vocab_size, args.make_vocab_size_divisible_by, args.tensor_model_parallel_size,
        logging_enabled=False)
    assert d["sequence_parallel"] == args.sequence_parallel


@pytest.mark.slow
def test_uneven_overflow_gives_negative_layer_counts_in_megatron():
    """The reason `uneven-stages-overflow` is stricter, as the reference states."""
    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.training.argument_utils import core_transformer_config_from_args
    layout, _ = fired("uneven-stages-overflow")
    with warnings.catch_warnings(), verify._environment(layout):
        warnings.simplefilter("ignore")
        config = core_transformer_config_from_args(verify._validate(layout))
    counts = [get_num_layers_to_build(config, pp_rank=r) for r in range(4)]
    assert counts == [5, -1, -1, 5]
    assert str(counts) in rules.RULES_BY_ID["uneven-stages-overflow"].stricter


@pytest.mark.parametrize("heads,groups,listed", [
    (32, 5, [1, 2, 4, 8, 16, 32]),  # few valid counts: every one (a benchmark answer missed 1 and 2)
    (96, 5, [2, 3, 4, 6]),          # twelve: the four nearest the given count (ties: the smaller)
])
def test_query_group_fix_lists_counts_that_pass(heads, groups, listed):
    base = (f"--world-size 1 --num-layers 2 --hidden-size {heads * 2} --num-attention-heads {heads} "
            f"--group-query-attention --seq-length 16 --max-position-embeddings 16 --micro-batch-size 1 "
            f"--global-batch-size 1 --num-query-groups ")
    wanted = (rules.RULES_BY_ID["heads-divisible-by-query-groups"],)
    layout, _ = flags.parse_layout((base + str(groups)).split())
    (violation,) = rules.check(layout, rules=wanted, with_memory=False).violations
    got = [int(x) for x in re.search(r"--num-query-groups in ([\d, ]+)", violation.fix).group(1).split(", ")]
    assert got == listed
    for g in got:
        layout, _ = flags.parse_layout((base + str(g)).split())
        assert not rules.check(layout, rules=wanted, with_memory=False).violations, g

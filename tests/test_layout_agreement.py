"""Accept/reject agreement between parallel_layout.rules and Megatron itself.

The oracle (scripts/parallel_layout/verify.py) feeds the same flags through
megatron-core 0.19.2's own code: the Megatron-LM parser and validate_args,
core_transformer_config_from_args (TransformerConfig.__post_init__),
initialize_model_parallel's size checks, the microbatch calculator and
get_num_layers_to_build.  Rules marked ``stricter`` are checks Megatron only
makes later (model build on GPU, first training step); they are excluded
from the comparison and documented in references/parallelism-reference.md.
"""

import json
import math
import os
import subprocess
import sys
import warnings

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import flags, rules, verify  # noqa: E402

pytestmark = pytest.mark.slow
EXAMPLES = int(os.environ.get("LAYOUT_AGREEMENT_EXAMPLES", "1000"))
# Set LAYOUT_AGREEMENT_RANDOM=1 to explore new random layouts (CI runs the fixed sequence).
DERANDOMIZE = not os.environ.get("LAYOUT_AGREEMENT_RANDOM")
STATS = {"compared": 0, "megatron_rejected": 0, "disagreements": 0}


@st.composite
def layouts(draw):
    """Small models on small worlds.  Half the draws start from a consistent
    layout (each size chosen to satisfy its rules), so both verdicts occur;
    the other half choose every size freely, at the edges of the rules."""
    clean = draw(st.booleans())
    tp = draw(st.sampled_from([1, 1, 2, 2, 3, 4, 8]))
    pp = draw(st.sampled_from([1, 1, 2, 3, 4]))
    cp = draw(st.sampled_from([1, 1, 1, 2, 4]))
    heads = tp * draw(st.integers(1, 3)) if clean else draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16]))
    kv = draw(st.sampled_from([4, 8]))
    hidden = heads * kv if clean or draw(st.booleans()) or heads == 1 else draw(st.integers(8, 96))
    num_layers = pp * draw(st.integers(1, 4)) if clean else draw(st.integers(1, 12))
    experts = draw(st.sampled_from([None, None, None, 2, 4, 6, 8]))
    ep = draw(st.sampled_from([1, 1, 2, 4])) if experts or not clean and draw(st.booleans()) else 1
    if clean and experts:
        ep = max(e for e in (1, 2, 4) if experts % e == 0 and e <= ep)
    etp = draw(st.sampled_from([None, None, 1, 2]))
    if clean:
        etp = None if not experts else 1
    grid = tp * pp * cp
    dp = draw(st.sampled_from([1, 1, 2, 3, 4]))
    if clean:
        dp = (ep // math.gcd(ep, tp * cp)) * draw(st.integers(1, 2))
    world = grid * dp if clean or draw(st.integers(0, 5)) else draw(st.integers(1, 64))
    seq = 2 * cp * tp * draw(st.integers(2, 6)) if clean else draw(st.sampled_from([16, 24, 32, 48, 64, 100]))
    micro = draw(st.integers(1, 3))
    argv = ["--world-size", world, "--tensor-model-parallel-size", tp,
            "--pipeline-model-parallel-size", pp, "--context-parallel-size", cp,
            "--expert-model-parallel-size", ep,
            "--num-layers", num_layers, "--hidden-size", hidden,
            "--num-attention-heads", heads, "--seq-length", seq,
            "--max-position-embeddings", seq if clean or draw(st.integers(0, 6)) else seq // 2,
            "--micro-batch-size", micro, "--vocab-size", draw(st.integers(50, 300)),
            "--make-vocab-size-divisible-by", draw(st.sampled_from([1, 8, 128]))]
    if etp is not None:
        argv += ["--expert-tensor-parallel-size", etp]
    if draw(st.booleans()):
        gbs = micro * max(1, world // grid) * draw(st.integers(1, 6))
        off = 0 if clean or draw(st.integers(0, 3)) else draw(st.integers(0, 2))
        argv += ["--global-batch-size", gbs + off]
    if draw(st.booleans()):
        groups = draw(st.sampled_from([g for g in range(1, 9) if heads % g == 0 and (g % tp == 0 or tp % g == 0)]
                                      or [1])) if clean else draw(st.integers(1, 8))
        argv += ["--group-query-attention", "--num-query-groups", groups]
    if experts:
        argv += ["--num-experts", experts, "--moe-ffn-hidden-size", draw(st.sampled_from([16, 24, 32]))]
        freq = draw(st.sampled_from(["int", "int", "list"]))
        if freq == "int":
            argv += ["--moe-layer-freq", draw(st.integers(1, 3))]
        else:
            size = num_layers if clean or draw(st.booleans()) else draw(st.integers(1, 12))
            bits = draw(st.lists(st.sampled_from([0, 1]), min_size=size, max_size=size))
            argv += ["--moe-layer-freq", "[" + ",".join(map(str, bits)) + "]"]
    if draw(st.booleans()) or (clean and experts):
        argv += ["--disable-bias-linear"]
    if draw(st.booleans()):
        argv += ["--ffn-hidden-size", draw(st.sampled_from([16, 24, 30, 64]))]
    if draw(st.booleans()):
        argv += ["--sequence-parallel"]
    if draw(st.booleans()):
        argv += ["--swiglu"]
    if draw(st.booleans()):
        argv += ["--untie-embeddings-and-output-weights"]
    if draw(st.booleans()):
        argv += ["--bf16"]
    if not clean or draw(st.integers(0, 2)) == 0:
        argv += draw(pipeline_flags(num_layers, pp))
        argv += draw(recompute_flags())
        argv += draw(feature_flags())
    return [str(a) for a in argv]


@st.composite
def pipeline_flags(draw, num_layers, pp):
    choice = draw(st.sampled_from(["none", "none", "nlpvs", "nvspr", "layout", "uneven",
                                   "account", "both"]))
    out = []
    if choice == "nlpvs" or choice == "both":
        out += ["--num-layers-per-virtual-pipeline-stage", draw(st.integers(1, 4))]
    if choice == "nvspr" or choice == "both":
        out += ["--num-virtual-stages-per-pipeline-rank", draw(st.integers(1, 3))]
    if choice == "layout":
        out += ["--pipeline-model-parallel-layout", draw(layout_strings(num_layers, pp))]
    if choice == "uneven":
        if draw(st.booleans()):
            out += ["--decoder-first-pipeline-num-layers", draw(st.integers(0, 4))]
        if draw(st.booleans()):
            out += ["--decoder-last-pipeline-num-layers", draw(st.integers(1, 4))]
        if draw(st.booleans()):
            out += ["--num-virtual-stages-per-pipeline-rank", draw(st.integers(1, 2))]
    if choice in ("account", "uneven") and draw(st.booleans()):
        out += [draw(st.sampled_from(["--account-for-embedding-in-pipeline-split",
                                      "--account-for-loss-in-pipeline-split"]))]
        if choice == "account" and draw(st.booleans()):
            out += ["--num-virtual-stages-per-pipeline-rank", draw(st.integers(1, 3))]
    if draw(st.integers(0, 5)) == 0:
        out += ["--no-overlap-p2p-communication"]
    if draw(st.integers(0, 4)) == 0:
        out += ["--microbatch-group-size-per-virtual-pipeline-stage", draw(st.integers(1, 4))]
    return out


@st.composite
def layout_strings(draw, num_layers, pp):
    stages = draw(st.integers(1, 2 * pp + 1))
    cuts = sorted(draw(st.lists(st.integers(0, num_layers), min_size=stages - 1,
                                max_size=stages - 1)))
    bounds = [0] + cuts + [num_layers]
    parts = ["t" * (bounds[i + 1] - bounds[i]) for i in range(stages)]
    parts[0] = "E" + parts[0]
    parts[-1] = parts[-1] + "L"
    if draw(st.integers(0, 5)) == 0:
        parts[-1] = parts[-1].replace("L", "")
    return "|".join(parts)


@st.composite
def recompute_flags(draw):
    kind = draw(st.sampled_from(["none", "none", "selective", "full", "activations"]))
    out = []
    if kind == "selective":
        out += ["--recompute-granularity", "selective"]
    if kind == "activations":
        out += ["--recompute-activations"]
    if kind == "full":
        out += ["--recompute-granularity", "full"]
    if kind != "none" and draw(st.booleans()):
        out += ["--recompute-method", draw(st.sampled_from(["uniform", "block"]))]
    if kind != "none" and draw(st.booleans()):
        out += ["--recompute-num-layers", draw(st.integers(1, 2))]
    return out


@st.composite
def feature_flags(draw):
    out = []
    if draw(st.integers(0, 4)) == 0:
        out += ["--mtp-num-layers", draw(st.integers(0, 2))]
        out += ["--position-embedding-type", draw(st.sampled_from(["rope", "learned_absolute"]))]
    fsdp = draw(st.sampled_from(["none"] * 6 + ["megatron", "torch"]))
    if fsdp == "megatron":
        out += ["--use-megatron-fsdp"]
    if fsdp == "torch":
        out += ["--use-torch-fsdp2"]
    if draw(st.integers(0, 3)) == 0:
        out += ["--ckpt-format", draw(st.sampled_from(["torch", "torch_dist", "torch_dcp",
                                                       "fsdp_dtensor"]))]
    if draw(st.integers(0, 3)) == 0:
        out += ["--use-distributed-optimizer"]
        if draw(st.booleans()):
            out += ["--num-distributed-optimizer-instances", draw(st.integers(1, 4))]
    return out


def compare(argv):
    layout, unknown = flags.parse_layout(argv)
    assert unknown == []
    result = rules.check(layout, with_memory=False)
    ours = [v for v in result.violations if rules.RULES_BY_ID[v.rule].stricter is None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = verify.megatron_verdict(layout)
    STATS["compared"] += 1
    STATS["megatron_rejected"] += not verdict["accepted"]
    agree = verdict["accepted"] == (not ours)
    STATS["disagreements"] += not agree
    assert agree, (argv, verdict, [(v.rule, v.message) for v in ours])
    if not verdict["accepted"]:
        error = " ".join(verdict["error"].split())
        messages = [" ".join(v.message.split()) for v in ours]
        # Megatron asserts without a message are reported as "AssertionError
        # (no message): <the condition>".
        assert any(m == error or m.startswith(error + ":") for m in messages), \
            (argv, verdict, messages)


def _bad_input(argv):
    try:
        flags.parse_layout(argv)
    except flags.BadInput:
        return True
    return False


@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=list(HealthCheck))
@given(layouts())
def test_accept_reject_agrees_with_megatron(argv):
    if _bad_input(argv):  # contradictory flags (e.g. two FSDP flavours): exit 2, not a verdict
        return
    compare(argv)


def test_agreement_statistics_are_meaningful():
    """The property test must have compared many layouts, both verdicts."""
    if STATS["compared"] == 0:
        pytest.skip("run together with test_accept_reject_agrees_with_megatron")
    print(f"\nlayout agreement: {STATS}")
    assert STATS["compared"] >= min(EXAMPLES, 300) * 0.8
    assert 0.2 < STATS["megatron_rejected"] / STATS["compared"] < 0.95
    assert STATS["disagreements"] == 0
    if os.environ.get("LAYOUT_AGREEMENT_STATS"):  # the fresh-interpreter run below reads them
        with open(os.environ["LAYOUT_AGREEMENT_STATS"], "w") as f:
            json.dump(STATS, f)


def test_the_recorded_run_in_the_reference_is_reproduced(tmp_path):
    """The reference quotes the fixed 1000-example run. It is reproduced in a fresh interpreter:
    after other tests have run in the same process, Hypothesis's derandomized generation drew the
    same first 494 layouts and then diverged (625 or 647 rejections instead of 612, 0
    disagreements either way), so the exact sequence depends on interpreter state, not on our code.
    Run alone it gave 612 in every run, loaded or not."""
    if os.environ.get("LAYOUT_AGREEMENT_STATS"):
        pytest.skip("this is the fresh-interpreter run itself")
    if EXAMPLES != 1000 or not DERANDOMIZE:
        pytest.skip("the reference records the default, derandomized 1000-example run")
    stats_file = tmp_path / "stats.json"
    env = dict(os.environ, LAYOUT_AGREEMENT_STATS=str(stats_file))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", os.path.abspath(__file__),
         "-k", "agrees_with_megatron or statistics_are_meaningful"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    stats = json.loads(stats_file.read_text())
    reference = open(os.path.join(ROOT, "references", "parallelism-reference.md")).read()
    sentence = (f"{stats['compared']} layouts compared, Megatron rejected {stats['megatron_rejected']} "
                f"and accepted {stats['compared'] - stats['megatron_rejected']}, 0 disagreements")
    assert sentence in " ".join(reference.split())


CASES = [
    # (flags, expected Megatron stage that rejects, or None when accepted)
    ("--world-size 16 --tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 "
     "--num-layers 8 --hidden-size 64 --num-attention-heads 8 --seq-length 32 "
     "--max-position-embeddings 32 --micro-batch-size 1 --vocab-size 100", None),
    ("--world-size 12 --tensor-model-parallel-size 8 --num-layers 8 --hidden-size 64 "
     "--num-attention-heads 8 --seq-length 32 --max-position-embeddings 32 "
     "--micro-batch-size 1 --vocab-size 100", "validate_args"),
    ("--world-size 8 --tensor-model-parallel-size 4 --num-layers 8 --hidden-size 72 "
     "--num-attention-heads 6 --seq-length 32 --max-position-embeddings 32 "
     "--micro-batch-size 1 --vocab-size 100", "TransformerConfig"),
    ("--world-size 8 --tensor-model-parallel-size 2 --expert-model-parallel-size 8 "
     "--num-experts 8 --disable-bias-linear --num-layers 8 --hidden-size 64 "
     "--num-attention-heads 8 --seq-length 32 --max-position-embeddings 32 "
     "--micro-batch-size 1 --vocab-size 100", "initialize_model_parallel"),
    ("--world-size 8 --pipeline-model-parallel-size 4 --num-virtual-stages-per-pipeline-rank 3 "
     "--num-layers 8 --hidden-size 64 --num-attention-heads 8 --seq-length 32 "
     "--max-position-embeddings 32 --micro-batch-size 1 --vocab-size 100",
     "get_num_layers_to_build"),
]


@pytest.mark.parametrize("argv,stage", CASES)
def test_each_megatron_stage_is_reached(argv, stage):
    """The oracle really runs every stage (a rejection at each one, or acceptance)."""
    layout, _ = flags.parse_layout(argv.split())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        verdict = verify.megatron_verdict(layout)
    assert verdict["stage"] == stage, verdict
    compare(argv.split())

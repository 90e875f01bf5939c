"""The performance model (parallel_layout.performance), its GPU table (parallel_layout.gpus) and its
calibration (parallel_layout.calibration) against published measurements.

- The model-FLOP count is Megatron's own: equal to the installed 0.19.2
  ``megatron.training.training.num_floating_point_operations`` for every model shape in
  tests/data/perf_models.json, and within 1% of the FLOPs per token that Megatron-Bridge's published
  tables imply (model TFLOP/s / tokens/s) for the models whose attention is not windowed.
- The error table (tests/data/perf_error_table.json) is recomputed from the data, the frozen split
  and the shipped constants; refitting on the fit rows gives the shipped constants, and the fit
  does not move when every held-out measurement is changed (the fit never reads them).
- The issue's targets are tests: those the model misses are strict xfails naming why, so they fail
  loudly once met.
"""

import copy
import json
import math
import os
import statistics
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "dev"))

from parallel_layout import calibration as C  # noqa: E402
from parallel_layout import derive as D, flags, gpus, performance as P, plan  # noqa: E402
from parallel_layout.errors import BadInput  # noqa: E402

DATA = os.path.join(ROOT, "tests", "data")
PUB, MODELS, SPLIT = C.load(DATA)
FIT_ROWS, TEST_ROWS = C.split(PUB["rows"], SPLIT)
FIT_ITEMS, FIT_SKIPPED = C.prepared(FIT_ROWS, MODELS)
TEST_ITEMS, TEST_SKIPPED = C.prepared(TEST_ROWS, MODELS)
with open(os.path.join(DATA, "perf_error_table.json")) as fh:
    TABLE = json.load(fh)
SCRIPT = os.path.join(ROOT, "scripts", "check_parallel_layout.py")


def layout_of(argv):
    layout, _ = flags.parse_layout([str(a) for a in argv])
    layout.megatron_version = "0.19.2"
    return layout


def row_layout(model, precision="BF16", **sizes):
    row = dict(model=model, system="DGX-H100", precision=precision, gpus=64, gbs=256, mbs=1,
               seq_length=4096, tp=1, pp=1, cp=1, vp=None, ep=None, fsdp=0)
    row.update(sizes)
    return layout_of(C.row_argv(row, MODELS))


# --- GPU table -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", gpus.names())
def test_gpu_record_is_complete_and_sourced(name):
    g = gpus.get(name)
    assert g["peak"]["bf16"] > 1e14 and g["hbm_gb"] >= 80 and g["hbm_bandwidth"] > 1e12
    assert g["nvlink_domain"] in (8, 72) and g["nvlink_bandwidth"] > g["internode_bandwidth"] > 0
    assert "datasheet" in g["source"] or "product page" in g["source"]
    if "fp8" in g["peak"]:  # tensor cores double the rate per halving of the format
        assert g["peak"]["fp8"] == pytest.approx(2 * g["peak"]["bf16"], rel=0.01)
    assert gpus.memory_budget_gib(name) == g["hbm_gb"]


def test_unknown_gpu_and_missing_precision_are_bad_input():
    with pytest.raises(BadInput, match="unknown GPU"):
        gpus.get("h800")
    with pytest.raises(BadInput, match="no fp8 tensor cores"):
        gpus.peak_flops(gpus.get("a100-80g"), "fp8")


# --- Model FLOPs: Megatron's own count -------------------------------------------------------

def megatron_args(layout):
    """The attributes num_floating_point_operations reads, from the checker's layout."""
    from parallel_layout import derive as D
    return types.SimpleNamespace(
        seq_length=layout.seq_length, hidden_size=layout.hidden_size,
        num_layers=layout.num_layers, num_attention_heads=layout.num_attention_heads,
        group_query_attention=layout.group_query_attention,
        num_query_groups=layout.num_query_groups, kv_channels=D.kv_channels(layout),
        ffn_hidden_size=D.ffn_hidden_size(layout), swiglu=layout.swiglu,
        num_experts=layout.num_experts, moe_layer_freq=(
            layout.moe_layer_freq if isinstance(layout.moe_layer_freq, list) else
            layout.moe_layer_freq),
        moe_router_topk=layout.moe_router_topk, moe_ffn_hidden_size=layout.moe_ffn_hidden_size,
        moe_shared_expert_intermediate_size=layout.moe_shared_expert_intermediate_size,
        moe_latent_size=None, mtp_num_layers=layout.mtp_num_layers,
        multi_latent_attention=layout.multi_latent_attention, q_lora_rank=layout.q_lora_rank,
        kv_lora_rank=layout.kv_lora_rank, qk_head_dim=layout.qk_head_dim,
        qk_pos_emb_head_dim=layout.qk_pos_emb_head_dim, v_head_dim=layout.v_head_dim,
        attention_output_gate=False, experimental_attention_variant=None,
        padded_vocab_size=D.padded_vocab_size(layout), hybrid_layer_pattern=None,
        hybrid_override_pattern=None, is_hybrid_model=False)


@pytest.mark.parametrize("model", sorted(MODELS["models"]))
def test_model_flops_equal_megatrons_count(model):
    from megatron.training.training import num_floating_point_operations
    layout = row_layout(model)
    ours = P.model_flops_per_token(P.model_shape(layout, P.perf_options(layout)))
    theirs = num_floating_point_operations(megatron_args(layout), batch_size=1) / layout.seq_length
    assert ours == pytest.approx(theirs, rel=1e-9)


WINDOWED = {"GPT OSS 120B"}  # Megatron counts full attention; the published numbers do not


@pytest.mark.parametrize("model", sorted(set(MODELS["models"]) - WINDOWED))
def test_model_flops_match_the_published_tflops_per_token(model):
    """Megatron-Bridge publishes model TFLOP/s and tokens/s: their ratio is its FLOPs per token.
    The newest release's rows agree within 1% (DeepSeek-V3's older rows count MTP)."""
    rows = [r for r in TEST_ROWS + FIT_ROWS if r["model"] == model and r["section"] == "pretrain"]
    newest = max(rows, key=lambda r: [int(x) for x in r["release"].split(".")])
    layout = row_layout(model, seq_length=newest["seq_length"])
    ours = P.model_flops_per_token(P.model_shape(layout, P.perf_options(layout)))
    published = newest["model_tflops_per_gpu"] * 1e12 / newest["tokens_per_sec_per_gpu"]
    assert ours == pytest.approx(published, rel=0.01)


# --- Terms -----------------------------------------------------------------------------------

BREAKDOWN_FUNCTIONS = (
    P.model_flops_per_token, P.gemm_seconds, P.layer_gemms, P.layer_gemm_seconds,
    P.attention_core_seconds, P.unfused_scores_bytes, P.elementwise_bytes,
    P.layer_memory_seconds, P.output_layer_seconds, P.ring_seconds, P.tp_comm_seconds,
    P.cp_comm_seconds, P.ep_comm_seconds, P.all_to_all_seconds, P.moe_sync_seconds,
    P.pp_p2p_seconds, P.bubble_fraction, P.dp_comm_seconds, P.recompute_seconds,
    P.optimizer_seconds)
CITATION = ("Narayanan", "Korthikanti", "Megatron", "megatron", "Dao", "Liu", "Jacobs",
            "Lepikhin", "Rajbhandari", "Thakur", "Williams", "Kingma", "calibrated")


@pytest.mark.parametrize("fn", BREAKDOWN_FUNCTIONS, ids=lambda f: f.__name__)
def test_every_term_names_its_source(fn):
    assert fn.__doc__ and any(c in fn.__doc__ for c in CITATION), fn.__name__


def predict(argv, gpu="h100"):
    return P.predict(layout_of(argv), gpus.get(gpu))


LLAMA8 = MODELS["models"]["LLAMA3_8B"]["flags"].split() + [
    "--seq-length", 8192, "--max-position-embeddings", 8192, "--global-batch-size", 128,
    "--micro-batch-size", 1, "--bf16", "--use-distributed-optimizer"]


def test_breakdown_sums_to_the_step_and_tokens_follow():
    perf = predict(["--world-size", 8] + LLAMA8)
    assert sum(perf["breakdown"].values()) == pytest.approx(perf["step_seconds"], rel=1e-3)
    assert perf["tokens_per_second_per_gpu"] == pytest.approx(
        128 * 8192 / (perf["step_seconds"] * 8), rel=1e-3)
    assert perf["mfu"] == pytest.approx(perf["model_tflops_per_gpu"] / 989.4, rel=1e-3)


def test_the_bubble_is_narayanans_and_interleaving_shrinks_it():
    assert P.bubble_fraction(8, 64, 1) == 7 / 64
    assert P.bubble_fraction(8, 64, 4) == 7 / 256
    base = ["--world-size", 64, "--pipeline-model-parallel-size", 8] + LLAMA8
    plain = predict(base)["breakdown"]["pipeline_bubble"]
    inter = predict(base + ["--num-virtual-stages-per-pipeline-rank", 4])["breakdown"]
    assert inter["pipeline_bubble"] < plain / 2


def test_flags_move_the_terms_they_name():
    base = ["--world-size", 16, "--tensor-model-parallel-size", 8, "--sequence-parallel"] + LLAMA8
    fast = predict(base)
    assert predict(base + ["--attention-backend", "unfused"])["step_seconds"] > fast["step_seconds"]
    assert predict(base + ["--recompute-granularity", "full", "--recompute-method", "uniform",
                           "--recompute-num-layers", 1])["breakdown"]["recompute"] > 0
    overlapped = predict(base + ["--tp-comm-overlap"])["breakdown"]["tp_comm"]
    assert overlapped < fast["breakdown"]["tp_comm"]
    fp8 = predict(base + ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"])
    assert fp8["precision"] == "fp8" and fp8["step_seconds"] < fast["step_seconds"]
    dp = ["--world-size", 64] + LLAMA8
    assert predict(dp + ["--overlap-grad-reduce", "--overlap-param-gather"])["breakdown"][
        "dp_comm"] < predict(dp)["breakdown"]["dp_comm"]


def test_collectives_leaving_the_nvlink_domain_are_slower():
    hw = P.hardware(gpus.get("h100"), "bf16", P.calibration())
    assert P.all_to_all_seconds(1e9, 16, 1, hw) > 2 * P.all_to_all_seconds(1e9, 8, 1, hw)
    gb = P.hardware(gpus.get("gb200"), "bf16", P.calibration())
    assert P.all_to_all_seconds(1e9, 64, 1, gb) < P.all_to_all_seconds(1e9, 64, 1, hw)


def test_hybrid_models_are_not_predicted():
    assert predict(["--world-size", 8, "--num-layers", 4, "--hidden-size", 256,
                    "--num-attention-heads", 4, "--seq-length", 512, "--vocab-size", 1000,
                    "--micro-batch-size", 1, "--bf16", "--hybrid-layer-pattern", "M*M*"]) is None


# --- Calibration and validation --------------------------------------------------------------

def test_split_is_frozen_by_release_and_holds_dense_and_moe_rows():
    releases = {r["release"] for r in PUB["rows"]}
    assert set(SPLIT["fit_releases"]) | set(SPLIT["test_releases"]) == releases
    newest = max(releases, key=lambda r: [int(x) for x in r.split(".")])
    assert newest in SPLIT["test_releases"]
    assert max(SPLIT["fit_releases"], key=lambda r: [int(x) for x in r.split(".")]) < min(
        SPLIT["test_releases"], key=lambda r: [int(x) for x in r.split(".")])
    kinds = {bool(layout.num_experts) for _, layout, _ in TEST_ITEMS}
    assert kinds == {True, False}


def test_rows_the_model_cannot_represent_are_listed_with_why():
    listed = {e["id"]: e["why"] for e in TABLE["not_representable"]}
    skipped = FIT_SKIPPED + TEST_SKIPPED
    assert {r["id"] for r, _ in skipped} == set(listed)
    assert len(skipped) + len(FIT_ITEMS) + len(TEST_ITEMS) == len(PUB["rows"])
    assert all(listed.values())


def test_refit_reproduces_the_shipped_constants_and_ignores_held_out_rows():
    import fit_performance
    calib, _, _ = fit_performance.compute()
    assert calib == P.load_calibration()
    # The fit reads fit rows only: changing every held-out measurement leaves it as it is.
    changed = [dict(r, tokens_per_sec_per_gpu=r["tokens_per_sec_per_gpu"] * 3)
               if r["release"] in SPLIT["test_releases"] else r for r in PUB["rows"]]
    fit_rows, _ = C.split(changed, SPLIT)
    refit = C.fit(C.prepared(fit_rows, MODELS)[0], {**fit_performance.BASE, "constants": {},
                                                    "gemm_half_dim": calib["gemm_half_dim"]})
    assert refit["constants"] == calib["constants"]


def test_error_table_is_recomputed_exactly():
    calib = P.load_calibration()
    fit_errors = C.error_rows(FIT_ITEMS, calib)
    test_errors = C.error_rows(TEST_ITEMS, calib)
    assert json.loads(json.dumps(fit_errors)) == TABLE["fit"]["rows"]
    assert json.loads(json.dumps(test_errors)) == TABLE["held_out"]["rows"]
    summary = {f"{g}/{p}": v for (g, p), v in C.summary(test_errors).items()}
    assert json.loads(json.dumps(summary)) == TABLE["held_out"]["summary"]


def test_plan_ranks_of_the_published_layouts_are_recomputed_exactly():
    ranks = C.plan_ranks(TEST_ITEMS, P.load_calibration())
    assert ranks == TABLE["plan_ranks"]["rows"]
    assert all(r["rank"] is not None or r["why"] for r in ranks)


def test_dense_held_out_rows_meet_the_target():
    dense = [e for e in TABLE["held_out"]["rows"] if not e["moe"]]
    assert dense and statistics.median(abs(e["error"]) for e in dense) <= 0.15
    assert max(abs(e["error"]) for e in dense) <= 0.40



def test_persistence_floor_is_recomputed_and_above_the_moe_target():
    """The split's floor: each held-out row predicted by its own setting's newest fit-release
    measurement.  Its MoE rows on GB200/GB300 miss the issue's 15% median already, so no model
    fitted on the fit releases meets the per-GPU target there."""
    import fit_performance
    test_errors = C.error_rows(TEST_ITEMS, P.load_calibration())
    recomputed = fit_performance.persistence_floor(PUB["rows"], SPLIT, test_errors)
    assert json.loads(json.dumps(recomputed)) == TABLE["persistence_floor"]
    rows = TABLE["persistence_floor"]["rows"]
    # Each floor row is a setting of a fit release measured again in a held-out release.
    by_id = {r["id"]: r for r in PUB["rows"]}
    for f in rows:
        old = [r for r in PUB["rows"] if r["release"] == f["from_release"]
               and C.setting_key(r) == C.setting_key(by_id[f["id"]])]
        assert f["from_release"] in SPLIT["fit_releases"] and len(old) == 1
        assert f["predicted"] == old[0]["tokens_per_sec_per_gpu"]
    summary = TABLE["persistence_floor"]["summary"]
    assert summary["gb200/MXFP8"]["median_abs_error"] > 0.15
    assert summary["gb300/MXFP8"]["median_abs_error"] > 0.15
    dense = [abs(f["error"]) for f in rows if not f["moe"]]
    assert dense and max(dense) < 0.05  # dense settings barely moved: the floor is MoE's

@pytest.mark.xfail(strict=True, reason=(
    "measured: held-out MoE rows median 29%, max 72% off, dense 6%/11%; per GPU/precision "
    "gb300/MXFP8 29%/72%, gb200/MXFP8 28%/68%, b300/MXFP8 32%/36%, h100/FP8 20%/29% (one dense, "
    "one MoE row). MoE rows of 26.06+ on "
    "GB200/GB300/B300 run 30-56% faster than the same layouts in 26.04.01 (software only, see "
    "release_drift in the table); a model fitted on older releases under-predicts them. "
    "The split's floor (persistence_floor: each row predicted by its own setting's newest "
    "fit-release measurement) is itself 22%/23% median on gb200/gb300 MXFP8"))
def test_held_out_median_and_max_error_per_gpu_and_precision():
    for key, s in TABLE["held_out"]["summary"].items():
        assert s["median_abs_error"] <= 0.15 and s["max_abs_error"] <= 0.40, key


@pytest.mark.xfail(strict=True, reason=(
    "measured: 15 of 37 held-out published layouts in the top 3 (all 37 ranked, median rank 5; "
    "each judged against the larger of the GPU's HBM and its own memory estimate, which 13 "
    "exceed); "
    "the model sees CP and TP inside an NVL72 domain as nearly free and exposes the whole EP "
    "all-to-all (HybridEP, CUDA graphs and FP8 dispatch of the recipes are not modelled), so "
    "it prefers CP/TP over the published EP layouts"))
def test_published_layouts_rank_in_the_top_three():
    ranks = TABLE["plan_ranks"]
    assert ranks["top3"] >= 0.8 * ranks["held_out"]


def test_software_drift_between_releases_is_measured():
    drift = C.release_drift(PUB["rows"], "26.04.01", "26.06")
    assert drift == TABLE["release_drift_26.04.01_to_26.06"]
    moe_gb = [v for k, v in drift.items() if "Qwen3" in k and "H100" not in k]
    dense = [v for k, v in drift.items() if "LLAMA" in k]
    assert min(moe_gb) > 1.25 and all(abs(v - 1) < 0.05 for v in dense)


# --- CLI -------------------------------------------------------------------------------------

def run(argv):
    proc = subprocess.run([sys.executable, SCRIPT] + [str(a) for a in argv],
                          capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


LLAMA70 = MODELS["models"]["LLAMA3_70B"]["flags"].split() + [
    "--seq-length", 8192, "--max-position-embeddings", 8192, "--global-batch-size", 256,
    "--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "tensorwise",
    "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]


def test_cli_performance_json_and_text():
    argv = ["--world-size", 64, "--tensor-model-parallel-size", 4, "--sequence-parallel",
            "--pipeline-model-parallel-size", 8, "--num-virtual-stages-per-pipeline-rank", 5,
            "--micro-batch-size", 1, "--gpu", "h100"] + LLAMA70
    rc, out, _ = run(argv + ["--json"])
    perf = json.loads(out)["performance"]
    for key in ("step_seconds", "tokens_per_second_per_gpu", "model_tflops_per_gpu", "mfu",
                "breakdown", "gpu", "calibration", "model_flops_formula"):
        assert key in perf
    assert perf["gpu"] == "h100" and perf["precision"] == "fp8"
    assert json.loads(out)["memory"]["gpu_memory_bytes"] == 80 * 2 ** 30  # --gpu's HBM
    rc, text, _ = run(argv)
    line = [x for x in text.splitlines() if x.startswith("Performance on h100 (fp8)")]
    assert len(line) == 1 and "tokens/s/GPU" in line[0] and line[0].count("%") == 4


def test_cli_predicts_a_layout_that_only_the_memory_estimate_rejects():
    """memory-fits judges the checker's estimate, not a Megatron check: the layout stays INVALID
    (exit 1) and is still predicted, with memory_fits false; any other violation withholds it."""
    argv = ["--world-size", 64, "--tensor-model-parallel-size", 4, "--sequence-parallel",
            "--pipeline-model-parallel-size", 8, "--micro-batch-size", 1, "--gpu", "h100"] + LLAMA70
    rc, out, _ = run(argv + ["--gpu-memory-gib", 1, "--json"])
    data = json.loads(out)
    assert rc == 1 and [v["rule"] for v in data["violations"]] == ["memory-fits"]
    assert data["performance"]["memory_fits"] is False
    assert data["performance"]["tokens_per_second_per_gpu"] > 0
    rc, text, _ = run(argv + ["--gpu-memory-gib", 1])
    assert rc == 1 and "memory_fits: false" in text and "Performance on h100 (fp8)" in text
    rc, out, _ = run(argv + ["--gpu-memory-gib", 4096, "--json"])
    assert rc == 0 and json.loads(out)["performance"]["memory_fits"] is True
    bad = [a if a != 64 else 60 for a in argv]  # DP undefined as well: not predicted
    rc, out, _ = run(bad + ["--gpu-memory-gib", 1, "--json"])
    assert rc == 1 and json.loads(out)["performance"] is None


def test_published_rows_are_ranked_against_at_least_their_own_memory_estimate():
    """A published layout ran: its plan rank is judged with the budget raised to its own estimate
    where that exceeds the HBM, so the estimate never demotes it below every fitting plan."""
    over = [(row, layout, gpu) for row, layout, gpu in TEST_ITEMS
            if C.memory_budget(layout, gpu)[1] is False]
    assert over
    row, layout, gpu = over[0]
    raised, fits = C.memory_budget(layout, gpu)
    assert fits is False and raised.gpu_memory_gib > gpus.memory_budget_gib(gpu["name"])
    assert layout.gpu_memory_gib is None  # a copy: the row's layout is not changed
    own = plan.rank_of(raised, plan.enumerate_layouts(raised, gpu=gpu, detail=0))
    plans = plan.enumerate_layouts(layout, gpu=gpu, detail=0)
    assert own is not None and plans[plan.rank_of(layout, plans) - 1]["fits_memory"] is False
    assert plans[own - 1]["fits_memory"] is not False


def test_cli_rejects_an_unknown_gpu_in_one_line():
    rc, out, err = run(["--world-size", 8, "--gpu", "tpu-v5"])
    assert rc == 2 and out == "" and err.count("\n") == 1 and "unknown GPU" in err


def test_plan_ranks_by_predicted_throughput_with_bounded_output():
    argv = ["--world-size", 64, "--plan", "--gpu", "h100"] + LLAMA70
    rc, out, _ = run(argv + ["--json"])
    data = json.loads(out)
    assert rc == 0 and len(out) <= 16 * 1024 and len(data["plan"]) <= 10
    fitting = [p for p in data["plan"] if p["fits_memory"]]
    speeds = [p["performance"]["tokens_per_second_per_gpu"] for p in fitting]
    assert speeds == sorted(speeds, reverse=True)
    assert {p["micro_batch_size"] for p in data["plan"]} <= {1, 2, 4, 8}
    assert any(p["virtual_pipeline_model_parallel_size"] for p in data["plan"]) or all(
        p["pipeline_model_parallel_size"] == 1 for p in data["plan"])
    rc, text, _ = run(argv)
    assert rc == 0 and len(text.encode()) <= 4 * 1024
    header = [x for x in text.splitlines() if x.lstrip().startswith("TP  PP")][0]
    first = text.splitlines()[text.splitlines().index(header) + 1].split()
    col = header.split().index("mbs")
    assert int(first[col]) == data["plan"][0]["micro_batch_size"]  # the micro batch, not m
    assert int(first[header.split().index("m")]) == data["plan"][0]["num_microbatches"]
    rc, full, _ = run(argv + ["--json", "--full"])
    data_full = json.loads(full)
    assert len(data_full["plan"]) == data_full["plan_count"] > 10
    assert "breakdown" in data_full["plan"][0]["performance"]


# --- Reference -------------------------------------------------------------------------------

def test_expected_throughput_section_is_generated_from_the_model():
    import perf_reference
    text = open(perf_reference.REFERENCE).read()
    body = text.split(perf_reference.BEGIN, 1)[1].split(perf_reference.END, 1)[0]
    assert perf_reference.BEGIN + body + perf_reference.END == perf_reference.section()


def test_published_layout_ranks_stated_in_the_reference():
    """The sentence after the 8B planning example states the range of --plan ranks of
    tests/data/published_layouts.json; recompute it."""
    import re
    import test_layout_published as T
    text = open(os.path.join(ROOT, "references", "parallelism-reference.md")).read()
    m = re.search(r"among up to ([\d,]+) variants, they rank between\s+(\d+)\w\w and (\d+)\w\w",
                  text)
    assert m
    counts, ranks = [], []
    for entry in T.ENTRIES:
        layout, _ = flags.parse_layout(T.plan_argv(entry))
        plans = plan.enumerate_layouts(layout)
        counts.append(len(plans))
        ranks.append(plan.rank_of(layout, plans))
    assert None not in ranks
    assert (int(m.group(1).replace(",", "")), int(m.group(2)), int(m.group(3))) == (
        max(counts), min(ranks), max(ranks))


@pytest.mark.parametrize("extra,needle", [
    (["--bf16"], "needs --vocab-size"),
    (["--vocab-size", 1000], "fp32 training is not modelled"),
    (["--vocab-size", 1000, "--bf16", "--tensor-model-parallel-size", 3], "the layout is invalid"),
])
def test_text_says_why_a_layout_is_not_predicted(extra, needle):
    argv = ["--world-size", 8, "--num-layers", 4, "--hidden-size", 256, "--num-attention-heads", 4,
            "--seq-length", 512, "--max-position-embeddings", 512, "--micro-batch-size", 1,
            "--global-batch-size", 8, "--gpu", "h100"] + extra
    rc, out, _ = run(argv)
    assert f"Performance: not predicted ({needle}" in out
    rc, out, _ = run(argv + ["--json"])
    assert json.loads(out)["performance"] is None


def _moe_rows_mbs_free(n):
    rows = [(r, L, g) for r, L, g in TEST_ITEMS if D.num_experts(L)][:n]
    out = []
    for row, layout, gpu in rows:
        free = copy.copy(layout)
        free.micro_batch_size = None
        out += [(layout, gpu), (free, gpu)]
    return out


def test_bounded_plan_shows_the_full_searchs_first_plans_and_rank():
    """--plan's bound (plan.enumerate_layouts(exact=N)) leaves out only size choices that rank
    below the first N and below the given layout: both equal the full search's."""
    left_out = 0
    for layout, gpu in _moe_rows_mbs_free(4):
        full = plan.enumerate_layouts(layout, gpu=gpu, detail=0)
        stats = {}
        bounded = plan.enumerate_layouts(layout, gpu=gpu, detail=0, exact=3, own=layout,
                                         stats=stats)
        left_out += stats["bounded_out"]
        key = [(p["flags"], p["score"]) for p in full[:3]]
        assert key == [(p["flags"], p["score"]) for p in bounded[:3]]
        assert plan.rank_of(layout, full) == plan.rank_of(layout, bounded)
    assert left_out > 0  # the bound does leave choices out


def test_step_lower_bound_is_below_every_variant():
    layout, gpu = _moe_rows_mbs_free(1)[1]
    opts = P.perf_options(layout)
    shape = P.model_shape(layout, opts)
    hw = P.hardware(gpu, P.precision(layout, opts), P.calibration())
    for p in plan.enumerate_layouts(layout, gpu=gpu, detail=0)[:400]:
        variant = copy.copy(layout)
        for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                  "context_parallel_size", "expert_model_parallel_size"):
            setattr(variant, k, p[k])
        variant.expert_tensor_parallel_size = p["expert_tensor_parallel_size"]
        variant.sequence_parallel = p["tensor_model_parallel_size"] > 1
        variant.micro_batch_size = p["micro_batch_size"]
        variant.num_virtual_stages_per_pipeline_rank = p["virtual_pipeline_model_parallel_size"]
        seconds = P.prediction(variant, gpu, opts=opts, shape=shape).seconds
        bound = P.step_lower_bound(variant, shape, hw, opts, 8, 1, plan.MAX_VPP)
        assert bound <= seconds * (1 + 1e-9)

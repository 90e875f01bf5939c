"""scripts/check_parallel_layout.py as a command: exit codes, JSON schema,
--ranks, --plan, --help, and a fuzzed argument parser that never produces a
traceback (bad input: exit 2 with one line on stderr)."""

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "check_parallel_layout.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import check_parallel_layout as cli  # noqa: E402
from parallel_layout import flags, ranks, rules  # noqa: E402

MODEL = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
         "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 256 "
         "--vocab-size 32000 --bf16 --sequence-parallel --use-distributed-optimizer").split()


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in argv])
    return rc, out.getvalue(), err.getvalue()


def test_valid_layout_exits_0_with_json_contract():
    rc, out, _ = run(["--world-size", 64, "--tensor-model-parallel-size", 8,
                      "--pipeline-model-parallel-size", 2, "--json", "--lr", "3e-4"] + MODEL)
    assert rc == 0
    data = json.loads(out)
    assert data["schema_version"] == 1 and data["valid"] is True
    assert data["violations"] == []
    d = data["derived"]
    assert (d["data_parallel_size"], d["expert_data_parallel_size"], d["num_microbatches"],
            d["padded_vocab_size"], d["layers_per_stage"]) == (4, None, 64, 32768, [16, 16])
    m = data["memory"]
    assert m["weight_and_optimizer_bytes_per_gpu"] > 0 and m["activation_bytes_per_gpu"] > 0
    assert data["ignored_flags"] == ["--lr", "3e-4"]


def test_invalid_layout_reports_every_violation_and_exits_1():
    rc, out, _ = run(["--world-size", 12, "--tensor-model-parallel-size", 8,
                      "--num-attention-heads", 12, "--num-layers", 7,
                      "--pipeline-model-parallel-size", 2, "--json"])
    assert rc == 1
    data = json.loads(out)
    assert data["valid"] is False
    got = {v["rule"] for v in data["violations"]}
    assert {"world-divisible", "heads-divisible-by-tp", "layers-divisible-by-pp"} <= got
    assert all(v["message"] and v["fix"] for v in data["violations"])


def test_ranks_json_and_text_rank_map():
    argv = ["--world-size", 16, "--tensor-model-parallel-size", 2,
            "--pipeline-model-parallel-size", 2, "--expert-model-parallel-size", 4,
            "--num-experts", 8, "--disable-bias-linear", "--gpus-per-node", 4, "--ranks"]
    rc, out, _ = run(argv + ["--json"])
    data = json.loads(out)
    assert rc == 0
    for key in ("tp", "pp", "dp", "cp", "ep", "etp", "edp", "tp-pp", "dp-cp", "tp-ep-pp"):
        assert key in data["ranks"]
    assert data["ranks"]["tp"][0] == [0, 1]
    assert data["rank_map"][5] == {"rank": 5, "node": 1, "gpu": 1,
                                   "coords": ranks.rank_coordinates(
                                       flags.parse_layout([str(a) for a in argv])[0])[5]}
    rc, text, _ = run(argv)
    assert "rank     5: node    1 gpu  1" in text


def check_plan_page(rc, data, limit=cli.PLAN_LIMIT):
    """--plan exits 0 and prints the first ``limit`` (the default page) of ``plan_count``
    layouts."""
    assert rc == 0, rc
    assert len(data["plan"]) == min(limit, data["plan_count"]), (len(data["plan"]),
                                                                 data["plan_count"])


@pytest.mark.parametrize("rc,shown,count", [(1, 20, 40), (0, 20, 5), (0, 3, 40)])
def test_plan_page_check_fails_on_broken_output(rc, shown, count):
    """The check above fails on a wrong exit code or a wrong page size (before it was
    fixed, operator precedence let any exit code pass once there were 20+ plans)."""
    with pytest.raises(AssertionError):
        check_plan_page(rc, {"plan": [{}] * shown, "plan_count": count})


def test_plan_lists_valid_layouts_best_first():
    rc, out, _ = run(["--world-size", 64, "--plan", "--json"] + MODEL)
    data = json.loads(out)
    check_plan_page(rc, data)
    for plan in data["plan"]:
        argv = ["--world-size", "64"] + MODEL + plan["flags"].split()
        assert rules.check(flags.parse_layout(argv)[0]).valid, plan
    scores = [p["score"] for p in data["plan"] if p["fits_memory"] and p["tp_within_node"]]
    assert scores == sorted(scores)


@pytest.mark.parametrize("argv,needle", [
    (["--world-size", "0"], "must be >= 1"),
    (["--world-size", "-4"], "must be >= 1"),
    (["--world-size", "2.5"], "expected an integer"),
    (["--world-size", "8", "--tensor-model-parallel-size"], "expected one argument"),
    ([], "world size is required"),
    (["--world-size", "8", "--nnodes", "2", "--nproc-per-node", "8"], "contradicts"),
    (["--world-size", "8", "--fp16", "--bf16"], "contradict"),
    (["--world-size", "8", "--recompute-granularity", "some"], "invalid choice"),
    (["--world-size", "8", "--gpu-memory-gib", "nan"], "positive number"),
    (["--world-size", "720720", "--plan"], "--plan needs the model"),
    (["--world-size", "8", "--num-layers", "2147483648"], "must be <= 2,147,483,647"),
    (["--world-size", "8", "--seq-length", "9" * 40], "expected an integer"),
    (["--world-size", "2097152", "--ranks"], "--ranks lists rank groups for up to"),
    (["--world-size", "8", "--entry", "train.py"], "matches several Megatron-LM scripts"),
    (["--world-size", "8", "--entry", "x" * 600], "--entry: a script path of at most"),
])
def test_bad_input_exits_2_with_one_line(argv, needle):
    rc, out, err = run(argv)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_subprocess_exit_codes_and_help_without_torch():
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    codes = [subprocess.run([sys.executable, SCRIPT] + a, capture_output=True, text=True,
                            env=env, timeout=60).returncode
             for a in (["--world-size", "8"], ["--world-size", "6", "--tensor-model-parallel-size",
                                                "4"], ["--world-size", "x"])]
    assert codes == [0, 1, 2]
    probe = ("import runpy, sys; sys.argv = ['x', '--help']\n"
             "try:\n    runpy.run_path(%r, run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')") % SCRIPT
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=60).stdout
    assert out.strip().endswith("NO-TORCH")
    for flag in flags.FLAGS + flags.WORLD_FLAGS:
        assert flag.option in out


FLAG_NAMES = [f.option for f in flags.FLAGS + flags.WORLD_FLAGS] + [
    "--json", "--ranks", "--plan", "--plan-limit", "--lr", "--unknown-x", "-x", "--", "-"]
VALUES = st.one_of(
    st.integers(-3, 70).map(str), st.sampled_from(["0", "-1", "1.5", "", " ", "1e3", "nan",
                                                   "inf", "abc", "2**8", "E|tL", "Et*3|(tt|)*2L",
                                                   "([1]*3+[0])*2", "[1,0", "9" * 30, "--json",
                                                   "1000000000000", "(t*9999999)*9999999",
                                                   "4" * 5000]),
    st.text(max_size=12))


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(st.lists(st.one_of(st.sampled_from(FLAG_NAMES), VALUES), max_size=14))
def test_fuzzed_arguments_never_raise(argv):
    if "--plan" in argv:
        argv = [a for a in argv if a != "--plan"]  # planning is the bench's subject, not a parser path
    rc, out, err = run(argv)
    assert rc in (0, 1, 2)
    assert "Traceback" not in err and "internal error" not in err, err
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("check_parallel_layout.py: error:")


@pytest.mark.slow
@pytest.mark.parametrize("extra,valid", [([], True), (["--num-attention-heads", "12"], False)])
def test_verify_reports_agreement_with_megatron(extra, valid):
    rc, out, _ = run(["--world-size", 64, "--tensor-model-parallel-size", 8,
                      "--pipeline-model-parallel-size", 2, "--verify", "--json"] + MODEL + extra)
    data = json.loads(out)
    assert data["valid"] is valid and rc == (0 if valid else 1)
    assert data["verify"]["available"] is True
    assert data["verify"]["megatron"]["accepted"] is valid
    assert data["verify"]["agrees"] is True


LARGE = ["--world-size", 16384, "--tensor-model-parallel-size", 8,
         "--pipeline-model-parallel-size", 4, "--num-experts", 64,
         "--expert-model-parallel-size", 8, "--disable-bias-linear", "--ranks"]


def expand(text):
    """The ranks a compact group text stands for ('0..24 step 8, 40' -> [0, 8, 16, 24, 40])."""
    out = []
    for part in text.split(", "):
        if ".." in part:
            span, _, step = part.partition(" step ")
            a, b = (int(x) for x in span.split(".."))
            out += list(range(a, b + 1, int(step or 1)))
        else:
            out.append(int(part))
    return out


def test_ranks_summarise_a_large_world():
    """16,384 GPUs: text under 4 KB, JSON under 16 KB, each kind of group as its
    count, size, first two and last groups, which are the real groups."""
    layout = flags.parse_layout([str(a) for a in LARGE[:-1]])[0]
    real = ranks.rank_groups(layout, order=ranks.layout_order(layout))
    rc, text, _ = run(LARGE)
    assert rc == 0 and len(text.encode()) <= 4096, len(text.encode())
    rc, out, _ = run(LARGE + ["--json"])
    assert len(out.encode()) <= 16384, len(out.encode())
    data = json.loads(out)
    assert data["ranks_summarised"] is True and data["rank_map_total"] == 16384
    for name, groups in real.items():
        s = data["ranks"][name]
        assert (s["count"], s["size"]) == (len(groups), len(groups[0]))
        for shown, group in zip((s["first"], s["second"], s["last"]),
                                (groups[0], groups[1], groups[-1])):
            if ", ..." in shown:  # more runs than shown: the shown ones are the group's start
                head = expand(shown.split(", ...")[0])
                assert head == group[:len(head)] and f"({len(group)} ranks)" in shown, name
            else:
                assert expand(shown) == group, name
    assert "  tp-pp: 512 x 32: [0..7, 4096..4103, 8192..8199, 12288..12295]" in text.replace(
        "             ", "")


def test_ranks_all_gives_every_group():
    rc, out, _ = run(LARGE + ["--json", "--ranks-all"])
    data = json.loads(out)
    assert data["ranks_summarised"] is False and len(data["ranks"]["tp"]) == 2048
    assert len(data["rank_map"]) == 16384


@given(st.lists(st.integers(0, 200), min_size=1, max_size=30, unique=True))
@settings(max_examples=300, deadline=None, derandomize=True)
def test_compact_groups_expand_to_the_group(values):
    group = sorted(values)
    text = ranks.compact(group)
    head = expand(text.split(", ...")[0])
    assert head == (group if ", ..." not in text else group[:len(head)])


@pytest.mark.parametrize("layout", ["(t*99999)*99999|L", "(t*9999999)*9999999|L",
                                    "E" + "(tt|)*99999" * 50 + "L", "t*" + "9" * 30,
                                    "((((t*999)*999)*999)*999)|L"])
def test_layout_string_expansion_is_bounded_in_total(layout):
    """The cap applies to the whole expansion (both of Megatron's passes), however
    the repetitions nest or repeat: an answer in well under a second, one violation."""
    import time
    start = time.monotonic()
    rc, out, err = run(["--world-size", 8, "--pipeline-model-parallel-size", 2, "--num-layers",
                        4, "--pipeline-model-parallel-layout", layout, "--json"])
    assert time.monotonic() - start < 5
    assert rc == 1 and "Traceback" not in err
    rules_hit = {v["rule"] for v in json.loads(out)["violations"]}
    assert "pipeline-layout" in rules_hit


def test_layout_string_within_the_bound_still_expands():
    from parallel_layout import derive
    stages = derive.unroll_layout("Et*3|(tt|)*2,tL")
    assert stages == ["Ettt", "tt", "tt", "tL"]
    assert len(derive.unroll_layout("(t|)*1000" + "L")) == 1001


def _closed_pipe(argv):
    r, w = os.pipe()
    os.close(r)
    try:
        return subprocess.run([sys.executable, SCRIPT] + [str(a) for a in argv], stdout=w,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)


@pytest.mark.parametrize("extra", [[], ["--json"], ["--ranks"]])
def test_a_closed_pipe_exits_0_without_a_traceback(extra):
    """`check_parallel_layout.py ... | head`: the reader's choice, not bad input."""
    proc = _closed_pipe(["--world-size", 64] + MODEL + extra)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


NUMERIC = [f.option for f in flags.FLAGS + flags.WORLD_FLAGS
           if f.kind in ("size", "count", "gib", "float")] + ["--plan-limit"]


@pytest.mark.parametrize("option", NUMERIC)
def test_every_numeric_flag_refuses_a_huge_value_in_one_line(option):
    rc, out, err = run(["--world-size", "8", f"{option}=99999999999999999999"])
    assert rc == 2 and err.count("\n") == 1 and len(err) < 300, err


@pytest.mark.parametrize("option", [f.option for f in flags.FLAGS if f.kind == "str"])
def test_every_string_flag_is_bounded_and_not_echoed_whole(option):
    rc, out, err = run(["--world-size", "8", f"{option}={'A' * 100_000}"])
    assert rc == 2 and err.count("\n") == 1 and len(err) < 300, err[:300]

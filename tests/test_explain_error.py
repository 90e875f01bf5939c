"""scripts/explain_error.py and scripts/triage: a pasted log -> the catalogue entry that explains it.

The catalogue test is generated from references/troubleshooting.md as the tests read it
(markdown-it-py, test_troubleshooting.load_entries), so entries added later are covered: every
documented message and every older wording (``text alias``), with its numbers changed, is
pasted into a noisy multi-rank log and must come back as the first match. Messages with no
text of their own (a bare ``AssertionError``) are pasted with a traceback through the
statement that raises them, which is how they are told apart.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests"), str(REPO / "dev")]

import test_troubleshooting as tt  # noqa: E402
import triage  # noqa: E402
import triage_logs as tl  # noqa: E402
from triage import catalogue  # noqa: E402

SCRIPT = REPO / "scripts" / "explain_error.py"
FIXTURE = REPO / "tests" / "data" / "triage" / "catalogue.md"
INDEX = {e["id"]: e for e in catalogue.entries()}
BARE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)?:?\s*$")
MATCH_KEYS = {"id", "title", "score", "matched_line", "ranks", "values", "cause", "fix", "versions", "next_command"}


def _messages():
    out = []
    for entry in tt.ENTRIES:
        for info, text in entry.fences:
            words = info.split()
            if words[:2] in (["text", "error"], ["text", "alias"]):
                out.append(pytest.param(entry.id, text.rstrip("\n"), id=f"{entry.id}-{words[1]}-{len(out)}"))
    return out


MESSAGES = _messages()


def _raising_frame(eid: str):
    """A frame inside the statement that raises the entry's message in 0.19.2 (from the index)."""
    for f in INDEX[eid]["frames"]:
        if f["kind"] == "statement":
            return [(f["file"], f["lines"][0], f["function"].rsplit(".", 1)[-1])]
    return []


@pytest.mark.parametrize("eid,message", MESSAGES)
def test_every_documented_message_is_the_first_match_in_a_noisy_log(eid, message):
    pasted = tl.changed_numbers(message, seed=len(message))
    if tl.NUMBER.search(message):
        assert pasted != message
    frames = _raising_frame(eid) if BARE.match(message.splitlines()[0]) else []
    result = triage.match_log(tl.multi_rank_log(pasted, frames, ranks=(1, 3, 6)))
    got = [m["id"] for m in result["matches"]]
    assert got and got[0] == eid, f"{eid}: first matches {got[:4]} for {pasted[:120]!r}"
    first = result["matches"][0]
    assert first["ranks"] == [1, 3, 6], first["ranks"]
    assert MATCH_KEYS <= set(first)


def test_the_catalogue_has_messages_to_match():
    assert len(MESSAGES) >= 70


def test_values_are_read_from_the_variable_parts():
    log = tl.multi_rank_log("ValueError: num_query_groups (2) must be a multiple or divisor of "
                            "tensor_model_parallel_size (8).")
    m = triage.match_log(log)["matches"][0]
    assert m["id"] == "TP-02"
    assert m["values"] == {"num_query_groups": "2", "tensor_model_parallel_size": "8"}
    assert m["next_command"] == ("python scripts/check_parallel_layout.py --world-size <WORLD_SIZE> "
                                 "--num-query-groups 2 --tensor-model-parallel-size 8")
    m = triage.match_log("RuntimeError: world_size (24) is not divisible by expert_tensor_model_pipeline_parallel "
                         "size (16)\n")["matches"][0]
    assert m["id"] == "MOE-04" and m["next_command"].startswith(
        "python scripts/check_parallel_layout.py --world-size 24")


def test_next_command_flags_are_ones_the_layout_checker_prints_in_help():
    help_text = subprocess.run([sys.executable, str(REPO / "scripts" / "check_parallel_layout.py"), "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    for eid, message in [(p.values[0], p.values[1]) for p in MESSAGES]:
        m = triage.match_log(tl.changed_numbers(message) + "\n")["matches"]
        for match in m:
            cmd = match["next_command"] or ""
            for flag in re.findall(r"--[\w-]+", cmd):
                if "check_parallel_layout" in cmd:
                    assert flag in help_text, (eid, flag)


# -- frames ---------------------------------------------------------------------------------------

def _installed_line(path: str, text: str) -> int:
    site = next((REPO / ".venv" / "lib").glob("python3*/site-packages"))
    for i, line in enumerate((site / path).read_text(encoding="utf-8").splitlines(), 1):
        if text in line:
            return i
    raise AssertionError(f"{text!r} not in {path}")


def test_bare_assertion_is_told_apart_by_its_raising_frame():
    tp10 = _installed_line("megatron/training/arguments.py", "assert args.hidden_size % args.num_attention_heads == 0")
    ok07 = _installed_line("megatron/core/models/gpt/gpt_layer_specs.py", "assert HAVE_KITCHEN")
    for frame, eid in [(("megatron/training/arguments.py", tp10, "validate_args"), "TP-10"),
                       (("megatron/core/models/gpt/gpt_layer_specs.py", ok07, "get_gpt_layer_local_submodules"), "OK-07")]:
        result = triage.match_log(tl.multi_rank_log("AssertionError", [frame]))
        assert result["matches"][0]["id"] == eid
        assert result["matches"][0]["frame"]["line"] == frame[1]
    # A line outside the statement (same file) is only a function-level hit: weaker than the statement.
    result = triage.match_log(tl.multi_rank_log("AssertionError", [("megatron/training/arguments.py", tp10 + 3,
                                                                     "validate_args")]))
    assert result["matches"][0]["id"] == "TP-10" and result["matches"][0]["score"] < 1.0


def test_bare_assertion_without_a_frame_lists_every_candidate():
    result = triage.match_log("AssertionError\n")
    bare = {e.id for e in tt.ENTRIES if e.message_fences and e.message_fences[0][1].strip() == "AssertionError"}
    assert {m["id"] for m in result["matches"]} == bare
    assert all(m["score"] == 0.5 for m in result["matches"])


@pytest.fixture()
def fixture_catalogue(tmp_path, monkeypatch):
    """The fixture catalogue (aliases, Symptoms, Stuck in, Core users get) compiled like the real one."""
    from reference_index.build import dump
    from reference_index.catalogue import compile_catalogue

    path = tmp_path / "catalogue.json"
    path.write_text(dump(compile_catalogue(FIXTURE)), encoding="utf-8")
    monkeypatch.setattr(catalogue, "INDEX", str(path))
    return {e["id"]: e for e in catalogue.entries()}


def test_compiler_reads_the_optional_entry_fields(fixture_catalogue):
    fx1, fx2 = fixture_catalogue["FX-01"], fixture_catalogue["FX-02"]
    assert [(m["kind"], m["versions"]) for m in fx1["messages"]] == [("error", None), ("alias", "0.12-0.14")]
    assert fx1["fields"]["Core users get"] == "nothing: the config is accepted and the run fails later."
    assert fx2["symptoms"] == ["hang", "stuck", "deadlock", "timeout"]
    assert fx2["stuck_in"] == [
        {"file": "megatron/core/pipeline_parallel/p2p_communication.py", "function": "_communicate_shapes"},
        {"file": "megatron/core/pipeline_parallel/p2p_communication.py", "function": "recv_forward"}]


def test_older_wording_matches_with_its_caveat(fixture_catalogue):
    log = tl.multi_rank_log("ValueError: bar_count 12 is not a multiple of foo_size 8")
    m = triage.match_log(log, megatron_version="0.13")["matches"][0]
    assert m["id"] == "FX-01" and m["how"] == "template"
    assert "wording of 0.12-0.14" in m["versions"]["caveat"]
    assert "foo_size (4) must divide bar_count (6)" in m["versions"]["caveat"]
    assert "outside" not in m["versions"]["caveat"]
    m = triage.match_log(log, megatron_version="0.16.1")["matches"][0]
    assert m["id"] == "FX-01" and "your release 0.16.1 is outside 0.12-0.14" in m["versions"]["caveat"]


PY_SPY = """Process 4242: python pretrain_gpt.py
Python v3.12.3 (/usr/bin/python3.12)

Thread 4242 (idle): "MainThread"
    _communicate_shapes (megatron/core/pipeline_parallel/p2p_communication.py:{line})
    _communicate (megatron/core/pipeline_parallel/p2p_communication.py:323)
    recv_forward (megatron/core/pipeline_parallel/p2p_communication.py:440)
    forward_backward_pipelining_without_interleaving (megatron/core/pipeline_parallel/schedules.py:2011)
    train_step (megatron/training/training.py:1402)
Thread 4300 (idle): "Thread-2 (_pin_memory_loop)"
    select (selectors.py:415)
    wait (threading.py:331)
"""


def test_hang_stack_is_matched_by_where_it_stops(fixture_catalogue):
    log = "\n".join(f"[rank{r}]: {row}" for r in (2, 5) for row in PY_SPY.format(line=201).splitlines()) + "\n"
    result = triage.match_log(log)
    assert [m["id"] for m in result["matches"]] == ["FX-02"]
    m = result["matches"][0]
    assert m["how"] == "stack" and m["ranks"] == [2, 5]
    assert m["frame"]["function"] == "_communicate_shapes"
    # A stack that stops elsewhere matches nothing.
    other = PY_SPY.format(line=201).replace("_communicate_shapes", "all_reduce").replace("recv_forward", "step")
    assert triage.match_log(other)["matches"] == []


def test_faulthandler_dump_is_a_stack_too(fixture_catalogue):
    dump = ("Timeout (0:10:00)!\nThread 0x00007f3a2b (most recent call first):\n"
            '  File "/x/site-packages/megatron/core/pipeline_parallel/p2p_communication.py", line 201 in _communicate_shapes\n'
            '  File "/x/site-packages/megatron/training/training.py", line 1402 in train_step\n')
    assert [m["id"] for m in triage.match_log(dump)["matches"]] == ["FX-02"]


# -- whole logs -----------------------------------------------------------------------------------

def test_chained_traceback_elastic_summary_and_nccl_lines():
    log = "\n".join([
        *tl.noise(20),
        "[rank0]:[E1130 12:00:01.123456 812 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600123 "
        "milliseconds before timing out.",
        "[rank2]:[E1130 12:00:01.123456 812 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600456 "
        "milliseconds before timing out.",
        "node3:812:901 [0] NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        "[rank1]: Traceback (most recent call last):",
        '[rank1]:   File "/w/site-packages/megatron/core/parallel_state.py", line 500, in initialize_model_parallel',
        "[rank1]: KeyError: 'tp'",
        "[rank1]: ",
        "[rank1]: During handling of the above exception, another exception occurred:",
        "[rank1]: ",
        "[rank1]: Traceback (most recent call last):",
        "[rank1]: ValueError: Unknown attribute: tensor",
        "E1130 12:00:02.000000 900 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1)",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "pretrain_gpt.py FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "[1]:",
        "  time      : 2026-11-30_12:00:02",
        "  host      : node3",
        "  rank      : 1 (local_rank: 1)",
        "  exitcode  : 1 (pid: 913)",
        "  error_file: <N/A>",
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-11-30_12:00:02",
        "  host      : node3",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -6 (pid: 912)",
        "============================================================",
    ]) + "\n"
    result = triage.match_log(log)
    by_id = {m["id"]: m for m in result["matches"]}
    assert by_id["PG-09"]["ranks"] == [0, 2]
    assert by_id["PG-09"]["values"]["ms"] in ("600123", "600456")
    assert by_id["PG-05"]["ranks"] == [1]
    problem = next(p for p in result["problems"] if p["matches"][0]["id"] == "PG-05")
    assert problem["chain"] == ["KeyError: 'tp'", "ValueError: Unknown attribute: tensor"]
    assert {f["rank"] for f in result["launcher"]["failures"]} == {0, 1}
    root = next(f for f in result["launcher"]["failures"] if f["rank"] == 0)
    assert root["exitcode"].startswith("-6") and root["host"] == "node3"  # host is printed before rank
    nccl = [u for u in result["unmatched"] if u["line"].startswith("NCCL WARN Call to ibv_reg_mr")]
    assert nccl and nccl[0]["ranks"] == []  # NCCL's "[0]" is the CUDA device, not a rank


def test_warning_with_its_source_prefix():
    log = ("/usr/lib/python3/site-packages/megatron/core/transformer/moe/moe_utils.py:12: UserWarning: When using "
           "expert parallelism and tensor parallelism for training, sequence parallelism must be used\n"
           "  warnings.warn(\n")
    assert triage.match_log(log)["matches"][0]["id"] == "MOE-06"


def test_version_caveat_for_the_users_release():
    msg = "ValueError: num_query_groups (3) must be a multiple or divisor of tensor_model_parallel_size (2).\n"
    old = triage.match_log(msg, megatron_version="0.15")
    assert old["megatron_version"] == "0.15" and old["megatron_version_source"] == "--megatron-version"
    assert "0.15 does not have this text (it appears in 0.16)" in old["matches"][0]["versions"]["caveat"]
    new = triage.match_log(msg)  # the installed megatron-core, read without importing it
    assert new["megatron_version_source"] == "installed megatron-core"
    assert f"same fixed text in {new['megatron_version']}" in new["matches"][0]["versions"]["caveat"]


# -- the command ----------------------------------------------------------------------------------

PYTHON3 = shutil.which("python3")


def _run(args, stdin=None, python=sys.executable):
    return subprocess.run([python, str(SCRIPT), *args], input=stdin, capture_output=True, timeout=120)


def test_json_output_is_the_api_object(tmp_path):
    log = tmp_path / "job.log"
    log.write_text(tl.multi_rank_log("ValueError: num_attention_heads (6) must be a multiple of "
                                     "tensor_model_parallel_size (4)."), encoding="utf-8")
    r = _run(["--json", "--megatron-version", "0.17", str(log)])
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out == triage.match_log(log.read_text(encoding="utf-8"), megatron_version="0.17")
    assert {"schema_version", "megatron_version", "matches"} <= set(out) and out["schema_version"] == 1
    assert MATCH_KEYS <= set(out["matches"][0])


@pytest.mark.parametrize("case", ["missing", "directory", "binary", "empty", "blank", "bad-version"])
def test_bad_input_is_one_line_and_exit_2(case, tmp_path):
    args, stdin = [], None
    if case == "missing":
        args = [str(tmp_path / "nope.log")]
    elif case == "directory":
        args = [str(tmp_path)]
    elif case == "binary":
        args, stdin = ["-"], bytes(range(256)) * 8
    elif case == "empty":
        args, stdin = [], b""
    elif case == "blank":
        args, stdin = [], b"\n\n  \n"
    else:
        args, stdin = ["--megatron-version", "zero"], b"ValueError: x\n"
    r = _run(args, stdin)
    assert r.returncode == 2, (case, r.stdout, r.stderr)
    assert r.stdout == b"" and len(r.stderr.decode().strip().splitlines()) == 1, r.stderr
    assert b"Traceback" not in r.stderr


def test_no_match_names_the_nearest_entries_and_the_words_searched():
    r = _run([], b"[rank0]: RuntimeError: pipeline schedule got the wrong number of microbatches per virtual stage\n")
    assert r.returncode == 1, r.stderr
    text = r.stdout.decode()
    assert "No catalogue entry matches" in text and "Searched words: " in text and "microbatches" in text
    out = json.loads(_run(["--json"], b"RuntimeError: pipeline schedule got the wrong number of microbatches\n").stdout)
    assert out["matches"] == [] and out["nearest"] and "microbatches" in out["searched_words"]
    assert all(n["anchor"] for n in out["nearest"])


@pytest.mark.skipif(PYTHON3 is None, reason="no python3 on PATH: the plain-interpreter claim is not checked")
def test_runs_under_plain_python3_without_torch_or_megatron():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import triage; "
            "r = triage.match_log('ValueError: Cannot use sequence parallelism without tensor parallelism\\n'); "
            "assert r['matches'][0]['id'] == 'TP-07'; "
            "assert not {'torch', 'megatron'} & set(sys.modules), sorted(sys.modules); print(sys.version_info[:2])")
    r = subprocess.run([PYTHON3, "-c", code, str(REPO / "scripts")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = _run(["--help"], python=PYTHON3)
    assert r.returncode == 0 and b"--megatron-version" in r.stdout and b"--json" in r.stdout

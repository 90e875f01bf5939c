"""Every script, every flag, hostile values and closed pipes: exit 2 with one line, never a traceback.

The cases are generated from each script's own argparse parser (tests/cli_cases.py), so a flag
added later is covered. Run with plain python3 (no torch, no megatron).
"""

from __future__ import annotations

import subprocess

import pytest

import cli_cases

CASES = cli_cases.cases()


def _param(script, flag, case, argv, reject):
    return pytest.param(script, argv, reject, id=f"{script}:{flag}:{case}")


@pytest.mark.parametrize("script,argv,reject", [_param(*c) for c in CASES])
def test_hostile_value_is_one_line_and_exit_2(script, argv, reject):
    proc = cli_cases.run(script, argv)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode in (0, 1, 2), (proc.returncode, proc.stderr[-500:])
    if reject:
        assert proc.returncode == 2, f"accepted (exit {proc.returncode}): {proc.stdout[:300]!r}"
    if proc.returncode == 2:
        assert cli_cases.one_line_reason(proc, script), proc.stderr[:1000]
    assert len(proc.stdout) <= 64_000, len(proc.stdout)


def test_the_generated_cases_cover_every_script_and_flag():
    scripts = {c[0] for c in CASES}
    assert scripts == {p.name for p in cli_cases.cli_parsers.COMMANDS}
    # every value-taking option of the checker's Megatron flag table is in (from its parser)
    flags = {c[1] for c in CASES if c[0] == "check_parallel_layout.py"}
    assert {"--tensor-model-parallel-size", "--pipeline-model-parallel-layout", "--megatron-version"} <= flags
    assert len(CASES) >= 200, len(CASES)


def _pipe_params():
    out = []
    for script, argvs in cli_cases.TYPICAL.items():
        for argv in argvs:
            for extra in ([], ["--json"]):
                out.append(pytest.param(script, argv + extra, id=f"{script}:{' '.join(argv[:2] + extra)}"))
    return out


@pytest.mark.parametrize("script,argv", _pipe_params())
def test_a_closed_pipe_exits_0_without_a_traceback(script, argv):
    proc = cli_cases.run_closed_pipe(script, argv)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr[-1500:]
    assert "Exception ignored" not in proc.stderr, proc.stderr[-1500:]
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-500:])


def test_api_history_into_head_as_a_user_types_it():
    """The report of issue 22: `api_history.py --diff ... | head` printed a BrokenPipeError traceback."""
    cmd = f"'{cli_cases.PLAIN}' scripts/api_history.py --diff 0.12 0.19 | head -n 1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, cwd=cli_cases.REPO,
                          env=cli_cases.env())
    assert proc.stdout.startswith("8") or "events after 0.12.3 up to 0.19.2" in proc.stdout, proc.stdout
    assert proc.stderr == "", proc.stderr[-1500:]


@pytest.mark.parametrize("argv", [["--", "GPTModel"], ["--", "--use-custom-fsdp"], ["--json", "--", "GPTModel"]])
def test_api_history_takes_a_name_after_double_dash(argv):
    proc = cli_cases.run("api_history.py", argv)
    assert proc.returncode == 0, proc.stderr
    assert "GPTModel" in proc.stdout or "--use-custom-fsdp" in proc.stdout


def test_api_history_takes_its_own_options_after_a_double_dash_name():
    # As a benchmark agent typed it: the '--' marks the flag NAME, --at is the script's own option.
    proc = cli_cases.run("api_history.py", ["--", "--moe-router-score-function", "--at", "0.13"])
    assert proc.returncode == 0, proc.stderr
    assert "in 0.13.1:" in proc.stdout and "choices: ['softmax', 'sigmoid']" in proc.stdout
    bad = cli_cases.run("api_history.py", ["--", "a", "b"])
    assert bad.returncode == 2 and "one NAME after '--', got 2" in bad.stderr


@pytest.mark.parametrize("kind", ["empty-file", "empty-dir"])
def test_reviewer_refuses_input_with_nothing_to_review(kind, tmp_path):
    target = tmp_path / "x.py" if kind == "empty-file" else tmp_path / "d"
    target.write_text("") if kind == "empty-file" else target.mkdir()
    proc = cli_cases.run("review_model_code.py", [str(target)])
    assert proc.returncode == 2 and cli_cases.one_line_reason(proc, "review_model_code.py"), proc.stderr


def test_nested_layout_repetition_is_refused_before_it_is_expanded():
    """Issue 22: "(t*99999)*99999|L" grew past 10 GB. Under a 1.5 GB address-space limit a bounded
    parser answers with a reason about the layout, not with a MemoryError."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    proc = subprocess.run([cli_cases.PLAIN, str(cli_cases.REPO / "scripts" / "check_parallel_layout.py"),
                           "--world-size", "8", "--num-layers", "8",
                           "--pipeline-model-parallel-layout", "(t*99999)*99999|L"],
                          capture_output=True, text=True, timeout=120, cwd=cli_cases.REPO, env=cli_cases.env(),
                          preexec_fn=limit)
    assert proc.returncode in (1, 2) and "MemoryError" not in proc.stderr and "internal error" not in proc.stderr, \
        proc.stderr[-500:]

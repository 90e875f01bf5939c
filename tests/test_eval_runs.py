"""The archived field runs (evals/runs/2026-12-0[12]-field-*) re-grade to the numbers BENCHMARK.md states.

Each archive holds what `run_evals.py report` needs (answers, logs, deterministic grades, the
graders' rubric files, the label key); re-running `report` on a copy must give the committed
report's summary, so the tables are reproducible from the committed files and nothing in them is
typed by hand. Also checked: every answer's cost was measured (a logger log exists) and no
answer broke its condition's reading rules.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RUNS = sorted(p for p in (REPO / "evals" / "runs").glob("2026-12-0[12]-field-*") if p.is_dir())
KEYS = ("eval_pass_rate", "expectation_pass_rate", "confident_wrong", "negative_controls_passed",
        "contaminated_answers", "answers")


def test_the_field_runs_are_archived():
    assert {p.name for p in RUNS} >= {f"2026-12-01-field-{s}{x}" for s in "abc" for x in ("", "-after")}
    assert "2026-12-02-field-a" in {p.name for p in RUNS}  # both conditions re-run, quoting logger
    assert {"2026-12-02-field-a-after", "2026-12-02-field-b-after"} <= {p.name for p in RUNS}


@pytest.mark.parametrize("run", RUNS, ids=[p.name for p in RUNS])
def test_report_recomputes_from_the_archive(run, tmp_path):
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    (copy / "report.json").unlink()
    out = subprocess.run([sys.executable, str(REPO / "evals" / "run_evals.py"), "report", "--run", str(copy)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    fresh = json.loads((copy / "report.json").read_text())["summary"]
    shipped = json.loads((run / "report.json").read_text())["summary"]
    for cond in ("with_skill", "without_skill"):
        assert {k: fresh[cond].get(k) for k in KEYS} == {k: shipped[cond].get(k) for k in KEYS}, cond
        assert fresh[cond]["cost"] == shipped[cond]["cost"], cond
        assert fresh[cond]["contaminated_answers"] == 0
    key = json.loads((run / "key.json").read_text())["labels"]
    missing_logs = [lab for lab in key if not (run / "logs" / f"{lab}.jsonl").is_file()]
    assert not missing_logs, missing_logs[:5]


def test_reuse_rebuilds_an_after_run_from_its_two_halves(tmp_path):
    # An "-after" archive is the re-run's with-skill half plus the first run's without-skill answers
    # (`run_evals.py reuse`): splitting it and reusing again gives the same labels and report.
    after, first = REPO / "evals/runs/2026-12-01-field-c-after", REPO / "evals/runs/2026-12-01-field-c"
    half = tmp_path / "half"
    shutil.copytree(after, half)
    key = json.loads((half / "key.json").read_text())
    reused = [lab for lab, m in key["labels"].items() if m.get("reused_from")]
    assert reused and all(key["labels"][lab]["condition"] == "without_skill" for lab in reused)
    for lab in reused:
        del key["labels"][lab]
        for p in half.rglob(f"{lab}.*"):
            p.unlink()
    (half / "key.json").write_text(json.dumps(key, indent=1) + "\n")
    run = [sys.executable, str(REPO / "evals" / "run_evals.py")]
    ids = sorted({m["eval_id"] for m in json.loads((first / "key.json").read_text())["labels"].values()
                  if m["condition"] == "without_skill"})
    reuse = run + ["reuse", "--run", str(half), "--source", str(first)]
    # In two parts, as after a change to one eval's task: all but one, then that one.
    out = subprocess.run(reuse + ["--except", str(ids[0])], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    again = subprocess.run(reuse, capture_output=True, text=True)
    assert again.returncode == 2 and "already has without_skill answers for evals" in again.stderr
    bad = subprocess.run(reuse + ["--except", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--except takes" in bad.stderr
    rest = subprocess.run(reuse + ["--except", ",".join(map(str, ids[1:]))], capture_output=True, text=True)
    assert rest.returncode == 0 and "reused 1 " in rest.stdout, rest.stderr
    rebuilt = json.loads((half / "key.json").read_text())["labels"]
    assert sorted(rebuilt) == sorted(json.loads((after / "key.json").read_text())["labels"])
    subprocess.run(run + ["report", "--run", str(half)], capture_output=True, text=True, check=True)
    fresh = json.loads((half / "report.json").read_text())["summary"]
    shipped = json.loads((after / "report.json").read_text())["summary"]
    assert all(fresh[c]["eval_pass_rate"] == shipped[c]["eval_pass_rate"] for c in ("with_skill", "without_skill"))


def test_benchmark_md_states_the_later_run_as_archived():
    # The table of the 2026-12-02 with-skill re-run: pass rates and confident-wrong counts are the
    # archived reports' own numbers, not typed from memory.
    text = (REPO / "BENCHMARK.md").read_text()
    summ = {s: json.loads((REPO / f"evals/runs/2026-12-02-field-{s}-after/report.json").read_text())["summary"]
            for s in "ab"}

    def pct(x):
        return f"{x:g}%"

    rates = [pct(summ[s][c]["eval_pass_rate"]) for s in "ab" for c in ("with_skill", "without_skill")]
    wrong = [str(summ[s][c]["confident_wrong"]) for s in "ab" for c in ("with_skill", "without_skill")]
    assert "| eval pass rate | " + " | ".join(rates) + " |" in text
    assert "| confident wrong answers | " + " | ".join(wrong) + " |" in text

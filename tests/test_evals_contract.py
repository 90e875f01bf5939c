"""evals/evals.json stays valid, its checks stay well-formed, and the facts it states still hold.

- schema: skill-creator fields (skill_name, evals with id, prompt, expected_output, files,
  expectations) plus this project's route, answer_keys, checks, facts, verified_by;
- coverage: >= 60 evals, >= 6 negative controls, every route used;
- every check and fact that can be recomputed cheaply is recomputed (layout numbers with
  scripts/check_parallel_layout.py --json, release facts from Megatron-LM's tags, config defaults,
  signatures and messages from the installed megatron-core in one child process), so a wrong eval fails;
- the grader: hand-made answers (right, wrong, confidently wrong, routed) are graded and reported
  with the expected numbers.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import evals_recompute as R

REPO = Path(__file__).resolve().parent.parent
EVALS = REPO / "evals" / "evals.json"
SKILL = REPO / "SKILL.md"


def _load_runner():
    spec = importlib.util.spec_from_file_location("run_evals", REPO / "evals" / "run_evals.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


run_evals = _load_runner()
DOC = json.loads(EVALS.read_text())
EV = DOC["evals"]


def test_schema_has_no_problems():
    assert run_evals.problems(DOC) == []


def test_schema_checker_catches_broken_evals():
    bad = json.loads(json.dumps(DOC))
    e0, e1 = bad["evals"][0], bad["evals"][1]
    e1["id"] = e0["id"]                                   # duplicate id
    e0["files"] = ["evals/files/missing.log"]             # missing file
    e0["checks"][0]["expectation"] = 99                   # dangling expectation index
    bad["evals"][2]["checks"].append({"kind": "regex", "pattern": "(", "must": True, "expectation": 0})
    del bad["evals"][3]["expectations"]
    found = "\n".join(run_evals.problems(bad))
    for needle in ("unique integer", "missing.log does not exist", "expectation must index", "bad pattern", "missing ['expectations']"):
        assert needle in found, needle


def test_coverage():
    assert DOC["skill_name"] == "core-models-and-parallelism"
    assert len(EV) >= 60
    assert sum(e["negative_control"] for e in EV) >= 6
    assert {e["route"] for e in EV} == set(DOC["routes"])
    # every positive route is exercised by at least two evals
    for route in set(DOC["routes"]) - run_evals.NEGATIVE_ROUTES:
        assert sum(e["route"] == route for e in EV) >= 2, route


def test_skill_name_matches_skill_md():
    front = SKILL.read_text().split("---")[1]
    assert re.search(rf"^name:\s*{re.escape(DOC['skill_name'])}\s*$", front, re.M)


def test_sibling_routes_named_in_negative_controls_exist_in_skill_md():
    text = SKILL.read_text()
    for e in EV:
        for c in e["checks"]:
            if e["negative_control"] and c.get("applies_to") == "with_skill":
                name = c["pattern"]
                assert re.fullmatch(r"[a-z-]+", name) and name in text, (e["name"], name)


def test_every_eval_records_how_it_was_verified():
    for e in EV:
        assert all(isinstance(v, str) and len(v) > 20 for v in e["verified_by"]), e["name"]
        # real threads are cited by URL
        for f in e["files"]:
            if f.endswith(".log"):
                assert re.search(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+", (REPO / f).read_text()), f


def test_input_files_are_used():
    used = {f for e in EV for f in e["files"]}
    present = {f"evals/files/{p.name}" for p in (REPO / "evals" / "files").iterdir()}
    assert present == used


def test_deterministic_checks_are_a_large_share():
    n_det = sum(len({c["expectation"] for c in e["checks"] if c.get("applies_to", "both") == "both"}) for e in EV)
    n_all = sum(len(e["expectations"]) for e in EV)
    assert n_det / n_all > 0.4, (n_det, n_all)


def _items(kinds: set[str]):
    out = []
    for e in EV:
        for c in e["checks"]:
            if "recompute" in c and c["recompute"]["kind"] in kinds:
                out.append((e["name"], c, c["recompute"]))
        for f in e["facts"]:
            if f["recompute"]["kind"] in kinds:
                out.append((e["name"], f, f["recompute"]))
    return out


def _recheck(items) -> tuple[list[str], list[str]]:
    """(wrong, skipped): the items whose recomputed value contradicts the eval, and those not checkable here."""
    values = R.recompute_all([s for _, _, s in items])
    wrong, skipped = [], []
    for (name, item, spec), value in zip(items, values):
        if isinstance(value, R.Skip):
            skipped.append(f"{name}: {value}")
            continue
        if isinstance(value, Exception):
            wrong.append(f"{name}: {spec['kind']} failed: {value}")
            continue
        ok, why = R.compare(item, value)
        if not ok:
            wrong.append(f"{name}: {why}")
    return wrong, skipped


def _assert_recomputed(items):
    wrong, skipped = _recheck(items)
    assert not wrong, "\n".join(wrong)
    return skipped


def test_layout_and_arithmetic_facts_recompute():
    items = _items({"layout", "layout_count_distinct", "layout_first_valid", "layout_group", "bubble", "mod", "arith"})
    assert len(items) >= 40
    _assert_recomputed(items)


def test_release_facts_recompute():
    items = _items(R.RELEASE_KINDS)
    assert len(items) >= 10
    skipped = _assert_recomputed(items)
    if len(skipped) == len(items):
        pytest.skip("no Megatron-LM mirror or wheels for the release facts: " + skipped[0])


def _provider_files() -> dict[str, str]:
    """provider-review input files that define a model_provider (what get_model calls), by path."""
    out = {}
    for e in EV:
        if e["route"] == "provider-review":
            for f in e["files"]:
                text = (REPO / f).read_text()
                if re.search(r"^def model_provider\(", text, re.M):
                    out[f] = text
    return out


def test_provider_signatures_recompute():
    """Every model_provider in a provider-review eval is checked against the keywords get_model passes."""
    items = _items(R.PROVIDER_KINDS)
    checked = {s["file"] for _, _, s in items if s["kind"] == "provider_unaccepted"}
    assert set(_provider_files()) <= checked and "evals/files/provider_ok.py" in checked, checked
    skipped = _assert_recomputed(items)
    if skipped:
        pytest.skip("megatron-core is not installed, so get_model's provider keywords cannot be read: " + skipped[0])


def test_provider_signature_check_catches_a_missing_keyword(tmp_path):
    """provider_ok.py with the pre-0.19 signature (no config, no pg_collection) fails eval 56's fact."""
    clean = next(e for e in EV if e["id"] == 56)
    fact = next(f for f in clean["facts"] if f["recompute"]["kind"] == "provider_unaccepted")
    text = (REPO / fact["recompute"]["file"]).read_text()
    old, n = re.subn(r"def model_provider\([^)]*\)", "def model_provider(pre_process=True, post_process=True, vp_stage=None)", text)
    assert n == 1
    variants = {"old.py": (old, ["config", "pg_collection"]),
                "kwargs.py": (old.replace("vp_stage=None)", "vp_stage=None, **kwargs)"), [])}
    for name, (source, missing) in variants.items():
        (tmp_path / name).write_text(source)
        value = R.recompute_all([dict(fact["recompute"], file=str(tmp_path / name))])[0]
        if isinstance(value, R.Skip):
            pytest.skip(str(value))
        assert value == missing, (name, value)
        assert R.compare(fact, value)[0] == (missing == []), name


@pytest.mark.slow
def test_providers_through_megatron_get_model(tmp_path):
    """Each provider-review model_provider, called by megatron.training's get_model (1-rank gloo, CPU):
    the one eval 56 calls clean builds; the others fail with an error their eval names; the pre-0.19
    signature (no config, no pg_collection) fails with the TypeError eval 53 quotes."""
    import procutil

    files = _provider_files()
    old = re.sub(r"def model_provider\([^)]*\)", "def model_provider(pre_process=True, post_process=True, vp_stage=None)",
                 (REPO / "evals/files/provider_ok.py").read_text())
    (tmp_path / "old_signature.py").write_text(old)
    paths = [str(REPO / f) for f in files] + [str(tmp_path / "old_signature.py")]
    p = subprocess.run([sys.executable, str(REPO / "tests" / "get_model_probe.py"), str(procutil.free_port()), *paths],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    clean = {f for e in EV if e["id"] == 56 for f in e["files"]}
    assert clean and clean <= set(files)
    for f in files:
        result = got[str(REPO / f)]
        if f in clean:
            # PP=1 here: the one stage is first and last; untied embeddings (the args set untie)
            assert result == {"built": "GPTModel", "pre_process": True, "post_process": True,
                              "shares_embeddings": False}, (f, result)
        else:
            named = [e["expected_output"] for e in EV if f in e["files"]]
            assert "error" in result and any(result["error"] in text for text in named), (f, result)
    assert got[paths[-1]] == {"error": "TypeError: model_provider() got an unexpected keyword argument 'config'"}


@pytest.mark.slow
def test_installed_megatron_facts_recompute():
    items = _items(R.PROBE_KINDS | {"inspector"})
    assert len(items) >= 40
    _assert_recomputed(items)


def test_a_wrong_eval_fails_recompute():
    """The recompute machinery is not vacuous: corrupting expected values makes it report them."""
    items = [(n, dict(c, expected=c["expected"] + 1), s) for n, c, s in _items({"layout"}) if c.get("kind") == "answer_number"][:3]
    items += [(n, dict(c, expected=c["expected"][::-1] + [0]), s) for n, c, s in _items({"layout_group"})][:1]
    wrong, _ = _recheck(items)
    assert len(items) == 4 and len(wrong) == len(items), wrong


# ------------------------------------------------------------------------------------ field tasks (issue 23)

FIELD = [e for e in EV if e.get("set") == "field"]
MATERIAL = json.loads((REPO / "evals" / "field_material.json").read_text())
# Recompute kinds that run the bundle's own scripts: never the only proof of a key.
BUNDLE_KINDS = {"layout", "layout_count_distinct", "layout_first_valid", "layout_group", "inspector"}


def _material_ids() -> set[str]:
    ids = {t["id"] for t in MATERIAL["threads"]} | {p["id"] for p in MATERIAL["providers"]}
    ids |= {t["id"] for t in MATERIAL["addendum_2026_12_01"]["threads"]}
    tables = MATERIAL["published_layouts"]
    ids |= {"published:" + r["source"] for r in tables["megatron_bridge_performance_summary"]}
    ids |= {"published:" + r["name"] for r in tables["ptdp_table2"]}
    ids |= {"census:" + t["url"].removeprefix("https://github.com/") for t in MATERIAL["route_census"]["threads"]}
    return ids


def _kinds(e: dict) -> list[str]:
    return [c["recompute"]["kind"] for c in e["checks"] if "recompute" in c] + [f["recompute"]["kind"] for f in e["facts"]]


def test_field_tasks_come_from_the_frozen_material():
    assert len(FIELD) >= 60
    ids = _material_ids()
    for e in FIELD:
        # "upgrade-*" tasks come from the release signatures frozen in upgrade_signatures
        assert e["material"] in ids or e["material"].startswith("upgrade-"), (e["name"], e["material"])
        assert e["negative_control"] or _kinds(e), f"{e['name']}: nothing recomputed"
        assert not set(_kinds(e)) & BUNDLE_KINDS, f"{e['name']}: a key computed by the bundle's scripts"
    assert MATERIAL["frozen_on"] == "2026-12-01" and "catalogue" in MATERIAL["rule"]


def test_every_bundle_computed_key_has_a_megatron_recompute():
    """Issue 22 item 8: an eval checked by the bundle's checker or inspector is also recomputed from Megatron."""
    for e in EV:
        kinds = set(_kinds(e))
        if kinds & BUNDLE_KINDS:
            assert kinds - BUNDLE_KINDS, f"{e['name']}: only the bundle's scripts back its keys"


def _shares(routes: list[str]) -> dict[str, float]:
    return {r: routes.count(r) / len(routes) for r in set(routes)}


def test_field_route_mix_follows_the_census():
    census = MATERIAL["route_census"]["counts"]
    assert sum(census.values()) == len(MATERIAL["route_census"]["threads"])
    want = {r: n / sum(census.values()) for r, n in census.items()}
    got = _shares([e["route"] for e in FIELD])
    assert set(got) == set(want), (got, want)
    for route, share in want.items():
        assert abs(got[route] - share) <= 0.08, (route, round(got[route], 3), round(share, 3))
    assert max(got, key=got.get) == max(want, key=want.get) == "errors"
    text = " ".join((REPO / "evals" / "README.md").read_text().split())
    for route, n in census.items():
        assert f"| {route} | {n} | {sum(e['route'] == route for e in FIELD)} |" in text, route


def test_field_settings_are_covered():
    releases = {e.get("user_release") for e in FIELD} - {None}
    assert releases == {"0.13.1", "0.16.1"}
    assert sum(bool(e.get("user_release")) for e in FIELD) >= 15          # setting c
    assert all(e["user_release"] != DOC["megatron_core_version"] for e in FIELD if e.get("user_release"))


def test_field_evals_file_writes_evals_json():
    p = subprocess.run([sys.executable, str(REPO / "evals" / "field_evals.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def _corrupt(item: dict) -> dict:
    """The item with a wrong answer key (or a wrong expected fact)."""
    if "expect" in item:
        exp = item["expect"]
        if isinstance(exp, dict) and ("matches" in exp or "contains" in exp):
            return dict(item, expect={"contains": "no such text in any answer"})
        return dict(item, expect=[exp, "wrong"] if not isinstance(exp, bool) else (not exp))
    if item["kind"] == "answer_number":
        return dict(item, expected=item["expected"] + 1 + 10 * item.get("tolerance", 0))
    if item["kind"] == "answer_text":
        return dict(item, expected="definitely-not-" + item["expected"])
    return dict(item, expected=list(item["expected"]) + ["extra"])


def _field_items(kinds: set[str]):
    return [(n, c, s) for n, c, s in _items(kinds) if any(e["name"] == n for e in FIELD)]


def test_a_wrong_field_key_fails_recompute_stdlib():
    items = _field_items({"arith", "bubble", "first_release", "upstream_source"})
    assert len(items) >= 30
    _assert_recomputed(items)
    wrong, skipped = _recheck([(n, _corrupt(c), s) for n, c, s in items])
    assert len(wrong) + len(skipped) == len(items) and len(wrong) >= 20, wrong


@pytest.mark.slow
def test_field_facts_recompute_from_megatron_and_fail_when_wrong():
    """Every megatron-backed key and fact of the field tasks holds, and each one, made wrong, is reported."""
    items = _field_items(R.PROBE_KINDS)
    assert len(items) >= 100
    wrong, skipped = _recheck(items)
    assert not wrong, "\n".join(wrong)
    values = R.recompute_all([s for _, _, s in items])
    caught = [R.compare(_corrupt(c), v)[0] is False for (_, c, _), v in zip(items, values) if not isinstance(v, Exception)]
    assert caught and all(caught)


# ------------------------------------------------------------------------------------ runner: settings and cost

def test_prepare_checks_the_interpreter_against_the_setting(tmp_path):
    p = _runner("prepare", "--out", str(tmp_path / "b"), "--setting", "b", "--python", sys.executable)
    assert p.returncode == 2 and "does not import megatron.core" in p.stderr, p.stderr
    plain = subprocess.run(["python3", "-c", "import megatron.core"], capture_output=True)
    if plain.returncode == 0:
        pytest.skip("python3 here imports megatron.core: no interpreter without it for setting b")
    p = _runner("prepare", "--out", str(tmp_path / "b2"), "--setting", "b", "--python", "python3", "--only", str(FIELD[0]["id"]))
    assert p.returncode == 0, p.stderr
    task = next((tmp_path / "b2" / "tasks").iterdir()).read_text()
    assert "WITHOUT megatron-core" in task and "logged.py" in task


def test_setting_c_asks_only_questions_about_another_release(tmp_path):
    p = _runner("prepare", "--out", str(tmp_path / "c"), "--setting", "c")
    assert p.returncode == 0, p.stderr
    key = json.loads((tmp_path / "c" / "key.json").read_text())
    asked = {m["eval_id"] for m in key["labels"].values()}
    assert asked == {e["id"] for e in FIELD if e.get("user_release")}
    assert key["setting"] == "c" and len(key["labels"]) == 2 * len(asked)
    dispatch = json.loads((tmp_path / "c" / "dispatch.json").read_text())
    assert {a["label"] for a in dispatch["agents"]} == set(key["labels"])
    assert not any(word in a["message"] for a in dispatch["agents"] for word in ("with_skill", "without_skill"))


def test_cost_is_measured_from_the_logger_and_reported_with_ratios(tmp_path):
    e = next(x for x in FIELD if x["name"] == "field-vocab-pad-tp2")
    run = tmp_path / "run"
    assert _runner("prepare", "--out", str(run), "--only", str(e["id"])).returncode == 0
    key = json.loads((run / "key.json").read_text())
    logger = run / "bin" / "logged.py"
    bundle = key["bundle"]
    for label, meta in key["labels"].items():
        assert subprocess.run([sys.executable, str(logger), label, "--start"]).returncode == 0
        cmds = [f"cat {bundle}/SKILL.md"] if meta["condition"] == "with_skill" else ["printf 0123456789", "printf abc", "printf xyz"]
        for c in cmds:
            p = subprocess.run([sys.executable, str(logger), label, "--", c], capture_output=True, text=True)
            assert p.returncode == 0
        _write_answer(run, label, "```answer\npadded_vocab_tp1: 50257\npadded_vocab_tp2: 50258\n```", "high")
    assert subprocess.run([sys.executable, str(logger), "not-a-label", "--start"], capture_output=True).returncode == 2
    assert _runner("grade", "--run", str(run)).returncode == 0
    p = _runner("report", "--run", str(run))
    assert p.returncode == 0, p.stderr
    s = json.loads((run / "report.json").read_text())["summary"]
    skill_md = (Path(bundle) / "SKILL.md").stat().st_size
    w, wo = s["with_skill"]["cost"], s["without_skill"]["cost"]
    assert (w["median_tool_calls"], wo["median_tool_calls"]) == (1, 3)
    assert (w["median_bytes_bundle"], wo["median_bytes_command_output"]) == (skill_md, 16)
    assert s["cost_with_over_without"]["tool_calls_ratio_of_medians"] == round(1 / 3, 3)
    assert s["cost_with_over_without"]["bytes_total_median_paired_ratio"] == round(skill_md / 16, 3)
    assert w["median_wall_seconds"] is not None and s["setting"] == "a"
    assert "| tool_calls | 1 | 3 |" in (run / "report.md").read_text()
    dest = tmp_path / "runs"
    p = _runner("archive", "--run", str(run), "--name", "t-archive", "--dest", str(dest))
    assert p.returncode == 0, p.stderr
    assert {x.name for x in (dest / "t-archive").iterdir()} >= {"answers", "logs", "key.json", "report.json", "deterministic.json"}
    assert not (dest / "t-archive" / "bundle").exists()


def test_transcripts_are_ingested_as_cost_logs(tmp_path):
    run = tmp_path / "run"
    e = FIELD[0]
    assert _runner("prepare", "--out", str(run), "--only", str(e["id"]), "--condition", "without_skill").returncode == 0
    key = json.loads((run / "key.json").read_text())
    (label,) = key["labels"]
    assert key["labels"][label]["condition"] == "without_skill"
    tr = tmp_path / "t.jsonl"
    tr.write_text("\n".join(json.dumps(x) for x in (
        {"tool": "read", "input": "/usr/lib/python3/site-packages/megatron/core/parallel_state.py", "output": "x" * 1000, "start": 10.0, "end": 11.0},
        {"tool": "bash", "input": "ls", "output_bytes": 24, "start": 12.0, "end": 13.5})))
    p = _runner("ingest", "--run", str(run), "--label", label, "--transcript", str(tr))
    assert p.returncode == 0, p.stderr
    c = run_evals.cost(run_evals._log(run, label), key["bundle"])
    assert c == {"logged": True, "tool_calls": 2, "bytes_total": 1024, "bytes_bundle": 0, "bytes_megatron_source": 1000,
                 "bytes_command_output": 24, "wall_seconds": 3.5}
    assert _runner("ingest", "--run", str(run), "--label", label, "--transcript", str(tr)).returncode == 2   # never overwrite
    assert _runner("ingest", "--run", str(run), "--label", "t000000", "--transcript", str(tr)).returncode == 2


def test_graders_do_not_see_the_condition(tmp_path):
    run = tmp_path / "run"
    rubric_eval = next(x for x in FIELD if any(c.get("kind") == "regex" for c in x["checks"]) or len(x["checks"]) < len(x["expectations"]))
    assert _runner("prepare", "--out", str(run), "--only", str(rubric_eval["id"])).returncode == 0
    key = json.loads((run / "key.json").read_text())
    for label in key["labels"]:
        _write_answer(run, label, f"I ran {key['bundle']}/scripts/explain_error.py from the core-models-and-parallelism skill (SKILL.md).", "low")
    assert _runner("grade", "--run", str(run)).returncode == 0
    for f in (run / "rubric").glob("t*.md"):
        text = f.read_text()
        for leak in (key["bundle"], "core-models-and-parallelism", "SKILL.md", "explain_error.py", "with_skill", "without_skill"):
            assert leak not in text, (f.name, leak)
    items = json.loads((run / "rubric" / "worklist.json").read_text())["items"]
    assert items and all(i["message"].startswith("Read `") and "with_skill" not in i["message"] for i in items)


# ------------------------------------------------------------------------------------ grader

def _write_answer(run: Path, label: str, answer: str, confidence: str, files=(), commands=()):
    (run / "answers" / f"{label}.json").write_text(json.dumps({
        "schema_version": 1, "label": label, "answer": answer, "confidence": confidence,
        "files_read": [{"path": p, "bytes": b} for p, b in files],
        "commands": [{"command": c, "exit_code": 0} for c in commands]}))


def _by(key: dict, eval_id: int, cond: str) -> str:
    return next(l for l, m in key["labels"].items() if m["eval_id"] == eval_id and m["condition"] == cond)


def _runner(*args):
    return subprocess.run([sys.executable, str(REPO / "evals" / "run_evals.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_grader_on_hand_made_answers(tmp_path):
    layout = next(e for e in EV if e["name"] == "layout-7b-64gpu")
    neg = next(e for e in EV if e["name"] == "neg-slurm-launch")
    run = tmp_path / "run"
    p = _runner("prepare", "--out", str(run), "--set", "all", "--only", f"{layout['id']},{neg['id']}")
    assert p.returncode == 0, p.stderr
    key = json.loads((run / "key.json").read_text())
    assert len(list((run / "tasks").iterdir())) == 4
    task = (run / "tasks" / f"{_by(key, layout['id'], 'with_skill')}.md").read_text()
    assert "SKILL.md" in task and "data_parallel_size: <integer>" in task
    assert "Do not read" in (run / "tasks" / f"{_by(key, layout['id'], 'without_skill')}.md").read_text()
    bundle = key["bundle"]

    right = _by(key, layout["id"], "with_skill")
    _write_answer(run, right, "DP = 64/(8*2) = 4 ...\n```answer\ndata_parallel_size: 4\nnum_microbatches: 64\n"
                  "padded_vocab_size: 32,768\nlayers_per_stage: 16\n```\n", "high",
                  files=[(f"{bundle}/SKILL.md", 5000), (f"{bundle}/references/parallelism-reference.md", 3000)],
                  commands=[f"python {bundle}/scripts/check_parallel_layout.py --world-size 64 --json"])
    wrong = _by(key, layout["id"], "without_skill")
    _write_answer(run, wrong, "DP is 8.\n```answer\ndata_parallel_size: 8\nnum_microbatches: 32\n"
                  "padded_vocab_size: 32000\nlayers_per_stage: 16\n```\n", "high",
                  files=[("/usr/lib/python3/site-packages/megatron/core/parallel_state.py", 120000)])
    routed = _by(key, neg["id"], "with_skill")
    _write_answer(run, routed, "Launch scripts belong to the training-cli-and-data skill, which is not installed here.", "medium",
                  files=[(f"{bundle}/SKILL.md", 5811)])
    unrouted = _by(key, neg["id"], "without_skill")
    _write_answer(run, unrouted, "#!/bin/bash\n#SBATCH --nodes 4\n...", "low", files=[(f"{bundle}/SKILL.md", 5811)])

    p = _runner("grade", "--run", str(run))
    assert p.returncode == 0, p.stderr
    det = json.loads((run / "deterministic.json").read_text())["graded"]
    assert all(r["passed"] for r in det[right]["checks"])
    assert [r["passed"] for r in det[wrong]["checks"]] == [False, False, False, True]
    assert det[wrong]["rubric_expectations"] == []                    # all four expectations decided by checks
    assert not (run / "rubric" / f"{wrong}.md").exists()
    assert [r["passed"] for r in det[routed]["checks"] if r["skill_specific"]] == [True]
    assert not any(r["skill_specific"] for r in det[unrouted]["checks"])
    assert det[unrouted]["contamination"]                             # read the bundle without the skill
    worklist = (run / "rubric" / f"{routed}.md").read_text()
    for leak in ("with_skill", "without_skill", "[with skill]", bundle, "confidence", "files_read"):
        assert leak not in worklist, leak

    for label, verdicts, cw in ((routed, [True, True], False), (unrouted, [False, False], False)):
        exps = json.loads((run / "rubric" / "worklist.json").read_text())["items"]
        texts = next(i["expectations"] for i in exps if i["label"] == label)
        (run / "rubric" / f"{label}.grading.json").write_text(json.dumps({
            "schema_version": 1, "label": label, "confidently_wrong": cw, "false_statements": [],
            "expectations": [{"text": t, "passed": v, "evidence": ""} for t, v in zip(texts, verdicts)]}))

    p = _runner("report", "--run", str(run))
    assert p.returncode == 0, p.stderr
    s = json.loads((run / "report.json").read_text())["summary"]
    w, wo = s["with_skill"], s["without_skill"]
    assert (w["eval_pass_rate"], wo["eval_pass_rate"]) == (100.0, 0.0)
    assert w["expectation_pass_rate"] == 100.0
    assert wo["expectation_pass_rate"] == round(100 * 1 / 5, 1)       # 1 of 4 layout + 0 of 1 negative (routing is with-skill only)
    assert (w["confident_wrong"], wo["confident_wrong"]) == (0, 1)
    assert w["bundle_bytes_median"] == (8000 + 5811) / 2 and w["bundle_bytes_worst"] == 8000
    assert w["script_derived_answers"] == 1 and wo["script_derived_answers"] == 0
    assert wo["contaminated_answers"] == 1
    assert s["with_minus_without_points"] == 100.0
    assert w["by_route"] == {"layout": 100.0, "sibling-training-cli": 100.0}
    assert "| eval_pass_rate | 100.0 | 0.0 |" in (run / "report.md").read_text()


def test_answer_block_parsing():
    text = "blah\n```answer\nold: 1\n```\nmore\n```answer\nData_Parallel_Size: 4 GPUs\nlist: [4, 5]\n```"
    keys = run_evals.parse_answer_block(text)
    assert keys == {"data_parallel_size": "4 GPUs", "list": "[4, 5]"}
    assert run_evals.apply_check({"kind": "answer_number", "key": "data_parallel_size", "expected": 4}, text, keys)[0]
    assert run_evals.apply_check({"kind": "answer_list", "key": "list", "expected": [4, 5]}, text, keys)[0]
    assert not run_evals.apply_check({"kind": "answer_list", "key": "list", "expected": [5, 4]}, text, keys)[0]
    assert run_evals.apply_check({"kind": "answer_list", "key": "list", "expected": [5, 4], "ordered": False}, text, keys)[0]
    assert not run_evals.apply_check({"kind": "answer_text", "key": "missing", "expected": "no"}, text, keys)[0]
    assert run_evals.apply_check({"kind": "regex", "pattern": "Megatron", "must": False}, text, keys)[0]
    formula = "```answer\nbubble: 7/32 = 0.21875\nfirst: v0.18\nok: True\n```"
    fk = run_evals.parse_answer_block(formula)
    assert run_evals.apply_check({"kind": "answer_number", "key": "bubble", "expected": 0.21875, "tolerance": 0.001}, formula, fk)[0]
    assert run_evals.apply_check({"kind": "answer_text", "key": "first", "expected": "0.18.0"}, formula, fk)[0]
    assert run_evals.apply_check({"kind": "answer_text", "key": "ok", "expected": "yes"}, formula, fk)[0]
    assert not run_evals.apply_check({"kind": "answer_text", "key": "first", "expected": "0.19.0"}, formula, fk)[0]


def test_runner_bad_arguments_exit_2():
    p = _runner("prepare")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    p = _runner("report", "--run", "/nonexistent/run")
    assert p.returncode == 1 and "missing" in p.stderr and "Traceback" not in p.stderr


def test_readme_counts_match_evals():
    """evals/README.md states the set's size; recount it so the page cannot go stale."""
    text = (REPO / "evals" / "README.md").read_text()
    n_neg = sum(e["negative_control"] for e in EV)
    assert f"{len(EV)} evals; {n_neg} are negative controls" in text
    det = sum(len({c["expectation"] for c in e["checks"] if c.get("applies_to", "both") == "both"}) for e in EV)
    total = sum(len(e["expectations"]) for e in EV)
    only = sum(len({c["expectation"] for c in e["checks"] if c.get("applies_to", "both") == "both"}) == len(e["expectations"]) for e in EV)
    assert f"Of {total} expectations, {det} are decided by deterministic checks and {total - det} by the rubric grader; {only} evals" in " ".join(text.split())
    n_recomputed = sum("recompute" in c for e in EV for c in e["checks"]) + sum(len(e["facts"]) for e in EV)
    assert f"{n_recomputed} of these values are recomputed" in " ".join(text.split())
    rows = dict(re.findall(r"^\| `([a-z-]+)` \| (\d+) \|", text, re.M))
    for route, count in rows.items():
        assert sum(e["route"] == route for e in EV) == int(count), route
    negatives = re.search(r"^\| `sibling-\*`, `out-of-scope` \| (\d+) \|", text, re.M)
    assert negatives and int(negatives.group(1)) == n_neg
    assert set(rows) | run_evals.NEGATIVE_ROUTES == set(DOC["routes"])


def test_logger_runs_the_words_it_was_given_as_typed(tmp_path):
    # Several words: quoted again, so a pattern with a space or a `python3 -c` program reaches the
    # command whole; one word: a bash command line (pipes inside the quotes work).
    (tmp_path / "bin").mkdir()
    logger = tmp_path / "bin" / "logged.py"
    shutil.copy(REPO / "evals" / "logged.py", logger)
    (tmp_path / "f.md").write_text("### TP-08 x\n### TP-09 y\nTP-08\n")
    run = lambda *w: subprocess.run([sys.executable, str(logger), "t00000a", "--", *w], capture_output=True,
                                    text=True, cwd=tmp_path)
    assert run("grep", "-c", "^### TP-08", "f.md").stdout == "1\n"
    assert run(sys.executable, "-c", "print(32//(4*4))").stdout == "2\n"
    assert run("grep TP f.md | wc -l").stdout.strip() == "3"
    logged = [json.loads(x)["command"] for x in (tmp_path / "logs" / "t00000a.jsonl").read_text().splitlines()]
    assert logged[0] == "grep -c '^### TP-08' f.md" and logged[2] == "grep TP f.md | wc -l"

#!/usr/bin/env python3
"""Run the skill's evaluation with and without the skill, grade it, and report (standard library only).

  run_evals.py validate                      check evals/evals.json against the schema (exit 1 on problems)
  run_evals.py prepare --out RUN [--setting a|b|c] [--set field|core|all] [...]
                                             write one task file per eval and condition, the skill bundle
                                             copy, the input files and the command logger; the condition key
                                             goes to RUN/key.json, the messages for the agents to RUN/dispatch.json
  run_evals.py grade --run RUN               apply the deterministic checks to RUN/answers/*.json and write
                                             the blind rubric worklist RUN/rubric/<label>.md
  run_evals.py report --run RUN [--previous OLD/report.json]
                                             merge deterministic and rubric grades and the measured cost
                                             (RUN/logs/<label>.jsonl) into RUN/report.json and RUN/report.md
  run_evals.py ingest --run RUN --label L --transcript FILE
                                             an agent's exported tool-call transcript as its cost log
  run_evals.py reuse --run RUN --source OLD [--condition without_skill] [--except 125,162]
                                             add OLD's answers of one condition to a run prepared for the other
                                             (a re-run after a change only that condition sees)
  run_evals.py archive --run RUN --name NAME copy what re-grading needs (answers, logs, grades, rubric, key,
                                             report) to evals/runs/NAME/

Settings: a = megatron-core 0.19.2 importable; b = no megatron-core importable (plain Python 3.10+,
the skill's scripts on their bundled data); c = the user's release (stated in the question) differs
from the installed 0.19.2 (only evals with user_release).

Formats (schema_version 1) are defined in evals/README.md. Exit codes: 0 done, 1 invalid evals or
missing inputs, 2 bad arguments. Diagnostics go to stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
EVALS = HERE / "evals.json"
SCHEMA_VERSION = 1
CONDITIONS = ("with_skill", "without_skill")
CHECK_KINDS = {"answer_number", "answer_text", "answer_list", "regex"}
REQUIRED = ("id", "name", "route", "prompt", "expected_output", "files", "expectations", "answer_keys",
            "checks", "facts", "verified_by", "negative_control")
NEGATIVE_ROUTES = {"sibling-training-cli", "sibling-checkpointing", "sibling-inference", "out-of-scope"}
WITH_SKILL_TAG = "[with skill] "
BUNDLE_PARTS = ("SKILL.md", "LICENSE", "references", "scripts")
# A command that runs one of the bundle's scripts makes the answer "script-derived".
SCRIPT_RE = re.compile(r"scripts/[\w/]+\.py")
ANSWER_BLOCK_RE = re.compile(r"```answer[ \t]*\n(.*?)```", re.S)
SKILL_NAME = "core-models-and-parallelism"
LOGGER = HERE / "logged.py"
SETS = ("field", "core", "all")
# What each setting gives the answering agent; "megatron" says whether the interpreter must import megatron.core.
SETTINGS = {
    "a": {"title": "megatron-core 0.19.2 installed", "megatron": True, "only_user_release": False,
          "env": "- Python with megatron-core 0.19.2 installed: `{python}` (you may run it and read the installed packages)."},
    "b": {"title": "no megatron-core importable", "megatron": False, "only_user_release": False,
          "env": "- Python `{python}` (3.10 or newer) WITHOUT megatron-core or torch: `import megatron` fails. Use no other "
                 "Python interpreter or environment on this machine.\n- The user has no copy of Megatron's source either: do "
                 "NOT read, list, download or unpack megatron-core or Megatron-LM files found anywhere on this machine (other "
                 "virtual environments, wheel or pip caches, git mirrors, `pip download`); they stand for what the user "
                 "does not have."},
    "c": {"title": "the user's release differs from the installed one", "megatron": True, "only_user_release": True,
          "env": "- Python with megatron-core 0.19.2 installed: `{python}`. The user's own release, stated in the question, is "
                 "a different one: answer for the user's release."},
}
# Cost classes of a logged command's output, first match wins.
COST_CLASSES = (("bundle", None), ("megatron_source", re.compile(r"site-packages/megatron|/megatron/(core|training)/|Megatron-LM")),
                ("command_output", re.compile(r"")))


# ------------------------------------------------------------------------------------------ schema

def load(path: Path = EVALS) -> dict:
    return json.loads(path.read_text())


def problems(doc: dict, repo: Path = REPO) -> list[str]:
    """Every schema problem in an evals document (empty when valid)."""
    out: list[str] = []
    if not isinstance(doc.get("skill_name"), str) or not isinstance(doc.get("evals"), list):
        return ["top level needs skill_name (string) and evals (list)"]
    routes = doc.get("routes", {})
    seen_ids, seen_names = set(), set()
    for e in doc["evals"]:
        where = f"eval {e.get('id')} ({e.get('name')})"
        missing = [k for k in REQUIRED if k not in e]
        if missing:
            out.append(f"{where}: missing {missing}")
            continue
        if not isinstance(e["id"], int) or e["id"] in seen_ids:
            out.append(f"{where}: id must be a unique integer")
        if e["name"] in seen_names:
            out.append(f"{where}: duplicate name")
        seen_ids.add(e["id"])
        seen_names.add(e["name"])
        if e["route"] not in routes:
            out.append(f"{where}: route {e['route']!r} not in routes")
        if e["negative_control"] != (e["route"] in NEGATIVE_ROUTES):
            out.append(f"{where}: negative_control must be true exactly for the negative routes")
        for k in ("prompt", "expected_output"):
            if not isinstance(e[k], str) or not e[k].strip():
                out.append(f"{where}: empty {k}")
        if not e["expectations"] or not all(isinstance(x, str) and x.strip() for x in e["expectations"]):
            out.append(f"{where}: expectations must be non-empty strings")
        if not e["verified_by"]:
            out.append(f"{where}: verified_by is empty")
        for f in e["files"]:
            if not (repo / f).is_file():
                out.append(f"{where}: file {f} does not exist")
            elif f not in e["prompt"]:
                out.append(f"{where}: file {f} is not named in the prompt")
        keys = [k["key"] for k in e["answer_keys"]]
        if len(set(keys)) != len(keys):
            out.append(f"{where}: duplicate answer key")
        for i, c in enumerate(e["checks"]):
            out += [f"{where} check {i}: {p}" for p in _check_problems(c, keys, len(e["expectations"]))]
        used = {c["key"] for c in e["checks"] if "key" in c}
        if set(keys) - used:
            out.append(f"{where}: answer keys {sorted(set(keys) - used)} have no check")
        for i, f in enumerate(e["facts"]):
            if not {"claim", "recompute", "expect"} <= set(f) or "kind" not in f["recompute"]:
                out.append(f"{where} fact {i}: needs claim, recompute (with kind) and expect")
    return out


def _check_problems(c: dict, keys: list[str], n_exp: int) -> list[str]:
    out = []
    kind = c.get("kind")
    if kind not in CHECK_KINDS:
        return [f"unknown kind {kind!r}"]
    if not isinstance(c.get("expectation"), int) or not 0 <= c["expectation"] < n_exp:
        out.append("expectation must index the eval's expectations")
    if c.get("applies_to", "both") not in ("both", "with_skill"):
        out.append("applies_to must be both or with_skill")
    if kind == "regex":
        if not isinstance(c.get("must"), bool):
            out.append("regex needs must: true/false")
        try:
            re.compile(c.get("pattern", ""))
        except re.error as e:
            out.append(f"bad pattern: {e}")
        if not c.get("pattern"):
            out.append("empty pattern")
    else:
        if c.get("key") not in keys:
            out.append(f"key {c.get('key')!r} is not one of the eval's answer_keys")
        exp = c.get("expected")
        if kind == "answer_number" and not isinstance(exp, (int, float)):
            out.append("answer_number needs a numeric expected")
        if kind == "answer_text" and not isinstance(exp, str):
            out.append("answer_text needs a string expected")
        if kind == "answer_list" and not isinstance(exp, list):
            out.append("answer_list needs a list expected")
    return out


# ------------------------------------------------------------------------------------------ prepare

TEMPLATE_COMMON = """\
# Task {label}

You are answering one question from a user of NVIDIA Megatron Core. Work as you normally would
(read files, run commands), then write your answer file.

## Environment
{env_line}
- Input files for this question (if any) are under `{files_dir}`.
- No web access. Do NOT read `{forbidden}` (the benchmark's own evals, tests and answers) or other tasks' files.
{condition_block}
## Question
{prompt}

## What to write
Write `{answer_path}` (JSON, schema_version 1):

```json
{{"schema_version": 1, "label": "{label}",
  "answer": "<your full answer to the user, Markdown>",
  "confidence": "high | medium | low",
  "files_read": [{{"path": "<absolute path>", "bytes": <bytes you read: the size if whole, else the part>}}],
  "commands": [{{"command": "<exact command line>", "exit_code": <int>}}]}}
```

List EVERY file you opened (including {skill_hint}input files and installed sources) and EVERY command you ran.
{keys_block}
## How to work: every command and every file read goes through the logger
The cost of your answer is measured. First run `python3 {logger} {label} --start`. Then run EVERY
shell command, and read EVERY file, through `python3 {logger} {label} -- <command>` (read files with
`cat`, `sed -n A,Bp`, `head` or `grep` inside it). Do not read files with any other tool. Writing the
answer file is the only step outside the logger.
"""

WITH_SKILL_BLOCK = """
## Condition: with the skill
The agent skill `core-models-and-parallelism` is installed at `{bundle}`. Load it: read
`{bundle}/SKILL.md` first and follow it (its routes, references and scripts; run scripts from
`{bundle}`). Read only what you need.
"""

WITHOUT_SKILL_BLOCK = """
## Condition: without a skill
No skill is loaded. Use your own knowledge, the Python environment and the installed packages.
Do not read `{bundle}`.
"""


def _keys_block(e: dict) -> str:
    if not e["answer_keys"]:
        return ""
    lines = "\n".join(f"{k['key']}: <{k['ask']}>" for k in e["answer_keys"])
    return ("\nEnd the `answer` text with this block (one line per key; plain values, lists comma-separated):\n\n"
            f"```answer\n{lines}\n```\n")


def _imports_megatron(python: str) -> bool | None:
    """Whether ``python -c 'import megatron.core'`` works (None when the interpreter cannot be run)."""
    import subprocess

    try:
        return subprocess.run([python, "-c", "import megatron.core"], capture_output=True, timeout=180).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None


def select(doc: dict, which: str, setting: str, only: set[int] | None) -> list[dict]:
    """The evals a run asks: the field tasks, the core set or both; setting c keeps those with user_release."""
    out = []
    for e in doc["evals"]:
        in_set = which == "all" or (e.get("set") == "field") == (which == "field")
        if not in_set or (only and e["id"] not in only):
            continue
        if SETTINGS[setting]["only_user_release"] and not e.get("user_release"):
            continue
        out.append(e)
    return out


AGENT_MESSAGE = ("Read the file `{task}` and carry out the task it describes. Work only from what it allows. "
                 "When you are done, the answer file it names must exist and be valid JSON.")
GRADER_MESSAGE = ("Read `{rubric}` and grade the answer it contains exactly as it asks. "
                  "Do not open any other file of the run directory.")


def prepare(args) -> int:
    doc = load(Path(args.evals))
    bad = problems(doc)
    if bad:
        print("\n".join(bad), file=sys.stderr)
        return 1
    out = Path(args.out).resolve()
    if out.exists() and any(out.iterdir()):
        print(f"error: {out} exists and is not empty", file=sys.stderr)
        return 2
    setting = SETTINGS[args.setting]
    python = args.python or (sys.executable if setting["megatron"] else "python3")
    imports = _imports_megatron(python)
    if imports is None or imports != setting["megatron"]:
        want = "imports" if setting["megatron"] else "does not import"
        print(f"error: setting {args.setting} ({setting['title']}) needs a Python that {want} megatron.core; {python} "
              f"{'cannot be run' if imports is None else ('does' if imports else 'does not')}", file=sys.stderr)
        return 2
    only = {int(x) for x in args.only.split(",")} if args.only else None
    chosen = select(doc, args.set, args.setting, only)
    if not chosen:
        print("error: no eval matches --set/--setting/--only", file=sys.stderr)
        return 2
    skill = Path(args.skill_dir).resolve()
    bundle, files_dir = out / "bundle", out / "files"
    for part in BUNDLE_PARTS:
        src = skill / part
        if src.is_dir():
            shutil.copytree(src, bundle / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.is_file():
            bundle.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, bundle / part)
    shutil.copytree(HERE / "files", files_dir)
    for d in ("tasks", "answers", "logs", "bin"):
        (out / d).mkdir(parents=True)
    shutil.copy2(LOGGER, out / "bin" / "logged.py")
    rng = random.Random(args.seed)
    key, agents = {}, []
    for e in chosen:
        for cond in (CONDITIONS if args.condition == "both" else (args.condition,)):
            label = f"t{rng.randrange(16**6):06x}"
            while label in key:
                label = f"t{rng.randrange(16**6):06x}"
            key[label] = {"eval_id": e["id"], "condition": cond}
            prompt = e["prompt"].replace("evals/files/", f"{files_dir}/")
            block = (WITH_SKILL_BLOCK if cond == "with_skill" else WITHOUT_SKILL_BLOCK).format(bundle=bundle)
            text = TEMPLATE_COMMON.format(
                label=label, env_line=setting["env"].format(python=python), files_dir=files_dir,
                forbidden=f"{REPO}/evals, {REPO}/tests, {out}/key.json, {out}/answers (other than yours)",
                condition_block=block, prompt=prompt, answer_path=out / "answers" / f"{label}.json",
                skill_hint="skill files, " if cond == "with_skill" else "", keys_block=_keys_block(e),
                logger=out / "bin" / "logged.py")
            (out / "tasks" / f"{label}.md").write_text(text)
            agents.append({"label": label, "message": AGENT_MESSAGE.format(task=out / "tasks" / f"{label}.md")})
    rng.shuffle(agents)  # dispatch order does not group a condition
    (out / "key.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "bundle": str(bundle), "files": str(files_dir),
                                              "setting": args.setting, "set": args.set, "python": python,
                                              "labels": key}, indent=1))
    (out / "dispatch.json").write_text(json.dumps({
        "schema_version": SCHEMA_VERSION, "setting": args.setting, "setting_title": setting["title"],
        "instructions": "Start one fresh agent per entry (same model, tools and limits for all; no shared context; no access to "
                        "the repository), send it exactly `message`, wait for RUN/answers/<label>.json.",
        "agents": agents}, indent=1))
    print(f"{len(agents)} task files in {out / 'tasks'} (setting {args.setting}: {setting['title']}); agent messages in "
          f"{out / 'dispatch.json'}; condition key in {out / 'key.json'} (keep it from graders)")
    return 0


# ------------------------------------------------------------------------------------------ grade

def parse_answer_block(text: str) -> dict[str, str]:
    blocks = ANSWER_BLOCK_RE.findall(text or "")
    if not blocks:
        return {}
    out = {}
    for line in blocks[-1].splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            out[k.strip().lower()] = v.strip()
    return out


def norm_text(v) -> str:
    """Comparable form of a short answer: case, quotes, yes/true, no/false and 'v0.18' / '0.18.0' folded."""
    s = str(v).strip().strip("`'\"").strip().lower()
    version = re.fullmatch(r"(?:core_)?v?(\d+\.\d+)(?:\.0)?", s)
    if version:
        return version.group(1)
    return {"true": "yes", "false": "no"}.get(s, s)


def _number(v: str) -> float | None:
    """The number an answer line gives; with a worked formula ('7/32 = 0.21875') the result after '='."""
    found = re.findall(r"-?\d[\d,_]*(?:\.\d+)?(?:e-?\d+)?", (v or "").rsplit("=", 1)[-1])
    return float(found[0].replace(",", "").replace("_", "")) if found else None


def _items(v: str) -> list[str]:
    return [x for x in re.split(r"[\s,;\[\]()]+", v or "") if x]


def apply_check(c: dict, answer: str, keys: dict[str, str]) -> tuple[bool, str]:
    kind = c["kind"]
    if kind == "regex":
        hit = re.search(c["pattern"], answer or "") is not None
        return hit == c["must"], ("found" if hit else "absent") + f" /{c['pattern']}/"
    got = keys.get(c["key"].lower())
    if got is None:
        return False, f"answer block has no {c['key']}"
    if kind == "answer_number":
        x = _number(got)
        return x is not None and abs(x - c["expected"]) <= c.get("tolerance", 0), f"{got!r} vs {c['expected']}"
    if kind == "answer_text":
        return norm_text(got) == norm_text(c["expected"]), f"{got!r} vs {c['expected']!r}"
    exp = [str(x).lower() for x in c["expected"]]
    items = [x.lower() for x in _items(got)]
    if not c.get("ordered", True):
        items, exp = sorted(items), sorted(exp)
    return items == exp, f"{got!r} vs {c['expected']!r}"


def applicable_expectations(e: dict, condition: str) -> list[int]:
    return [i for i, x in enumerate(e["expectations"])
            if condition == "with_skill" or not x.startswith(WITH_SKILL_TAG)]


def _answer_files(run: Path, labels: dict) -> dict[str, dict]:
    out = {}
    for label in labels:
        p = run / "answers" / f"{label}.json"
        if p.is_file():
            try:
                out[label] = json.loads(p.read_text())
            except json.JSONDecodeError as err:
                print(f"warning: {p}: not JSON ({err}); graded as empty", file=sys.stderr)
                out[label] = {}
    return out


def _contamination(ans: dict, cond: str, run: Path, bundle: str) -> list[str]:
    bad = []
    for f in ans.get("files_read", []):
        p = str(f.get("path", ""))
        if cond == "without_skill" and p.startswith(bundle):
            bad.append(f"read the skill bundle without the skill: {p}")
        if p.startswith(str(REPO / "evals")) or p.startswith(str(REPO / "tests")) or p.endswith("key.json"):
            bad.append(f"read benchmark material: {p}")
    return bad


def grade(args) -> int:
    run = Path(args.run).resolve()
    keyfile = run / "key.json"
    if not keyfile.is_file():
        print(f"error: {keyfile} missing (run prepare first)", file=sys.stderr)
        return 1
    key = json.loads(keyfile.read_text())
    evals = {e["id"]: e for e in load(Path(args.evals))["evals"]}
    answers = _answer_files(run, key["labels"])
    rubric_dir = run / "rubric"
    rubric_dir.mkdir(exist_ok=True)
    graded, worklist = {}, []
    for label, meta in sorted(key["labels"].items()):
        if label not in answers:
            continue
        e, cond, ans = evals[meta["eval_id"]], meta["condition"], answers[label]
        text = ans.get("answer", "") if isinstance(ans.get("answer"), str) else ""
        keys = parse_answer_block(text)
        results = []
        for c in e["checks"]:
            if c.get("applies_to", "both") == "with_skill" and cond != "with_skill":
                continue
            ok, why = apply_check(c, text, keys)
            results.append({"expectation": c["expectation"], "kind": c["kind"], "passed": ok, "detail": why,
                            "skill_specific": c.get("applies_to", "both") == "with_skill"})
        decided = {r["expectation"] for r in results if not r["skill_specific"]}
        rubric = [i for i in range(len(e["expectations"])) if i not in decided]
        graded[label] = {"checks": results, "rubric_expectations": rubric,
                         "contamination": _contamination(ans, cond, run, key["bundle"])}
        if rubric:  # answers decided by checks alone need no grader
            worklist.append({"label": label, "expectations": [e["expectations"][i] for i in rubric],
                             "message": GRADER_MESSAGE.format(rubric=rubric_dir / f"{label}.md")})
            (rubric_dir / f"{label}.md").write_text(_rubric_task(label, e, rubric, redact(text, run), run))
    (run / "deterministic.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "graded": graded}, indent=1))
    (rubric_dir / "worklist.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "items": worklist}, indent=1))
    missing = sorted(set(key["labels"]) - set(answers))
    print(f"graded {len(graded)} answers ({len(missing)} missing); rubric worklist: {rubric_dir}/worklist.json")
    return 0


def redact(answer: str, run: Path) -> str:
    """The answer as a grader sees it: paths into the run and the skill's name hidden, so the condition does not show."""
    text = answer.replace(str(run / "bundle"), "<path>").replace(str(run), "<run>")
    text = re.sub(r"(?i)\b" + re.escape(SKILL_NAME) + r"\b", "<tool>", text)
    return re.sub(r"\bSKILL\.md\b|\bscripts/[\w/]+\.py\b", "<tool>", text)


def _rubric_task(label: str, e: dict, rubric: list[int], answer: str, run: Path) -> str:
    exps = "\n".join(f"{n}. {e['expectations'][i].removeprefix(WITH_SKILL_TAG)}" for n, i in enumerate(rubric)) or "(none)"
    return f"""# Grade answer {label}

You grade one answer to a question about NVIDIA Megatron Core. You do not know how the answer was
produced; judge only its text against the reference. A statement the reference contradicts is
false even if it sounds plausible. Do not run tools to re-derive facts; the reference was verified.

## Question
{e['prompt']}

## Reference answer (verified against megatron-core 0.19.2 or the named release sources)
{e['expected_output']}

## Expectations to grade (each: passed true/false, with the words of the answer as evidence)
{exps}

## The answer
<answer>
{answer}
</answer>

## Write `{run}/rubric/{label}.grading.json`
{{"schema_version": 1, "label": "{label}",
 "expectations": [{{"text": "<expectation>", "passed": true, "evidence": "<quote>"}}],
 "confidently_wrong": <true if the answer states something false as a fact without hedging>,
 "false_statements": ["<each false statement, quoted>"]}}
"""


# ------------------------------------------------------------------------------------------ report

def _pct(a: int, b: int) -> float | None:
    return round(100.0 * a / b, 1) if b else None


def _log(run: Path, label: str) -> list[dict] | None:
    path = run / "logs" / f"{label}.jsonl"
    if not path.is_file():
        return None
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def cost(records: list[dict] | None, bundle: str) -> dict:
    """Tool calls, bytes read by class and wall time of one answer, from its logger lines."""
    if not records:
        return {"logged": False}
    calls = [r for r in records if r.get("command") != "--start"]
    by_class = {name: 0 for name, _ in COST_CLASSES}
    for r in calls:
        cmd = str(r.get("command", ""))
        name = "bundle" if bundle in cmd else next(n for n, rx in COST_CLASSES[1:] if rx.search(cmd))
        by_class[name] += int(r.get("stdout_bytes", 0)) + int(r.get("stderr_bytes", 0))
    starts, ends = [float(r["start"]) for r in records if "start" in r], [float(r["end"]) for r in records if "end" in r]
    return {"logged": True, "tool_calls": len(calls), "bytes_total": sum(by_class.values()),
            **{f"bytes_{k}": v for k, v in by_class.items()},
            "wall_seconds": round(max(ends) - min(starts), 1) if starts and ends else None}


COST_KEYS = ("bytes_total", "bytes_bundle", "bytes_megatron_source", "bytes_command_output", "tool_calls", "wall_seconds")


def report(args) -> int:
    run = Path(args.run).resolve()
    try:
        key = json.loads((run / "key.json").read_text())
        det = json.loads((run / "deterministic.json").read_text())["graded"]
    except FileNotFoundError as err:
        print(f"error: {err.filename} missing (run prepare and grade first)", file=sys.stderr)
        return 1
    evals = {e["id"]: e for e in load(Path(args.evals))["evals"]}
    answers = _answer_files(run, key["labels"])
    rows = []
    for label, meta in sorted(key["labels"].items()):
        if label not in det:
            continue
        e, cond = evals[meta["eval_id"]], meta["condition"]
        applicable = set(applicable_expectations(e, cond))
        passed: dict[int, bool] = {}
        for r in det[label]["checks"]:
            if not r["skill_specific"]:
                passed[r["expectation"]] = passed.get(r["expectation"], True) and r["passed"]
        gfile = run / "rubric" / f"{label}.grading.json"
        grading = json.loads(gfile.read_text()) if gfile.is_file() else None
        rubric_idx = det[label]["rubric_expectations"]
        if grading:
            for i, g in zip(rubric_idx, grading.get("expectations", [])):
                passed[i] = bool(g.get("passed"))
        ans = answers.get(label, {})
        bundle_bytes = sum(int(f.get("bytes", 0)) for f in ans.get("files_read", [])
                           if str(f.get("path", "")).startswith(key["bundle"]))
        total_bytes = sum(int(f.get("bytes", 0)) for f in ans.get("files_read", []))
        scripts = [c.get("command", "") for c in ans.get("commands", []) if SCRIPT_RE.search(c.get("command", ""))
                   and (key["bundle"] in c.get("command", "") or cond == "with_skill")]
        c = cost(_log(run, label), key["bundle"])
        exp_results = {i: passed.get(i) for i in applicable}
        failed = [i for i, v in exp_results.items() if v is False]
        rows.append({
            "label": label, "eval_id": e["id"], "name": e["name"], "route": e["route"], "condition": cond,
            "negative_control": e["negative_control"], "expectations": len(applicable),
            "expectations_passed": sum(1 for v in exp_results.values() if v),
            "ungraded": sorted(i for i, v in exp_results.items() if v is None),
            "eval_passed": bool(applicable) and all(v is True for v in exp_results.values()),
            "confident_wrong": bool(failed) and ans.get("confidence") == "high" or bool(grading and grading.get("confidently_wrong")),
            "bundle_bytes": bundle_bytes, "total_bytes": total_bytes, "script_derived": bool(scripts),
            "skill_specific_checks": [r["passed"] for r in det[label]["checks"] if r["skill_specific"]],
            "contamination": det[label]["contamination"] + _setting_contamination(key, c, _log(run, label)),
            "cost": c,
        })
    summary = _summarise(rows)
    summary["setting"] = key.get("setting", "a")
    summary["setting_title"] = SETTINGS[summary["setting"]]["title"]
    if args.previous:
        prev = json.loads(Path(args.previous).read_text())["summary"]
        summary["change_since_previous"] = {
            c: {k: _delta(summary[c].get(k), prev.get(c, {}).get(k))
                for k in ("eval_pass_rate", "expectation_pass_rate", "confident_wrong", "bundle_bytes_median")}
            for c in CONDITIONS if c in summary}
    (run / "report.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION, "summary": summary, "rows": rows}, indent=1))
    (run / "report.md").write_text(_markdown(summary))
    print((run / "report.md").read_text())
    return 0


# Setting b: Megatron's code read, listed, imported or fetched by a logged command (a command that only
# prints text, such as printf of a pasted traceback, reads nothing).
_MEGATRON_CODE = re.compile(dict(COST_CLASSES)["megatron_source"].pattern
                            + r"|\.venv|\.mirror/|import megatron"
                            r"|megatron[-_]core[^\s]*\.(whl|tar)|pip3?\s+(download|install)[^|;&]*megatron")
_PRINTS_ONLY = re.compile(r"^\s*(printf|echo)\b")


def _setting_contamination(key: dict, c: dict, records) -> list[str]:
    """Setting b forbids Megatron's code: a logged command that read it (another environment, a cache, a
    mirror, a download) taints the answer."""
    if key.get("setting") != "b" or not records:
        return []
    return [f"setting b used megatron-core: {r['command'][:120]}" for r in records
            if _MEGATRON_CODE.search(str(r.get("command", ""))) and not _PRINTS_ONLY.match(str(r.get("command", "")))
            and r.get("exit_code") == 0]


def _median(values: list) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _cost_summary(rs: list[dict]) -> dict:
    logged = [r["cost"] for r in rs if r["cost"].get("logged")]
    return {"answers_with_cost": len(logged), **{f"median_{k}": _median([c.get(k) for c in logged]) for k in COST_KEYS}}


def _ratios(out: dict, rows: list[dict]) -> dict:
    """with/without of the medians, and the median over evals answered in both conditions of the per-eval ratio."""
    w, wo = out["with_skill"]["cost"], out["without_skill"]["cost"]
    res = {}
    for k in COST_KEYS:
        a, b = w.get(f"median_{k}"), wo.get(f"median_{k}")
        res[f"{k}_ratio_of_medians"] = round(a / b, 3) if a is not None and b else None
        pairs = []
        for eid in {r["eval_id"] for r in rows}:
            both = {r["condition"]: r["cost"].get(k) for r in rows if r["eval_id"] == eid and r["cost"].get("logged")}
            if both.get("without_skill") and both.get("with_skill") is not None:
                pairs.append(both["with_skill"] / both["without_skill"])
        res[f"{k}_median_paired_ratio"] = round(statistics.median(pairs), 3) if pairs else None
    return res


def _delta(a, b):
    return None if a is None or b is None else round(a - b, 1)


def _summarise(rows: list[dict]) -> dict:
    out: dict = {}
    for cond in CONDITIONS:
        rs = [r for r in rows if r["condition"] == cond and r["expectations"]]
        if not rs:
            continue
        bb = sorted(r["bundle_bytes"] for r in rs)
        out[cond] = {
            "answers": len(rs),
            "eval_pass_rate": _pct(sum(r["eval_passed"] for r in rs), len(rs)),
            "expectation_pass_rate": _pct(sum(r["expectations_passed"] for r in rs), sum(r["expectations"] for r in rs)),
            "ungraded_expectations": sum(len(r["ungraded"]) for r in rs),
            "confident_wrong": sum(r["confident_wrong"] for r in rs),
            "negative_controls_passed": f"{sum(r['eval_passed'] for r in rs if r['negative_control'])}/{sum(r['negative_control'] for r in rs)}",
            "bundle_bytes_median": statistics.median(bb), "bundle_bytes_worst": bb[-1],
            "total_bytes_median": statistics.median(sorted(r["total_bytes"] for r in rs)),
            "script_derived_answers": sum(r["script_derived"] for r in rs),
            "contaminated_answers": sum(bool(r["contamination"]) for r in rs),
            "by_route": {route: _pct(sum(r["eval_passed"] for r in rs if r["route"] == route),
                                     sum(1 for r in rs if r["route"] == route))
                         for route in sorted({r["route"] for r in rs})},
            "answers_by_route": {route: sum(1 for r in rs if r["route"] == route) for route in sorted({r["route"] for r in rs})},
            "cost": _cost_summary(rs),
        }
    if all(c in out for c in CONDITIONS) and None not in (out["with_skill"]["eval_pass_rate"], out["without_skill"]["eval_pass_rate"]):
        out["with_minus_without_points"] = round(out["with_skill"]["eval_pass_rate"] - out["without_skill"]["eval_pass_rate"], 1)
    if all(c in out for c in CONDITIONS):
        out["cost_with_over_without"] = _ratios(out, [r for r in rows if r["expectations"]])
        cw, cwo = out["with_skill"]["confident_wrong"], out["without_skill"]["confident_wrong"]
        out["confident_wrong_with_over_without"] = round(cw / cwo, 3) if cwo else None
    return out


def _markdown(s: dict) -> str:
    lines = [f"Setting {s.get('setting', 'a')}: {s.get('setting_title', '')}", "",
             "| metric | with skill | without skill |", "| --- | --- | --- |"]
    for k in ("answers", "eval_pass_rate", "expectation_pass_rate", "ungraded_expectations", "confident_wrong",
              "negative_controls_passed", "bundle_bytes_median", "bundle_bytes_worst", "total_bytes_median",
              "script_derived_answers", "contaminated_answers"):
        lines.append(f"| {k} | {s.get('with_skill', {}).get(k)} | {s.get('without_skill', {}).get(k)} |")
    routes = sorted(set(s.get("with_skill", {}).get("by_route", {})) | set(s.get("without_skill", {}).get("by_route", {})))
    lines += ["", "| route (eval pass rate %) | with skill | without skill |", "| --- | --- | --- |"]
    lines += [f"| {r} | {s.get('with_skill', {}).get('by_route', {}).get(r)} | {s.get('without_skill', {}).get('by_route', {}).get(r)} |"
              for r in routes]
    lines += ["", "| cost (median per answer) | with skill | without skill | with/without (of medians) | median paired ratio |",
              "| --- | --- | --- | --- | --- |"]
    ratios = s.get("cost_with_over_without", {})
    for k in COST_KEYS:
        lines.append(f"| {k} | {s.get('with_skill', {}).get('cost', {}).get('median_' + k)} | "
                     f"{s.get('without_skill', {}).get('cost', {}).get('median_' + k)} | {ratios.get(k + '_ratio_of_medians')} | "
                     f"{ratios.get(k + '_median_paired_ratio')} |")
    if "with_minus_without_points" in s:
        lines += ["", f"With minus without: {s['with_minus_without_points']} points."]
    if "change_since_previous" in s:
        lines += ["", "Change since previous run: " + json.dumps(s["change_since_previous"])]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------ ingest

def ingest(args) -> int:
    """Turn an exported agent transcript into the logger's lines (for agents that could not use logged.py).

    The transcript is JSON lines, one per tool call: {"tool", "input", "output" (text) or "output_bytes",
    "start", "end"} (seconds since the epoch). A read tool's bytes are those of its output, like ``cat``.
    """
    run = Path(args.run).resolve()
    key = json.loads((run / "key.json").read_text()) if (run / "key.json").is_file() else None
    if key is None or args.label not in key["labels"]:
        print(f"error: {args.label} is not a label of {run}", file=sys.stderr)
        return 2
    out = run / "logs" / f"{args.label}.jsonl"
    if out.exists():
        print(f"error: {out} exists (the agent used the logger)", file=sys.stderr)
        return 2
    lines = []
    try:
        calls = [json.loads(x) for x in Path(args.transcript).read_text().splitlines() if x.strip()]
    except (OSError, json.JSONDecodeError) as err:
        print(f"error: transcript {args.transcript}: {err}", file=sys.stderr)
        return 2
    if not calls:
        print("error: empty transcript", file=sys.stderr)
        return 2
    t0 = min(float(c["start"]) for c in calls)
    lines.append({"schema_version": 1, "label": args.label, "n": 0, "command": "--start", "exit_code": 0,
                  "stdout_bytes": 0, "stderr_bytes": 0, "start": t0, "end": t0})
    for i, c in enumerate(calls, 1):
        size = int(c["output_bytes"]) if "output_bytes" in c else len(str(c.get("output", "")).encode())
        lines.append({"schema_version": 1, "label": args.label, "n": i, "command": f"[{c.get('tool', 'tool')}] {c.get('input', '')}",
                      "exit_code": int(c.get("exit_code", 0)), "stdout_bytes": size, "stderr_bytes": 0,
                      "start": float(c["start"]), "end": float(c["end"]), "ingested": True})
    out.parent.mkdir(exist_ok=True)
    out.write_text("".join(json.dumps(x) + "\n" for x in lines))
    print(f"{len(calls)} tool calls of {args.label} written to {out}")
    return 0


# ------------------------------------------------------------------------------------------ archive

ARCHIVED = ("key.json", "dispatch.json", "deterministic.json", "report.json", "report.md")


def archive(args) -> int:
    """Copy what re-grading and re-reporting need into evals/runs/NAME (no bundle or input copies)."""
    run = Path(args.run).resolve()
    if not re.fullmatch(r"[\w.-]+", args.name):
        print("error: --name must be a plain directory name", file=sys.stderr)
        return 2
    dest = Path(args.dest).resolve() / args.name
    if dest.exists():
        print(f"error: {dest} exists", file=sys.stderr)
        return 2
    missing = [n for n in ARCHIVED if not (run / n).is_file()]
    if missing:
        print(f"error: {run} lacks {missing} (run prepare, grade and report first)", file=sys.stderr)
        return 1
    for d in ("answers", "logs", "rubric", "tasks"):
        if (run / d).is_dir():
            shutil.copytree(run / d, dest / d)
    for n in ARCHIVED:
        shutil.copy2(run / n, dest / n)
    print(f"archived {run} to {dest}")
    return 0


def reuse(args) -> int:
    """Add an earlier run's answers of one condition (the same setting and set) to a run prepared with
    --condition for the other one: labels, answers, logs, tasks and rubric grades are copied, each
    label marked with `reused_from`. For a re-run after a change that condition cannot see (the
    without-skill answers never read the bundle). Evals whose task changed since SOURCE are left out
    with --except and reused from a small fresh run; reusing an eval the run already has is refused."""
    run, old = Path(args.run).resolve(), Path(args.source).resolve()
    try:
        k_new, k_old = (json.loads((d / "key.json").read_text()) for d in (run, old))
    except FileNotFoundError as e:
        print(f"error: {e.filename} missing (run prepare first)", file=sys.stderr)
        return 1
    if (k_new.get("setting"), k_new.get("set")) != (k_old.get("setting"), k_old.get("set")):
        print("error: the two runs differ in setting or set", file=sys.stderr)
        return 2
    try:
        skip = {int(x) for x in args.except_ids.split(",") if x.strip()} if args.except_ids else set()
    except ValueError:
        print(f"error: --except takes comma-separated eval ids, not {args.except_ids!r}", file=sys.stderr)
        return 2
    have = {m["eval_id"] for m in k_new["labels"].values() if m["condition"] == args.condition}
    wanted = {m["eval_id"] for m in k_old["labels"].values() if m["condition"] == args.condition} - skip
    if have & wanted:
        print(f"error: {run} already has {args.condition} answers for evals {sorted(have & wanted)}",
              file=sys.stderr)
        return 2
    n = 0
    for label, meta in sorted(k_old["labels"].items()):
        if meta["condition"] != args.condition or meta["eval_id"] in skip:
            continue
        k_new["labels"][label] = dict(meta, reused_from=old.name)
        for sub, ext in (("answers", ".json"), ("logs", ".jsonl"), ("tasks", ".md")):
            src = old / sub / f"{label}{ext}"
            if src.is_file():
                (run / sub).mkdir(exist_ok=True)
                shutil.copy2(src, run / sub / src.name)
        for src in sorted((old / "rubric").glob(f"{label}.*")):
            (run / "rubric").mkdir(exist_ok=True)
            shutil.copy2(src, run / "rubric" / src.name)
        n += 1
    (run / "key.json").write_text(json.dumps(k_new, indent=1) + "\n")
    print(f"reused {n} {args.condition} answers of {old} in {run}")
    return 0


# ------------------------------------------------------------------------------------------ main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="run_evals.py", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--evals", default=str(EVALS), help="evals file (default: evals/evals.json)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="check evals.json against the schema")
    p = sub.add_parser("prepare", help="write task files for both conditions")
    p.add_argument("--out", required=True, help="new run directory")
    p.add_argument("--skill-dir", default=str(REPO), help="skill bundle to copy (default: this repository)")
    p.add_argument("--python", help="Python for the answering agents (default: this one for settings a and c, "
                                    "python3 for b); checked: it must import megatron.core exactly when the setting says so")
    p.add_argument("--setting", choices=sorted(SETTINGS), default="a", help="a: 0.19.2 installed; b: no megatron-core; "
                                                                           "c: the user's release differs (evals with user_release)")
    p.add_argument("--set", choices=SETS, default="field", help="field tasks (default), the core set, or all")
    p.add_argument("--condition", choices=("both",) + CONDITIONS, default="both", help="prepare one condition only (default both)")
    p.add_argument("--only", help="comma-separated eval ids")
    p.add_argument("--seed", type=int, default=0, help="seed for the anonymous labels")
    g = sub.add_parser("grade", help="deterministic checks + blind rubric worklist")
    g.add_argument("--run", required=True)
    r = sub.add_parser("report", help="numbers for BENCHMARK.md")
    r.add_argument("--run", required=True)
    r.add_argument("--previous", help="an earlier run's report.json, for the change since then")
    i = sub.add_parser("ingest", help="an exported transcript as the logger's lines of one answer")
    i.add_argument("--run", required=True)
    i.add_argument("--label", required=True)
    i.add_argument("--transcript", required=True, help="JSON lines: tool, input, output or output_bytes, start, end")
    u = sub.add_parser("reuse", help="add an earlier run's answers of one condition to a one-condition run")
    u.add_argument("--run", required=True, help="run prepared with --condition (the other one)")
    u.add_argument("--source", required=True, help="earlier run of the same setting and set")
    u.add_argument("--condition", choices=CONDITIONS, default="without_skill")
    u.add_argument("--except", dest="except_ids", default="",
                   help="comma-separated eval ids not to reuse (their task changed since SOURCE: answer them "
                        "afresh in a small run and reuse that one too)")
    a = sub.add_parser("archive", help="copy a graded run to evals/runs/NAME")
    a.add_argument("--run", required=True)
    a.add_argument("--name", required=True, help="e.g. 2026-12-02-field-a")
    a.add_argument("--dest", default=str(HERE / "runs"), help=argparse.SUPPRESS)
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    if args.cmd == "validate":
        bad = problems(load(Path(args.evals)))
        print("\n".join(bad) if bad else f"ok: {len(load(Path(args.evals))['evals'])} evals", file=sys.stderr if bad else sys.stdout)
        return 1 if bad else 0
    return {"prepare": prepare, "grade": grade, "report": report, "ingest": ingest, "reuse": reuse,
            "archive": archive}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())

"""Behaviour in the release index (issue 22 item 6): deprecations, ignored flags, body changes.

What api_history.py reports is checked against Megatron itself: the released sources at their git
tags (the Megatron-LM mirror), the installed 0.19.2, and, for the ignored --rampup-batch-size, the
microbatch calculator run in 0.16.1 (.venv-0161) and in 0.19.2 (.venv).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import upstream_sources as up

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
SITE = Path(next(p for p in sys.path if p.endswith("site-packages")))


def history(name: str) -> dict:
    p = subprocess.run([PY, str(ROOT / "scripts" / "api_history.py"), "--json", "--", name], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def events(name: str, change: str) -> list[dict]:
    return [e for e in history(name)["events"] if e["change"] == change]


def mirror_or_skip() -> Path:
    repo = up.mirror()
    if repo is None:
        pytest.skip("needs the Megatron-LM git mirror (MEGATRON_LM_MIRROR)")
    return repo


def at(tag: str, path: str) -> str:
    text = up.mirror_source_at(mirror_or_skip(), tag, path)
    assert text is not None, f"{path} missing at {tag}"
    return text


def _strings_in(node: ast.AST) -> str:
    return " ".join(n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def test_gptmodel_constructor_logs_its_deprecation_from_0_19():
    ev = events("GPTModel", "deprecated")
    assert [e["version"] for e in ev] == ["0.19.2"], ev
    assert "GPTModel IS DEPRECATED" in ev[0]["detail"] and "gpt_model.py:" in ev[0]["detail"]
    # Oracle: the installed 0.19.2 constructor makes a logging call with that text; 0.18.2's does not.
    def init_logs(text: str) -> str:
        cls = next(n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef) and n.name == "GPTModel")
        init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
        return " ".join(_strings_in(c) for c in ast.walk(init) if isinstance(c, ast.Call)
                        and re.search(r"log|warn", ast.unparse(c.func)))
    installed = (SITE / "megatron/core/models/gpt/gpt_model.py").read_text()
    assert "GPTModel IS DEPRECATED" in init_logs(installed)
    assert "DEPRECATED" not in init_logs(at("core_v0.18.2", "megatron/core/models/gpt/gpt_model.py"))


def test_hybrid_override_pattern_is_deprecated_for_hybrid_layer_pattern_from_0_17():
    ev = events("--hybrid-override-pattern", "deprecated")
    assert {e["version"] for e in ev} == {"0.17.1"} and ev, ev
    assert {e["successor"] for e in ev} == {"--hybrid-layer-pattern"}
    assert any(e["detail"].startswith("help: 'Deprecated. Use --hybrid-layer-pattern instead.") for e in ev)
    new, old = at("core_v0.17.1", "megatron/training/arguments.py"), at("core_v0.16.1", "megatron/training/arguments.py")
    assert "--hybrid-override-pattern is deprecated; use --hybrid-layer-pattern instead." in new
    assert "--hybrid-layer-pattern" not in old and "--hybrid-override-pattern" in old


def test_rampup_batch_size_is_marked_ignored_from_0_18():
    ev = {e["change"]: e for e in history("--rampup-batch-size")["events"]}
    assert ev["ignored"]["version"] == "0.18.2" and ev["deprecated"]["version"] == "0.18.2", ev
    assert "0 in 0.18.2" in ev["ignored"]["detail"]
    # Oracle 1: in the whole 0.18.2 tree nothing reads the attribute; in 0.17.1 training does.
    repo = mirror_or_skip()
    def readers(tag):
        out = subprocess.run(["git", "-C", str(repo), "grep", "-n", r"\.rampup_batch_size", tag],
                             capture_output=True, text=True).stdout
        return [line for line in out.splitlines() if "/tests/" not in line and ":tests/" not in line]
    assert readers("core_v0.18.2") == []
    assert any("megatron/training/global_vars.py" in line for line in readers("core_v0.17.1"))


PROBE = """
import json
from megatron.core import num_microbatches_calculator as m
m.init_num_microbatches_calculator(rank=0, rampup_batch_size=[16, 8, 300000], global_batch_size=1024,
                                   micro_batch_size=1, data_parallel_size=8, decrease_batch_size_if_needed=False)
print(json.dumps(m.get_current_global_batch_size()))
"""


@pytest.mark.parametrize("release,expected", [("0.16.1", 16), ("0.19.2", 1024)])
def test_rampup_batch_size_ramps_in_0_16_and_is_ignored_in_0_19(release, expected):
    """Oracle 2: Megatron's own calculator. With a ramp 16 -> 1024, 0.16.1 starts at 16; 0.19.2 at 1024."""
    import old_envs
    python = old_envs.python_for(release)
    proc = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True, timeout=600, cwd="/")
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected


def _numstat(repo: Path, a: str, b: str, path: str) -> int:
    out = subprocess.run(["git", "-C", str(repo), "diff", "--numstat", a, b, "--", path], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]) + int(out[1]) if out else 0


def test_memory_estimator_rewrite_between_0_17_and_0_18_is_the_largest_change():
    path = "megatron/training/theoretical_memory_usage.py"
    ev = {e["version"]: e for e in events("megatron.training.theoretical_memory_usage", "body_changed")}
    assert "0.18.2" in ev and "memory estimator" in ev["0.18.2"]["detail"], ev
    size = {v: sum(map(int, re.findall(r"(\d+) code lines (?:added|removed)", e["detail"]))) for v, e in ev.items()}
    assert max(size, key=size.get) == "0.18.2", size
    # Oracle: git's own diff of the file between consecutive tags is largest for 0.17.1 -> 0.18.2.
    repo = mirror_or_skip()
    tags = ["core_v0.12.3", "core_v0.13.1", "core_v0.14.0", "core_v0.15.3", "core_v0.16.1", "core_v0.17.1",
            "core_v0.18.2"]
    lines = {b: _numstat(repo, a, b, path) for a, b in zip(tags, tags[1:])}
    assert max(lines, key=lines.get) == "core_v0.18.2", lines
    # and a release whose file git says is unchanged has no body event
    assert all(("0." + t.split("v0.", 1)[1]) not in ev for t, n in lines.items() if n == 0)
    fn = events("megatron.training.theoretical_memory_usage:compute_weight_and_optimizer_memory", "body_changed")
    assert "0.18.2" in {e["version"] for e in fn}


@pytest.mark.parametrize("module", ["megatron.core.num_microbatches_calculator",
                                    "megatron.core.transformer.pipeline_parallel_layer_layout"])
def test_watched_modules_report_body_changes_only_where_the_code_changed(module):
    """Each body_changed release of a watched module is one where git sees the file change."""
    repo = mirror_or_skip()
    path = module.replace(".", "/") + ".py"
    tags = {"0.13.1": ("core_v0.12.3", "core_v0.13.1"), "0.14.0": ("core_v0.13.1", "core_v0.14.0"),
            "0.15.3": ("core_v0.14.0", "core_v0.15.3"), "0.16.1": ("core_v0.15.3", "core_v0.16.1"),
            "0.17.1": ("core_v0.16.1", "core_v0.17.1"), "0.18.2": ("core_v0.17.1", "core_v0.18.2")}
    evs = [e for e in events(module, "body_changed") if e["version"] in tags]
    for e in evs:
        assert _numstat(repo, *tags[e["version"]], path) > 0, e
    changed = {v for v, (a, b) in tags.items() if _numstat(repo, a, b, path) > 0}
    assert {e["version"] for e in evs} <= changed


def test_text_output_names_the_behaviour_events():
    p = subprocess.run([PY, str(ROOT / "scripts" / "api_history.py"), "GPTModel"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert re.search(r"0\.19\.2\s+deprecated\s+GPTModel\.__init__ logs 'GPTModel IS DEPRECATED", p.stdout), p.stdout
    p = subprocess.run([PY, str(ROOT / "scripts" / "api_history.py"), "--rampup-batch-size"], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert re.search(r"0\.18\.2\s+ignored\s+deprecated and never read", p.stdout), p.stdout

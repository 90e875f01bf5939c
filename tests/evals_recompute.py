"""Recompute the machine-checkable facts behind evals/evals.json.

A recompute spec (an eval check's ``recompute`` or a fact's ``recompute``) names a kind:

- layout kinds run scripts/check_parallel_layout.py --json (standard library only):
  ``layout`` (a value at ``path`` in its JSON; ``violation_rules`` / ``warning_rules`` give the
  rule ids), ``layout_count_distinct``, ``layout_first_valid`` (walk one flag until the layout
  is valid), ``layout_group`` (the --ranks group of one kind holding a rank);
- release kinds read Megatron-LM sources at git tags through tests/upstream_sources.py:
  ``upstream_source``, ``first_release``, ``all_releases_contain``;
- arithmetic kinds: ``bubble`` ((p-1)/(v*m), Narayanan et al. 2021), ``mod``, ``arith`` (an
  arithmetic expression over numbers and cells of the published tables frozen in
  evals/field_material.json: ``{"published": "<row source>", "field": "TP"}``);
- ``inspector`` runs scripts/inspect_core_api.py --json;
- provider kinds parse files with ast (tests/provider_calls.py): ``get_model_provider_kwargs`` (the
  keywords the installed megatron/training/training.py get_model passes to the provider),
  ``provider_unaccepted`` (those of them a provider file's ``function`` cannot accept);
- every other kind needs megatron-core and runs in one child process (tests/evals_probe.py); a spec
  with ``release`` (``0.13.1``, ``0.16.1``) runs in that release's environment (``.venv-0131``,
  ``.venv-0161``) and is skipped where the environment is missing.

``compare(check_or_fact, value)`` says whether a recomputed value supports what the eval states.
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import provider_calls
import upstream_sources

REPO = Path(__file__).resolve().parent.parent
CHECKER = REPO / "scripts" / "check_parallel_layout.py"
INSPECTOR = REPO / "scripts" / "inspect_core_api.py"
PROBE = Path(__file__).resolve().parent / "evals_probe.py"
STDLIB_KINDS = {"layout", "layout_count_distinct", "layout_first_valid", "layout_group", "bubble", "mod", "arith",
                "upstream_source", "first_release", "all_releases_contain", "inspector",
                "get_model_provider_kwargs", "provider_unaccepted"}
PROVIDER_KINDS = {"get_model_provider_kwargs", "provider_unaccepted"}
RELEASE_KINDS = {"upstream_source", "first_release", "all_releases_contain"}
PROBE_KINDS = {"config", "config_ok", "config_ok_negated", "config_error", "config_max_valid", "field_default",
               "config_fields", "signature", "import_ok", "call_error", "spec_mlp", "installed_source",
               "call", "rejected_kwargs", "param_at", "layers_per_rank", "layers_per_rank_error", "layout_decoders", "pg_fields", "version", "fake_world"}
MATERIAL = REPO / "evals" / "field_material.json"


class Skip(Exception):
    """The fact cannot be recomputed here (no mirror or wheel for that release)."""


@functools.lru_cache(maxsize=None)
def _checker(args: str) -> tuple[int, dict]:
    import shlex

    p = subprocess.run([sys.executable, str(CHECKER), *shlex.split(args), "--json"],
                       capture_output=True, text=True, timeout=120)
    if p.returncode not in (0, 1):
        raise AssertionError(f"checker exit {p.returncode} for {args!r}: {p.stderr.strip()}")
    return p.returncode, json.loads(p.stdout)


def _path(doc, path: str):
    if path in ("violation_rules", "warning_rules"):
        return [v["rule"] for v in doc[path.split("_")[0] + "s"]]
    cur = doc
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        cur = cur[int(part[1:-1])] if part.startswith("[") else cur[part]
    return cur


def _set_flag(args: str, flag: str, value: int) -> str:
    new, n = re.subn(rf"{re.escape(flag)}\s+\S+", f"{flag} {value}", args)
    return new if n else f"{args} {flag} {value}"


def _first_valid(spec) -> int | None:
    for i in range(spec["limit"] + 1):
        value = spec["start"] + i * spec["step"]
        if value < 1:
            break
        if _checker(_set_flag(spec["args"], spec["flag"], value))[1]["valid"]:
            return value
    return None


def _group(spec) -> list[int]:
    doc = _checker(spec["args"] + " --ranks")[1]
    return next(g for g in doc["ranks"][spec["group"]] if spec["rank"] in g)


def _source(ref: str, path: str) -> str | None:
    repo = upstream_sources.mirror()
    # Releases before 0.15 have no wheel in upstream_sources.RELEASES: read the tag from the mirror.
    if repo is not None and upstream_sources._git(repo, "rev-parse", "--verify", "-q", ref).returncode == 0:
        return upstream_sources.mirror_source_at(repo, ref, path)
    try:
        return upstream_sources.source_at(ref, path)
    except (upstream_sources.Unavailable, upstream_sources.UnknownVersion) as e:
        raise Skip(f"{path} at {ref} unavailable: {e}") from e


def _has(ref: str, path: str, contains: str | None) -> bool:
    text = _source(ref, path)
    return text is not None and (contains is None or contains in text)


def _first_release(spec) -> str | None:
    for ref in spec["refs"]:
        if _has(ref, spec["path"], spec.get("contains")):
            return ref.removeprefix("core_v")
    return None


@functools.lru_cache(maxsize=1)
def _inspector() -> dict:
    p = subprocess.run([sys.executable, str(INSPECTOR), "--json"], capture_output=True, text=True, timeout=600)
    return json.loads(p.stdout)


def _get_model_keywords() -> list[str]:
    training = provider_calls.installed()
    if training is None:
        raise Skip(f"{provider_calls.TRAINING} is not installed: cannot read which keywords get_model passes")
    return provider_calls.call_keywords(training.read_text())


def _provider(spec):
    if spec["kind"] == "get_model_provider_kwargs":
        return _get_model_keywords()
    source = (REPO / spec["file"]).read_text()
    return provider_calls.unaccepted(source, _get_model_keywords(), spec.get("function", "model_provider"))


@functools.lru_cache(maxsize=1)
def _published_rows() -> dict[str, dict]:
    tables = json.loads(MATERIAL.read_text())["published_layouts"]
    rows = tables["megatron_bridge_performance_summary"]
    return {r["source"]: r for r in rows} | {r["name"]: r for r in tables["ptdp_table2"]}


def _number(cell):
    return cell if isinstance(cell, (int, float)) else float(str(cell).replace(",", ""))


_ARITH_FUNCS = {"min": min, "max": max, "lcm": __import__("math").lcm, "ceil": __import__("math").ceil,
                "round": round, "int": int}


def _arith(spec):
    """Evaluate a small arithmetic expression (numbers, + - * / // %, min/max/lcm/ceil/round)."""
    import ast

    env = {k: _number(_published_rows()[v["published"]][v["field"]]) if isinstance(v, dict) else v
           for k, v in spec.get("vars", {}).items()}
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.Name):
            return env[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _ARITH_FUNCS:
            return _ARITH_FUNCS[n.func.id](*[ev(a) for a in n.args])
        raise ValueError(f"arith: unsupported {ast.dump(n)[:60]}")

    value = ev(ast.parse(spec["expr"], mode="eval"))
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _stdlib(spec):
    kind = spec["kind"]
    if kind == "layout":
        return _path(_checker(spec["args"])[1], spec["path"])
    if kind == "layout_count_distinct":
        rules = {v["rule"] for v in _checker(spec["args"])[1]["violations"]}
        return len(rules - set(spec.get("exclude", [])))
    if kind == "layout_first_valid":
        return _first_valid(spec)
    if kind == "layout_group":
        return _group(spec)
    if kind == "bubble":
        return (spec["pp"] - 1) / (spec["vpp"] * spec["m"])
    if kind == "mod":
        return spec["a"] % spec["b"]
    if kind == "arith":
        return _arith(spec)
    if kind == "upstream_source":
        return _has(spec["ref"], spec["path"], spec.get("contains"))
    if kind == "first_release":
        return _first_release(spec)
    if kind == "all_releases_contain":
        return all(_has(ref, spec["path"], spec["contains"]) for ref in spec["refs"])
    if kind == "inspector":
        return _path(_inspector(), spec["path"])
    if kind in PROVIDER_KINDS:
        return _provider(spec)
    raise KeyError(kind)


def probe(specs: list[dict], python: str | None = None) -> list:
    """Run every megatron-dependent spec in one child; returns values (or raises on probe errors)."""
    if not specs:
        return []
    p = subprocess.run([python or sys.executable, str(PROBE)], input=json.dumps(specs), capture_output=True,
                       text=True, timeout=900)
    if p.returncode != 0:
        raise AssertionError(f"evals_probe failed: {p.stderr[-2000:]}")
    return json.loads(p.stdout)


def _release_python(release: str | None) -> str | None:
    """The interpreter for a spec's release (None: this one); Skip when that environment is absent."""
    if release is None or release == "0.19.2":
        return None
    import old_envs  # builds the environment on first use, once across parallel workers
    if release not in old_envs.RELEASES:
        raise Skip(f"no environment for megatron-core {release}")
    python, why = old_envs.python_or_reason(release)
    if python is None:
        raise Skip(why)
    return str(python)


def recompute_all(specs: list[dict]) -> list:
    """Values for every spec, in order: a value, or a Skip / Exception instance."""
    out: list = [None] * len(specs)
    by_release: dict = {}
    for i, s in enumerate(specs):
        if s["kind"] in PROBE_KINDS:
            by_release.setdefault(s.get("release"), []).append(i)
    for release, idx in by_release.items():
        try:
            python = _release_python(release)
        except Skip as e:
            for i in idx:
                out[i] = e
            continue
        for i, res in zip(idx, probe([specs[i] for i in idx], python)):
            out[i] = res["value"] if "value" in res else AssertionError(res["error"])
    for i, s in enumerate(specs):
        if s["kind"] in PROBE_KINDS:
            continue
        try:
            out[i] = _stdlib(s)
        except Skip as e:
            out[i] = e
    return out


def _runner():
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_evals", REPO / "evals" / "run_evals.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# The grader's own normalisation, so a recomputed value is compared exactly as an answer would be.
norm_text = _runner().norm_text


def compare(item: dict, value) -> tuple[bool, str]:
    """(holds, explanation) for a check (``kind``) or a fact (``expect``) against a recomputed value."""
    if "expect" in item:
        exp = item["expect"]
        if isinstance(exp, dict) and "matches" in exp:
            return bool(re.search(exp["matches"], str(value))), f"{value!r} ~ /{exp['matches']}/"
        if isinstance(exp, dict) and "contains" in exp:
            return exp["contains"] in value, f"{exp['contains']!r} in {value!r}"
        return value == exp, f"{value!r} == {exp!r}"
    kind = item["kind"]
    if kind == "answer_number":
        ok = value is not None and abs(float(value) - float(item["expected"])) <= item.get("tolerance", 0)
        return ok, f"{value!r} vs {item['expected']!r}"
    if kind == "answer_text":
        return norm_text(value) == norm_text(item["expected"]), f"{value!r} vs {item['expected']!r}"
    if kind == "answer_list":
        got, exp = list(value), list(item["expected"])
        if not item.get("ordered", True):
            got, exp = sorted(map(str, got)), sorted(map(str, exp))
        return got == exp, f"{value!r} vs {item['expected']!r}"
    if kind == "regex":
        return bool(re.search(item["pattern"], str(value))), f"{value!r} ~ /{item['pattern']}/"
    raise KeyError(kind)

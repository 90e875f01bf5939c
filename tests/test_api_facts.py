"""Every checkable fact in SKILL.md and references/*.md holds in the installed megatron-core.

The facts (names, signature blocks, defaults, derived values, quoted message parts, field
counts) are extracted by scripts/reference_facts.py; see its docstring for the syntax.

Against megatron-core 0.19.2 (the bundle's release) every fact must hold. To check the facts
against another installation, point API_FACTS_PYTHON at its interpreter (Python >= 3.10 with
torch and megatron-core; pytest is not needed there):

    API_FACTS_PYTHON=/tmp/v0161/bin/python .venv/bin/python -m pytest tests/test_api_facts.py -rx

Facts that do not hold there are reported as xfail with their id and what the installation has
instead (the version-specific facts), and a summary is printed at the end of the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import reference_facts as rf  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))

import upstream_sources as up  # noqa: E402

DOCS = [REPO / "SKILL.md", *sorted((REPO / "references").glob("*.md"))]
FACTS = rf.extract_facts([p for p in DOCS if p.is_file()])
OTHER_PYTHON = os.environ.get("API_FACTS_PYTHON")

# Version-tagged names are checked against tests/upstream_sources.py (git mirror, else the
# released wheels from PyPI); the child imports it from the tests directory.
_CHILD = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import reference_facts as rf
import upstream_sources as up
facts = rf.extract_facts(sys.argv[3:])
print(json.dumps({"version": rf.installed_version(), "results": rf.check_facts(facts, source_at=up.source_at)}))
"""


def _rel(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return path


@pytest.fixture(scope="module")
def checked(request):
    """(installed version, {(fact id, versions): result}) for every fact, checked once."""
    if OTHER_PYTHON:
        proc = subprocess.run(
            [OTHER_PYTHON, "-c", _CHILD, str(REPO / "scripts"), str(REPO / "tests"),
             *[str(p) for p in DOCS if p.is_file()]],
            capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        version, results = data["version"], data["results"]
    else:
        version, results = rf.installed_version(), rf.check_facts(FACTS, source_at=up.source_at)
    by_key = {(r["id"], r["versions"]): r for r in results}
    yield version, by_key
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # the summary is shown even without -s
            for line in _summary(version, results):
                reporter.write_line(line)


def _summary(version, results) -> list[str]:
    counts = Counter((r["kind"], r["status"]) for r in results)
    lines = [f"\nreference facts against megatron-core {version}:"]
    for kind in sorted({k for k, _ in counts}):
        lines.append("  " + kind + ": " + ", ".join(f"{s} {n}" for (k, s), n in sorted(counts.items()) if k == kind))
    off = [r for r in results if r["status"] != "ok"]
    if off and version != rf.BUNDLE_VERSION:
        lines.append(f"  version-specific facts (hold in {rf.BUNDLE_VERSION}, not in {version}):")
        lines += [f"    {r['id']} [{_rel(r['source'].rsplit(':', 1)[0])}:{r['source'].rsplit(':', 1)[1]}]: "
                  f"{r['status']}: {r['detail'].splitlines()[0] if r['detail'] else ''}" for r in off]
    return lines


def _fact_id(fact: rf.Fact) -> str:
    return fact.id + (f"@{fact.versions}" if fact.versions else "")


@pytest.mark.slow
@pytest.mark.parametrize("fact", FACTS, ids=[_fact_id(f) for f in FACTS])
def test_fact_holds(fact, checked):
    version, by_key = checked
    result = by_key[(fact.id, fact.versions)]
    where = ", ".join(_rel(s.rsplit(":", 1)[0]) + ":" + s.rsplit(":", 1)[1] for s in fact.sources)
    if result["status"] == "error" and result.get("mirror_missing"):
        pytest.skip(f"{fact.id}: {result['detail']}")
    if result["status"] != "ok" and version != rf.BUNDLE_VERSION:
        first = result["detail"].splitlines()[0] if result["detail"] else ""
        pytest.xfail(f"version-specific in {version}: {fact.id} ({where}): {result['status']}: {first}")
    assert result["status"] == "ok", f"{fact.id} stated at {where}: {result['status']}: {result['detail']}"


def test_every_kind_of_fact_is_present():
    """The reference really states facts of each kind (an empty extraction would pass vacuously)."""
    api = [f for f in FACTS if any("api-reference.md" in s for s in f.sources)]
    kinds = Counter(f.kind for f in api)
    assert kinds["name"] >= 40 and kinds["signature"] >= 20 and kinds["default"] >= 80, kinds
    assert kinds["derived"] >= 10 and kinds["quote"] >= 5 and kinds["fieldcount"] >= 2, kinds
    assert any(f.versions for f in api), "no version-tagged name: the escape is untested on the real document"

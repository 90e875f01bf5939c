"""The reviewer on patterns reduced from real downstream code (issue 20).

- Each fixture in tests/data/review_downstream/ names its source (``# source:
  owner/repo@commit:path:line``) and what the reviewer must say at which release
  (``# expect: RULE RELEASE line N [severity]``, ``# silent: RULE RELEASE``).
- Each expected finding is proven by the oracle (tests/review_oracle_child.py: real imports,
  attribute lookups, ``inspect.signature`` binding) run by that release's own Python
  (.venv 0.19.2, .venv-0161, .venv-0131), where the rule is one the oracle can judge.
- The fix the reviewer suggests, applied to the line (tests/review_fixes.py), makes it
  silent there.
- The frozen downstream corpus (tests/data/review_downstream_corpus.json), where the fetch
  mirrors exist: at least 90% of the oracle's breaks are reported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import release_index  # noqa: E402
import old_envs  # noqa: E402
import review_downstream  # noqa: E402
import review_fixes  # noqa: E402
from model_review.review import review_paths  # noqa: E402

DATA = REPO / "tests" / "data" / "review_downstream"
FIXTURES = sorted(DATA.glob("*.py"))
SOURCE = re.compile(r"^# source: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}):(\S+):(\d+)$", re.M)
EXPECT = re.compile(r"^# expect: ([\w.-]+) ([\d.]+) line (\d+)(?: (\w+))?$", re.M)
SILENT = re.compile(r"^# silent: ([\w.-]+) ([\d.]+)$", re.M)
# Reviewer rule -> the oracle's kind of break that proves it (rules absent here are proven
# elsewhere: global-process-group by test_review_rules.py, the TE and layout rules by
# building, the guarded import is an info).
PROOF = {"unknown-keyword": "signature", "removed-keyword": "signature",
         "missing-required": "signature", "too-many-positional": "signature",
         "unresolved-import": "import", "removed-attribute": "attribute",
         "config-field": "config-field", "deprecated-keyword": "deprecated",
         "gptmodel-deprecated": "deprecated", "positional-mismatch": "positional",
         "deprecated-module": "deprecated-module"}


def expectations(path):
    text = path.read_text()
    return text, [(r, v, int(line), sev or None) for r, v, line, sev in EXPECT.findall(text)]


def review(path, version, rule):
    return review_paths([str(path)], version, rule_ids={rule}, has_te=False)["findings"]


def test_fixtures_name_a_real_source():
    assert len(FIXTURES) >= 10
    for path in FIXTURES:
        text, expects = expectations(path)
        assert SOURCE.search(text), f"{path.name}: no '# source: owner/repo@commit:path:line'"
        assert expects or SILENT.search(text), f"{path.name}: no '# expect:' or '# silent:'"


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_reviewer_says_what_the_fixture_expects(path):
    text, expects = expectations(path)
    for rule, version, line, severity in expects:
        found = [f for f in review(path, version, rule) if f["line"] == line]
        assert found, f"{path.name}: no {rule} on line {line} at {version}"
        assert {f["severity"] for f in found} == {severity or
                                                  _rule_severity(rule)}, found
    for rule, version in SILENT.findall(text):
        assert [f for f in review(path, version, rule) if f["severity"] != "info"] == [], \
            f"{path.name}: {rule} at {version}"


def _rule_severity(rule):
    from model_review.rules import RULES_BY_ID
    return RULES_BY_ID[rule].severity


_ORACLE = {}
def _environment(release):
    """The interpreter of ``release`` (built on first use); a release with no environment skips."""
    if release not in old_envs.RELEASES:
        pytest.skip(f"no environment with megatron-core {release} here")
    return old_envs.python_for(release)


def _oracle(version):
    """The oracle's breaks for every fixture at ``version`` (one child run per release)."""
    release, _ = release_index.resolve_version(version)
    if release not in _ORACLE:
        py = _environment(release)
        items = [{"key": p.name, "text": p.read_text()} for p in FIXTURES]
        proc = subprocess.run([str(py), str(review_downstream.CHILD)],
                              input=json.dumps({"items": items,
                                                "elsewhere": sorted(review_downstream.all_fields())}),
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        _ORACLE[release] = json.loads(proc.stdout)
    return _ORACLE[release]


@pytest.mark.parametrize("path", [p for p in FIXTURES
                                  if any(e[0] in PROOF and e[3] != "info"
                                         for e in expectations(p)[1])], ids=lambda p: p.stem)
def test_expected_finding_is_a_real_break(path):
    """The release itself breaks (or warns) there: real import, lookup or bind."""
    text, expects = expectations(path)
    for rule, version, line, severity in expects:
        if rule not in PROOF or severity == "info":
            continue
        breaks = _oracle(version)[path.name]
        assert any(b["kind"] == PROOF[rule] and
                   (b["line"] <= line <= b.get("end", b["line"]) or line in b.get("also", []))
                   for b in breaks), (rule, version, line, breaks)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fix_applied_is_silent(path, tmp_path):
    """Item 7: each finding's fix, applied to its line, leaves the reviewer silent there."""
    text, expects = expectations(path)
    for rule, version, line, severity in expects:
        for f in [f for f in review(path, version, rule)
                  if f["line"] == line and f["severity"] != "info"]:
            fixed = review_fixes.apply(text, f)
            assert fixed is not None, f"no mechanical form for {rule}'s fix {f['fix']!r}"
            out = tmp_path / path.name
            out.write_text(fixed)
            again = [g for g in review(out, version, rule)
                     if g["line"] == line and g["severity"] != "info"]
            assert again == [], (f["fix"], again)


def test_downstream_corpus_recall():
    """The frozen corpus (skips without the fetch mirrors): at least 90% of the breaks that
    real imports and signature calls reveal at each file's target release and at 0.19.2
    are reported."""
    entries = review_downstream.corpus()
    if review_downstream.read(entries[0]) is None:
        pytest.skip("downstream corpus needs the fetch mirrors (/work/.mirror)")
    found = review_downstream.review_all(entries)
    breaks = review_downstream.oracle_all(entries)
    hit, missed = review_downstream.match(found, breaks)
    assert len(hit) + len(missed) >= 30
    assert len(hit) / (len(hit) + len(missed)) >= 0.9, missed


RULE_DATA = REPO / "tests" / "data" / "review"


def _rules():
    from model_review.rules import RULES
    return [r.id for r in RULES]


@pytest.mark.parametrize("rule", _rules())
def test_rule_fixture_fix_applied_is_silent(rule, tmp_path):
    """Item 7 for every rule: the fix of each finding on tests/data/review/<rule>.bad.py,
    applied, leaves no finding of the rule on that line; a rule whose fix is advice is
    listed in review_fixes.NOT_MECHANICAL with the reason."""
    from test_review_rules import FIXTURE_RELEASE
    version = FIXTURE_RELEASE.get(rule, "0.19")
    path = RULE_DATA / f"{rule}.bad.py"
    text = path.read_text()
    found = [f for f in review_paths([str(path)], version, rule_ids={rule}, has_te=False,
                                     target_te=False)["findings"] if f["severity"] != "info"]
    assert found
    for f in found:
        fixed = review_fixes.apply(text, f)
        if fixed is None:
            assert f["rule"].split(".")[0] in review_fixes.NOT_MECHANICAL, f["fix"]
            continue
        out = tmp_path / path.name
        out.write_text(fixed)
        again = [g for g in review_paths([str(out)], version, rule_ids={rule}, has_te=False,
                                         target_te=False)["findings"]
                 if g["line"] == f["line"] and g["rule"] == f["rule"] and g["severity"] != "info"]
        assert again == [], (f["fix"], again)

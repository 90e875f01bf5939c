"""Spot checks: the release index against really installed megatron-core releases.

For every megatron.* name the bundle mentions (SKILL.md and references/, tagged or not), a child
process under the installation's own interpreter (tests/release_index_probe.py) compares
inspect.signature and dataclasses.fields of the live object with the index entry of that release;
here the index must also agree on which of the names exist in that release at all.

Installations: the pinned 0.19.2 (this interpreter), 0.16.1 (.venv-0161, tests/fixtures/make_old_env.sh)
and 0.13.1 (.venv-0131, tests/fixtures/make_older_env.sh); both old ones are Python 3.11 with CPU
torch 2.13.0 and are built on first use; a test skips when no Python 3.11 exists to build them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import reference_facts as rf  # noqa: E402
import release_index as ri  # noqa: E402

pytestmark = pytest.mark.slow

DOCS = [ROOT / "SKILL.md", *sorted((ROOT / "references").glob("*.md"))]
ENVS = {  # release -> (build script, venv directory, env var overriding it)
    "0.16.1": ("make_old_env.sh", ".venv-0161", "OLD_VENV"),
    "0.13.1": ("make_older_env.sh", ".venv-0131", "OLDER_VENV"),
}
# A name that does not import because the name is not in that release (vs a missing third-party
# package such as triton, which says nothing about the release's API).
ABSENT = re.compile(r"No module named 'megatron|has no attribute")


def bundle_names() -> list[str]:
    return sorted({f.target for f in rf.extract_facts(DOCS) if f.kind == "name"})


def python_for(release: str) -> str:
    if release == "0.19.2":
        return sys.executable
    script, venv, var = ENVS[release]
    proc = subprocess.run(["bash", str(ROOT / "tests" / "fixtures" / script)], capture_output=True, text=True,
                          timeout=1500)
    if proc.returncode == 3:
        pytest.skip(f"cannot spot-check the index against megatron-core {release}: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return os.path.join(os.environ.get(var, str(ROOT / venv)), "bin", "python")


@pytest.mark.parametrize("release", ["0.19.2", "0.16.1", "0.13.1"])
def test_index_agrees_with_the_installed_release(release):
    names = bundle_names()
    assert len(names) > 60
    proc = subprocess.run([python_for(release), str(ROOT / "tests" / "release_index_probe.py"), *names],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["installed"] == release and report["indexed"] == release
    rel = ri.load(release)
    by_status: dict[str, list[dict]] = {}
    for r in report["results"]:
        by_status.setdefault(r["status"], []).append(r)
    assert not by_status.get("mismatch"), json.dumps(by_status["mismatch"], indent=1)[:4000]
    assert not by_status.get("not_in_index"), by_status["not_in_index"]
    # Which names exist: the index agrees with the installation both ways.
    for r in by_status.get("ok", []) + by_status.get("skipped", []):
        assert rel.resolve(r["target"]) is not None, f"{r['target']} imports in {release}, the index lacks it"
    absent = [r for r in by_status.get("unresolved", []) if ABSENT.search(r["detail"])]
    for r in absent:
        assert rel.resolve(r["target"]) is None, f"{r['target']} is not in {release}, the index has it"
    # Non-vacuous: most of the bundle's classes and functions were compared.
    assert len(by_status.get("ok", [])) >= 40, {k: len(v) for k, v in by_status.items()}
    other = [r["target"] for r in by_status.get("unresolved", []) if r not in absent]
    print(f"{release}: {len(by_status.get('ok', []))} compared, {len(absent)} absent in both, "
          f"{len(by_status.get('skipped', []))} modules/values resolved in both, not importable here: {other}")

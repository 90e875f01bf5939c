"""Spot checks: the release index against really installed megatron-core releases.

For every megatron.* name the bundle mentions (SKILL.md and references/, tagged or not), a child
process under the installation's own interpreter (tests/release_index_probe.py) compares
inspect.signature and dataclasses.fields of the live object with the index entry of that release;
here the index must also agree on which of the names exist in that release at all.

The 0.19.2 flags are compared with the argparse parser megatron/training/arguments.py really
builds (dest, aliases, literal defaults): that also proves the dataclass-derived flag groups
(ArgumentGroupFactory) are read right.

Installations: the pinned 0.19.2 (this interpreter), 0.16.1 (.venv-0161, tests/fixtures/make_old_env.sh)
and 0.13.1 (.venv-0131, tests/fixtures/make_older_env.sh); both old ones are Python 3.11 with CPU
torch 2.13.0 and are built on first use; a test skips when no Python 3.11 exists to build them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import reference_facts as rf  # noqa: E402
import old_envs  # noqa: E402
import release_index as ri  # noqa: E402

pytestmark = pytest.mark.slow

DOCS = [ROOT / "SKILL.md", *sorted((ROOT / "references").glob("*.md"))]
# A name that does not import because the name is not in that release (vs a missing third-party
# package such as triton, which says nothing about the release's API).
ABSENT = re.compile(r"No module named 'megatron|has no attribute")


def bundle_names() -> list[str]:
    return sorted({f.target for f in rf.extract_facts(DOCS) if f.kind == "name"})


def python_for(release: str) -> str:
    return str(old_envs.python_for(release))


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


DUMP_PARSER = """
import argparse, json, warnings
warnings.simplefilter("ignore")
from megatron.training.arguments import add_megatron_arguments
parser = argparse.ArgumentParser(allow_abbrev=False)
add_megatron_arguments(parser)
out = {}
for a in parser._actions:
    longs = [o for o in a.option_strings if o.startswith("--")]
    if longs and longs[0] != "--help":
        out[longs[0]] = {"dest": a.dest, "aliases": [o for o in a.option_strings if o != longs[0]],
                         "default": repr(a.default)}
print(json.dumps(out))
"""
# Added by megatron/training/arguments.py only when NVIDIA Kitchen imports (not installed here).
NEEDS_KITCHEN = {"--kitchen-config-file", "--kitchen-recipe-number"}


def test_flags_equal_the_installed_megatron_lm_parser():
    """Every flag of 0.19.2's index, with dest, aliases and default, is what argparse builds."""
    import ast

    if not (Path(sys.prefix) / "lib").exists() or ri.versions.installed_version() != "0.19.2":
        pytest.skip("needs the pinned megatron-core 0.19.2 (with megatron/training) installed")
    proc = subprocess.run([sys.executable, "-c", DUMP_PARSER], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    live = json.loads(proc.stdout)
    index = ri.load("0.19.2").flags()
    assert set(index) - NEEDS_KITCHEN == set(live), (sorted(set(index) - set(live)), sorted(set(live) - set(index)))
    wrong, compared = [], 0
    for flag, got in live.items():
        want = index[flag]
        if want["dest"] != got["dest"] or want["aliases"] != got["aliases"]:
            wrong.append((flag, want["dest"], got["dest"], want["aliases"], got["aliases"]))
            continue
        try:
            value = ast.literal_eval(want["default"])
        except (ValueError, SyntaxError):
            continue  # an expression (a dtype, a function): compared as source text elsewhere
        try:
            live_value = ast.literal_eval(got["default"])
        except (ValueError, SyntaxError):
            live_value = got["default"]  # not a literal: cannot equal the literal the index has
        if isinstance(live_value, (list, tuple)) and isinstance(value, (list, tuple)):
            live_value, value = list(live_value), list(value)
        compared += 1
        if value != live_value:
            wrong.append((flag, want["default"], got["default"]))
    assert not wrong, wrong[:20]
    assert len(live) > 700 and compared > 600, (len(live), compared)


_ENUM_CHILD = r"""
import importlib, json, sys
out = {}
for key in json.loads(sys.stdin.read()):
    mod, cls = key.split(":")
    try:
        obj = getattr(importlib.import_module(mod), cls)
    except Exception as exc:  # a module that needs what this environment lacks (TE, triton)
        out[key] = "import failed: " + type(exc).__name__
        continue
    out[key] = [n for n in obj.__members__ if not n.startswith("_")]
print(json.dumps(out))
"""


@pytest.mark.parametrize("release", ["0.19.2", "0.16.1", "0.13.1"])
def test_enum_members_equal_the_installed_enums(release):
    # The members the index compiled with ast from each enum class body are the names the real
    # enum has (Enum.__members__, aliases included), for every enum class the release can import.
    members = ri.load(release)._raw["members"]
    assert len(members) > 20
    proc = subprocess.run([python_for(release), "-c", _ENUM_CHILD], input=json.dumps(sorted(members)),
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    live = json.loads(proc.stdout)
    checked = {k: v for k, v in live.items() if not isinstance(v, str)}
    assert len(checked) >= 0.8 * len(members), {k: v for k, v in live.items() if isinstance(v, str)}
    assert {k: members[k] for k in checked} == checked


def test_a_removed_enum_member_is_answered_with_its_releases():
    # mbridge's ModelType.encoder_and_decoder (ISEEKYAN/mbridge#155): a member in 0.12.3-0.13.1;
    # test_enum_members_equal_the_installed_enums proves the member lists of both ends.
    key = "megatron.core.transformer.enums:ModelType.encoder_and_decoder"
    assert ri.catalog()[key]["kind"] == "member"
    assert ri.releases_of(key) == ("0.12.3", "0.13.1")
    assert [e["change"] for e in ri.events(key)] == ["removed"]

"""One place decides the release (issue 19 item 6): scripts/megatron_release.py, for every script.

--megatron-version takes a minor line (0.15) or a release (0.15.3) from 0.12 to 0.19.2 in the checker,
the triage, the reviewer, the history and the inspector (for --object); anything else exits 2 with one line naming the supported
range. The installed release is read from distribution metadata: a fake ``megatron_core-X.dist-info``
first on PYTHONPATH stands in for a newer (or older) installed release, with plain python3.
"""

from __future__ import annotations

import os
import re
import sys

import pytest

import cli_cases

sys.path.insert(0, str(cli_cases.REPO / "scripts"))
import megatron_release as mr  # noqa: E402

LOG = str(cli_cases.LOG)
# Each script with --megatron-version and the input that makes it do its work.
WITH_VERSION = {
    "check_parallel_layout.py": lambda v: ["--world-size", "8", "--megatron-version", v],
    "explain_error.py": lambda v: ["--megatron-version", v, LOG],
    "review_model_code.py": lambda v: ["--megatron-version", v, str(cli_cases.PROVIDER)],
    "api_history.py": lambda v: ["GPTModel", "--at", v],
    "inspect_core_api.py": lambda v: ["--object", "GPTModel", "--megatron-version", v],
}
ACCEPTED = ["0.12", "0.12.0", "0.13", "0.13.1", "0.14.0", "0.15", "0.15.3", "0.16.1", "0.17", "0.18.2", "0.19",
            "0.19.2", "core_v0.13.0", "0.19.0rc1"]
REJECTED = ["0.11", "0.11.9", "0.19.3", "0.20", "0.99", "1.0", "latest", "", "0.x"]


def test_every_script_with_a_release_option_is_listed():
    """A new script with --megatron-version must be added here (its parser says it has one)."""
    having = {p.name for p in cli_cases.cli_parsers.COMMANDS
              if any("--megatron-version" in a["options"]
                     for a in cli_cases.cli_parsers.parser_actions(p, cli_cases.PLAIN))}
    assert having | {"api_history.py"} == set(WITH_VERSION)


@pytest.mark.parametrize("script", sorted(WITH_VERSION))
@pytest.mark.parametrize("version", ACCEPTED)
def test_a_supported_release_is_accepted(script, version):
    proc = cli_cases.run(script, WITH_VERSION[script](version))
    assert proc.returncode in (0, 1), (proc.returncode, proc.stderr[-600:])
    assert "not indexed" not in proc.stderr and "not supported" not in proc.stderr


@pytest.mark.parametrize("script", sorted(WITH_VERSION))
@pytest.mark.parametrize("version", REJECTED)
def test_anything_else_exits_2_naming_the_supported_range(script, version):
    proc = cli_cases.run(script, WITH_VERSION[script](version))
    assert proc.returncode == 2, (proc.returncode, proc.stdout[:300])
    assert cli_cases.one_line_reason(proc, script), proc.stderr
    assert "supported: 0.12, 0.13, 0.14, 0.15, 0.16, 0.17, 0.18, 0.19 (any release from 0.12.0 to 0.19.2)" \
        in proc.stderr


def _fake_installed(tmp_path, version):
    info = tmp_path / f"megatron_core-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: megatron-core\nVersion: {version}\n")
    return {"PYTHONPATH": str(tmp_path)}


def _run_with(script, argv, extra_env):
    import subprocess
    env = dict(cli_cases.env(), **extra_env)
    return subprocess.run([cli_cases.PLAIN, str(cli_cases.REPO / "scripts" / script), *argv], capture_output=True,
                          text=True, timeout=120, cwd=cli_cases.REPO, env=env)


NO_VERSION = {
    "check_parallel_layout.py": ["--world-size", "8"],
    "explain_error.py": [LOG],
    "review_model_code.py": [str(cli_cases.PROVIDER)],
    "api_history.py": ["GPTModel"],
}


@pytest.mark.parametrize("script", sorted(NO_VERSION))
def test_a_newer_installed_release_is_named_and_checked_as_0_19_2(script, tmp_path):
    proc = _run_with(script, NO_VERSION[script], _fake_installed(tmp_path, "0.20.1"))
    assert proc.returncode in (0, 1), proc.stderr
    said = proc.stdout + proc.stderr
    assert re.search(r"installed megatron-core 0\.20\.1.*newer than 0\.19\.2.*checked as 0\.19\.2", said), said[-800:]


@pytest.mark.parametrize("script", ["check_parallel_layout.py", "explain_error.py", "review_model_code.py"])
def test_an_older_installed_release_exits_2_unless_a_release_is_given(script, tmp_path):
    env = _fake_installed(tmp_path, "0.11.0")
    proc = _run_with(script, NO_VERSION[script], env)
    assert proc.returncode == 2 and "installed megatron-core 0.11.0 is not supported" in proc.stderr, proc.stderr
    assert cli_cases.one_line_reason(proc, script)
    assert _run_with(script, WITH_VERSION[script]("0.12"), env).returncode in (0, 1)


def test_the_module_is_the_indexes_release_list():
    """The releases the module accepts are exactly those the release index holds (one list)."""
    import release_index as ri
    assert ri.RELEASES is mr.RELEASES
    shipped = sorted(p.name[: -len(".json.gz")] for p in (cli_cases.REPO / "references/index/releases").glob("0.*.json.gz"))
    assert shipped == sorted(mr.RELEASES, key=lambda v: tuple(map(int, v.split("."))))  # noqa: C414
    assert [mr.indexed(v) for v in ("0.12", "0.15.0", "0.19")] == ["0.12.3", "0.15.3", "0.19.2"]


def test_no_script_decides_the_release_elsewhere():
    """The old resolvers are gone: nothing in scripts/ but megatron_release.py reads the installed
    version of megatron-core for deciding the release (the inspector reports it, reference_facts
    reads it for its own facts)."""
    reporters = {"megatron_release.py", "reference_facts.py", "__init__.py"}  # inspector/__init__: dist_version
    hits = []
    for path in (cli_cases.REPO / "scripts").rglob("*.py"):
        if path.name in reporters:
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"metadata\.version\(", text):
            hits.append(str(path.relative_to(cli_cases.REPO)))
    assert hits == [], hits


# Triage caveats for 0.12-0.14 (they said "older than the releases checked (0.15 to 0.19.2)").
def _entry(entry_id):
    from triage import catalogue
    return next(e for e in catalogue.entries() if e["id"] == entry_id)


@pytest.mark.parametrize("release", ["0.12", "0.13.1", "0.14"])
def test_triage_caveat_for_0_12_to_0_14_follows_the_index(release):
    import release_index as ri
    from triage import versions
    since_012 = [e for e in _catalogue() if re.search(r"since 0\.12 or earlier", e["fields"].get("Text history", ""))]
    since_later = [e for e in _catalogue() if re.search(r"since 0\.1[3-9]", e["fields"].get("Text history", ""))]
    assert since_012 and since_later
    line = mr.indexed(release)
    for rec in since_012:
        cav = versions.caveat(rec, release, None)["caveat"]
        assert cav.startswith(f"same fixed text in {release}"), (rec["id"], cav)
    for rec in since_later:
        since = int(re.search(r"since 0\.(\d+)", rec["fields"]["Text history"]).group(1))
        cav = versions.caveat(rec, release, None)["caveat"]
        if since > int(line.split(".")[1]):
            assert cav.startswith(f"{release} does not have this text"), (rec["id"], cav)
    # the index agrees for one entry of each kind: the fixed text is in that release's sources or not
    text = next(m["text"] for m in since_012[0]["messages"] if m["kind"] == "error")
    assert line in ri.releases_with_message(text)


def _catalogue():
    from triage import catalogue
    return catalogue.entries()

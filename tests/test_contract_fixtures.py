"""Each contract check fails on its deliberately broken fixture (tests/fixtures/contract/<check>/)."""

import os
from pathlib import Path

import pytest

import contract_checks

FIXTURES = Path(__file__).parent / "fixtures" / "contract"

# check -> the problems its broken fixture must produce (fragments of the messages).
EXPECTED = {
    "frontmatter": [
        "'version' is neither an Agent Skills key",
        "must be lowercase letters",
        "must equal the install folder name",
        "must not contain '<' or '>'",
        "must be a double-quoted string",
        "metadata.priority must be a string",
        "license 'MIT' does not match LICENSE",
    ],
    "links": [
        "references/nope.md' points to a missing file",
        "#no-such-section does not exist",
        "#setup-2 does not exist",
        "leaves the bundle",
        "../training-cli-and-data/SKILL.md must be linked exactly once, found 2",
        "../inference-and-serving/SKILL.md must be linked exactly once, found 0",
    ],
    "reachability": ["references/orphan.md is not reachable", "scripts/unused.py is not reachable"],
    "toc": ["long.md: 133 lines and no table of contents", "partial.md: table of contents misses sections ['three']"],
    "budget": ["SKILL.md has 601 lines"],
    "python_fences": ["README.md:3: python fence does not parse"],
    "command_flags": ["does not accept --bad", "does not accept --also-bad", "does not accept --torchrun-bad"],
}


@pytest.mark.parametrize("name", sorted(contract_checks.CHECKS))
def test_check_fails_on_its_broken_fixture(name):
    problems = contract_checks.CHECKS[name](FIXTURES / name)
    text = "\n".join(problems)
    for fragment in EXPECTED[name]:
        assert fragment in text, f"{name}: expected a problem containing {fragment!r}, got:\n{text}"


def test_every_check_has_a_fixture():
    assert set(EXPECTED) == set(contract_checks.CHECKS)


def test_reachability_follows_imports():
    problems = contract_checks.check_reachability(FIXTURES / "reachability")
    assert not any("helper_pkg" in p for p in problems), problems


def test_recipe_runner_fails_on_wrong_output_and_on_a_failing_recipe(tmp_path):
    runnable = contract_checks.runnable_fences(FIXTURES / "recipes")
    assert len(runnable) == 2
    (wrong, expected), (failing, none) = runnable
    assert expected is not None and none is None
    assert "stdout differs" in "\n".join(contract_checks.run_fence(wrong, expected, tmp_path, dict(os.environ)))
    assert "recipe exited 1" in "\n".join(contract_checks.run_fence(failing, none, tmp_path, dict(os.environ)))

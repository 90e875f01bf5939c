"""The bundle's contract holds on the bundle itself (each check is proven able to fail in test_contract_fixtures)."""

import pytest

import contract_checks
import mdtools


@pytest.mark.parametrize("name", sorted(contract_checks.CHECKS))
def test_bundle_meets_contract(name):
    problems = contract_checks.CHECKS[name](mdtools.REPO)
    assert problems == [], "\n".join(problems)


def test_every_sibling_route_is_documented_once():
    # The allowed exits are exactly the sibling routes; link_report counts each one in SKILL.md.
    problems, n_links, n_anchors = contract_checks.link_report(mdtools.REPO)
    assert problems == []
    assert n_links > 0 and n_anchors > 0


def test_commands_are_found():
    # Guards the flag check itself: if no command were found, check_command_flags would pass vacuously.
    scripts = {script for _, script, _ in contract_checks.documented_commands(mdtools.REPO)}
    assert {"scripts/inspect_core_api.py", "scripts/check_parallel_layout.py"} <= scripts

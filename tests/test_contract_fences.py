"""Every ```python run``` fence in the bundle runs on CPU, and prints what its ```text output``` fence says."""

import os

import pytest

import contract_checks
import mdtools

RUNNABLE = contract_checks.runnable_fences(mdtools.REPO)


def cpu_env():
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""  # recipes are documented as CPU recipes; prove it even on a GPU machine
    env["PYTHONWARNINGS"] = "ignore"
    return env


@pytest.mark.slow
@pytest.mark.parametrize(
    "fence,expected", RUNNABLE, ids=[f"{f.path.name}:{f.line}" for f, _ in RUNNABLE]
)
def test_recipe_runs_and_prints_documented_output(fence, expected, tmp_path):
    problems = contract_checks.run_fence(fence, expected, tmp_path, cpu_env())
    assert problems == [], "\n".join(problems)

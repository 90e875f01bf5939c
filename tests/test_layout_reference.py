"""references/parallelism-reference.md states what the code does: every rule
id is documented, the worked examples reproduce exactly, the bash commands
use only flags the checker's --help prints, and the recorded agreement
numbers are the ones the agreement test measures."""

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from parallel_layout import rules  # noqa: E402

REFERENCE = os.path.join(ROOT, "references", "parallelism-reference.md")
TEXT = open(REFERENCE).read()
FENCE = re.compile(r"^```(\w[^\n]*)?\n(.*?)^```", re.S | re.M)


def fences():
    return [(info or "", body) for info, body in FENCE.findall(TEXT)]


def examples():
    found = fences()
    pairs = []
    for (info, body), nxt in zip(found, found[1:] + [("", "")]):
        if info.strip() == "bash" and body.startswith("python scripts/check_parallel_layout.py"):
            if nxt[0].strip() == "text":  # a command followed by its output
                pairs.append((body.strip(), nxt[1]))
    return pairs


def test_every_rule_is_documented():
    for rule in rules.RULES:
        assert f"`{rule.id}`" in TEXT, rule.id


def test_every_stricter_rule_is_listed_with_its_reason():
    section = TEXT.split("## Where the checker is stricter than Megatron")[1].split("\n## ")[0]
    listed = set(re.findall(r"^- `([a-z0-9-]+)`", section, re.M))
    assert listed == {r.id for r in rules.RULES if r.stricter}


def test_every_late_rule_is_listed_with_its_phase():
    section = TEXT.split("## Rules Megatron checks late")[1].split("\n## ")[0]
    listed = set(re.findall(r"^- `([a-z0-9-]+)`", section, re.M))
    assert listed == {r.id for r in rules.RULES if r.late}


def test_help_lists_every_flag_used_in_the_reference():
    help_text = subprocess.run([sys.executable, os.path.join(ROOT, "scripts",
                                                             "check_parallel_layout.py"), "--help"],
                               capture_output=True, text=True, timeout=60).stdout
    used = set()
    for info, body in fences():
        if info.strip() in ("bash", "sh", "console") and "check_parallel_layout.py" in body:
            used |= {tok for tok in shlex.split(body) if tok.startswith("--")}
    used -= {"--lr"}  # an ignored Megatron flag, shown on purpose
    assert used and all(flag in help_text for flag in used), used - set(help_text.split())


@pytest.mark.parametrize("cmd,expected", examples(), ids=lambda v: str(v)[:60])
def test_worked_example_output_is_exact(cmd, expected):
    argv = shlex.split(cmd)
    argv[0] = sys.executable
    out = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    got = [line.rstrip() for line in out.rstrip().splitlines()]
    assert got == [line.rstrip() for line in expected.rstrip().splitlines()]


def test_there_are_worked_examples():
    assert len(examples()) >= 4


def test_recorded_agreement_numbers_are_stated():
    m = re.search(r"(\d+) layouts compared, Megatron rejected (\d+) and accepted (\d+), "
                  r"0 disagreements", TEXT)
    assert m and int(m.group(1)) == int(m.group(2)) + int(m.group(3))


@pytest.mark.slow
def test_cuda_device_max_connections_quotes_are_megatron_text():
    """Every quoted message in the CUDA_DEVICE_MAX_CONNECTIONS decision rule is
    in the installed source (string pieces joined across lines)."""
    import inspect
    import megatron.core.parallel_state as ps
    import megatron.training.arguments as args_module
    source = inspect.getsource(args_module) + inspect.getsource(ps)
    flat = re.sub(r"['\"]\s*\\?\s*\n\s*f?['\"]", "", source)
    bullet = TEXT.split("**`CUDA_DEVICE_MAX_CONNECTIONS`.**")[1].split("\n- ")[0]
    quotes = re.findall(r'\("([^"]+)"\)', " ".join(bullet.split()))
    assert len(quotes) >= 3
    for quote in quotes:
        assert quote in flat, quote

"""The repository passes its tests alone: a plain `git clone` with nothing beside it.

Two checks:

* a scan of every tracked file for paths that leave the checkout (``..`` past the repository
  root, ``.parent``/``dirname`` chains past it, absolute machine paths); the few that are meant
  (documented environment-variable defaults, interpreter look-ups, recorded output) are listed
  in ``ALLOWED`` with the reason and, where a test reads one, how it degrades when it is absent;
* a `git clone` of the committed HEAD into an empty temporary folder, where the fast part of
  the suite (``FAST``, minus slow tests) runs with the current interpreter and without the
  Megatron-LM and Transformer Engine clones.
"""
import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "scripts"))

import contract_checks  # noqa: E402

# The fast part of the suite, run in the clone with -m "not slow" (about a minute here).
FAST = (
    "tests/test_contract_bundle.py", "tests/test_contract_fixtures.py",
    "tests/test_contract_skill_facts.py", "tests/test_layout_published.py",
    "tests/test_layout_rules.py", "tests/test_layout_cli.py", "tests/test_troubleshooting.py",
    "tests/test_api_extract.py", "tests/test_inspect_unit.py", "tests/test_inspect_imports.py",
    "tests/test_cluster_units.py", "tests/test_plain_clone.py", "tests/test_cp_features.py",
    "tests/test_api_without_te_and_logging.py", "tests/test_layout_core_users.py",
    "tests/test_api_history.py",  # the shipped release index answers from a clone
)

MIRROR_DEFAULT = "/work/.mirror/NVIDIA+Megatron-LM/repo"
# (file, literal) -> why this code may name a path outside the checkout.
ALLOWED = {
    ("scripts/reference_facts.py", MIRROR_DEFAULT):
        "default of $MEGATRON_LM_MIRROR; absent, version-tagged facts report mirror_missing "
        "(test_absent_mirror_degrades)",
    ("tests/upstream_sources.py", MIRROR_DEFAULT):
        "default of $MEGATRON_LM_MIRROR; absent, mirror() is None and released versions come "
        "from the PyPI wheels (test_absent_mirror_degrades)",
    ("tests/test_cp_features.py", "/work/.mirror/NVIDIA+TransformerEngine/repo"):
        "default of $TRANSFORMER_ENGINE_MIRROR; absent, the TE checks skip and name the claim",
    ("tests/test_inspect_hostile.py", "~/.pyenv/versions/3.1[0-9]*/bin/python3.1[0-9]"):
        "looks for a Python without torch to run the inspector with; none found: skipped",
    ("tests/test_inspect_unit.py", "/root"): "a fake HOME given to the redaction code, not read",
    ("tests/test_inspect_unit.py", "/home/alice"): "a fake HOME given to the redaction code",
    ("tests/test_inspect_unit.py", "/home/alice/venv"): "a fake value given to the redaction code",
    ("tests/test_inspect_unit.py", "/home/alicex"): "a fake value given to the redaction code",
    ("tests/test_inspect_unit.py", "~/venv"): "the redaction code's expected output",
    ("tests/test_api_facts.py", "/tmp/v0161/bin/python"):
        "an example value of $API_FACTS_PYTHON in the module docstring",
    ("tests/test_evals_contract.py", "/usr/lib/python3/site-packages/megatron/core/parallel_state.py"):
        "a file a hand-made benchmark answer claims to have read (grader test data), not read",
    ("tests/test_explain_error.py", "/usr/lib/python3/site-packages/megatron/core/transformer/moe/moe_utils.py:12:"):
        "a warning line of a pasted log (triage test input), not read",
    ("evals/field_evals.py", "/opt/megatron-lm/megatron/core/parallel_state.py"):
        "a frame of a pasted log (field task from NVIDIA/Megatron-LM#4342), not read",
    ("tests/triage_logs.py", "/usr/local/lib/python3.12/site-packages"):
        "the site-packages prefix of frames in generated tracebacks (triage test input), not read",
    ("tests/test_review_corpus.py", "/work/.mirror/NVIDIA-NeMo+Megatron-Bridge/repo"):
        "default of $MEGATRON_BRIDGE_MIRROR; absent, the Megatron-Bridge corpus test skips and names it",
    ("bench/gpu_report.sh", "/tmp/site"):
        "the GPU bench installs the wheel there on the device machine; no test runs it",
    ("dev/build_launch_cases.py", MIRROR_DEFAULT):
        "default of $MEGATRON_LM_MIRROR for the developer's rebuild of tests/data/launch_cases.json.gz; "
        "no test runs it",
    ("dev/build_launch_cases.py", "/tmp/placeholder"):
        "the value put in for shell variables of a launch script when its flags are extracted, not read",
    ("dev/build_layout_entries.py", MIRROR_DEFAULT):
        "default of $MEGATRON_LM_MIRROR; the staleness test that runs it skips without the mirror",
    ("tests/test_layout_entries.py", MIRROR_DEFAULT):
        "default of $MEGATRON_LM_MIRROR; absent, the entries staleness test skips (skipif names it)",
    ("tests/test_layout_entries.py", "/opt/megatron-lm/pretrain_vlm.py"):
        "an entry-script argument as a user types it (resolved by name), not read",
    ("tests/test_layout_entries.py", "../../pretrain_hybrid.py"):
        "an entry-script argument as a user types it (resolved by name), not read",
    ("tests/test_layout_launch_cases.py", MIRROR_DEFAULT):
        "default of $MEGATRON_LM_MIRROR; absent, the completeness test skips (skipif names it)",
    ("tests/review_downstream.py", "/work/.mirror"):
        "default of $DOWNSTREAM_MIRRORS (the fetched downstream projects); absent, the corpus "
        "recall test skips and names it",
    ("tests/test_review_downstream.py", "/work/.mirror"):
        "the skip message of the corpus recall test, not read",
    ("scripts/parallel_layout/ranks.py", ".."): "the rank-range separator of '0..24 step 8', not a path",
    ("tests/test_layout_cli.py", ".."): "the rank-range separator of '0..24 step 8', not a path",
}
# Interpreters and programs found on the machine (shebangs, python3.X look-ups) are not data.
PROGRAM = re.compile(r"^/usr(/local)?/bin/(env|python3(\.\d+)?)$")
# Absolute paths that name a machine's files (not URLs, not API paths such as /v1/...).
ABSOLUTE = re.compile(r"(?<![\w.:/%$-])(~/[\w.+*\[\]-]+(?:/[\w.+*\[\]-]+)*"
                      r"|/(?:work|home|tmp|root|usr|opt|mnt|data|shared|scratch|var|etc)(?![\w.+-])"
                      r"(?:/[\w.+*\[\]:-]+)*)")
# In Markdown only this development machine's tree is suspect: the references quote real
# messages that name /usr/local/... and the README names install targets (~/.claude/...).
DOC_ABSOLUTE = re.compile(r"(?<![\w.:/%$-])(/work/[\w.+/-]*)")
PARENT = re.compile(r"(?<![\w.])((?:\.\./)+)")
CODE = (".py", ".sh")
SELF = "tests/test_plain_clone.py"


def _tracked() -> list:
    r = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        pytest.skip("not a git checkout: the scan reads the tracked files")
    # tests/data and tests/fixtures hold recorded output and fake packages: data, never run as
    # tests or scripts (the contract fixtures are broken bundles on purpose); so do the answering and
    # grading agents' files of archived benchmark runs (their task files name the run's own paths).
    return [p for p in r.stdout.split("\0") if p and (REPO / p).is_file()
            and not p.startswith(("tests/data/", "tests/fixtures/contract/"))
            and not (p.startswith("evals/runs/") and any(f"/{d}/" in p for d in ("answers", "rubric", "tasks", "logs")))
            and p != SELF  # its literals are the scan's own test inputs
            and (p.endswith(CODE + (".md",)) or p in ("Makefile", ".ci/run"))]


def _depth(rel: str) -> int:
    """How many directories the file sits below the repository root."""
    return len(Path(rel).parts) - 1


def _python_escapes(rel: str, text: str) -> list:
    """Absolute paths and ``..`` in strings; __file__ parent chains that climb past the root."""
    found = []
    for node in ast.walk(ast.parse(text, rel)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value == ".." or node.value.startswith("../"):
                found.append((node.lineno, node.value.split()[0]))
            found += [(node.lineno, m.group(1)) for m in ABSOLUTE.finditer(node.value)
                      if not PROGRAM.match(m.group(1))]
        chain, cur = 0, node
        while True:  # Path(__file__)[.resolve()].parent.parent...
            if isinstance(cur, ast.Attribute) and cur.attr == "parent":
                chain, cur = chain + 1, cur.value
            elif isinstance(cur, ast.Call) and isinstance(cur.func, ast.Attribute) \
                    and cur.func.attr in ("resolve", "absolute"):
                cur = cur.func.value
            else:
                break
        if chain and isinstance(cur, ast.Call) and any(
                isinstance(a, ast.Name) and a.id == "__file__" for a in cur.args) \
                and chain > _depth(rel) + 1:
            found.append((node.lineno, f"Path(__file__){'.parent' * chain}"))
        if isinstance(node, ast.Call) and _dirname_depth(node) > _depth(rel) + 1:
            found.append((node.lineno, f"dirname x{_dirname_depth(node)} of __file__"))
    return sorted(found)


def _dirname_depth(node) -> int:
    n = 0
    while isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("dirname", "abspath",
                                                                               "realpath"):
        n += node.func.attr == "dirname"
        if not node.args:
            return 0
        node = node.args[0]
    return n if isinstance(node, ast.Name) and node.id == "__file__" else 0


def _text_escapes(rel: str, text: str) -> list:
    """Shell and Markdown: ``../`` that climbs past the root (from the file's folder), and
    absolute machine paths (in Markdown only /work/...)."""
    found = []
    pattern = DOC_ABSOLUTE if rel.endswith(".md") else ABSOLUTE
    for lineno, line in enumerate(text.splitlines(), 1):
        if lineno == 1 and line.startswith("#!"):
            continue
        found += [(lineno, m.group(1)) for m in pattern.finditer(line)
                  if not PROGRAM.match(m.group(1))]
        for m in PARENT.finditer(line):
            # A Markdown link is relative to its file; a path in prose or a command, to the root.
            link = rel.endswith(".sh") or line[:m.start()].endswith("](")
            if m.group(1).count("..") > (_depth(rel) if link else 0):
                found.append((lineno, re.split(r"[\s)\"'`>]", line[m.start():])[0]))
    return found


def _allowed(rel: str, literal: str) -> bool:
    return (rel, literal) in ALLOWED or literal in contract_checks.SIBLING_ROUTES


def _outside_paths() -> list:
    problems = []
    for rel in _tracked():
        text = (REPO / rel).read_text(errors="replace")
        found = _python_escapes(rel, text) if rel.endswith(".py") else _text_escapes(rel, text)
        problems += [f"{rel}:{n}: {what}" for n, what in found if not _allowed(rel, what)]
    return sorted(set(problems))


def test_the_scan_finds_what_it_looks_for(tmp_path):
    # The patterns must be able to fail: the spelling that once read ../shared, and others.
    code = ('import os\nfrom pathlib import Path\nROOT = os.path.dirname(os.path.dirname(__file__))\n'
            'A = os.path.join(ROOT, "..", "shared", "x.json")\n'
            'B = Path(__file__).resolve().parent.parent.parent / "shared"\n'
            'C = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n')
    assert sorted(w for _, w in _python_escapes("tests/x.py", code)) == [
        "..", "Path(__file__).parent.parent.parent", "dirname x3 of __file__"]
    assert _python_escapes("tests/x.py", 'P = "/work/main/shared/x.json"\nQ = "/usr/bin/python3"\n') == [
        (1, "/work/main/shared/x.json")]
    assert _python_escapes("tests/x.py", "from pathlib import Path\nR = Path(__file__).parent.parent\n") == []
    assert ABSOLUTE.search("read /work/main/shared/data.json here").group(1) == "/work/main/shared/data.json"
    assert ABSOLUTE.search("see https://example.com/home/x") is None
    assert _text_escapes("references/x.md", "from `../shared/data/published_layouts.json`.") == [
        (1, "../shared/data/published_layouts.json")]
    assert _text_escapes("references/x.md", "[the guide](../README.md)") == []
    assert _text_escapes("tests/fixtures/x.sh", 'root=$(cd "$(dirname "$0")/../.." && pwd)') == []
    assert _text_escapes("README.md", "[SKILL](../training-cli-and-data/SKILL.md)") == [
        (1, "../training-cli-and-data/SKILL.md")]  # found, then allowed as a sibling route


def test_no_test_script_or_document_reads_a_path_outside_the_checkout():
    assert _outside_paths() == []


def test_every_allowed_exception_is_still_there():
    # A stale entry would allow a new path silently.
    for rel, literal in ALLOWED:
        assert literal in (REPO / rel).read_text(), (rel, literal)


def test_absent_mirror_degrades(monkeypatch, tmp_path):
    import reference_facts
    import upstream_sources

    monkeypatch.setenv("MEGATRON_LM_MIRROR", str(tmp_path / "no-mirror"))
    assert upstream_sources.mirror() is None
    fact = reference_facts.Fact(id="name:megatron.core.no_such_module", kind="name",
                                target="megatron.core.no_such_module", expected="",
                                source="x.md:1", versions="main")
    result = reference_facts.check_fact(fact)
    assert result["status"] == "error" and result.get("mirror_missing") is True, result


@pytest.mark.slow
def test_a_plain_clone_passes_the_fast_suite(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("a plain clone needs git and a git checkout")
    clone = tmp_path / "alone" / REPO.name
    r = subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "alone")) == [REPO.name]  # nothing beside it
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST", "MEGATRON_LM", "TRANSFORMER_ENGINE"))}
    # Neither git clone is there: what needs one must skip, not fail.
    env["MEGATRON_LM_MIRROR"] = str(tmp_path / "no-mirror")
    env["TRANSFORMER_ENGINE_MIRROR"] = str(tmp_path / "no-te-mirror")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                        "not slow", *FAST], cwd=clone, capture_output=True, text=True,
                       timeout=900, env=env)
    tail = (r.stdout + r.stderr)[-4000:]
    assert r.returncode == 0, tail
    assert re.search(r"\d+ passed", tail) and " failed" not in tail and " error" not in tail, tail

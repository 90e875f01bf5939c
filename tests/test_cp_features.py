"""references/parallelism-reference.md, "Context parallelism by feature", against Transformer
Engine's released sources.

The Megatron half of the section uses the ordinary quoted-message facts (checked against the
installed megatron-core by tests/test_api_facts.py). The TE half is checked here against
Transformer Engine's git tags: every quoted TE text is in TE 2.18's attention code, and "TE since
vX" is the first release tag whose source holds it; the yes/no cells of the masks, bias, packed
sequence and sliding-window rows are what the assertions of TE 2.18's context-parallel forward
functions refuse. The TE clone comes from ``$TRANSFORMER_ENGINE_MIRROR`` (default below);
without it these tests skip and name the claim.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "references" / "parallelism-reference.md"
SECTION = "## Context parallelism by feature"
TE_MIRROR = Path(os.environ.get("TRANSFORMER_ENGINE_MIRROR",
                                "/work/.mirror/NVIDIA+TransformerEngine/repo"))
TE_RELEASE = "v2.18"
TE_CODE = "transformer_engine/pytorch"
CP_FILE = "transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py"
COMM_TYPES = ("p2p", "all_gather", "a2a", "a2a+p2p")
# The autograd function that runs each type (a2a+p2p runs the ring with an all-to-all first).
FORWARD_CLASS = {"p2p": "AttnFuncWithCPAndKVP2P", "all_gather": "AttnFuncWithCPAndKVAllGather",
                 "a2a": "AttnFuncWithCPAndQKVOA2A", "a2a+p2p": "AttnFuncWithCPAndKVP2P"}
# Row of the table -> the assertion text (ast.unparse) that refuses the feature.
REFUSALS = {"Padding masks with `sbhd`/`bshd`": "'padding' not in attn_mask_type",
            "Attention bias": "attn_bias_type == 'no_bias'",
            "Packed sequences (`thd`)": "qkv_format != 'thd'"}
TE_QUOTE = re.compile(r"`([^`]+)` \(TE since (v\d+\.\d+(?:\.\d+)?)\)")


def section() -> str:
    text = DOC.read_text()
    assert SECTION in text
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def table() -> dict:
    rows = {}
    for line in section().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) == 6 and cells[0] not in ("Feature", "---"):
            rows[cells[0]] = dict(zip(COMM_TYPES, cells[1:5]), check=cells[5])
    return rows


def te_quotes() -> list:
    return TE_QUOTE.findall(section())


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(TE_MIRROR), *args], capture_output=True, text=True,
                          timeout=120)


@lru_cache(maxsize=None)
def te_tags() -> tuple:
    if not (TE_MIRROR / "HEAD").exists() and not (TE_MIRROR / ".git").exists():
        pytest.skip(f"no Transformer Engine clone at {TE_MIRROR} (set TRANSFORMER_ENGINE_MIRROR): "
                    "the TE checks and versions of 'Context parallelism by feature' are unchecked")
    tags = [t for t in _git("tag").stdout.split() if re.fullmatch(r"v\d+\.\d+(\.\d+)?", t)]
    return tuple(sorted(tags, key=lambda t: tuple(int(x) for x in t[1:].split("."))))


@lru_cache(maxsize=None)
def te_has(tag: str, text: str) -> bool:
    r = _git("grep", "-q", "-F", "-e", text, tag, "--", TE_CODE)
    assert r.returncode in (0, 1), r.stderr
    return r.returncode == 0


@lru_cache(maxsize=None)
def cp_source(tag: str) -> ast.Module:
    r = _git("show", f"{tag}:{CP_FILE}")
    assert r.returncode == 0, r.stderr
    return ast.parse(r.stdout)


def forward_asserts(cls_name: str) -> list:
    tree = cp_source(TE_RELEASE)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    fwd = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return [ast.unparse(a.test) for a in ast.walk(fwd) if isinstance(a, ast.Assert)]


def entry_asserts(comm_type: str) -> list:
    """Assertions of attn_forward_func_with_cp under ``if cp_comm_type == <comm_type>``."""
    tree = cp_source(TE_RELEASE)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name == "attn_forward_func_with_cp")
    found = []
    for node in ast.walk(fn):
        if isinstance(node, ast.If) and ast.unparse(node.test) == f"cp_comm_type == {comm_type!r}":
            found += [ast.unparse(a.test) for stmt in node.body for a in ast.walk(stmt)
                      if isinstance(a, ast.Assert)]
    return found


def test_the_section_has_its_rows_and_quotes():
    rows = table()
    assert {"Sliding-window attention", "FP8 attention", "MLA (K and V head sizes differ)",
            *REFUSALS} <= set(rows)
    assert len(te_quotes()) >= 12


def test_every_te_quote_is_in_the_release_and_first_appears_when_stated():
    tags = te_tags()
    for text, since in te_quotes():
        assert te_has(TE_RELEASE, text), (text, TE_RELEASE)
        assert since in tags, since
        earlier = tags[:tags.index(since)]
        assert te_has(since, text), (text, since)
        first = next(t for t in tags if te_has(t, text))
        assert first == since, (text, since, first, earlier[-1:])


def test_comm_types_arrive_in_the_stated_releases():
    te_tags()
    for code, since in (('cp_comm_type == "all_gather"', "v1.10"), ('cp_comm_type == "a2a"', "v1.11"),
                        ('"a2a+p2p"', "v1.12")):
        assert next(t for t in te_tags() if te_has(t, code)) == since, code
    text = section()
    assert "TE added `all_gather` in 1.10, `a2a` in 1.11 and `a2a+p2p` in 1.12." in text


@pytest.mark.parametrize("row", sorted(REFUSALS))
def test_refusal_cells_match_the_forward_assertions(row):
    te_tags()
    cells = table()[row]
    for comm_type in COMM_TYPES:
        asserts = forward_asserts(FORWARD_CLASS[comm_type]) + entry_asserts(comm_type)
        refused = any(REFUSALS[row] in a for a in asserts)
        assert cells[comm_type].startswith("no" if refused else "yes"), (row, comm_type, asserts)


def test_sliding_window_cells_match_the_entry_check():
    te_tags()
    fn = next(n for n in cp_source(TE_RELEASE).body if isinstance(n, ast.FunctionDef)
              and n.name == "attn_forward_func_with_cp")
    check = next(a for a in ast.walk(fn) if isinstance(a, ast.Assert)
                 and "sliding window" in ast.unparse(a.msg))
    allowed = {e.value for n in ast.walk(check.test) if isinstance(n, ast.List) for e in n.elts}
    cells = table()["Sliding-window attention"]
    assert {c for c in COMM_TYPES if cells[c].startswith("yes")} == allowed


def test_named_comm_type_of_a_quoted_check_is_its_column():
    # A message that names a type ("cp_comm_type='a2a'") refuses exactly that column.
    for row, cells in table().items():
        for text, _ in TE_QUOTE.findall(cells["check"]):
            named = re.search(r"cp_comm_type='([a-z_+0-9]+)'", text)
            if named and "only supports SWA" not in text:
                assert cells[named.group(1)].startswith("no"), (row, text)


def test_no_te_cp_check_names_mla():
    te_tags()
    r = _git("show", f"{TE_RELEASE}:{CP_FILE}")
    assert "MLA" not in r.stdout
    assert "none in TE 2.18's `context_parallel.py`" in table()["MLA (K and V head sizes differ)"]["check"]


def test_megatron_te_minimums_are_the_installed_ones():
    # The versions stated next to the quoted Megatron messages (the quotes themselves are
    # quote facts); read from the installed megatron-core's TE attention wrapper.
    import sysconfig

    src = (Path(sysconfig.get_paths()["purelib"]) / "megatron" / "core" / "extensions"
           / "transformer_engine.py").read_text()
    for pattern in (r'is_te_min_version\(\s*"1\.0\.0"\s*\), "Only Transformer-Engine version >= 1\.0\.0',
                    r'is_te_min_version\("1\.10\.0"\):\s*if cp_comm_type is None:',
                    r'must be >= 1\.12\.0 to support"\s*"hierarchical cp commucation\."',
                    r'must be >= 1\.2\.0 to support"\s*"sliding window attention\."'):
        assert re.search(pattern, src), pattern
    text = section()
    for stated in ("CP needs TE 1.0.0 or newer", "`cp_comm_type` reaches TE only with TE 1.10.0",
                   "`a2a+p2p` needs TE 1.12.0 or newer", "Sliding-window attention needs TE 1.2.0"):
        assert stated in text, stated

"""Claims that Megatron does *not* check something are proven by a scan of its source.

Every sentence of ``references/*.md`` and ``SKILL.md`` that contains one of the absence
phrases of tests/data/troubleshooting/absence_claims.yaml ("only warns", "never checks",
"silently", "no check", ...) must be covered by a record there: either a claim (what it is
about, as the config fields / environment variables / files a check would read) or a note
saying why the sentence is not a claim about Megatron's checks.

For each claim, tests/source_checks.py lists every ``raise``, ``assert``, ``warnings.warn``,
logged warning or error, and call of a checking helper (``ensure_divisibility``, ``divide``)
in the installed megatron-core 0.19.2 (``megatron/core`` and ``megatron/training``) that reads
what the claim is about. Each of them must be listed under the claim's ``accounted`` checks,
with the reason it does not contradict the claim; an unlisted one fails the test, and so does
a listed one that no longer exists.

A claim with ``release: core_v0.X.Y`` is about that release: the files (or folders) its
``scope`` lists are read from the git mirror or the release's wheel (tests/upstream_sources.py) and scanned.

A term of ``about`` is one name, or alternatives separated by ``|``; a check is about the claim
when it reads every term. ``@file:GLOB`` is read by every check in a matching file, and
``@function:NAME`` by every check in that function (``Class.method``).
"""

from __future__ import annotations

import fnmatch
import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

import source_checks as sc  # noqa: E402
import upstream_sources as up  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SITE = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
DATA = yaml.safe_load((ROOT / "tests" / "data" / "troubleshooting" / "absence_claims.yaml").read_text())
DOCS = sorted((ROOT / "references").glob("*.md")) + [ROOT / "SKILL.md"]
ENTRY_HEAD = re.compile(r"^### ([A-Z]+-\d{2}) ")
INDEX_LINK = re.compile(r"^- \[([A-Z]+-\d{2})\]")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[A-Z`(*\[])")


def sentences(text: str) -> list[tuple[str, str]]:
    """(section, sentence) of a Markdown text, fences skipped.

    section: the entry id for troubleshooting entries and their index lines, else the
    nearest heading. Blocks are paragraphs and list items (continuation lines joined)."""
    out: list[tuple[str, str]] = []
    section, block, in_fence = "", [], False

    def flush():
        if block:
            joined = " ".join(s.strip() for s in block)
            sec = INDEX_LINK.match(block[0])
            for s in SENTENCE_END.split(joined):
                out.append((sec.group(1) if sec else section, s))
            block.clear()

    for line in text.splitlines():
        if line.startswith("```"):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if line.startswith("#"):
            flush()
            m = ENTRY_HEAD.match(line)
            section = m.group(1) if m else line.lstrip("# ").strip()
            out.append((section, line.lstrip("# ").strip()))
        elif not line.strip():
            flush()
        elif re.match(r"^(- |\d+\. |\| )", line):
            flush()
            block.append(line)
        else:
            block.append(line)
    flush()
    return out


def absence_sentences() -> list[tuple[str, str, str]]:
    phrases = [p.lower() for p in DATA["phrases"]]
    patterns = [re.compile(p, re.I) for p in DATA.get("patterns", [])]
    found = []
    for doc in DOCS:
        rel = doc.relative_to(ROOT).as_posix()
        for section, s in sentences(doc.read_text(encoding="utf-8")):
            if any(p in s.lower() for p in phrases) or any(p.search(s) for p in patterns):
                found.append((rel, section, s))
    return found


def covers(record: dict, doc: str, section: str, sentence: str) -> bool:
    if record["doc"] != doc or record.get("section", section) != section:
        return False
    return any(frag in sentence for frag in record["sentences"])


FOUND = absence_sentences()
RECORDS = DATA["claims"] + DATA["not_claims"]


def test_every_absence_sentence_has_a_record():
    bare = [f"{d} [{sec}]: {s}" for d, sec, s in FOUND if not any(covers(r, d, sec, s) for r in RECORDS)]
    assert not bare, "absence sentences without a claim record:\n" + "\n".join(bare)


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r["id"])
def test_every_record_matches_a_sentence(record):
    assert any(covers(record, *f) for f in FOUND), f"{record['id']}: no such sentence any more"
    assert record.get("claim") or record.get("why"), f"{record['id']}: say what it claims or why not"


def _reads(check: sc.Check, term: str) -> bool:
    for alt in term.split("|"):
        if alt.startswith("@file:"):
            if fnmatch.fnmatch(check.file, alt[6:]):
                return True
        elif alt.startswith("@function:"):
            if check.function == alt[10:]:
                return True
        elif alt in check.reads:
            return True
    return False


def relevant_checks(claim: dict) -> list[sc.Check]:
    scope = tuple(claim.get("scope", DATA["packages"]))
    helpers = frozenset(DATA["check_helpers"])
    if "release" in claim:  # a claim about an older release: scan its files (scope lists them)
        try:
            files = [f for entry in scope
                     for f in ([entry] if entry.endswith(".py") else up.files_at(claim["release"], entry + "/"))
                     if f.endswith(".py")]
            checks = [c for path in files
                      for c in sc.checks_in_source(up.source_at(claim["release"], path) or "", path, helpers)]
        except up.Unavailable as exc:
            pytest.skip(f"{claim['id']}: {claim['release']} not readable here: {exc}")
    else:
        checks = sc.installed_checks(SITE, tuple(DATA["packages"]), helpers)
    return [c for c in checks if c.file.startswith(scope) and all(_reads(c, t) for t in claim["about"])]


def _accounts(item: dict, check: sc.Check) -> bool:
    file, _, function = item["at"].partition(":")
    return (check.file == file and check.function == function
            and check.kind == item.get("kind", check.kind)
            and item.get("text", "") in check.message)


@pytest.mark.parametrize("claim", DATA["claims"], ids=lambda r: r["id"])
def test_claim_accounts_for_every_check_on_its_fields(claim):
    relevant = relevant_checks(claim)
    # A YAML alias list inside a list ([*a, *b]) arrives nested: flatten one level.
    accounted = [a for item in claim.get("accounted", []) for a in (item if isinstance(item, list) else [item])]
    extra = [c for c in relevant if not any(_accounts(a, c) for a in accounted)]
    assert not extra, (
        f"{claim['id']} ({claim['claim']}): megatron-core 0.19.2 has checks on "
        f"{claim['about']} that the claim does not account for:\n"
        + "\n".join(f"  {c.where()} {c.kind} {c.message[:120]!r}" for c in extra)
    )
    stale = [a["at"] + " " + a.get("text", "") for a in accounted
             if not any(_accounts(a, c) for c in relevant)]
    assert not stale, f"{claim['id']}: accounted checks not found (any more): {stale}"
    assert all(a.get("why") for a in accounted), f"{claim['id']}: every accounted check needs a why"


def test_scanner_sees_guarded_warnings_env_reads_and_templates():
    src = (
        "import os, warnings\n"
        "def f(cfg):\n"
        "    if cfg.tp > 1 and not cfg.sequence_parallel:\n"
        "        warnings.warn(f'use SP with tp={cfg.tp} ' 'please')\n"
        "    assert os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS') != '1', 'no %s here' % 'x'\n"
        "    if cfg.moe:\n"
        "        raise ValueError('a' + 'b {}'.format(1))\n"
        "    logger.warning('set NCCL_DEBUG_X to see more')\n"
        "    divide(cfg.ffn_hidden_size, 2)\n"
    )
    got = sc.checks_in_source(src, "m.py", frozenset({"divide"}))
    kinds = [(c.kind, c.message) for c in got]
    assert kinds == [("warn", "use SP with tp={} please"), ("assert", "no {} here"),
                     ("raise", "ab {}"), ("log", "set NCCL_DEBUG_X to see more"), ("call:divide", "")]
    assert {"tp", "sequence_parallel"} <= got[0].reads
    assert "CUDA_DEVICE_MAX_CONNECTIONS" in got[1].reads and "NCCL_DEBUG_X" in got[3].reads
    assert "moe" in got[2].reads and "sequence_parallel" not in got[2].reads
    assert "ffn_hidden_size" in got[4].reads and got[0].function == "f"


def test_sentence_splitter_keeps_entry_sections():
    text = ("## Cat\n\n- [XX-01](#x) thing (silent)\n\n### XX-01 Title\n\n- **Layer:** A only warns;\n"
            "  more. Next one never checks.\n\n```text\nonly warns in a fence\n```\n")
    got = sentences(text)
    assert ("XX-01", "[XX-01](#x) thing (silent)") not in got  # the list marker stays
    assert ("XX-01", "- [XX-01](#x) thing (silent)") in got
    assert ("XX-01", "- **Layer:** A only warns; more.") in got
    assert ("XX-01", "Next one never checks.") in got
    assert not any("fence" in s for _, s in got)

"""Structure and source checks for references/troubleshooting.md (no torch needed).

The catalogue is parsed with markdown-it-py. An entry is a level-3 heading
``### <ID> <title>`` (ID like ``TP-01``) and everything up to the next level-2/3 heading.
Each entry carries these bullets (bold label, then text):

- ``**Status:**`` one of ``reproduced``, ``source-checked``, ``external``, ``reported`` (in a
  code span);
- ``**Raised in:**`` first code span = path of the raising file, relative to
  site-packages (``megatron/core/...``, ``megatron/training/...``, ``torch/lib/...``),
  or no code span for external behaviour without a file in the environment;
- ``**Layer:**``, ``**Versions:**``, ``**Upstream:**``;
- ``**Core users get:**`` on every Megatron-LM-only entry (checked in test_troubleshooting_repro.py);

optional ``**Symptoms:**`` and ``**Stuck in:**`` (``file:function``; ``; ``-separated) bullets;
exactly one fence with info ``text error`` (the message) or ``text symptom`` (what a
silent failure looks like), optionally a ``text source`` fence (the fixed text checked
against the named file when the symptom itself is not in it), any number of
``text alias versions=0.A-0.B [file=PATH]`` fences (older wordings, checked against the
messages of those releases), ``**Cause.**`` and ``**Fix.**`` paragraphs.

Reproduced entries are compared with the library in test_troubleshooting_repro.py.
Here: source-checked entries' message segments (split at ``<...>`` placeholders) must
occur in the installed file they name; external entries must link upstream and, when
they name a file, their segments must occur in it (bytes for shared libraries).
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mdtools  # noqa: E402
import upstream_sources as up  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "references" / "troubleshooting.md"
SITE = Path(sysconfig.get_paths()["purelib"])  # the running interpreter's, not a .venv in the checkout
STATUSES = ("reproduced", "source-checked", "external", "reported")
ID_RE = re.compile(r"^([A-Z]+-\d{2}) (.+)$")
PLACEHOLDER = re.compile(r"<[^<>\n]*>")
MIN_SEGMENT = 8


@dataclass
class Entry:
    id: str
    title: str
    body: str
    fences: list[tuple[str, str]] = field(default_factory=list)

    def bullet(self, label: str) -> str:
        m = re.search(rf"^- \*\*{re.escape(label)}:\*\*\s*(.+)$", self.body, re.M)
        return m.group(1).strip() if m else ""

    @property
    def status(self) -> str:
        m = re.match(r"`([^`]+)`", self.bullet("Status"))
        return m.group(1) if m else ""

    @property
    def raised_in(self) -> str | None:
        m = re.search(r"`([^`]+)`", self.bullet("Raised in"))
        return m.group(1) if m else None

    @property
    def message_fences(self) -> list[tuple[str, str]]:
        return [f for f in self.fences if f[0] in ("text error", "text symptom")]

    @property
    def text(self) -> str:
        return self.message_fences[0][1].rstrip("\n")

    @property
    def aliases(self) -> list[tuple[dict[str, str], str]]:
        """Older wordings: (info keys, message) of each ``text alias versions=A-B [file=PATH]`` fence."""
        out = []
        for info, content in self.fences:
            words = info.split()
            if words[:2] == ["text", "alias"]:
                keys = dict(w.split("=", 1) for w in words[2:] if "=" in w)
                out.append((keys, content.rstrip("\n")))
        return out

    @property
    def checked_text(self) -> str:
        """What must occur in the named file: a ``text source`` fence, else the message."""
        src = [c for info, c in self.fences if info == "text source"]
        return src[0].rstrip("\n") if src else self.text


def _doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def load_entries(text: str | None = None) -> list[Entry]:
    text = _doc_text() if text is None else text
    tokens = mdtools.parser().parse(text)
    lines = text.splitlines()
    entries: list[Entry] = []
    current: Entry | None = None
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.tag in ("h1", "h2", "h3"):
            current = None
            m = ID_RE.match(tokens[i + 1].content) if tok.tag == "h3" else None
            if m:
                current = Entry(m.group(1), m.group(2), "")
                entries.append(current)
            start = tok.map[1]
            if current is not None:
                current._start = start  # type: ignore[attr-defined]
        elif tok.type == "fence" and current is not None:
            current.fences.append((tok.info.strip(), tok.content))
    # Bodies: the lines from each entry heading to the next heading of level <= 3.
    heads = [t.map[0] for t in tokens if t.type == "heading_open" and t.tag in ("h1", "h2", "h3")]
    for e in entries:
        start = e._start  # type: ignore[attr-defined]
        end = min([h for h in heads if h >= start] + [len(lines)])
        e.body = "\n".join(lines[start:end])
    return entries


def counts(entries: list[Entry]) -> dict[str, int]:
    return {s: sum(e.status == s for e in entries) for s in STATUSES}


def _normalized_source(path: Path) -> str:
    return _normalize_text(path.read_text(encoding="utf-8"))


def _normalize_text(src: str) -> str:
    """Source with adjacent string literals joined, so split messages read as one."""
    src = re.sub(r"([\"'])\s*(?:\\\s*)?\n?\s*[rfbu]*\1", "", src)
    return re.sub(r"\s+", " ", src)


EXC_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit): ?")


def segments(message: str) -> list[str]:
    """Fixed pieces of a message: without the exception type, split at <...> placeholders."""
    parts = [p.strip() for p in PLACEHOLDER.split(EXC_PREFIX.sub("", message))]
    return [p for p in parts if len(p) >= MIN_SEGMENT]


def fixed_runs(message: str, source: str, min_words: int = 3) -> list[str]:
    """Maximal runs of the message's words that occur verbatim in the (normalized) source.

    Values interpolated into a message (numbers, names) break the runs, so what remains
    is the fixed text of the f-string; runs shorter than min_words are dropped.
    """
    words = EXC_PREFIX.sub("", message.splitlines()[0]).split()
    runs, i = [], 0
    while i < len(words):
        j = i
        while j < len(words) and " ".join(words[i : j + 1]) in source:
            j += 1
        if j - i >= min_words:
            runs.append(" ".join(words[i:j]))
        i = max(j, i + 1)
    return runs


# Newest patch release of each minor line from 0.12. Read through tests/upstream_sources.py: the
# git mirror ($MEGATRON_LM_MIRROR) when present, else the megatron-core wheels from PyPI (which
# ship megatron/training/ only from 0.17 on). "since 0.12 or earlier" asserts presence from 0.12. 0.19.2 itself is checked against the installed files.
RELEASES = {12: "core_v0.12.3", 13: "core_v0.13.1", 14: "core_v0.14.0", 15: "core_v0.15.3", 16: "core_v0.16.1", 17: "core_v0.17.1", 18: "core_v0.18.2",
            19: "core_v0.19.0"}
MIN_HISTORY_CHARS = 23  # shorter fixed text ("is not divisible by") proves nothing
HISTORY_RE = re.compile(r"since 0\.(\d+)")


@functools.lru_cache(maxsize=None)
def _source_at(tag: str, path: str) -> str:
    """Normalized text of path at tag, "" when absent; raises up.Unavailable when unknowable here."""
    return _normalize_text(up.source_at(tag, path) or "")


ENTRIES = load_entries() if DOC.exists() else []
BY_STATUS = {s: [e for e in ENTRIES if e.status == s] for s in STATUSES}


def test_catalogue_size_and_unique_ids():
    ids = [e.id for e in ENTRIES]
    assert len(ids) >= 40, f"only {len(ids)} entries"
    assert len(ids) == len(set(ids)), "duplicate entry ids"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_entry_has_required_fields(entry):
    assert entry.status in STATUSES, f"{entry.id}: status {entry.status!r}"
    for label in ("Raised in", "Layer", "Versions", "Upstream"):
        assert entry.bullet(label), f"{entry.id}: missing **{label}:**"
    assert len(entry.message_fences) == 1, f"{entry.id}: needs one text error/symptom fence"
    assert "**Cause.**" in entry.body and "**Fix.**" in entry.body, entry.id
    if entry.status != "external" and (entry.status != "reported" or entry.raised_in):
        path = entry.raised_in
        assert path and (SITE / path).is_file(), f"{entry.id}: no installed file {path!r}"


SOURCE_CHECKED = [
    e for e in ENTRIES
    if e.status == "source-checked" or (any(info == "text source" for info, _ in e.fences)
                                        and not re.search(r"\.so(?:\.\d+)*$", e.raised_in or ""))
]  # a shared library's text is checked as bytes by test_external_entries_link_their_source


@pytest.mark.parametrize("entry", SOURCE_CHECKED, ids=lambda e: e.id)
def test_source_checked_text_occurs_in_named_file(entry):
    src = _normalized_source(SITE / entry.raised_in)
    segs = segments(entry.checked_text)
    assert segs, f"{entry.id}: no fixed text to check"
    missing = [s for s in segs if re.sub(r"\s+", " ", s) not in src]
    assert not missing, f"{entry.id}: not in {entry.raised_in}: {missing}"


@pytest.mark.parametrize("entry", BY_STATUS["external"], ids=lambda e: e.id)
def test_external_entries_link_their_source(entry):
    assert "https://" in entry.bullet("Upstream") + entry.bullet("Raised in"), entry.id
    if entry.raised_in:
        blob = (SITE / entry.raised_in).read_bytes()
        missing = [s for s in segments(entry.checked_text) if s.encode() not in blob]
        assert not missing, f"{entry.id}: not in {entry.raised_in}: {missing}"


def test_index_links_every_entry():
    text = _doc_text()
    index = text.split("\n## ", 2)[1] if "\n## " in text else ""
    for e in ENTRIES:
        assert f"[{e.id}]" in index, f"{e.id} missing from the index"


def test_closing_note_counts_match_the_catalogue():
    m = re.search(
        r"(\d+) entries: (\d+) reproduced, (\d+) source-checked, (\d+) external, (\d+) reported",
        _doc_text(),
    )
    assert m, "closing note with the counts not found"
    c = counts(ENTRIES)
    assert tuple(map(int, m.groups())) == (
        len(ENTRIES), c["reproduced"], c["source-checked"], c["external"], c["reported"]
    )


def test_closing_note_version_counts_match_the_catalogue():
    m = re.search(r"(\d+) entries have a text history checked against core_v0\.12\.3 through\s+0\.19\.0, "
                  r"(\d+) of them with the same fixed text in every release since 0\.12; (\d+) older wordings\s+"
                  r"are listed as aliases in (\d+) entries\. Megatron-LM-only entries: (\d+), all with",
                  _doc_text())
    assert m, "closing note with the version counts not found"
    since = [int(HISTORY_RE.search(e.bullet("Text history")).group(1)) for e in HISTORY_ENTRIES]
    lm_only = [e for e in ENTRIES if e.bullet("Layer").startswith("Megatron-LM only")]
    assert tuple(map(int, m.groups())) == (
        len(HISTORY_ENTRIES), since.count(12), sum(len(e.aliases) for e in ENTRIES), len(ALIAS_ENTRIES),
        len(lm_only),
    )
    assert all(e.bullet("Core users get") for e in lm_only)


def test_python_fences_parse():
    for e in ENTRIES:
        for info, code in e.fences:
            if info.split()[:1] == ["python"]:
                ast.parse(code)


def test_parser_sees_fields_of_a_sample():
    sample = (
        "# T\n\n## Cat\n\n### XX-01 Title here\n\n- **Status:** `source-checked`\n"
        "- **Raised in:** `megatron/core/utils.py`\n\n```text error\nAssertionError: a <n> b\n```\n"
        "\n```text alias versions=0.12-0.14 file=megatron/core/x.py\nValueError: old <n> words\n```\n"
        "\n### XX-02 Other\n\n- **Status:** `reproduced`\n- **Layer:** Megatron-LM only\n"
        "- **Core users get:** the config is built, `accepted: x`.\n"
    )
    a, b = load_entries(sample)
    assert a.aliases == [({"versions": "0.12-0.14", "file": "megatron/core/x.py"}, "ValueError: old <n> words")]
    assert a.text == "AssertionError: a <n> b" and b.aliases == []
    assert b.bullet("Core users get") == "the config is built, `accepted: x`."
    assert _alias_releases(a.aliases[0][0]) == ["core_v0.12.3", "core_v0.13.1", "core_v0.14.0"]
    assert (a.id, a.title, a.status, a.raised_in) == (
        "XX-01", "Title here", "source-checked", "megatron/core/utils.py"
    )
    assert a.text == "AssertionError: a <n> b" and segments(a.text) == []
    assert segments("ValueError: fixed text here <n> and more text") == [
        "fixed text here", "and more text"
    ]
    assert b.status == "reproduced" and "XX-02" not in a.body


HISTORY_ENTRIES = [e for e in ENTRIES if HISTORY_RE.search(e.bullet("Text history"))]


@pytest.mark.parametrize("entry", HISTORY_ENTRIES, ids=lambda e: e.id)
def test_text_history_matches_the_git_mirror(entry):
    """'since 0.N': the fixed text is in every release from 0.N to 0.19 and not in 0.(N-1).

    Releases whose file cannot be read here (megatron/training/ of 0.15 and 0.16 without the
    git mirror) are left out of the comparison, and the test then skips and names them."""
    since = int(HISTORY_RE.search(entry.bullet("Text history")).group(1))
    path = entry.raised_in
    runs = fixed_runs(entry.checked_text, _normalized_source(SITE / path))
    assert sum(map(len, runs)) >= MIN_HISTORY_CHARS, (
        f"{entry.id}: too little fixed text in the installed {path} to track: {runs}"
    )
    unchecked = []
    for minor, tag in RELEASES.items():
        if minor < since - 1:
            continue
        try:
            src = _source_at(tag, path)
        except up.Unavailable as exc:
            unchecked.append((tag, str(exc)))
            continue
        present = all(r in src for r in runs)
        if minor >= since:
            assert present, f"{entry.id}: text not in {tag}:{path}"
        else:
            assert not present, f"{entry.id}: text already in {tag}:{path}"
    if unchecked:
        tags = ", ".join(t for t, _ in unchecked)
        pytest.skip(f"{entry.id} 'since 0.{since}' holds in the other releases; not checked in {tags}: {unchecked[0][1]}")


def test_every_megatron_message_has_a_text_history():
    lacking = [
        e.id for e in ENTRIES
        if e.status != "external" and e.message_fences and e.message_fences[0][0] == "text error"
        and (e.raised_in or "").startswith("megatron/") and not e.bullet("Text history")
    ]
    assert not lacking, f"entries without **Text history:**: {lacking}"


def test_fixed_runs_skips_values():
    src = "raise ValueError(f\"num_attention_heads ({n}) must be a multiple of tensor_model_parallel_size ({tp}).\")"
    msg = "ValueError: num_attention_heads (6) must be a multiple of tensor_model_parallel_size (4)."
    assert fixed_runs(msg, src) == ["must be a multiple of tensor_model_parallel_size"]


ALIAS_ENTRIES = [e for e in ENTRIES if e.aliases]
VERSIONS_RE = re.compile(r"^0\.(\d+)-0\.(\d+)$")


@functools.lru_cache(maxsize=None)
def _messages_at(tag: str, path: str) -> str:
    """The messages of path at tag as printed (ast templates, f"{x=}" gives "x={}"), one per line."""
    import source_checks as sc

    return "\n".join(re.sub(r"\s+", " ", m) for m in sc.messages(up.source_at(tag, path) or ""))


def _alias_releases(keys: dict[str, str]) -> list[str]:
    m = VERSIONS_RE.match(keys.get("versions", ""))
    assert m, f"alias needs versions=0.A-0.B, got {keys}"
    lo, hi = int(m.group(1)), int(m.group(2))
    return [tag for minor, tag in RELEASES.items() if lo <= minor <= hi]


@pytest.mark.parametrize("entry", ALIAS_ENTRIES, ids=lambda e: e.id)
def test_alias_wording_is_in_the_releases_it_names(entry):
    """Each older wording's fixed text occurs in the named file of every release in its range."""
    unchecked = []
    for keys, text in entry.aliases:
        path = keys.get("file", entry.raised_in)
        segs = segments(text)
        assert segs and sum(map(len, segs)) >= MIN_HISTORY_CHARS, f"{entry.id}: alias too short: {text!r}"
        for tag in _alias_releases(keys):
            try:
                src = _messages_at(tag, path)
            except up.Unavailable as exc:
                unchecked.append((tag, str(exc)))
                continue
            missing = [seg for seg in segs if seg not in src]
            assert not missing, f"{entry.id}: alias {text!r} not in {tag}:{path}: {missing}"
    if unchecked:
        pytest.skip(f"{entry.id} aliases not checked in {[t for t, _ in unchecked]}: {unchecked[0][1]}")


def _catalogue_words() -> str:
    return re.sub(r"\s+", " ", _doc_text())


OLD_RELEASES = {13: "core_v0.13.1", 15: "core_v0.15.3", 16: "core_v0.16.1"}
# How alike an older message must be to count as this check's wording; at 0.55 only unrelated
# messages are added (measured on 0.13.1, 0.15.3 and 0.16.1), rewordings below it are aliased by hand.
RATIO = 0.75


@pytest.mark.parametrize("minor", sorted(OLD_RELEASES))
def test_message_pasted_from_an_older_release_is_found_by_its_fixed_words(minor):
    """Take each entry's message as that release's source words it (the most similar message of the
    raising file there, ast-extracted); its fixed words must occur in the catalogue as plain text."""
    import difflib

    import source_checks as sc

    tag = OLD_RELEASES[minor]
    lost, compared = [], 0
    for e in ENTRIES:
        if e.status == "external" or not e.raised_in or e.message_fences[0][0] != "text error":
            continue
        paths = {e.raised_in} | {k.get("file", e.raised_in) for k, _ in e.aliases}
        msg = EXC_PREFIX.sub("", e.text.splitlines()[0])
        try:
            old = [m for p in paths for m in sc.messages(up.source_at(tag, p) or "")]
        except up.Unavailable:
            continue
        cands = [e.text] + [t for _, t in e.aliases]
        best = max(old, key=lambda m: max(difflib.SequenceMatcher(None, m, EXC_PREFIX.sub("", c)).ratio()
                                         for c in cands), default="")
        ratio = max((difflib.SequenceMatcher(None, best, EXC_PREFIX.sub("", c)).ratio() for c in cands), default=0)
        if ratio < RATIO:  # no wording of this check in that release
            continue
        compared += 1
        words = [w for w in (re.sub(r"\s+", " ", p).strip() for p in best.split("{}")) if len(w) >= MIN_SEGMENT]
        missing = [w for w in words if w not in _catalogue_words()]
        if missing:
            lost.append(f"{e.id}: {tag} says {best!r}; not in the catalogue: {missing}")
    assert compared >= 30, f"only {compared} messages of {tag} compared"
    assert not lost, "\n".join(lost)


# What a release did where an entry's check did not exist yet, as the entry's **Versions** says:
# (entry, release, file, text, present). A file that does not exist counts as text absent.
VERSION_FACTS = [
    *[(e, "core_v0.12.3", "megatron/core/transformer/transformer_config.py", "pipeline_model_parallel_layout", False)
      for e in ("PP-07", "PP-08", "PP-09", "PP-10", "PP-11")],
    *[(e, "core_v0.13.1", "megatron/core/transformer/transformer_config.py", "pipeline_model_parallel_layout", True)
      for e in ("PP-07", "PP-08", "PP-09", "PP-10", "PP-11")],
    ("MOE-12", "core_v0.13.1", "megatron/core/transformer/transformer_config.py", "overlap_moe_expert_parallel_comm", False),
    ("DP-10", "core_v0.17.1", "megatron/core/distributed/distributed_data_parallel_config.py", "num_buckets", False),
    ("PG-06", "core_v0.12.3", "megatron/core/process_groups_config.py", "use_mpu_process_groups", False),
    ("OK-02", "core_v0.12.3", "megatron/core/models/backends.py", "Falling back to Torch Norm", False),
    ("OK-02", "core_v0.12.3", "megatron/core/models/gpt/gpt_layer_specs.py", "Apex is not installed. Falling back to Torch Norm", True),
    ("DP-04", "core_v0.13.1", "megatron/training/arguments.py", "'--use-megatron-fsdp'", False),
    ("DP-04", "core_v0.13.1", "megatron/training/arguments.py", "'--use-custom-fsdp'", True),
    ("DP-05", "core_v0.13.1", "megatron/training/arguments.py", "'--use-custom-fsdp'", True),
    ("DEP-02", "core_v0.16.1", "megatron/training/arguments.py", "'--hybrid-layer-pattern'", False),
    ("DEP-03", "core_v0.16.1", "megatron/training/arguments.py", "'--hybrid-layer-pattern'", False),
    ("CFG-02", "core_v0.15.3", "megatron/core/transformer/transformer_config.py", "full scope is deprecated", False),
]


@pytest.mark.parametrize("fact", VERSION_FACTS, ids=lambda f: f"{f[0]}-{f[1]}-{'has' if f[4] else 'lacks'}")
def test_what_older_releases_did_is_in_their_source(fact):
    entry_id, tag, path, text, present = fact
    entry = {e.id: e for e in ENTRIES}[entry_id]
    minor = tag.removeprefix("core_v").rsplit(".", 1)[0]
    assert minor in entry.bullet("Versions") + entry.body, f"{entry_id}: **Versions** does not mention {minor}"
    try:
        src = up.source_at(tag, path) or ""
    except up.Unavailable as exc:
        pytest.skip(f"{entry_id}: {tag}:{path} not readable here: {exc}")
    assert (text in src) == present, f"{entry_id}: {text!r} {'missing from' if present else 'found in'} {tag}:{path}"


# --------------------------------------------------------------------------- field-report fields

FIELD_REPORTS = ROOT / "tests" / "data" / "troubleshooting" / "field_reports.json"


def _links(text: str) -> set[str]:
    return set(re.findall(r"<(https://[^>\s]+)>", text))


@pytest.mark.parametrize("entry", BY_STATUS["reported"], ids=lambda e: e.id)
def test_reported_entries_come_from_harvested_reports(entry):
    """A `reported` entry names at least one public thread that the harvest covers with it."""
    import json

    reports = json.loads(FIELD_REPORTS.read_text(encoding="utf-8"))["reports"]
    mine = {r["link"] for r in reports if r["verdict"] == "covered" and r["entry"] == entry.id}
    assert _links(entry.bullet("Upstream")) & mine, (
        f"{entry.id}: no Upstream link is a covered report in {FIELD_REPORTS.name}"
    )


STUCK = [e for e in ENTRIES if e.bullet("Stuck in")]


@pytest.mark.parametrize("entry", STUCK, ids=lambda e: e.id)
def test_stuck_in_names_an_installed_function(entry):
    for item in entry.bullet("Stuck in").split(";"):
        path, _, func = item.strip().partition(":")
        assert func, f"{entry.id}: {item!r} is not file:function"
        src = (SITE / path).read_text(encoding="utf-8")
        assert re.search(rf"^\s*def {re.escape(func)}\(", src, re.M), (
            f"{entry.id}: no def {func} in installed {path}"
        )


def test_hang_and_symptom_entries_are_indexed_by_symptom_words():
    """Entries with Symptoms carry at least one of the words users search for."""
    words = {"hang", "stuck", "deadlock", "diverge", "nan", "timeout", "silently", "fewer layers", "install",
             "out of memory", "missing keys", "undefined symbol", "nccl error", "load checkpoint", "split sizes",
             "recompute", "exit"}
    lacking = [
        e.id for e in ENTRIES if e.bullet("Symptoms")
        and not words & {w.strip().lower() for w in e.bullet("Symptoms").split(",")}
    ]
    assert not lacking, lacking
    assert any(e.id.startswith("HANG-") for e in ENTRIES if e.bullet("Stuck in"))


def _te_table_rows() -> list[tuple[str, str]]:
    text = _doc_text()
    section = text.split("\n## Transformer Engine\n", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"^\|[^|]+\|[^|]+\| `([^`]+)`: `([^`]+)` \|$", section, re.M)


def test_te_version_table_rows_are_in_the_installed_files():
    rows = _te_table_rows()
    assert len(rows) >= 8, rows
    for path, fixed in rows:
        src = _normalized_source(SITE / path)
        assert re.sub(r"\s+", " ", fixed) in src, f"TE table: {fixed!r} not in {path}"

"""Robust matching: pastes as users make them still find their catalogue entry.

Generated from the catalogue (test_troubleshooting's reading of references/troubleshooting.md)
where it can be: every documented message cut short mid-word (a paste truncated before its long
tail), every message an entry quotes in its prose (``Core users get``, older wordings in
``Versions``), every line the layout checker prints for a violated rule. Plus shapes in place
of numbers, multi-line messages, and the prefixes loggers, launchers and test runners put in
front of a message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import test_explain_error as te  # noqa: E402
import triage  # noqa: E402
import triage_logs as tl  # noqa: E402
from triage import catalogue, match  # noqa: E402

TRUNCATE_AT = 0.7  # share of the first line kept; the cut falls inside a word where it can


def _truncated():
    out = []
    for p in te.MESSAGES:
        eid, message = p.values
        first = message.splitlines()[0]
        body = first.split(": ", 1)[-1]
        if len(body) < 60 or te.BARE.match(first):
            continue  # too short to lose a tail and still say which message it is
        cut = first[: int(len(first) * TRUNCATE_AT)]
        if cut.rfind("<") > cut.rfind(">"):  # half a placeholder is no paste: cut after it and some text
            cut = first[: first.index(">", len(cut)) + 1 + match.TRUNCATED_MIN]
        # Entries whose messages start the same way are as right as this one: the cut hides the rest.
        same = {q.values[0] for q in te.MESSAGES if q.values[1].splitlines()[0].startswith(cut)}
        out.append(pytest.param(eid, cut, same, id=p.id))
    return out


TRUNCATED = _truncated()


def test_enough_messages_are_long_enough_to_truncate():
    assert len(TRUNCATED) >= 40


@pytest.mark.parametrize("eid,cut,same", TRUNCATED)
def test_a_message_cut_short_still_finds_its_entry(eid, cut, same):
    pasted = tl.changed_numbers(cut, seed=5)
    result = triage.match_log(tl.multi_rank_log(pasted, ranks=(0, 1)))
    ids = [m["id"] for m in result["matches"]]
    assert ids and ids[0] in same, (pasted, ids[:4], same)


def _prose(long: bool):
    out = []
    for rec in catalogue.entries():
        for q in match.prose(rec):
            if (match.loose(q)[2] >= match.PROSE_MIN) == long:
                out.append(pytest.param(rec["id"], q, id=f"{rec['id']}-{len(out)}"))
    return out


PROSE, SHORT_PROSE = _prose(True), _prose(False)


def test_the_catalogue_quotes_messages_in_prose():
    assert len(PROSE) >= 10


@pytest.mark.parametrize("eid,quoted", SHORT_PROSE)
def test_a_short_quote_is_not_claimed_by_its_prose(eid, quoted):
    # "RuntimeError: shape '[1, 4, 31]' is invalid for input of size 126" is any reshape in torch:
    # quoted in an entry's prose it says what that case prints, not that every such line is the case.
    for m in triage.match_log(quoted + "\n")["matches"]:
        assert m["how"] != "prose", (eid, quoted, m["id"])


@pytest.mark.parametrize("eid,quoted", PROSE)
def test_a_message_quoted_in_prose_finds_the_entry_or_the_entry_it_names(eid, quoted):
    result = triage.match_log(tl.multi_rank_log(quoted, ranks=(3,)))
    assert result["matches"], quoted
    first = result["matches"][0]
    # The quote belongs to this entry, or it is another entry's own message (quoted here as what
    # Core users then get, "fails as PP-02"): that entry's exact template is the answer.
    # Several entries may quote the same message (CS-01..03 the same warning): any of them.
    quoting = {r["id"] for r in catalogue.entries() if quoted in match.prose(r)}
    assert first["id"] == eid or first["how"] == "template" or (first["how"] == "prose" and first["id"] in quoting), \
        (eid, quoted, first["id"], first["how"])


def test_shapes_in_place_of_numbers():
    # TP-06 documents a 2-D shape; a 3-D one is the same message.
    message = ("RuntimeError: Error(s) in loading state_dict for GPTModel:\n"
               "\tsize mismatch for embedding.word_embeddings.weight: copying a param with shape "
               "torch.Size([1, 4, 1131]) from checkpoint, the shape in current model is torch.Size([1, 4, 1024]).")
    ids = [m["id"] for m in triage.match_log(tl.multi_rank_log(message))["matches"]]
    assert ids[0] == "TP-06", ids
    line = ("AssertionError: FP8 execution requires 2D input matrices with height divisible by 8 and width "
            "divisible by 16, but got tensor with dims=[1, 4, 1131]")
    ids = [m["id"] for m in triage.match_log(tl.multi_rank_log(line))["matches"]]
    assert ids[0] == "FP-01", ids


@pytest.mark.parametrize("prefix", [
    "E       ",                                   # pytest
    "[1,3]<stderr>:",                             # mpirun --tag-output
    "3: ",                                        # srun --label
    "2026-11-30 13:00:01,123 [rank3]: ",          # timestamp and rank
    "\x1b[31m[rank3]: \x1b[0m",                   # ANSI colours
])
def test_prefixes_before_the_message(prefix):
    line = "ValueError: num_attention_heads (12) must be a multiple of tensor_model_parallel_size (8)."
    result = triage.match_log("\n".join(tl.noise(30)) + "\n" + prefix + line + "\n")
    assert result["matches"][0]["id"] == "TP-01"
    assert result["sources"][0]["function"] == "TransformerConfig.__post_init__"


@pytest.mark.parametrize("logged", [
    "WARNING:megatron.core.models.hybrid.hybrid_model:hybrid_override_pattern has been deprecated. "
    "Use hybrid_layer_pattern instead.",
    "[WARNING  | megatron.core.models.hybrid.hybrid_model]: hybrid_override_pattern has been deprecated. "
    "Use hybrid_layer_pattern instead.",
])
def test_logger_prefixes(logged):
    result = triage.match_log(tl.multi_rank_log(logged))
    assert result["sources"], logged
    assert result["sources"][0]["file"].endswith("hybrid_model.py")


def test_a_multi_line_megatron_message_is_placed():
    # A message whose text spans lines in the release index, printed across lines.
    from release_index import load

    site = next(s for s in load("0.19.2").message_sites()
                if "\n" in s["text"].strip() and s["kind"] in ("raise", "assert") and "{}" not in s["text"]
                and len(s["text"].strip().splitlines()[0]) > 20)
    message = f"{site['exc']}: {site['text'].strip()}"
    frames = [(site["file"], site["line"], site["function"].rsplit(".", 1)[-1])]
    got = triage.match_log(tl.multi_rank_log(message, frames), megatron_version="0.19.2")["sources"]
    assert got and (got[0]["file"], got[0]["function"]) == (site["file"], site["function"]), message


LAYOUTS = [  # layouts that break Megatron's own checks (the checker reproduces their messages)
    ["--world-size", "8", "--tensor-model-parallel-size", "8", "--num-attention-heads", "12",
     "--num-layers", "4", "--hidden-size", "768"],
    ["--world-size", "8", "--pipeline-model-parallel-size", "2", "--num-layers", "5",
     "--num-attention-heads", "8", "--hidden-size", "512"],
    ["--world-size", "8", "--expert-model-parallel-size", "4", "--num-experts", "6",
     "--num-layers", "4", "--num-attention-heads", "8", "--hidden-size", "512"],
]


def _checker(args):
    cmd = [sys.executable, str(REPO / "scripts" / "check_parallel_layout.py"), *args]
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    data = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=120).stdout)
    return text, data


@pytest.mark.parametrize("args", LAYOUTS, ids=["heads", "layers", "experts"])
def test_the_layout_checkers_rule_lines_are_explained(args):
    text, data = _checker(args)
    assert data["violations"]
    result = triage.match_log(text)
    explained = {p["matched_line"] for p in result["problems"]}
    for v in data["violations"]:
        line = next(ln.strip() for ln in text.splitlines() if f"[{v['rule']}]" in ln)
        assert line in explained, (v["rule"], line, sorted(explained))
        problem = next(p for p in result["problems"] if p["matched_line"] == line)
        files = [s.split()[0] for s in v["source"].split("; ")]
        # An entry answers it, or it is placed in one of the files the rule names as its source.
        assert problem["matches"] or (problem["source"] and problem["source"]["file"] in files), (v, problem)


# A title tag before the message: an issue title pasted as it stands ("[Bug] RuntimeError: ...",
# "dsv3:No dot product ..."), over every message long enough to be cut.
@pytest.mark.parametrize("tag", ["[Bug] ", "dsv3:", "[Blackwell B200] "])
def test_a_title_tag_before_a_cut_message(tag):
    missed = []
    for p in TRUNCATED:
        eid, cut, same = p.values
        ids = [m["id"] for m in triage.match_log(tag + cut + "\n")["matches"]]
        if not ids or ids[0] not in same:
            missed.append((eid, cut[:60], ids[:3]))
    assert not missed, missed


def test_a_literal_hash_is_a_word_not_a_number():
    parts = match._loose_parts("found NaN in local grad norm for bucket #<b> in backward pass")
    at = parts.index("#")  # the literal "#", then the bucket's placeholder
    assert parts[at] is not match.NUMBER and parts[at + 1] is None
    parts = match._loose_parts("see issue # 12 for details")
    assert "#" in parts and match.NUMBER in parts and parts.index("#") + 1 == parts.index(match.NUMBER)


def _cut_after_a_value():
    """Every documented message with a placeholder followed by more text, cut right after the
    placeholder's value."""
    out = []
    for p in te.MESSAGES:
        eid, message = p.values
        first = message.splitlines()[0]
        body = match.message_part(first)
        for m in match._VAR.finditer(body):
            if m.group(0)[0] != "<" or len(body) - m.end() < 20:
                continue
            head = body[:m.start()]
            kept = sum(len(w) for w in match._loose_parts(head) if isinstance(w, str))
            # A paste must keep enough of the message to say which one it is (match._enough).
            if match.loose(first)[2] and len(head.split()) >= 4 and match._enough(kept, match.loose(first)[2]):
                out.append(pytest.param(eid, head + "VALUE7", id=f"{p.id}-{m.start()}"))
            break
    return out


CUT_AFTER_VALUE = _cut_after_a_value()


def test_a_paste_cut_right_after_a_value():
    assert len(CUT_AFTER_VALUE) >= 4
    missed = []
    for p in CUT_AFTER_VALUE:
        eid, pasted = p.values
        ids = [m["id"] for m in triage.match_log(pasted + "\n")["matches"]]
        same = {q.values[0] for q in te.MESSAGES
                if match._prefix_rx(q.values[1].splitlines()[0], len(match._loose_parts(pasted))).fullmatch(
                    match.message_part(pasted).lower())}
        if not ids or ids[0] not in same | {eid}:
            missed.append((eid, pasted[:70], ids[:3]))
        # ... but the value is one token: a sentence after it is not the message cut short.
        longer = triage.match_log(pasted + " because nothing in this sentence is the message\n")["matches"]
        assert not any(m["id"] == eid and m["how"] == "truncated" for m in longer), (eid, pasted)
    assert not missed, missed


@pytest.mark.parametrize("eid,quoted", PROSE[:1] + [p for p in te.MESSAGES if len(p.values[1].splitlines()[0]) >= 50][:12])
def test_a_message_quoted_inside_a_sentence(eid, quoted):
    first = quoted.splitlines()[0]
    for sentence in (f"After the upgrade every run fails with `{first}` on all ranks.",
                     f'Training stops and the log says "{first}" right away.'):
        ids = [m["id"] for m in triage.match_log(sentence + "\n")["matches"]]
        assert ids, sentence
        same = {q.values[0] for q in te.MESSAGES if q.values[1].splitlines()[0] == first} | {eid}
        quoting = {r["id"] for r in catalogue.entries() if first in match.prose(r)}
        assert ids[0] in same | quoting, (eid, sentence[:120], ids[:3])


@pytest.mark.parametrize("pasted", [
    # build_module's suffix after another exception (Megatron-Bridge#4077's custom MoE), on one
    # line as spec_utils.py raises it and wrapped onto lines of their own as pasted there.
    "TypeError: ErnieMultiTypeMoE.__init__() got an unexpected keyword argument 'is_mtp_layer' "
    "when instantiating ErnieMultiTypeMoE when instantiating TransformerLayer",
    "TypeError: ErnieMultiTypeMoE.__init__() got an unexpected keyword argument 'is_mtp_layer'\n"
    "    when instantiating ErnieMultiTypeMoE\n    when instantiating TransformerLayer",
])
def test_build_modules_suffix_alone_is_not_a_bare_assert(pasted):
    ids = [m["id"] for m in triage.match_log(pasted + "\n")["matches"]]
    assert "MOE-03" not in ids, ids
    # The bare assert it documents still matches, nested or not.
    for bare in ("AssertionError:  when instantiating TransformerLayer",
                 "AssertionError:  when instantiating MoELayer when instantiating TransformerLayer"):
        assert triage.match_log(bare + "\n")["matches"][0]["id"] == "MOE-03"


def test_a_quote_with_backticks_inside_is_read_from_its_double_backtick_span():
    # NeMo-RL#1565 as pasted: uv's own lower-case "error:", a backticked name inside the message.
    pasted = ("error: Distribution `nvidia-resiliency-ext==0.5.0` can't be installed because it doesn't have a "
              "source distribution or wheel for the current platform\n"
              "hint: You're on Linux (manylinux_2_35_x86_64), but the package only has wheels for manylinux_2_39\n")
    first = triage.match_log(pasted)["matches"][0]
    assert (first["id"], first["how"]) == ("INST-02", "prose"), first
    assert any(q.startswith("error: Distribution `nvidia-resiliency-ext==") for q in match.prose(next(r for r in catalogue.entries() if r["id"] == "INST-02")))


def test_a_reporters_sentence_naming_settings_is_not_the_message_about_them():
    # verl#5251 as written: the settings CFG-04's message names, set as that message asks. Word
    # overlap alone is not a match for a line that does not read as a failure.
    pasted = ("Unreleased GPU memory occurs during RL or SFT training of MoE models (e.g., Qwen3-30B-A3B/"
              "Qwen3-VL-30B-A3B) using image verlai/verl:vllm012.dev3 with checkpoint enabled "
              "(recompute_method=uniform, recompute_granularity=full, recompute_num_layers=1). Key observations:\n")
    assert triage.match_log(pasted)["matches"] == []
    # The same words in a failure line still find the entry by overlap.
    failing = "ValueError: with recompute_granularity full the recompute_method must be block or uniform\n"
    assert [(m["id"], m["how"]) for m in triage.match_log(failing)["matches"]][:1] == [("CFG-04", "words")]


def test_a_number_megatron_prints_literally_is_not_read_as_a_value():
    # "ETP==1" is Megatron's own text (MOE-05): reading 1 as the user's ETP would misstate their
    # config (a benchmark answer had to reason this away). Numbers Megatron formats in are values.
    fixed = triage.match_log("AssertionError: Bias in Moe is only supported when ETP==1")
    assert fixed["matches"][0]["id"] == "MOE-05" and fixed["matches"][0]["values"] == {}
    varied = triage.match_log("AssertionError: num_layers=30 should be divisible by "
                              "config.pipeline_model_parallel_size=4")
    assert varied["matches"][0]["id"] == "PP-02"
    assert sorted(varied["matches"][0]["values"].values()) == ["30", "4"]


def test_every_catalogue_number_left_literal_is_megatrons_own_text():
    # A standalone number in a template's fixed text (not read as a value) must be printed, with
    # the words right before it, by some released Megatron message (the release index).
    import re

    import release_index as ri

    texts = "\n".join({m["text"] for v in ri.RELEASES for m in ri.load(v).messages()})
    number = re.compile(r"(?<![A-Za-z_\d.])\d+(?:\.\d+)*(?!\d)")
    kept = 0
    for rec in catalogue.entries():
        for msg in rec["messages"]:
            for t in msg["templates"]:
                body = t["fixed"].split(":", 1)[-1].strip()
                for m in number.finditer(body):
                    before = body[max(0, m.start() - 16):m.start()]
                    if len(before) < 16:
                        continue
                    kept += 1
                    assert before + m.group(0) in texts, (rec["id"], before + m.group(0))
    assert kept >= 3  # ETP==1, CUDA>=11, version >=2.3.0 at least

"""explain_error.py places any message Megatron prints at its raise site, from the release index.

Generated from the release index (references/index/releases, compiled from the released sources
of 0.12.3 ... 0.19.2): a seeded sample of messages from every release, each printed with values
filled in (numbers, shapes, dtypes, paths, names) the way Megatron prints it (a traceback ending
in the raising frame for raise/assert, ``path:line: Warning:`` for warnings.warn, a logger
prefix for logging), inside a noisy multi-rank log. The script must name the site's file and
function in the user's release. Messages the catalogue documents keep their entry first
(tests/test_explain_error.py pastes every one of them; here: with the raise site beside it).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import triage  # noqa: E402
import triage_logs as tl  # noqa: E402
from release_index import RELEASES, load  # noqa: E402
from release_index import messages as rm  # noqa: E402
from triage import source  # noqa: E402

PER_RELEASE = 40  # 8 releases x 40 = 320 messages
# Values as Megatron's f-strings print them: numbers, a shape, a dtype, a quoted choice, a path ...
VALUES = ("8", "[1, 4, 1131]", "torch.bfloat16", "'selective'", "0.5", "None", "(4, 2)",
          "ckpt/iter_0000100", "True", "decoder.layers.3.mlp")


def _fill(text: str, rng: random.Random) -> str:
    parts = text.split("{}")
    return "".join(p + (rng.choice(VALUES) if i < len(parts) - 1 else "") for i, p in enumerate(parts))


def _placeable(site: dict, filled: str) -> bool:
    """What the script promises to place: enough fixed text to tell the message from its values."""
    t = rm.Template(rm._norm(site["text"]))
    return t.fixed >= rm.MIN_FIXED and (t.fixed >= source.MIN_FIXED_ALONE or
                                        t.fixed / max(len(" ".join(filled.split())), 1) >= source.MIN_COVER)


def _sample():
    out, skipped = [], 0
    for version in RELEASES:
        rng = random.Random(f"sources-{version}")
        sites = load(version).message_sites()
        picked = 0
        for site in rng.sample(sites, len(sites)):
            filled = _fill(site["text"], rng)
            if not filled.strip().splitlines() or not filled.strip().splitlines()[0].strip():
                skipped += 1  # a message that starts with a line break: no first line to paste
                continue
            if not _placeable(site, filled):
                skipped += 1
                continue
            out.append(pytest.param(version, site, filled, id=f"{version}-{site['file'].rsplit('/', 1)[-1]}-"
                                                              f"{site['line']}"))
            picked += 1
            if picked == PER_RELEASE:
                break
    return out


SAMPLE = _sample()


def _printed(site: dict, filled: str) -> tuple[str, list]:
    """The message as it reaches the log, and the traceback frames printed before it."""
    exc = site["exc"] or "RuntimeError"
    func = site["function"].rsplit(".", 1)[-1]
    if site["kind"] in ("raise", "assert"):
        return f"{exc}: {filled}", [(site["file"], site["line"], func)]
    if site["kind"] == "warn":
        return f"venv/lib/python3.12/site-packages/{site['file']}:{site['line']}: {exc}: {filled}", []
    module = site["file"][:-3].replace("/", ".")
    return f"WARNING:{module}:{filled}", []


def test_the_sample_is_large_and_spans_every_release():
    assert len(SAMPLE) >= 300
    assert {p.values[0] for p in SAMPLE} == set(RELEASES)
    assert {p.values[1]["kind"] for p in SAMPLE} == {"raise", "assert", "warn", "log"}


@pytest.mark.parametrize("version,site,filled", SAMPLE)
def test_a_megatron_message_is_placed_at_its_raise_site(version, site, filled):
    message, frames = _printed(site, filled)
    result = triage.match_log(tl.multi_rank_log(message, frames, ranks=(0, 5)), megatron_version=version)
    placed = [s for s in result["sources"]]
    assert placed, f"not placed: {message[:160]!r}"
    got = placed[0]
    want = (site["file"], site["function"])
    assert got["release"] == version and got["in_your_release"]
    sites = [(got["file"], got["function"])] + [(o["file"], o["function"]) for o in got["other_sites"]]
    if frames or site["kind"] == "warn":  # the traceback / warning prefix names the frame: it decides
        assert (got["file"], got["function"]) == want, (message[:160], sites)
    else:  # a logged message names no frame: every site printing the same text is listed
        assert want in sites, (message[:160], sites)
    assert version in got["releases"]
    if site["kind"] in ("raise", "assert"):
        assert got["exc"] == site["exc"]
    problem = next(p for p in result["problems"] if p["source"] is got or p["source"] == {
        k: v for k, v in got.items() if k != "matched_line"})
    assert sorted(problem["ranks"]) == [0, 5]


def test_the_site_carries_condition_fields_and_flags():
    msg = "ValueError: num_attention_heads (12) must be a multiple of tensor_model_parallel_size (8)."
    s = triage.match_log(tl.multi_rank_log(msg), megatron_version="0.19.2")["sources"][0]
    assert (s["file"], s["function"]) == ("megatron/core/transformer/transformer_config.py",
                                          "TransformerConfig.__post_init__")
    assert s["condition"] == "self.num_attention_heads % self.tensor_model_parallel_size != 0"
    assert s["fields"] == ["num_attention_heads", "tensor_model_parallel_size"]
    assert s["flags"] == ["--num-attention-heads", "--tensor-model-parallel-size"]
    assert s["releases"] == list(RELEASES)


def test_a_message_from_another_release_says_so():
    # 0.12.3-0.18.2 assert this in get_data_parallel_group; 0.19.2 prints "{} is not initialized".
    msg = "AssertionError: data parallel group with context parallel combined is not initialized"
    old = triage.match_log(msg + "\n", megatron_version="0.16")["sources"][0]
    assert old["release"] == "0.16.1" and old["in_your_release"] and old["function"] == "get_data_parallel_group"
    assert old["condition"] == "with_context_parallel and _DATA_PARALLEL_GROUP_WITH_CP is None"
    # A user on 0.19.2 pasting the older wording: the older site, said to be another release's,
    # and the site 0.19.2 prints the line from.
    new = triage.match_log(msg + "\n", megatron_version="0.19.2")["sources"][0]
    assert not new["in_your_release"] and new["release"] == "0.18.2"
    assert "your release 0.19.2 does not print this text; it is printed in 0.12.3-0.18.2" in new["note"]
    mine = new["your_release_site"]
    assert mine["function"] == "get_data_parallel_group" and mine["text"] == "{} is not initialized"


def test_a_message_no_release_prints_is_not_placed():
    r = triage.match_log("RuntimeError: pipeline schedule got the wrong number of microbatches per virtual stage\n")
    assert r["sources"] == []


def test_catalogue_messages_keep_their_entry_first_with_the_site_beside_it():
    import test_explain_error as te

    with_site = 0
    for param in te.MESSAGES:
        eid, message = param.values
        if te.BARE.match(message.splitlines()[0]):
            continue
        result = triage.match_log(tl.multi_rank_log(tl.changed_numbers(message, seed=3)))
        assert result["matches"][0]["id"] == eid
        first = result["problems"][0]
        assert first["matches"][0]["id"] == eid
        with_site += first["source"] is not None
    assert with_site >= 50  # most documented messages are Megatron's own text


def test_a_catalogue_entry_comes_before_a_bare_raise_site():
    # The raise-site-only message is printed first; the entry's problem is still listed first.
    log = tl.multi_rank_log("AssertionError: mismatch in target masking the conversation [1, 2]", ranks=(1,)) + \
        tl.multi_rank_log("ValueError: num_attention_heads (6) must be a multiple of tensor_model_parallel_size (4).",
                          ranks=(2,))
    result = triage.match_log(log, megatron_version="0.19.2")
    assert [bool(p["matches"]) for p in result["problems"]] == [True, False]
    assert result["problems"][0]["matches"][0]["id"] == "TP-01"
    assert result["problems"][1]["source"]["function"] == "SFTTokenizer.tokenize_conversation"


def test_the_script_prints_the_site_and_exits_0_for_a_message_with_no_entry():
    import subprocess

    r = subprocess.run([sys.executable, str(REPO / "scripts" / "explain_error.py"), "--megatron-version", "0.19.2"],
                       input=b"[rank0]: AssertionError: mismatch in target masking the conversation [1, 2]\n",
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode()
    assert "no catalogue entry; Megatron prints it at megatron/core/tokenizers/text/libraries/sft_tokenizer.py:" in out
    assert "when: " in out and "No catalogue entry matches this log." in out


@pytest.mark.slow  # every message of the oldest and the newest release: minutes, not seconds
@pytest.mark.parametrize("version", [RELEASES[0], RELEASES[-1]])
def test_every_message_of_a_release_is_placed(version):
    rng = random.Random(f"all-{version}")
    placed, total, missed = 0, 0, []
    for site in load(version).message_sites():
        filled = _fill(site["text"], rng)
        lines = filled.strip().splitlines()
        if not lines or not lines[0].strip() or not _placeable(site, filled):
            continue
        message, frames = _printed(site, filled)
        got = triage.match_log(tl.multi_rank_log(message, frames, ranks=(0, 5)), megatron_version=version)["sources"]
        total += 1
        if got:
            sites = [(got[0]["file"], got[0]["function"])] + [(o["file"], o["function"]) for o in got[0]["other_sites"]]
            want = (site["file"], site["function"])
            if (sites[0] == want) if (frames or site["kind"] == "warn") else (want in sites):
                placed += 1
                continue
        missed.append(message[:120])
    assert placed >= 0.995 * total, (placed, total, missed[:10])


@pytest.mark.parametrize("version", RELEASES)
def test_message_records_cut_from_the_file_equal_the_full_decode(version):
    # release_index.messages reads only the message list's bytes (a speed-up the bench measures).
    full = load(version)._raw["messages"]
    assert rm._message_records(version) == full
    texts = {r[2] for r in full}
    rng = random.Random(version)
    for text in rng.sample(sorted(texts), 50):
        assert rm.prints(version, text)
        assert not rm.prints(version, text + " (not in the index)")


@pytest.mark.parametrize("line", [
    # Lines that Megatron does not print (torch, CUDA, NCCL, Python, or a sentence that only ends
    # like a short Megatron template, "{} is not supported"): no raise site is claimed for them.
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error",
    "ValueError: too many values to unpack (expected 2)",
    "TypeError: 'NoneType' object is not subscriptable",
    "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 1",
    "ValueError: fp8 with cpu offloading is not supported",
    "NotImplementedError: Context parallel is not supported for this model",
    "WARNING: Logging before flag parsing goes to stderr.",
    # Python's own wording, which megatron/core/msc_utils.py's "{} has no attribute {}" also fits.
    "AttributeError: 'TensorDict' object has no attribute 'meta_info'",
    "AttributeError: module 'numpy' has no attribute 'product'",
])
def test_lines_megatron_does_not_print_are_not_placed(line):
    assert triage.match_log(tl.multi_rank_log(line), megatron_version="0.19.2")["sources"] == []


def test_pythons_wording_is_placed_where_a_frame_is_at_the_site():
    import release_index as ri
    site = next(s for s in ri.load("0.19.2").message_sites() if s["file"] == "megatron/core/msc_utils.py"
                and s["text"] == "{} has no attribute {}")
    frames = [(site["file"], site["line"], site["function"].rsplit(".", 1)[-1])]
    line = "AttributeError: 'Client' object has no attribute 'open'"
    got = triage.match_log(tl.multi_rank_log(line, frames, ranks=(0,)), megatron_version="0.19.2")["sources"]
    assert [(g["file"], g["function"]) for g in got] == [(site["file"], site["function"])]
    # Without the frame it is the interpreter's wording about some other object.
    assert triage.match_log(tl.multi_rank_log(line, ranks=(0,)), megatron_version="0.19.2")["sources"] == []


def test_a_message_raised_through_a_local_name_is_placed():
    # Pasted in NVIDIA/Megatron-LM#1490 (a TP=4 checkpoint loaded at TP=1); strategies/torch.py
    # binds the text to _msg before raising it.
    line = ("megatron.core.dist_checkpointing.core.CheckpointingException: Global shape mismatch for loaded "
            "(torch.Size([1152, 1536])) and expected ((4608, 1536)) tensor for key layers.0.self_attention.wqkv.weight")
    got = triage.match_log(tl.multi_rank_log(line), megatron_version="0.19.2")["sources"]
    assert [(g["file"], g["function"]) for g in got] == [
        ("megatron/core/dist_checkpointing/strategies/torch.py", "MCoreLoadPlanner._validate_global_shapes")]


def test_a_short_message_with_details_appended_is_placed_by_its_frame():
    # Megatron-LM#3569 as pasted (srun label, rank prefix): a build that appends the matched keys to
    # 0.19.2's short "Parameter {} has {} matches in state dict". The frame is the raise site's.
    head = ("14: [rank14]:   File \"/Megatron-LM/megatron/core/optimizer/distrib_optimizer.py\", line 2532, in "
            "_build_model_param_to_state_dict_param_map\n14: [rank14]:     len(matched_keys) == 1\n")
    line = ("14: [rank14]: AssertionError: Parameter decoder.layers.1.mlp.experts.linear_fc1.weight1 has 7 matches "
            "in state dict: ['decoder.layers.1.mlp.experts.linear_fc1.weight10', "
            "'decoder.layers.1.mlp.experts.linear_fc1.weight1', 'decoder.layers.1.mlp.experts.linear_fc1.weight11']\n")
    src = triage.match_log(head + line, megatron_version="0.19.2")["sources"]
    assert [(s["file"], s["function"]) for s in src][:1] == [
        ("megatron/core/optimizer/distrib_optimizer.py", "DistributedOptimizer._build_model_param_to_state_dict_param_map")]
    # Without the frame the short text inside a longer message is not claimed.
    assert triage.match_log(line, megatron_version="0.19.2")["sources"] == []

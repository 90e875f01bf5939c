"""explain_error.py on a traceback pasted without its last line (the exception and its message).

Users paste the frames and stop before the tail, or a forum cuts it. The innermost frame still
says where the job stopped, and the code line Python prints under it shows the ``assert`` or
``raise``. The oracle is the installed megatron-core: for a seeded sample of the raise and
assert sites of 0.19.2 (release index), the traceback is built from the installed file's own
line at that site, the way Python prints it, inside a noisy multi-rank log. The script must
name that site, and give the same catalogue entry first as the whole message would.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import triage  # noqa: E402
from release_index import load  # noqa: E402

RELEASE = "0.19.2"
SAMPLE = 150
NOISE = "\n".join(f"[rank{r}]: iteration {i} | lm loss 2.31E+00 | grad norm 0.93" for i in range(3) for r in range(2))


def _installed(rel_file: str) -> Path | None:
    spec = importlib.util.find_spec("megatron.core")
    root = Path(spec.origin).parent.parent.parent  # site-packages
    path = root / rel_file
    return path if path.is_file() else None


def _sites():
    rng = random.Random("cut-tracebacks")
    r = load(RELEASE)
    sites = [s for s in (*r.message_sites(), *r.bare_asserts()) if s["kind"] in ("assert", "raise")]
    out = []
    for s in rng.sample(sites, len(sites)):
        path = _installed(s["file"])
        if path is None:
            continue
        code = path.read_text().splitlines()[s["line"] - 1].strip()
        if not code.startswith(s["kind"]):
            continue  # a site whose recorded line is not the statement's first (none expected)
        out.append((s, path, code))
        if len(out) == SAMPLE:
            break
    return out


SITES = _sites()


def _paste(site: dict, path: Path, code: str, rank: int = 0) -> str:
    fn = site["function"].rsplit(".", 1)[-1]
    return "\n".join([
        NOISE,
        f"[rank{rank}]: Traceback (most recent call last):",
        f'[rank{rank}]:   File "/workspace/Megatron-LM/pretrain_gpt.py", line 301, in <module>',
        f"[rank{rank}]:     pretrain(",
        f'[rank{rank}]:   File "{path}", line {site["line"]}, in {fn}',
        f"[rank{rank}]:     {code}",
    ]) + "\n"


def test_the_sample_is_large_and_mixed():
    assert len(SITES) == SAMPLE
    kinds = {s["kind"] for s, _, _ in SITES}
    assert kinds == {"assert", "raise"}
    assert any(not s["text"] for s, _, _ in SITES), "no assert without a message in the sample"


@pytest.mark.parametrize("site,path,code", SITES, ids=[f"{s['file'].split('/')[-1]}:{s['line']}" for s, _, _ in SITES])
def test_cut_traceback_names_the_site(site, path, code):
    result = triage.match_log(_paste(site, path, code), RELEASE)
    placed = [p["source"] for p in result["problems"] if p["source"] and p["source"]["how"] == "cut"]
    assert placed, f"nothing placed for {site['file']}:{site['line']}\n{code}"
    got = placed[0]
    assert (got["file"], got["function"], got["line"]) == (site["file"], site["function"], site["line"])
    assert got["text"] == site["text"]
    assert "[not in the log:" in result["problems"][0]["matched_line"]
    # The same catalogue entry first as the whole message would get.
    if site["text"]:
        whole = triage.match_log(_paste(site, path, code).rstrip("\n") + f"\n[rank0]: {site['exc']}: {site['text']}\n",
                                 RELEASE)
        want = whole["matches"][0]["id"] if whole["matches"] else None
        assert (result["matches"][0]["id"] if result["matches"] else None) == want


def test_a_known_cut_paste_gets_its_entry():
    # The frames of a Pai-Megatron-Patch report (issue 332) as far as the assert, without the message.
    path = _installed("megatron/core/tensor_parallel/mappings.py")
    text = path.read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if "dim_size[0] % world_size == 0" in t) - 1
    paste = "\n".join([
        '[rank0]:   File "/workspace/PAI-Megatron-LM-240718/megatron/core/tensor_parallel/layers.py", line 297, in forward',
        "[rank0]:     output_parallel = reduce_scatter_to_sequence_parallel_region(output_parallel)",
        f'[rank0]:   File "/workspace/venv/lib/python3.12/site-packages/megatron/core/tensor_parallel/mappings.py", line {line}, '
        "in _reduce_scatter_along_first_dim",
        "[rank0]:     assert (",
    ])
    result = triage.match_log(paste, RELEASE)
    assert result["matches"][0]["id"] == "TP-08"
    assert result["problems"][0]["source"]["function"] == "_reduce_scatter_along_first_dim"


@pytest.mark.parametrize("last", [
    "output = self.linear_fc1(hidden_states)",  # a call: the exception came from deeper, not shown
    "assert (",  # an assert, but the frame is not Megatron's
])
def test_no_site_without_a_raising_megatron_frame(last):
    frame = ("/workspace/venv/lib/python3.12/site-packages/megatron/core/transformer/mlp.py" if not last.startswith("assert")
             else "/workspace/my_trainer/model.py")
    paste = f'Traceback (most recent call last):\n  File "{frame}", line 120, in forward\n    {last}\n'
    result = triage.match_log(paste, RELEASE)
    assert not any(p["source"] and p["source"]["how"] == "cut" for p in result["problems"])


def test_a_hang_dump_is_not_a_cut_traceback():
    # py-spy prints frames innermost first, without code lines: a hang, never a lost message.
    dump = ("Thread 0x7f (active): \"MainThread\"\n"
            "    _reduce_scatter_along_first_dim (megatron/core/tensor_parallel/mappings.py:176)\n"
            "    forward (megatron/core/tensor_parallel/layers.py:372)\n")
    result = triage.match_log(dump, RELEASE)
    assert not any(p["source"] and p["source"]["how"] == "cut" for p in result["problems"])

"""parallel-size-mismatch, proven on two gloo ranks with the installed 0.19.2: groups built
with tensor_model_parallel_size=2 and a TransformerConfig left at 1.

- With sizes that fit both, the model builds without a word and its layers take the
  group's size (the same shapes as with the config at 2).
- With 3 attention heads, the config at 1 passes TransformerConfig's own check and the
  build fails later in an assertion; the config at 2 fails at once with the config's message.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

from procutil import free_port  # noqa: E402

PROBE = r'''
import json, sys, logging, warnings
logging.disable(logging.CRITICAL); warnings.simplefilter("ignore")
import torch
rank, port, cases = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                                     rank=rank, world_size=2)
from megatron.core import parallel_state
parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
from megatron.core.transformer.transformer_config import TransformerConfig
from megatron.core.models.gpt import GPTModel
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
results = []
for cfg_tp, heads in cases:  # one world for every case: each rank imports megatron once
    out = {"stage": "config"}
    try:
        cfg = TransformerConfig(num_layers=1, hidden_size=16 * heads, num_attention_heads=heads,
                                tensor_model_parallel_size=cfg_tp, use_cpu_initialization=True)
        out["stage"] = "build"
        m = GPTModel(cfg, get_gpt_layer_local_spec(), vocab_size=128, max_sequence_length=16)
        out["ok"] = True
        out["shapes"] = {n: list(p.shape) for n, p in m.named_parameters()}
    except Exception as e:
        out["ok"] = False
        out["error"] = f"{type(e).__name__}: {e}"
    results.append(out)
if rank == 0:
    print("RESULT " + json.dumps(results))
'''


def run_pair(tmp_path, cases):
    """Each (config TP, attention heads) case built on the same two ranks (groups at TP=2)."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(script), str(r), port, json.dumps(cases)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for r in (0, 1)]
    try:
        outs = [p.communicate(timeout=240)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    line = next(l for l in outs[0].splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_config_tp1_under_tp2_group(tmp_path):
    at1, at2, bad1, bad2 = run_pair(tmp_path, [[1, 4], [2, 4], [1, 3], [2, 3]])
    assert at1["ok"] and at2["ok"], (at1, at2)
    assert at1["shapes"] == at2["shapes"]  # the group, not the config, decides the shards
    assert bad1["stage"] == "build" and not bad1["ok"]  # the config's check did not run
    assert bad2["stage"] == "config" and "must be a multiple of tensor_model_parallel_size" \
        in bad2["error"], bad2


def test_reviewer_reports_it():
    from model_review.review import review_paths
    path = REPO / "tests" / "data" / "review" / "parallel-size-mismatch.bad.py"
    (f,) = review_paths([str(path)], "0.19")["findings"]
    assert f["rule"] == "parallel-size-mismatch" and f["fix"] == "tensor_model_parallel_size=2"

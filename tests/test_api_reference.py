"""references/api-reference.md: its closing note's numbers are the extracted ones, every recipe
has an output block, and every object the issue asks for is covered by a checked fact."""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "scripts"))

import reference_facts as rf  # noqa: E402

DOC = REPO / "references" / "api-reference.md"
TEXT = DOC.read_text(encoding="utf-8")
FACTS = rf.extract_facts([DOC])
MD = rf.scan_markdown(TEXT)


def _closing_note() -> str:
    return TEXT.split("## What the tests verify", 1)[1]


def test_closing_note_counts_are_the_extracted_counts():
    note = _closing_note()
    kinds = Counter(f.kind for f in FACTS)
    recipes = [f for f in MD.fences if f.info.split()[:2] == ["python", "run"]]
    stated = {
        "name": r"- (\d+) distinct `megatron\.\*` names \((\d+) of them version-tagged",
        "signature": r"- (\d+) signature blocks",
        "default": r"- (\d+) defaults and",
        "derived": r"and (\d+) derived values",
        "quote": r"- (\d+) quoted message parts",
        "fieldcount": r"- (\d+) field counts",
    }
    for kind, pattern in stated.items():
        m = re.search(pattern, note)
        assert m, f"closing note does not state the {kind} count"
        assert int(m.group(1)) == kinds[kind], f"{kind}: note says {m.group(1)}, extracted {kinds[kind]}"
    tagged = re.search(stated["name"], note).group(2)
    assert int(tagged) == sum(1 for f in FACTS if f.versions)
    m = re.search(r"- (\d+) recipes", note)
    assert m and int(m.group(1)) == len(recipes)


def test_closing_note_counts_the_version_notes():
    import test_api_version_notes

    m = re.search(r"- (\d+) version notes, re-derived", _closing_note())
    assert m and int(m.group(1)) == len(test_api_version_notes.NOTES)


def test_every_recipe_is_followed_by_its_output():
    fences = MD.fences
    for i, fence in enumerate(fences):
        if fence.info.split()[:2] == ["python", "run"]:
            assert i + 1 < len(fences) and fences[i + 1].info == "text output", f"recipe at line {fence.line}"
            assert fences[i + 1].body.strip(), f"empty output block after line {fence.line}"


# The objects the issue asks the reference to cover, each with a signature block or a
# defaults table (a checked statement of its API), not just a mention.
COVERED_BY_SIGNATURE = [
    "megatron.core.models.gpt.gpt_model:GPTModel",
    "megatron.core.models.hybrid.hybrid_model:HybridModel",
    "megatron.core.models.mamba.mamba_model:MambaModel",
    "megatron.core.models.common.language_module.language_module:LanguageModule",
    "megatron.core.transformer.spec_utils:build_module",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_local_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_layer_with_transformer_engine_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_decoder_block_spec",
    "megatron.core.models.gpt.gpt_layer_specs:get_gpt_mtp_block_spec",
    "megatron.core.transformer.transformer_block:TransformerBlock",
    "megatron.core.transformer.transformer_layer:TransformerLayer",
    "megatron.core.parallel_state:initialize_model_parallel",
    "megatron.core.parallel_state:destroy_model_parallel",
    "megatron.core.parallel_state:RankGenerator",
    "megatron.core.process_groups_config:ProcessGroupCollection.use_mpu_process_groups",
    "megatron.core.hyper_comm_grid:HyperCommGrid",
    "megatron.core.tensor_parallel.layers:ColumnParallelLinear",
    "megatron.core.tensor_parallel.layers:RowParallelLinear",
    "megatron.core.tensor_parallel.layers:VocabParallelEmbedding",
    "megatron.core.tensor_parallel.random:model_parallel_cuda_manual_seed",
    "megatron.core.distributed:DistributedDataParallel",
    "megatron.core.distributed:FullyShardedDataParallel",
    "megatron.core.optimizer:get_megatron_optimizer",
    "megatron.core.pipeline_parallel:get_forward_backward_func",
    "megatron.core.transformer.moe.moe_layer:MoELayer",
]
COVERED_BY_DEFAULTS = [
    "megatron.core.transformer.transformer_config:TransformerConfig",
    "megatron.core.distributed:DistributedDataParallelConfig",
    "megatron.core.optimizer:OptimizerConfig",
    "megatron.core.transformer.spec_utils:ModuleSpec",
    "megatron.core.models.hybrid.hybrid_layer_allocation:Symbols",
]


@pytest.mark.parametrize("target", COVERED_BY_SIGNATURE)
def test_object_has_a_signature_block(target):
    assert f"signature:{target}" in {f.id for f in FACTS}


@pytest.mark.parametrize("target", COVERED_BY_DEFAULTS)
def test_object_has_checked_defaults(target):
    assert any(f.kind == "default" and f.target == target for f in FACTS)


def test_version_notes_cite_checked_sources():
    # The 0.12-0.16 notes come from the release index (tests/test_api_version_notes_index.py).
    notes = TEXT.split("## Version notes: 0.16 to main", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in notes.splitlines() if line.startswith("| `")]
    assert len(rows) >= 15
    for row in rows:
        assert re.search(r"core_v0\.1[6-9]\.0|main|—", row.rsplit("|", 2)[-2]), row


_NEEDS_CUDA = """
import socket, traceback
import torch
from megatron.core import parallel_state
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
from megatron.core.transformer.transformer_config import TransformerConfig

assert not torch.cuda.is_available()
try:
    model_parallel_cuda_manual_seed(1234, tp_rank=0, ep_rank=0, etp_rank=0)
except RuntimeError:
    print("seed: RuntimeError")
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
parallel_state.initialize_model_parallel()
config = TransformerConfig(num_layers=1, hidden_size=64, num_attention_heads=4, use_cpu_initialization=True)
model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=128,
                 max_sequence_length=32)
tokens = torch.zeros(1, 8, dtype=torch.long)
try:
    model(tokens, torch.arange(8).unsqueeze(0), None)
except RuntimeError:
    frames = [f.filename.rsplit("/", 1)[-1] for f in traceback.extract_tb(__import__("sys").exc_info()[2])]
    print("forward: RuntimeError in", "dot_product_attention.py" if "dot_product_attention.py" in frames else frames)
parallel_state.destroy_model_parallel()
torch.distributed.destroy_process_group()
"""


@pytest.mark.slow
def test_what_the_reference_says_needs_cuda_fails_without_it():
    """model_parallel_cuda_manual_seed and a forward pass (in DotProductAttention) need CUDA."""
    import os
    import subprocess

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", _NEEDS_CUDA], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == ["seed: RuntimeError", "forward: RuntimeError in dot_product_attention.py"]

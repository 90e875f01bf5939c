"""The version notes of references/api-reference.md, re-derived from Megatron-LM's history.

Each note is one row of data: what must hold at the release before the change and at the one
where the reference says it happened. Files are read with tests/upstream_sources.py (the git
mirror at $MEGATRON_LM_MIRROR when present, else the released megatron-core wheels from PyPI)
and parsed with `ast`. Only notes about `main` (unreleased) need the mirror; without it they
skip and name the note.
"""

from __future__ import annotations

import ast
import re
import sys
import sysconfig
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import upstream_sources as up  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "references" / "api-reference.md"
SITE = Path(sysconfig.get_paths()["purelib"])
INSTALLED = "installed"  # the megatron-core these tests run against (0.19.2), read from site-packages


def show(ref: str, path: str) -> str | None:
    if ref == INSTALLED:
        return (SITE / path).read_text(encoding="utf-8") if (SITE / path).is_file() else None
    return up.source_at(ref, path)


def _node(ref: str, path: str, qualname: str):
    text = show(ref, path)
    if text is None:
        return None
    body = ast.parse(text).body
    node = None
    for part in qualname.split("."):
        node = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def params(ref: str, path: str, qualname: str) -> list[str] | None:
    node = _node(ref, path, qualname)
    if node is None:
        return None
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args]
    names += ["*" + a.vararg.arg] if a.vararg else []
    names += [x.arg for x in a.kwonlyargs]
    names += ["**" + a.kwarg.arg] if a.kwarg else []
    return names


def field_count(ref: str, path: str, cls: str) -> int:
    node = _node(ref, path, cls)
    return sum(isinstance(n, ast.AnnAssign) for n in node.body)


GPT = ("megatron/core/models/gpt/gpt_model.py", "GPTModel.__init__")
HYB = ("megatron/core/models/hybrid/hybrid_model.py", "HybridModel.__init__")
MAMBA = ("megatron/core/models/mamba/mamba_model.py", "MambaModel.__init__")
IMP = ("megatron/core/parallel_state.py", "initialize_model_parallel")
RANKGEN = ("megatron/core/parallel_state.py", "RankGenerator.__init__")
LOCAL_SPEC = ("megatron/core/models/gpt/gpt_layer_specs.py", "get_gpt_layer_local_spec")
FB = ("megatron/core/pipeline_parallel/schedules.py", "get_forward_backward_func")
DDP = ("megatron/core/distributed/distributed_data_parallel.py", "DistributedDataParallel.__init__")
LAYER = ("megatron/core/transformer/transformer_layer.py", "TransformerLayer.__init__")
MOE = ("megatron/core/transformer/moe/moe_layer.py", "MoELayer.__init__")
SEED = ("megatron/core/tensor_parallel/random.py", "model_parallel_cuda_manual_seed")


def added(obj, param, before, at):
    return lambda: param not in (params(before, *obj) or []) and param in params(at, *obj)


def removed(obj, param, before, at):
    return lambda: param in params(before, *obj) and param not in params(at, *obj)


def file_added(path, before, at):
    return lambda: show(before, path) is None and show(at, path) is not None


def file_removed(path, before, at):
    return lambda: show(before, path) is not None and show(at, path) is None


def text_added(path, text, before, at):
    return lambda: text not in (show(before, path) or "") and text in show(at, path)


def same_params(obj, refs):
    return lambda: len({tuple(params(r, *obj)) for r in refs}) == 1


REFS = ["core_v0.16.0", "core_v0.17.0", "core_v0.18.0", "core_v0.19.0", "main"]

# (note as the reference states it, check)
NOTES = [
    ("megatron.core.models.hybrid is new in core_v0.18.0",
     file_added("megatron/core/models/hybrid/hybrid_model.py", "core_v0.17.0", "core_v0.18.0")),
    ("MambaModel becomes (*args, mamba_stack_spec=None, **kwargs) in core_v0.18.0",
     lambda: params("core_v0.18.0", *MAMBA) == ["self", "*args", "mamba_stack_spec", "**kwargs"]
     and params("core_v0.17.0", *MAMBA)[:3] == ["self", "config", "mamba_stack_spec"]),
    ("MambaModel logs its deprecation from core_v0.18.0",
     text_added(MAMBA[0], "MambaModel has been deprecated", "core_v0.17.0", "core_v0.18.0")),
    ("hybrid_override_pattern deprecated in core_v0.18.0",
     lambda: "hybrid_override_pattern has been deprecated" in show("core_v0.18.0", HYB[0])),
    ("hybrid_attention_ratio and hybrid_mlp_ratio deprecated in core_v0.18.0",
     lambda: "hybrid_attention_ratio and hybrid_mlp_ratio have been deprecated" in show("core_v0.18.0", HYB[0])),
    ("MambaModel gained hybrid_layer_pattern in core_v0.17.0", added(MAMBA, "hybrid_layer_pattern", "core_v0.16.0", "core_v0.17.0")),
    ("MambaModel gained vp_stage in core_v0.17.0", added(MAMBA, "vp_stage", "core_v0.16.0", "core_v0.17.0")),
    ("GPTModel logs GPTModel IS DEPRECATED from core_v0.19.0",
     text_added(GPT[0], "GPTModel IS DEPRECATED", "core_v0.18.0", "core_v0.19.0")),
    ("GPTModel parameters unchanged 0.16 to 0.19", same_params(GPT, REFS[:4])),
    ("GPTModel gains logit_dtype on main", added(GPT, "logit_dtype", "core_v0.19.0", "main")),
    ("HybridModel gains logit_dtype on main", added(HYB, "logit_dtype", "core_v0.19.0", "main")),
    ("logit_dtype follows fp16_lm_cross_entropy",
     lambda: all(params("main", *o)[params("main", *o).index("logit_dtype") - 1] == "fp16_lm_cross_entropy" for o in (GPT, HYB))),
    ("get_gpt_layer_local_spec loses moe_use_legacy_grouped_gemm in core_v0.17.0",
     lambda: "moe_use_legacy_grouped_gemm" in params("core_v0.16.0", *LOCAL_SPEC)
     and params("core_v0.17.0", *LOCAL_SPEC) == ["*args", "**kwargs"]),
    ("grouped_gemm_util removed in core_v0.17.0",
     file_removed("megatron/core/transformer/moe/grouped_gemm_util.py", "core_v0.16.0", "core_v0.17.0")),
    ("initialize_model_parallel gains rank_offset in core_v0.17.0", added(IMP, "rank_offset", "core_v0.16.0", "core_v0.17.0")),
    ("initialize_model_parallel gains local_world_size in core_v0.17.0", added(IMP, "local_world_size", "core_v0.16.0", "core_v0.17.0")),
    ("initialize_model_parallel loses create_all_gather_group in core_v0.18.0",
     removed(IMP, "create_all_gather_group", "core_v0.17.0", "core_v0.18.0")),
    ("initialize_model_parallel gains gtp_remat_size in core_v0.19.0", added(IMP, "gtp_remat_size", "core_v0.18.0", "core_v0.19.0")),
    ("initialize_model_parallel gains expert_gtp_remat_size in core_v0.19.0",
     added(IMP, "expert_gtp_remat_size", "core_v0.18.0", "core_v0.19.0")),
    ("RankGenerator gains gtp_remat in core_v0.19.0", added(RANKGEN, "gtp_remat", "core_v0.18.0", "core_v0.19.0")),
    ("ProcessGroupCollection: 20 fields (0.16, 0.17), 22 (0.18), 27 (0.19)",
     lambda: [field_count(r, "megatron/core/process_groups_config.py", "ProcessGroupCollection") for r in REFS[:4]]
     == [20, 20, 22, 27]),
    ("get_forward_backward_func gains schedule_pg_collection in core_v0.19.0",
     added(FB, "schedule_pg_collection", "core_v0.18.0", "core_v0.19.0")),
    ("DistributedDataParallel gains full_param_layout in core_v0.18.0", added(DDP, "full_param_layout", "core_v0.17.0", "core_v0.18.0")),
    ("TransformerLayer gains is_mtp_layer in core_v0.17.0", added(LAYER, "is_mtp_layer", "core_v0.16.0", "core_v0.17.0")),
    ("TransformerLayer gains add_layer_offset in core_v0.17.0", added(LAYER, "add_layer_offset", "core_v0.16.0", "core_v0.17.0")),
    ("TransformerLayer gains pp_layer_offset in core_v0.17.0", added(LAYER, "pp_layer_offset", "core_v0.16.0", "core_v0.17.0")),
    ("TransformerLayer gains name in core_v0.18.0", added(LAYER, "name", "core_v0.17.0", "core_v0.18.0")),
    ("MoELayer gains is_mtp_layer in core_v0.17.0", added(MOE, "is_mtp_layer", "core_v0.16.0", "core_v0.17.0")),
    ("MoELayer gains name in core_v0.18.0", added(MOE, "name", "core_v0.17.0", "core_v0.18.0")),
    *[(f"model_parallel_cuda_manual_seed gains {p} on main", added(SEED, p, "core_v0.19.0", "main"))
      for p in ("gtp_remat_rank", "egtp_remat_rank", "gtp_remat_world_size", "egtp_remat_world_size")],
    ("hyper_connection is new on main",
     file_added("megatron/core/transformer/hyper_connection.py", "core_v0.19.0", "main")),
    # Split at the last release so that the released part is checked without the mirror.
    *[(f"{qual} parameters unchanged from {refs[0]} to {refs[-1]}", same_params((path, qual), refs))
      for refs in (REFS[:4], REFS[3:])
      for path, qual in [
          ("megatron/core/transformer/transformer_block.py", "TransformerBlock.__init__"),
          ("megatron/core/hyper_comm_grid.py", "HyperCommGrid.__init__"),
          ("megatron/core/optimizer/__init__.py", "get_megatron_optimizer"),
          ("megatron/core/models/gpt/gpt_layer_specs.py", "get_gpt_decoder_block_spec"),
          ("megatron/core/models/gpt/gpt_layer_specs.py", "get_gpt_mtp_block_spec"),
      ]],
    ("the installed 0.19.2 agrees with core_v0.19.0 on every signature noted here",
     lambda: all(params("core_v0.19.0", *o) is not None and params("core_v0.19.0", *o) == params(INSTALLED, *o)
                 for o in (GPT, HYB, MAMBA, IMP, RANKGEN, LOCAL_SPEC, FB, DDP, LAYER, MOE, SEED))),
    ("the installed 0.19.2 agrees with core_v0.19.0 on ProcessGroupCollection's fields",
     lambda: field_count(INSTALLED, "megatron/core/process_groups_config.py", "ProcessGroupCollection")
     == field_count("core_v0.19.0", "megatron/core/process_groups_config.py", "ProcessGroupCollection") == 27),
]


@pytest.mark.parametrize("note,check", NOTES, ids=[n for n, _ in NOTES])
def test_version_note_holds_in_git_history(note, check):
    try:
        holds = check()
    except up.Unavailable as exc:
        pytest.skip(f"cannot check {note!r}: {exc}")
    assert holds, f"not what Megatron-LM's history says: {note}"


def test_the_reference_cites_the_mirror_commit():
    repo = up.mirror()
    if repo is None:
        pytest.skip("the cited main commit can only be compared with the git mirror (set MEGATRON_LM_MIRROR)")
    head = up._git(repo, "rev-parse", "main")
    commit = head.stdout.strip() if head.returncode == 0 else ""
    text = DOC.read_text(encoding="utf-8")
    cited = text.split("main at commit `", 1)[1].split("`", 1)[0]
    assert commit.startswith(cited), f"the reference cites main at {cited}, the mirror's main is {commit[:10]}"


def test_the_checks_reject_wrong_notes():
    """Each kind of check says no to a note that history contradicts."""
    assert not added(GPT, "logit_dtype", "core_v0.16.0", "core_v0.17.0")()
    assert not removed(IMP, "create_all_gather_group", "core_v0.16.0", "core_v0.17.0")()
    assert not file_added("megatron/core/models/hybrid/hybrid_model.py", "core_v0.18.0", "core_v0.19.0")()
    assert not text_added(GPT[0], "GPTModel IS DEPRECATED", "core_v0.17.0", "core_v0.18.0")()
    assert not same_params(IMP, REFS[:4])()
    assert not same_params(IMP, ["core_v0.18.0", INSTALLED])()  # the installed files are read too


# -- the two sources agree ------------------------------------------------------------------------

needs_mirror = pytest.mark.skipif(up.mirror() is None, reason="comparing wheel and git needs the mirror")
AGREE_TAGS = ["core_v0.17.0", "core_v0.19.0"]  # wheels these notes download anyway


@needs_mirror
@pytest.mark.parametrize("tag", AGREE_TAGS)
def test_wheel_ships_the_same_python_files_as_the_git_tag(tag):
    """So that a file absent from a wheel is absent from the release (file_added/file_removed)."""
    version = up.version_of(tag)
    wheel = {f for f in up.wheel_files(version) if up._covered(version, f)}
    packages = up._packages(version)
    git = {f for f in up.mirror_files(up.mirror(), tag)
           if f.endswith(".py") and "/".join(f.split("/")[:2]) in packages}
    assert "megatron/core" in packages and len(wheel) > 300
    assert wheel == git, f"only wheel: {sorted(wheel - git)[:5]}, only git: {sorted(git - wheel)[:5]}"


@needs_mirror
@pytest.mark.parametrize("tag", AGREE_TAGS)
def test_wheel_and_git_tag_have_the_same_text(tag):
    version = up.version_of(tag)
    paths = sorted({obj[0] for obj in (GPT, MAMBA, IMP, FB, DDP, LAYER, MOE, SEED)}
                   | {"megatron/core/process_groups_config.py"})
    for path in paths:
        assert up.wheel_source_at(version, path) == up.mirror_source_at(up.mirror(), tag, path), (tag, path)


@needs_mirror
def test_release_list_has_every_final_tag_of_the_mirror():
    tags = up._git(up.mirror(), "tag", "-l", "core_v*").stdout.split()
    final = {t.removeprefix("core_v") for t in tags if re.fullmatch(r"core_v\d+\.\d+\.\d+", t)}
    assert {v for v in final if up._vtuple(v) >= (0, 12)} <= set(up.RELEASES)


def test_main_without_the_mirror_is_unavailable_not_absent(monkeypatch):
    monkeypatch.setenv("MEGATRON_LM_MIRROR", "/nonexistent")
    with pytest.raises(up.Unavailable, match="git mirror"):
        up.source_at("main", GPT[0])
    with pytest.raises(up.UnknownVersion):
        up.source_at("0.14.9", GPT[0])
    with pytest.raises(up.Unavailable, match="does not ship"):
        up.source_at("core_v0.17.0", "README.md")
    assert up.describe("0.17.0") == "PyPI wheel megatron-core==0.17.0"
    assert up.exists_at("0.17.0", GPT[0]) and not up.exists_at("0.17.0", "megatron/core/no_such_file.py")


def test_a_failed_download_is_unavailable(monkeypatch, tmp_path):
    """No network (here: no index at all) makes the claim unverifiable, never absent."""
    monkeypatch.setenv("MEGATRON_LM_MIRROR", "/nonexistent")
    monkeypatch.setenv("MEGATRON_WHEEL_CACHE", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(up.Unavailable, match="pip download megatron-core==0.15.0 failed"):
        up.source_at("0.15.0", GPT[0])
    assert list(tmp_path.iterdir()) == []  # nothing half-written is left in the cache

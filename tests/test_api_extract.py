"""The fact extraction (dev/reference_index, markdown-it-py, compiled into references/index/facts.json)
finds the documented syntax, scripts/reference_facts.py reads it back from the index, and every kind
of check fails on a wrong fact."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "dev"), str(REPO / "tests")]

import reference_facts as rf  # noqa: E402
import upstream_sources as up  # noqa: E402
from reference_index import build  # noqa: E402

DATA = REPO / "tests" / "data" / "api"


def extract(paths):
    """Facts of Markdown that is not in the shipped index (the test fixtures), compiled here."""
    paths = [Path(p) for p in paths]
    index = build.compile_facts([p.relative_to(REPO) for p in paths])
    return rf.extract_facts(paths, index=index)


def test_spans_and_fences_carry_their_lines_and_the_text_after_them():
    from reference_index import facts, markdown

    text = "\n".join([
        "````markdown",
        "```python",
        "`megatron.core.in_a_fence`",
        "```",
        "````",
        "<!-- `megatron.core.in_a_comment`",
        "still -->",
        "~~~python signature megatron.core.a:b",
        "def b(): ...",
        "~~~",
        "`` a`b `` and \\`not a span` and `megatron.core.x` (0.16)",
        "",
        "a `megatron.core.span",
        "wraps` (main) - not a list",
        "",
        "| `megatron.core.cell` | b |",
        "|---|---|",
    ])
    doc = markdown.parse(text)
    assert [(f.info, f.line) for f in doc.fences] == [("markdown", 1), ("python signature megatron.core.a:b", 8)]
    # The escaped backtick leaves "` and `" as the span; the wrapped span's rest is its closing line's.
    assert [(s.line, s.content, s.rest) for s in doc.spans] == [
        (11, "a`b", " and `not a span`and`megatron.core.x` (0.16)"), (11, "and", "megatron.core.x` (0.16)"),
        (13, "megatron.core.span wraps", " (main) - not a list"), (16, "megatron.core.cell", "")]
    found = sorted((f["id"], f["versions"], f["line"]) for f in facts.document_facts(doc))
    assert found == [("name:megatron.core.cell", None, 16), ("name:megatron.core.in_a_fence", None, 3),
                     ("name:megatron.core.span", "main", 13), ("signature:megatron.core.a:b", None, 8)]


def test_a_file_missing_from_the_index_says_how_to_rebuild(tmp_path):
    doc = tmp_path / "edited.md"
    doc.write_text("`megatron.core.parallel_state` changed\n", encoding="utf-8")
    with pytest.raises(rf.StaleIndex, match="make index-references"):
        rf.extract_facts([doc])


def test_a_copy_of_a_bundle_document_is_found_by_its_hash(tmp_path):
    copy = tmp_path / "copy.md"
    copy.write_bytes((REPO / "references" / "api-reference.md").read_bytes())
    ours = {(f.id, f.versions) for f in rf.extract_facts([copy])}
    assert ours == {(f.id, f.versions) for f in rf.extract_facts([REPO / "references" / "api-reference.md"])}
    assert all(f.source.startswith(str(copy)) for f in rf.extract_facts([copy]))


def test_extraction_of_the_fixture_finds_each_documented_form():
    facts = {f.id: f for f in extract([DATA / "good.md"])}
    assert set(facts) == {
        "name:megatron.core.parallel_state.initialize_model_parallel",
        "name:megatron.core.models.gpt.gpt_model:GPTModel",
        "name:megatron.core.transformer.moe.grouped_gemm_util",
        "name:megatron.core.transformer.hyper_connection",
        "name:megatron.core.transformer",
        "name:megatron.core.transformer:TransformerConfig",
        "signature:megatron.core.parallel_state:RankGenerator",
        "default:TransformerConfig.num_query_groups",
        "default:TransformerConfig.params_dtype",
        "default:TransformerConfig.activation_func",
        "default:ModuleSpec.module",
        "derived:TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4).ffn_hidden_size",
        "quote:megatron/core/transformer/spec_utils.py:when instantiating",
        "fieldcount:megatron.core.transformer.transformer_config:TransformerConfig",
        "name:megatron.core.parallel_state:get_tensor_model_parallel_rank",
        "name:megatron.core.parallel_state:destroy_model_parallel",
    }
    assert facts["name:megatron.core.transformer.moe.grouped_gemm_util"].versions == "0.16"
    assert facts["name:megatron.core.transformer.hyper_connection"].versions == "main"
    gpt = facts["name:megatron.core.models.gpt.gpt_model:GPTModel"]
    assert [s.rsplit(":", 1)[1] for s in gpt.sources] == ["3", "4"]


@pytest.mark.parametrize("spec,inside,outside", [
    ("0.16", ["0.16.0", "0.16.1"], ["0.17.0", "0.19.2"]),
    ("0.16-0.18", ["0.16.1", "0.17.0", "0.18.2"], ["0.15.3", "0.19.2"]),
    ("0.16, 0.19.2", ["0.16.0", "0.19.2"], ["0.19.0", "0.17.1"]),
    ("main", ["0.20.0rc0", "0.20.0.dev0"], ["0.19.2"]),
])
def test_version_spec(spec, inside, outside):
    assert all(rf.version_in_spec(v, spec) for v in inside)
    assert not any(rf.version_in_spec(v, spec) for v in outside)


@pytest.mark.parametrize("a,b", [
    ("Optional[int]", "int | None"),
    ("typing.Optional[typing.List[torch.Tensor]]", "list[Tensor] | None"),
    ("Union[ModuleSpec, type]", "type | ModuleSpec"),
    ("'TransformerConfig'", "megatron.core.transformer.transformer_config.TransformerConfig"),
    ("Literal['rope', 'none']", "Literal['rope','none']"),
])
def test_annotation_normalization(a, b):
    assert rf.normalize_annotation(a) == rf.normalize_annotation(b)


def test_annotation_normalization_keeps_differences():
    assert rf.normalize_annotation("Optional[int]") != rf.normalize_annotation("int")
    assert rf.normalize_annotation("Literal['rope']") != rf.normalize_annotation("Literal['none']")


@pytest.fixture(scope="module")
def bad_results():
    facts = extract([DATA / "bad.md"])
    return {r["id"]: r for r in rf.check_facts(facts, source_at=up.source_at)}


# Each wrong fact in tests/data/api/bad.md and the status its check must report.
BAD = {
    "name:megatron.core.models.gpt.gpt_model:GPTModelX": "missing",
    "name:megatron.core.no_such_module.thing": "missing",
    "name:megatron.core.models.gpt.gpt_model:GPTModel": "mismatch",  # tagged (0.16) yet present in 0.19.2
    "name:megatron.core.transformer.no_such_thing": "mismatch",  # tagged (main) but absent from main
    "signature:megatron.core.parallel_state:RankGenerator": "mismatch",
    "signature:megatron.core.parallel_state:destroy_model_parallel": "mismatch",
    "signature:megatron.core.models.gpt.gpt_model:GPTModel": "mismatch",
    "default:TransformerConfig.num_query_groups": "mismatch",
    "default:TransformerConfig.no_such_field": "missing",
    "default:ModuleSpec.params": "mismatch",
    "derived:TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4).kv_channels": "mismatch",
    "derived:TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4, pipeline_model_parallel_size=2).ffn_hidden_size": "error",
    "quote:megatron/core/transformer/spec_utils.py:when constructing": "mismatch",
    "fieldcount:megatron.core.transformer.transformer_config:TransformerConfig": "mismatch",
    "name:megatron.core.parallel_state:get_tensor_parallel_rank": "missing",
}


# Tagged names are checked with tests/upstream_sources.py (released versions from PyPI wheels
# when the git mirror is absent); only names tagged (main) need the mirror.
NEEDS_MIRROR = {"name:megatron.core.transformer.no_such_thing"}
HAVE_MIRROR = up.mirror() is not None


@pytest.mark.slow
@pytest.mark.parametrize("fact_id,status", sorted(BAD.items()))
def test_each_check_fails_on_a_wrong_fact(bad_results, fact_id, status):
    result = bad_results[fact_id]
    if fact_id in NEEDS_MIRROR and not HAVE_MIRROR:
        assert result.get("mirror_missing"), result  # it must say it could not check, not pass
        pytest.skip(f"{fact_id}: {result['detail']}")
    assert result["status"] == status, result
    assert result["detail"], "a failed check must say what the installation has instead"


@pytest.mark.slow
def test_bad_fixture_has_no_unexpected_facts(bad_results):
    assert set(bad_results) == set(BAD)


@pytest.mark.slow
def test_signature_mismatch_names_the_difference(bad_results):
    detail = bad_results["signature:megatron.core.parallel_state:RankGenerator"]["detail"]
    assert "gtp_remat" in detail and "installed:" in detail
    detail = bad_results["signature:megatron.core.models.gpt.gpt_model:GPTModel"]["detail"]
    assert "position_embedding_type: default 'rope'" in detail


@pytest.mark.slow
def test_good_fixture_holds():
    results = rf.check_facts(extract([DATA / "good.md"]), source_at=up.source_at)
    if not HAVE_MIRROR:  # names tagged (main) cannot be checked; they must say so, not pass
        assert {r["id"] for r in results if r.get("mirror_missing")} == {
            "name:megatron.core.transformer.hyper_connection"}
        results = [r for r in results if not r.get("mirror_missing")]
    assert [r for r in results if r["status"] != "ok"] == []


def _kinds_demo(a, /, b, *args, c, d=1, **kw):
    pass


def test_render_stub_marks_every_parameter_kind():
    stub = rf.render_stub(f"{__name__}:_kinds_demo")
    assert stub == "def _kinds_demo(\n    a,\n    /,\n    b,\n    *args,\n    c,\n    d=1,\n    **kw,\n): ..."


@pytest.mark.slow
def test_rendered_stubs_pass_their_own_check():
    """render_stub and the signature comparison agree on every object the reference documents."""
    targets = sorted({f.target for f in rf.extract_facts([REPO / "references" / "api-reference.md"])
                      if f.kind == "signature"})
    assert len(targets) >= 20
    for target in targets:
        fact = rf.Fact(f"signature:{target}", "signature", target, rf.render_stub(target), "rendered")
        assert rf.check_fact(fact)["status"] == "ok", target


def _tagged(target: str, versions: str) -> rf.Fact:
    return rf.Fact(f"name:{target}", "name", target, "", "test", versions)


GROUPED = "megatron.core.transformer.moe.grouped_gemm_util"


@pytest.mark.parametrize("versions,status,detail", [
    ("0.16", "ok", "present upstream at 0.16"),
    ("0.15-0.16", "ok", "present upstream at 0.15-0.16"),
    ("0.16.0, 0.17", "mismatch", "not in 0.17"),  # removed in core_v0.17.0
    ("0.14.9", "mismatch", "no megatron-core release 0.14.9"),
])
def test_tagged_names_are_checked_against_released_sources(versions, status, detail):
    """With an injected source (here the wheels or the mirror), released tags are really checked."""
    result = rf.check_fact(_tagged(GROUPED, versions), source_at=up.source_at)
    assert (result["status"], detail in result["detail"]) == (status, True), result


def test_an_unreadable_source_is_an_error_not_a_verdict():
    def offline(version, path):
        raise up.Unavailable("offline")

    result = rf.check_fact(_tagged(GROUPED, "0.16"), source_at=offline)
    assert result["status"] == "error" and result["mirror_missing"] and "offline" in result["detail"]

    def gone(version, path):  # a contradiction at one version outweighs an unknown one
        if version == "main":
            raise up.Unavailable("no mirror")
        return None

    assert rf.check_fact(_tagged(GROUPED, "0.16, main"), source_at=gone)["status"] == "mismatch"

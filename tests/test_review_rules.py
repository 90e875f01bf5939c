"""Each review rule has a failing and a passing fixture (tests/data/review/<rule>.bad.py and
.ok.py): the failing one yields the rule, the passing one does not.  Signatures of 0.19.2
and of the other releases come from the shipped release index (scripts/release_index)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

from model_review import checks_groups, checks_models, rules  # noqa: E402
from model_review.review import review_paths  # noqa: E402

DATA = REPO / "tests" / "data" / "review"


# The release a rule's fixtures are reduced from, where it is not 0.19 (the fixture's comment
# names the source and the release).
FIXTURE_RELEASE = {"config-field": "0.13", "deprecated-module": "0.16"}


def run(path, rule_id, has_te=False, version="0.19", target_te=None):
    if rule_id == "te-placeholder" and target_te is None and not has_te:
        target_te = False  # per-import warnings only for a declared target without TE
    out = review_paths([str(path)], version, rule_ids={rule_id}, has_te=has_te,
                       target_te=target_te)
    return out["findings"]


@pytest.mark.parametrize("rule", [r.id for r in rules.RULES])
def test_rule_fails_and_passes(rule):
    version = FIXTURE_RELEASE.get(rule, "0.19")
    bad = run(DATA / f"{rule}.bad.py", rule, version=version)
    assert bad, f"{rule}: the failing fixture gives no finding"
    assert all(f["rule"].split(".")[0] == rule for f in bad)
    assert all(f["reference"].startswith("references/") for f in bad)
    assert [f for f in run(DATA / f"{rule}.ok.py", rule, version=version)
            if f["severity"] != "info"] == []


def test_every_rule_has_fixtures():
    for r in rules.RULES:
        assert (DATA / f"{r.id}.bad.py").exists() and (DATA / f"{r.id}.ok.py").exists(), r.id


def test_reference_anchors_exist():
    """Every rule's reference section, and every per-object section, is a heading there."""
    import re
    from model_review import targets
    refs = [r.reference for r in rules.RULES] + [targets.reference(t) for t in targets.CLASSES]
    for ref in refs + [targets.reference("megatron.core.models.gpt.gpt_layer_specs:get_x")]:
        path, _, anchor = ref.partition("#")
        text = (REPO / path).read_text()
        slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                 for h in re.findall(r"^#+ (.+)$", text, re.M)}
        assert anchor in slugs, ref


def test_unknown_keyword_names_nearest():
    (f,) = run(DATA / "unknown-keyword.bad.py", "unknown-keyword")
    assert f["line"] == 3 and f["fix"] == "num_query_groups=..."


def test_removed_keyword_names_release_and_successor():
    (f,) = run(DATA / "removed-keyword.bad.py", "removed-keyword")
    assert "absent from 0.14.0" in f["message"] and f["fix"] == "original_max_position_embeddings=..."
    old = review_paths([str(DATA / "removed-keyword.bad.py")], "0.13",
                       rule_ids={"removed-keyword", "unknown-keyword"})
    assert old["findings"] == [], "0.13.1 has max_position_embeddings"


def test_unresolved_import_points_to_definition():
    (f,) = run(DATA / "unresolved-import.bad.py", "unresolved-import")
    assert "exports nothing" in f["message"]
    assert f["fix"] == "from megatron.core.models.hybrid.hybrid_model import HybridModel"


def test_te_placeholder_silent_with_te():
    assert run(DATA / "te-placeholder.bad.py", "te-placeholder", has_te=True) == []


def test_gpt_route_gives_pattern():
    (f,) = run(DATA / "gptmodel-deprecated.bad.py", "gptmodel-deprecated")
    assert "hybrid_layer_pattern='*-*-'" in f["fix"]
    assert checks_models.gpt_pattern({"num_layers": 3, "num_moe_experts": 8, "moe_layer_freq": 2}) \
        == "*E*-*E"


def test_layout_rule_ids_are_the_layout_checkers():
    from parallel_layout import rules as layout_rules
    found = run(DATA / "layout.bad.py", "layout")
    assert {f["rule"] for f in found} == {"layout.heads-divisible-by-tp", "layout.query-groups-vs-tp"}
    for f in found:
        assert f["rule"].split(".", 1)[1] in layout_rules.RULES_BY_ID


@pytest.mark.parametrize("path,message,since,before", [
    ("megatron/core/models/gpt/gpt_model.py", checks_models.GPT_MESSAGE,
     checks_models.GPT_DEPRECATED_SINCE, "0.18.2"),
    ("megatron/core/models/mamba/mamba_model.py", checks_models.MAMBA_MESSAGE,
     checks_models.MAMBA_DEPRECATED_SINCE, "0.17.1"),
])
def test_deprecation_first_release(path, message, since, before):
    """Each deprecation's first release, against the released sources."""
    upstream = pytest.importorskip("upstream_sources")
    try:
        now, old = upstream.source_at(since, path), upstream.source_at(before, path)
    except upstream.Unavailable as exc:
        pytest.skip(f"{path} deprecated since {since}: sources unavailable ({exc})")
    assert message in now and message not in old


def test_group_fields_match_use_mpu_process_groups():
    """GROUP_FIELDS is the map ProcessGroupCollection.use_mpu_process_groups uses (0.19.2)."""
    import megatron.core.process_groups_config as pgc
    tree = ast.parse(Path(pgc.__file__).read_text())
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Call) and v.args and \
                        isinstance(v.args[0], ast.Attribute):
                    found.setdefault(v.args[0].attr, k.value)
    for getter, field in checks_groups.GROUP_FIELDS.items():
        assert found.get(getter) == field, getter


def test_hybrid_pattern_builds_the_gpt_layers():
    """A GPT config of N layers and HybridModel with '*-' * N build the same decoder
    parameters (HybridModel's final norm switched off: TENorm needs TE)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.models.hybrid.hybrid_block import HybridStack, HybridStackSubmodules
    from megatron.core.models.hybrid.hybrid_model import HybridModel
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_config import TransformerConfig
    from megatron.core.transformer.transformer_layer import TransformerLayer
    from review_helpers import cpu_world
    with cpu_world():
        n = 2
        kw = dict(hidden_size=64, num_attention_heads=4, use_cpu_initialization=True)
        gpt = GPTModel(TransformerConfig(num_layers=n, **kw), get_gpt_layer_local_spec(), 128, 32,
                       position_embedding_type="none")
        pattern = checks_models.gpt_pattern({"num_layers": n})
        import dataclasses
        from megatron.core.ssm.mlp_layer import MLPLayer
        from megatron.core.transformer.identity_op import IdentityOp
        local = get_gpt_layer_local_spec().submodules
        attn = ModuleSpec(module=TransformerLayer, submodules=dataclasses.replace(
            local, pre_mlp_layernorm=IdentityOp, mlp=IdentityOp))
        mlp = ModuleSpec(module=MLPLayer, submodules=dataclasses.replace(
            local, input_layernorm=IdentityOp, self_attention=IdentityOp))
        stack = ModuleSpec(module=HybridStack, params={"post_layer_norm": False},
                           submodules=HybridStackSubmodules(attention_layer=attn, mlp_layer=mlp))
        hyb = HybridModel(TransformerConfig(num_layers=len(pattern), **kw),
                          stack, 128, 32, hybrid_layer_pattern=pattern)
        shapes = lambda m: sorted(tuple(p.shape) for name, p in m.named_parameters()  # noqa: E731
                                  if name.startswith("decoder.layers"))
        assert shapes(gpt) == shapes(hyb)


def test_positional_mismatch_is_silent_in_0_19_2():
    """The fifth positional argument of the GPT layer-spec functions is fp8: an attention
    variant passed there is accepted and changes nothing (0.19.0's own gpt_builders.py)."""
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    assert repr(get_gpt_layer_local_spec(None, False, False, False, "gated_delta_net")) == \
        repr(get_gpt_layer_local_spec())


def test_global_group_only_where_a_collection_is_in_scope(tmp_path):
    """Issue 20: a provider that builds a model but holds no collection has nothing to pass
    instead (one info note per file, no warning); a function that receives pg_collection, and
    any method of a class that keeps it, is warned with the variable in scope."""
    path = tmp_path / "p.py"
    path.write_text(
        "from megatron.core import mpu\n"
        "from megatron.core.models.gpt import GPTModel\n\n"
        "def provider(config, spec):\n"
        "    rank = mpu.get_tensor_model_parallel_rank()\n"
        "    return GPTModel(config, spec, 128, 32)\n\n"
        "def log_rank():\n"
        "    return mpu.get_tensor_model_parallel_rank()\n\n"
        "def helper(x, pg_collection):\n"
        "    return mpu.get_tensor_model_parallel_rank()\n\n"
        "class Head(GPTModel):\n"
        "    def forward(self, x):\n"
        "        return mpu.get_context_parallel_group()\n")
    found = run(path, "global-process-group")
    warned = {(f["line"], f["fix"]) for f in found if f["severity"] == "warning"}
    assert warned == {(12, "use pg_collection.tp.rank()"),
                      (16, "use self.pg_collection.cp")}
    infos = [f for f in found if f["severity"] == "info"]
    assert len(infos) == 1 and infos[0]["line"] == 5 and infos[0]["message"].startswith("2 ")


def test_stores_pg_modules_keep_the_collection():
    """STORES_PG: each module's installed 0.19.2 source (or the base it inherits it from)
    assigns self.pg_collection."""
    import importlib
    import inspect
    from model_review.checks_groups import STORES_PG
    via = {"megatron.core.models.gpt.gpt_model":
           "megatron.core.models.common.language_module.language_module",
           "megatron.core.models.hybrid.hybrid_model":
           "megatron.core.models.common.language_module.language_module"}
    for module in STORES_PG:
        text = inspect.getsource(importlib.import_module(via.get(module, module)))
        assert "self.pg_collection = " in text, module


def test_group_replacements_give_the_same_values():
    """The fixes' pg_collection expressions evaluate on a real ProcessGroupCollection and agree
    with the getters (world size 1: this proves the attribute paths, not multi-rank values;
    the group each field holds is checked by test_group_fields_match_use_mpu_process_groups)."""
    from megatron.core import parallel_state
    from megatron.core.process_groups_config import ProcessGroupCollection
    from review_helpers import cpu_world
    with cpu_world():
        pg = ProcessGroupCollection.use_mpu_process_groups()
        for getter in ("get_tensor_model_parallel_rank", "get_tensor_model_parallel_world_size",
                       "get_pipeline_model_parallel_rank", "get_context_parallel_world_size",
                       "get_expert_model_parallel_rank", "get_data_parallel_world_size"):
            expr = checks_groups.replacement(getter)
            assert eval(expr, {"pg_collection": pg}) == getattr(parallel_state, getter)(), getter  # noqa: S307


def test_unresolved_import_severity(tmp_path):
    """Removed from a module the index saw it in: error.  Absent from a plain module that may
    bind it from another package (fp8_utils binds FP8_TENSOR_CLASS from Transformer Engine):
    warning, since the index records megatron names only."""
    path = tmp_path / "i.py"
    path.write_text("from megatron.training.utils import get_batch_on_this_cp_rank\n"
                    "from megatron.core.fp8_utils import FP8_TENSOR_CLASS\n")
    removed, third_party = run(path, "unresolved-import")
    assert removed["severity"] == "error" and "it is there in 0.12.3" in removed["message"]
    assert removed["fix"] == "from megatron.core.utils import get_batch_on_this_cp_rank"
    assert third_party["severity"] == "warning"
    fp8_utils = Path(__import__("megatron.core.fp8_utils", fromlist=["x"]).__file__).read_text()
    assert "as FP8_TENSOR_CLASS" in fp8_utils


def test_deprecated_config_fields_from_the_release_messages(tmp_path):
    """0.19.2's TransformerConfig warns that enable_cuda_graph is deprecated; a message about a
    value of cuda_graph_modules, or about a flag that contains 'fp8', deprecates neither."""
    path = tmp_path / "c.py"
    path.write_text("from megatron.core.transformer.transformer_config import TransformerConfig\n"
                    "c = TransformerConfig(num_layers=2, hidden_size=64, num_attention_heads=4,\n"
                    "                      enable_cuda_graph=True, cuda_graph_modules=[], fp8=None)\n")
    (f,) = run(path, "deprecated-keyword")
    assert f["line"] == 3 and "'enable_cuda_graph' is deprecated" in f["message"]
    assert "enable_cuda_graph is deprecated, use cuda_graph_impl=local instead." in f["message"]


def test_config_built_from_a_dict_meets_its_spec(tmp_path):
    """Issue 20: the config's keywords come from a dict splatted with ** (qk_layernorm=True),
    the spec leaves its q/k norms out: spec-config-mismatch reads the dict."""
    path = tmp_path / "p.py"
    path.write_text(
        "from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec\n"
        "from megatron.core.transformer.transformer_config import TransformerConfig\n\n"
        "def provider():\n"
        "    kw = {'num_layers': 2, 'hidden_size': 64, 'num_attention_heads': 4}\n"
        "    kw['qk_layernorm'] = True\n"
        "    config = TransformerConfig(**kw)\n"
        "    return config, get_gpt_layer_local_spec()\n")
    (f,) = run(path, "spec-config-mismatch")
    assert f["line"] == 8 and f["fix"] == "qk_layernorm=config.qk_layernorm"


def test_splat_keyword_unknown_and_changed_dict_unread(tmp_path):
    """A key of a ** dict the callee lacks is reported on the key's line; a dict changed by
    .update() is not read (its keys are not known)."""
    path = tmp_path / "p.py"
    path.write_text(
        "from megatron.core.transformer.transformer_config import TransformerConfig\n\n"
        "def a():\n"
        "    kw = dict(num_layers=2, num_query_group=2)\n"
        "    return TransformerConfig(**kw)\n\n"
        "def b(extra):\n"
        "    kw = dict(num_layers=2, num_query_group=2)\n"
        "    kw.update(extra)\n"
        "    return TransformerConfig(**kw)\n")
    (f,) = run(path, "unknown-keyword")
    assert f["line"] == 4 and f["fix"] == "key 'num_query_groups'"


def test_global_group_in_a_staticmethod_has_no_self(tmp_path):
    """A staticmethod of a class that keeps self.pg_collection cannot reach it (info); a
    function nested in a method is a closure over self (warning, self.pg_collection)."""
    path = tmp_path / "p.py"
    path.write_text(
        "from megatron.core import parallel_state\n"
        "from megatron.core.transformer.attention import SelfAttention\n\n\n"
        "class A(SelfAttention):\n"
        "    @staticmethod\n"
        "    def helper(x):\n"
        "        return parallel_state.get_tensor_model_parallel_rank()\n\n"
        "    def forward(self, x):\n"
        "        def inner(y):\n"
        "            return parallel_state.get_tensor_model_parallel_rank()\n"
        "        return inner(x)\n")
    found = {(f["line"], f["severity"], f["fix"]) for f in run(path, "global-process-group")}
    assert found == {(8, "info", ""), (12, "warning", "use self.pg_collection.tp.rank()")}

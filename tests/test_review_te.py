"""te-placeholder: without Transformer Engine every name in checks_imports' TE tables imports
(``te`` is a MagicMock) and building a model from it fails."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

from model_review import checks_imports  # noqa: E402
from model_review.context import te_installed  # noqa: E402

pytestmark = pytest.mark.skipif(te_installed(), reason="the MagicMock claims need an "
                                "environment without Transformer Engine")


@pytest.fixture(scope="module")
def world():
    from review_helpers import cpu_world
    with cpu_world():
        yield


def _obj(obj_id):
    module, _, name = obj_id.partition(":")
    return getattr(importlib.import_module(module), name)


def test_te_is_a_magicmock():
    from unittest.mock import MagicMock
    te_mod = importlib.import_module(checks_imports.TE_MODULES[0])
    assert isinstance(te_mod.te, MagicMock) and te_mod.HAVE_TE is False


def _build(spec, config):
    from megatron.core.models.gpt.gpt_model import GPTModel
    return GPTModel(config, spec, 128, 32)


@pytest.mark.parametrize("obj_id", sorted(checks_imports.TE_OBJECTS) + sorted(checks_imports.TE_WHEN))
def test_imports_then_fails_to_build(world, obj_id):
    from megatron.core.models.hybrid.hybrid_model import HybridModel
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_config import TransformerConfig
    config = TransformerConfig(num_layers=4, hidden_size=64, num_attention_heads=4,
                               use_cpu_initialization=True)
    obj = _obj(obj_id)  # the import works
    if obj_id in checks_imports.TE_WHEN:
        kw, value, (exc_name, text) = checks_imports.TE_WHEN[obj_id]
    else:
        exc_name, text = checks_imports.TE_OBJECTS[obj_id]
    with pytest.raises(Exception) as exc:
        if obj_id in checks_imports.TE_WHEN:
            _build(obj(config, **{kw: value}), config)
        elif not isinstance(obj, ModuleSpec):  # a spec function
            _build(obj(), config)
        else:  # a stack spec
            HybridModel(config=config, hybrid_stack_spec=obj, vocab_size=128,
                        max_sequence_length=32, hybrid_layer_pattern="*-*-")
    assert type(exc.value).__name__ == exc_name and text in str(exc.value), exc.value


def test_magicmock_fallback_since_0_13():
    import upstream_sources
    repo = upstream_sources.mirror()
    if repo is None:
        pytest.skip("te-placeholder applies from 0.13.1: needs Megatron-LM's git mirror")
    path = "megatron/core/extensions/transformer_engine.py"
    before = upstream_sources.mirror_source_at(repo, "core_v0.12.3", path)
    since = upstream_sources.mirror_source_at(repo, f"core_v{checks_imports.MAGICMOCK_SINCE}", path)
    assert "te = MagicMock()" in since and "te = MagicMock()" not in before

"""The key facts SKILL.md states, each checked against the installed megatron-core."""

import inspect
import logging
import warnings
from pathlib import Path

import pytest

import mdtools
from review_helpers import cpu_world  # noqa: E402

SKILL = (mdtools.REPO / "SKILL.md").read_text(encoding="utf-8")


def test_skill_names_the_checked_version():
    from importlib.metadata import version

    assert version("megatron-core") == "0.19.2"
    assert "## Key facts (megatron-core 0.19.2)" in SKILL


def test_expert_tensor_parallel_size_defaults_to_tp():
    from megatron.core import ModelParallelConfig

    assert "sets `expert_tensor_parallel_size` to `tensor_model_parallel_size` when it is `None`" in SKILL
    cfg = ModelParallelConfig(tensor_model_parallel_size=4)
    assert cfg.expert_tensor_parallel_size == 4
    assert ModelParallelConfig(tensor_model_parallel_size=4, expert_tensor_parallel_size=1).expert_tensor_parallel_size == 1


def test_transformer_config_derived_sizes():
    from megatron.core.transformer import TransformerConfig

    assert "`ffn_hidden_size = 4 * hidden_size`, `kv_channels = hidden_size // num_attention_heads`" in SKILL
    cfg = TransformerConfig(num_layers=2, hidden_size=96, num_attention_heads=8)
    assert (cfg.ffn_hidden_size, cfg.kv_channels, cfg.num_query_groups) == (384, 12, 8)


def test_default_rank_order_puts_tp_ranks_together():
    from megatron.core import parallel_state
    from megatron.core.parallel_state import RankGenerator

    assert '`order="tp-cp-ep-dp-pp"` by default' in SKILL
    order = inspect.signature(parallel_state.initialize_model_parallel).parameters["order"].default
    assert order == "tp-cp-ep-dp-pp"
    gen = RankGenerator(tp=2, ep=1, dp=2, pp=2, cp=1, order=order)
    assert gen.get_ranks("tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.fixture
def gloo_world_of_one():
    # The gloo world review_helpers keeps for the process (other files in this worker use it too).
    with cpu_world():
        yield


@pytest.mark.slow
def test_gpt_model_deprecation_is_a_logged_warning_not_a_deprecation_warning(gloo_world_of_one, caplog):
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer import TransformerConfig

    assert "no `DeprecationWarning` is raised" in SKILL
    cfg = TransformerConfig(num_layers=1, hidden_size=32, num_attention_heads=4, use_cpu_initialization=True)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(), vocab_size=64, max_sequence_length=16)
    logged = [r for r in caplog.records if r.getMessage().startswith("GPTModel IS DEPRECATED. ")]
    assert logged and logged[0].levelno == logging.WARNING
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning) and "GPTModel" in str(w.message)]


def test_hybrid_model_is_the_successor_and_its_package_exports_nothing():
    import megatron.core.models.gpt.gpt_model as gpt_model
    import megatron.core.models.hybrid as hybrid_pkg
    from megatron.core.models.hybrid.hybrid_model import HybridModel

    assert "The successor is `megatron.core.models.hybrid.hybrid_model.HybridModel`" in SKILL
    assert "to use `HybridModel`" in inspect.getsource(gpt_model)
    assert HybridModel.__name__ == "HybridModel"
    assert "its package `megatron.core.models.hybrid` exports nothing" in SKILL
    assert not hasattr(hybrid_pkg, "HybridModel")
    with pytest.raises(ImportError):
        exec("from megatron.core.models.hybrid import HybridModel", {})


def test_cuda_device_max_connections_rules_are_megatron_lms():
    # Raising these needs a GPU (validate_args asks the device's architecture): the fixed texts must occur in
    # the installed argument checks, next to the architecture test SKILL.md describes.
    import megatron.training.arguments as arguments

    source = Path(arguments.__file__).read_text()
    assert "unless FSDP or `overlap_moe_expert_parallel_comm` is used" in SKILL
    assert "get_device_arch_version() < 10" in source
    assert ('"Using tensor model parallelism or context parallelism require setting the environment variable " \\\n'
            '                "CUDA_DEVICE_MAX_CONNECTIONS to 1"') in source
    assert "'FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.'" in source


@pytest.mark.parametrize("version,present", [("0.17.0", False), ("0.17.1", False), ("0.18.0", True), ("0.19.2", True)])
def test_hybrid_model_first_shipped_in_0_18_0(version, present):
    import upstream_sources

    assert "`megatron.core.models.hybrid.hybrid_model.HybridModel` (first shipped in 0.18.0)" in SKILL
    try:
        found = upstream_sources.exists_at(version, "megatron/core/models/hybrid/hybrid_model.py")
    except upstream_sources.Unavailable as exc:
        pytest.skip(f"cannot read megatron-core {version}: {exc}")
    assert found is present

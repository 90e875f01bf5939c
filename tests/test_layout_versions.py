"""Version claims of references/parallelism-reference.md, checked against the released sources."""

import pytest

import mdtools
import upstream_sources

REFERENCE = (mdtools.REPO / "references" / "parallelism-reference.md").read_text(encoding="utf-8")
CONFIG = "megatron/core/transformer/transformer_config.py"
DIVISOR_RULE = "must be a multiple or divisor of"


def _source(version):
    try:
        return upstream_sources.source_at(version, CONFIG)
    except upstream_sources.Unavailable as exc:
        pytest.skip(f"cannot read megatron-core {version}: {exc}")


def test_the_reference_states_the_query_group_history():
    text = " ".join(REFERENCE.split())
    assert "multiple or divisor in core_v0.16.0 through 0.19.2; core_v0.15.0 accepted only a multiple" in text


@pytest.mark.parametrize("version", ["0.16.0", "0.16.1", "0.17.1", "0.18.2", "0.19.0", "0.19.2"])
def test_query_groups_may_divide_tp_from_0_16(version):
    assert DIVISOR_RULE in _source(version)


@pytest.mark.parametrize("version", ["0.15.0", "0.15.3"])
def test_query_groups_had_to_be_a_multiple_of_tp_in_0_15(version):
    src = _source(version)
    assert DIVISOR_RULE not in src
    assert "if self.num_query_groups % self.tensor_model_parallel_size != 0:" in src

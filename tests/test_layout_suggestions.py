"""Every suggestion of every violation is itself a valid layout: applied to
the user's flags, it passes every rule (and fits when --gpu-memory-gib is
given).  Checked on the rule corpus (one trigger per rule) and on random
invalid layouts (hypothesis)."""

import os
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from parallel_layout import catalog, flags, memory, rules, suggest  # noqa: E402
from test_layout_rules import TRIGGERS, argv_for  # noqa: E402

ERROR_RULES = [r.id for r in rules.RULES if r.kind == "error"]


STATS = {"layouts": 0, "with_suggestions": 0}


def assert_all_valid(layout, result):
    STATS["layouts"] += 1
    STATS["with_suggestions"] += bool(result.violations and result.violations[0].suggestions)
    for v in result.violations:
        assert len(v.suggestions) <= suggest.MAX_SUGGESTIONS
        for changes in v.suggestions:
            assert changes, v.rule
            pasted = {o for o, _ in catalog.split_flags(layout.other_flags or ())}
            for option, value in changes.items():
                assert option in suggest.BY_OPTION or (option in pasted and value is None), option
                assert value is None or value is True or not isinstance(value, (list, tuple))
            fixed = suggest.apply(layout, changes)
            after = rules.check(fixed, with_memory=False)
            assert after.valid, (v.rule, changes, [(x.rule, x.message) for x in after.violations])
            if layout.gpu_memory_gib:
                assert memory.estimate(fixed)["fits"] is not False, changes


@pytest.mark.parametrize("rule_id", ERROR_RULES)
def test_suggestions_of_the_rule_corpus_are_valid_layouts(rule_id):
    layout, _ = flags.parse_layout(argv_for(rule_id))
    result = rules.check(layout)
    assert_all_valid(layout, result)


def test_most_corpus_violations_get_a_suggestion():
    """A suggestion exists for nearly every trigger (the model is never changed,
    so a model that no layout can hold gets none)."""
    without = []
    for rule_id in ERROR_RULES:
        layout, _ = flags.parse_layout(argv_for(rule_id))
        result = rules.check(layout)
        if result.violations and not result.violations[0].suggestions:
            without.append(rule_id)
    assert len(without) <= len(ERROR_RULES) // 4, without


def test_suggestions_are_nearest_first():
    layout, _ = flags.parse_layout(argv_for("world-divisible"))
    found = rules.check(layout).violations[0].suggestions
    # world 8 with TP 3: TP 2 and TP 4 are one change away (log2 distance 0.58 and 0.42)
    assert found[:2] == [{"--tensor-model-parallel-size": 4},
                         {"--tensor-model-parallel-size": 2}], found


MODEL = ("--num-layers 12 --hidden-size 1024 --seq-length 1024 --max-position-embeddings 1024 "
         "--micro-batch-size 1 --vocab-size 1000 --bf16 --num-attention-heads 16 ")


def violation_of(rule_id, argv):
    layout, _ = flags.parse_layout((MODEL + argv).split())
    result = rules.check(layout)
    return layout, result, next(v for v in result.violations if v.rule == rule_id)


def test_interleaved_group_fix_is_never_an_empty_range():
    """The issue's example: PP 6, 3 microbatches, VPP: no '[6, 3]' range."""
    layout, result, v = violation_of(
        "interleaved-microbatch-group", "--world-size 6 --pipeline-model-parallel-size 6 "
        "--num-virtual-stages-per-pipeline-rank 2 --global-batch-size 3")
    assert "[6, 3]" not in v.fix and "--global-batch-size 6" in v.fix
    assert {"--global-batch-size": 6} in v.suggestions
    assert_all_valid(layout, result)


def test_query_group_fix_respects_the_heads_rule():
    """The issue's example: 5 query groups, TP 2, 16 heads: TP 5 or 10 would
    break heads % TP, and TP 1, which the configuration checks accept, fails in
    the forward pass (16 heads do not split into 5 groups): no layout holds this
    model, so no layout is suggested and the fix names the query groups."""
    layout, result, v = violation_of("query-groups-vs-tp",
                                     "--world-size 16 --tensor-model-parallel-size 2 "
                                     "--group-query-attention --num-query-groups 5 "
                                     "--global-batch-size 32")
    assert "use TP in 1 " in v.fix and "5" not in v.fix.split("(")[0].replace("use TP in 1", "")
    assert v.suggestions == []
    one = rules.check(suggest.apply(layout, {"--tensor-model-parallel-size": 1}))
    assert [x.rule for x in one.violations] == ["heads-divisible-by-query-groups"]
    assert "--num-query-groups" in one.violations[0].fix


@st.composite
def invalid_layouts(draw):
    heads = draw(st.sampled_from([4, 6, 8, 12, 16, 32]))
    argv = ["--world-size", draw(st.sampled_from([4, 6, 8, 12, 16, 24, 32, 64])),
            "--tensor-model-parallel-size", draw(st.sampled_from([1, 2, 3, 4, 8])),
            "--pipeline-model-parallel-size", draw(st.sampled_from([1, 2, 3, 4, 6])),
            "--context-parallel-size", draw(st.sampled_from([1, 1, 2, 4])),
            "--num-layers", draw(st.sampled_from([6, 8, 12, 16, 30])),
            "--num-attention-heads", heads, "--hidden-size", heads * 32,
            "--seq-length", draw(st.sampled_from([512, 1000, 2048])),
            "--max-position-embeddings", draw(st.sampled_from([512, 2048])),
            "--micro-batch-size", draw(st.sampled_from([1, 2, 3])),
            "--global-batch-size", draw(st.sampled_from([3, 6, 16, 64, 96])),
            "--vocab-size", 32000, "--bf16"]
    if draw(st.booleans()):
        argv += ["--group-query-attention", "--num-query-groups",
                 draw(st.sampled_from([1, 2, 3, 4, 5]))]
    if draw(st.booleans()):
        argv += ["--num-virtual-stages-per-pipeline-rank", draw(st.sampled_from([2, 3]))]
    if draw(st.booleans()):
        argv += ["--num-experts", draw(st.sampled_from([4, 6, 8])),
                 "--expert-model-parallel-size", draw(st.sampled_from([1, 2, 4, 8]))]
    if draw(st.booleans()):
        argv += ["--sequence-parallel"]
    if draw(st.booleans()):
        argv += ["--recompute-granularity", draw(st.sampled_from(["full", "selective"]))]
    if draw(st.booleans()):
        argv += ["--gpu-memory-gib", draw(st.sampled_from([1, 80]))]
    return [str(a) for a in argv]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(invalid_layouts())
def test_every_suggestion_of_a_random_invalid_layout_is_valid(argv):
    layout, _ = flags.parse_layout(argv)
    result = rules.check(layout)
    assume(not result.valid)
    assert_all_valid(layout, result)


def test_random_layouts_mostly_get_suggestions():
    """The property above is not vacuous: most random invalid layouts get a suggestion."""
    if STATS["layouts"] < 40:
        pytest.skip("run with the property test")
    assert STATS["with_suggestions"] >= STATS["layouts"] // 2, STATS


KNOB_RULES = sorted(rules.KNOBS)


def fix_values(fix, option):
    """The values a fix line names for ``option`` ('drop the flag' is None)."""
    text = fix.split(f"use {option} in ", 1)[1].split(":")[0].split(" (and")[0]
    return [None if v == "drop the flag" else int(v) for v in text.split(", ")]


@pytest.mark.parametrize("rule_id", KNOB_RULES)
def test_fix_line_and_suggestions_come_from_one_search(rule_id):
    """Every value the fix line names passes every rule when changed alone, and
    every suggested layout that changes only that flag is among those values."""
    from test_layout_rules import fired
    layout, result = fired(rule_id)
    option = rules.KNOBS[rule_id]
    v = next(x for x in result.violations if x.rule == rule_id)
    if f"use {option} in " not in v.fix:
        assert f"(no value of {option} alone passes every rule" in v.fix
        assert not [c for c in v.suggestions if set(c) == {option}]
        return
    values = fix_values(v.fix, option)
    for value in values:
        assert rules.check(suggest.apply(layout, {option: value}), suggest=False).valid, value
    for changes in v.suggestions:
        if set(changes) == {option}:
            assert changes[option] in values, (changes, values)


def test_the_issues_vpp_example_fix_and_suggestions_agree():
    """num_layers_per_pipeline_rank 20 with vp_size 12: the fix line used to offer
    VPP 4, 5 or 10 while the suggestions offered 10, 20 or none."""
    layout, _ = flags.parse_layout(("--world-size 16 --pipeline-model-parallel-size 2 "
                                    "--num-layers 40 --hidden-size 64 --num-attention-heads 8 "
                                    "--seq-length 64 --max-position-embeddings 64 "
                                    "--micro-batch-size 1 --global-batch-size 64 "
                                    "--num-virtual-stages-per-pipeline-rank 12").split())
    v = rules.check(layout).violations[0]
    assert v.message.startswith("num_layers_per_pipeline_rank 20")
    option = "--num-virtual-stages-per-pipeline-rank"
    values = fix_values(v.fix, option)
    singles = [c[option] for c in v.suggestions if set(c) == {option}]
    assert singles and set(singles) <= set(values)
    assert values[:2] == [10, 20] and None in values

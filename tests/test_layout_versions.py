"""Version claims of references/parallelism-reference.md, checked against the released sources."""

import pytest

import mdtools
import old_envs
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


# ---------------------------------------------------------------- --megatron-version

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

ROOT = str(mdtools.REPO)
CLI = os.path.join(ROOT, "scripts", "check_parallel_layout.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
GQA_TP8 = ("--world-size 8 --tensor-model-parallel-size 8 --num-layers 4 --hidden-size 1024 "
           "--num-attention-heads 16 --group-query-attention --num-query-groups 2").split()
MISMATCH = ("--world-size 4 --pipeline-model-parallel-size 4 --num-layers 8 --hidden-size 64 "
            "--num-attention-heads 8 --decoder-first-pipeline-num-layers 4 "
            "--decoder-last-pipeline-num-layers 4").split()
ARGS_PY = "megatron/training/arguments.py"


def checker(argv, version, python=sys.executable):
    out = subprocess.run([python, CLI, *argv, "--json", "--megatron-version", version],
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


def test_query_groups_dividing_tp_rejected_on_0_15_accepted_on_0_16():
    old = checker(GQA_TP8, "0.15")
    assert old["megatron_core_version"] == "0.15.3"
    assert [v["rule"] for v in old["violations"]] == ["query-groups-vs-tp"]
    assert old["violations"][0]["message"] == ("num_query_groups (2) must be a multiple of "
                                               "tensor_model_parallel_size (8).")
    new = checker(GQA_TP8, "0.16")
    assert new["valid"] and new["megatron_core_version"] == "0.16.1"


def test_the_0_15_message_is_the_0_15_source():
    src = _source("0.15.3")
    assert ("num_query_groups ({self.num_query_groups}) must be a multiple of "
            "tensor_model_parallel_size ({self.tensor_model_parallel_size}).") in " ".join(
                src.split()).replace('" f"', "").replace("' f'", "")


@pytest.mark.parametrize("version,has", [("0.15.3", False), ("0.16.1", True), ("0.19.2", True)])
def test_uneven_mismatch_check_exists_from_0_16(version, has):
    assert ("middle layers remaining but" in _source(version)) is has
    verdict = checker(MISMATCH, version)
    assert ("uneven-stages" in [v["rule"] for v in verdict["violations"]]) is has


@pytest.mark.parametrize("version,bound_to_cp", [("0.12.3", True), ("0.13.1", False),
                                                 ("0.19.2", False)])
def test_cuda_device_max_connections_precedence(version, bound_to_cp):
    """0.12.3 writes 'tp > 1 or cp > 1 and arch < 10' (the arch test binds to CP):
    TP > 1 is asserted on Blackwell too; 0.13.1 on parenthesizes the condition."""
    try:
        src = upstream_sources.source_at(version, ARGS_PY)
    except upstream_sources.Unavailable as exc:
        pytest.skip(f"cannot read megatron-core {version}: {exc}")
    flat = " ".join(src.split())
    unbound = ("if args.tensor_model_parallel_size > 1 or args.context_parallel_size > 1 and "
               "get_device_arch_version() < 10:")
    assert (unbound in flat) is bound_to_cp
    warning = next(w for w in checker(GQA_TP8, version)["warnings"]
                   if w["rule"] == "cuda-device-max-connections")
    assert ("Blackwell included" in warning["message"]) is bound_to_cp


def _config_probe(cases: str) -> str:
    """A child script for an old release's interpreter: TransformerConfig(**kw) for each
    (name, kw) of CASES (Python source), printing {name: None or the error text} as JSON."""
    return ("import json, warnings\nwarnings.simplefilter('ignore')\n"
            "from megatron.core.transformer.transformer_config import TransformerConfig\n"
            + cases + "\nout = {}\nfor name, kw in CASES:\n    try:\n        TransformerConfig(**kw)\n"
            "        out[name] = None\n    except (AssertionError, ValueError) as exc:\n"
            "        out[name] = str(exc)\nprint(json.dumps(out))\n")


OLD_PROBE = _config_probe("""
CASES = (("gqa", dict(num_layers=4, hidden_size=1024, num_attention_heads=16,
                      num_query_groups=2, tensor_model_parallel_size=8)),
         ("mismatch", dict(num_layers=8, hidden_size=64, num_attention_heads=8,
                           pipeline_model_parallel_size=4,
                           num_layers_in_first_pipeline_stage=4,
                           num_layers_in_last_pipeline_stage=4,
                           pipeline_dtype=__import__("torch").bfloat16)))
""")


@pytest.mark.slow
def test_rules_agree_with_the_installed_0_16_1():
    """Under the real megatron-core 0.16.1 (tests/fixtures/make_old_env.sh):
    TransformerConfig accepts 2 query groups with TP 8 and raises the uneven
    Mismatch; the checker, run by the same interpreter with no
    --megatron-version, resolves the installed 0.16.1 and agrees."""
    old_py = str(old_envs.python_for("0.16.1"))
    real = subprocess.run([old_py, "-c", OLD_PROBE], capture_output=True, text=True,
                          timeout=300)
    assert real.returncode == 0, real.stderr[-2000:]
    verdict = json.loads(real.stdout.strip().splitlines()[-1])
    assert verdict["gqa"] is None
    for argv, name in ((GQA_TP8, "gqa"), (MISMATCH, "mismatch")):
        out = subprocess.run([old_py, CLI, *argv, "--json"], capture_output=True, text=True,
                             timeout=120)
        data = json.loads(out.stdout)
        assert data["megatron_core_version"] == "0.16.1"
        assert data["megatron_version_source"] == "installed megatron-core"
        messages = [v["message"] for v in data["violations"]]
        assert messages == ([] if verdict[name] is None else [verdict[name]]), (name, messages)


def _rule_messages():
    """{rule id: its message on the rule corpus trigger} (0.19.2 wording)."""
    from parallel_layout import rules as R
    from test_layout_rules import fired
    out = {}
    for rule in R.RULES:
        if rule.kind != "error":
            continue
        _, result = fired(rule.id)  # in the release its trigger names, if any
        found = [v.message for v in result.violations if v.rule == rule.id]
        out[rule.id] = " ".join(found[0].split())
    return out


def test_rule_version_ranges_are_where_the_message_is_in_the_released_source():
    """A rule whose versions are a plain range 'A-B' has its message in the
    sources of exactly the indexed releases A to B (release index, compiled
    from the released sources); the others explain their history and are
    tested above."""
    import re
    from release_index import RELEASES, load
    from parallel_layout import rules as R
    patterns = {}
    for version in RELEASES:
        patterns[version] = [re.compile(re.escape(" ".join(m["text"].split())).replace(
            re.escape("{}"), ".*?") + "$") for m in load(version).messages()
            if len(m["text"]) >= 12]
    messages = _rule_messages()
    checked = 0
    for rule in R.RULES:
        if rule.kind != "error" or not re.fullmatch(r"\d+\.\d+\.\d+-\d+\.\d+\.\d+", rule.versions):
            continue
        found = [v for v in RELEASES if any(p.match(messages[rule.id]) for p in patterns[v])]
        first, last = rule.versions.split("-")
        assert found == list(RELEASES[RELEASES.index(first):RELEASES.index(last) + 1]), \
            (rule.id, found)
        checked += 1
    assert checked >= 25


# Rules whose message depends on the release: (rule id, trigger flags, {release: message or None}),
# each message where the release index (compiled from the released sources) has it.
RELEASE_MESSAGES = [
    ("ep-tp-needs-sp", "--num-experts 8 --disable-bias-linear --expert-model-parallel-size 2 "
                       "--tensor-model-parallel-size 2",
     "megatron/core/model_parallel_config.py",
     {"0.12.3": "When using expert parallelism and tensor parallelism, sequence parallelism "
                "must be used", "0.14.0": "When using expert parallelism and tensor "
                                           "parallelism, sequence parallelism must be used",
      "0.15.3": None, "0.19.2": None}),
    ("moe-bias-needs-etp1", "--num-experts 8 --expert-tensor-parallel-size 2 "
                            "--tensor-model-parallel-size 2",
     "megatron/core/transformer/transformer_config.py",
     {"0.12.3": "Bias is not supported for MoE", "0.14.0": "Bias is not supported for MoE",
      "0.15.3": "Bias in Moe is only supported when ETP==1",
      "0.19.2": "Bias in Moe is only supported when ETP==1"}),
    ("moe-bias-needs-etp1", "--num-experts 8 --expert-tensor-parallel-size 1",
     "megatron/core/transformer/transformer_config.py",
     {"0.13.1": "Bias is not supported for MoE", "0.15.3": None, "0.19.2": None}),
    ("fp16-expert-parallel", "--fp16 --num-experts 8 --expert-model-parallel-size 2 "
                             "--disable-bias-linear",
     "megatron/training/arguments.py",
     {"0.12.3": "Expert parallelism is not supported with fp16 training.",
      "0.15.3": "Expert parallelism is not supported with fp16 training.",
      "0.16.1": None, "0.19.2": None}),
]


@pytest.mark.parametrize("rule_id,argv,source,by_release", RELEASE_MESSAGES,
                         ids=[f"{r[0]}-{i}" for i, r in enumerate(RELEASE_MESSAGES)])
def test_release_dependent_messages_follow_the_released_sources(rule_id, argv, source,
                                                                by_release):
    """Under --megatron-version X the checker gives X's message (or nothing), and X's
    sources (the release index) hold that message in the rule's file, or not at all."""
    from release_index import load
    from parallel_layout import flags as F, rules as R
    base = ("--world-size 16 --num-layers 4 --hidden-size 64 --num-attention-heads 8 "
            "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 ")
    for version, expected in by_release.items():
        layout, _ = F.parse_layout((base + argv).split())
        layout.megatron_version = version
        got = [v.message for v in R.check(layout, suggest=False).violations
               if v.rule == rule_id]
        assert got == ([expected] if expected else []), (version, got)
        in_source = {m["text"] for m in load(version).messages() if m["file"] == source}
        if expected:
            assert expected in in_source, version
        else:  # none of the rule's messages in that file of that release
            assert not {e for e in by_release.values() if e} & in_source, version


CORE_0131_PROBE = _config_probe("""
base = dict(num_layers=4, hidden_size=64, num_attention_heads=8, num_moe_experts=8)
CASES = (("moe-bias", dict(base, add_bias_linear=True, expert_tensor_parallel_size=1)),
         ("ep-tp-no-sp", dict(base, add_bias_linear=False, tensor_model_parallel_size=2,
                              expert_model_parallel_size=2, sequence_parallel=False)))
""")


@pytest.mark.slow
def test_old_moe_rules_agree_with_the_installed_0_13_1():
    """The real megatron-core 0.13.1 rejects a biased MoE even with ETP 1, and EP with TP
    but no sequence parallelism, with the messages the checker gives under
    --megatron-version 0.13.1 (0.19.2 accepts both: only warnings)."""
    py_0131 = str(old_envs.python_for("0.13.1"))
    real = subprocess.run([py_0131, "-c", CORE_0131_PROBE], capture_output=True, text=True,
                          timeout=300)
    assert real.returncode == 0, real.stderr[-2000:]
    verdict = json.loads(real.stdout.strip().splitlines()[-1])
    from parallel_layout import flags as F, rules as R
    base = ("--world-size 8 --num-layers 4 --hidden-size 64 --num-attention-heads 8 "
            "--seq-length 64 --max-position-embeddings 64 --micro-batch-size 1 --num-experts 8 ")
    cases = {"moe-bias": (base + "--expert-tensor-parallel-size 1", "moe-bias-needs-etp1"),
             "ep-tp-no-sp": (base + "--disable-bias-linear --tensor-model-parallel-size 2 "
                                    "--expert-model-parallel-size 2", "ep-tp-needs-sp")}
    for name, (argv, rule) in cases.items():
        for version, expected in (("0.13.1", verdict[name]), ("0.19.2", None)):
            layout, _ = F.parse_layout(argv.split())
            layout.megatron_version = version
            got = [v.message for v in R.check(layout, suggest=False).violations
                   if v.rule == rule]
            assert got == ([expected] if expected else []), (name, version, got)
        assert verdict[name] is not None

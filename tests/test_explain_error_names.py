"""Failures about a name are answered from the release index, as api_history.py answers them.

The failures are real: each is raised by the installed megatron-core 0.19.2 (and 0.16.1 in
.venv-0161 when present) in a child process, and the text Python prints is pasted. The answer
(in which releases the name or parameter exists, what changed and when) must agree with what
``api_history.py --json`` prints for the same name: one data source, one lookup.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "scripts"), str(REPO / "tests")]

import triage  # noqa: E402
import old_envs  # noqa: E402
import triage_logs as tl  # noqa: E402

# Each probe runs one statement in the child and prints the exception line Python prints.
PROBES = {
    "module_removed": "import megatron.core.transformer.custom_layers.transformer_engine",
    "import_name": "from megatron.core.parallel_state import get_tensor_model_parallel_group_if_none",
    "module_attr": "import megatron.core.parallel_state as ps; ps.get_tensor_model_parallel_group_if_none",
    "config_kw": ("from megatron.core.transformer.transformer_config import TransformerConfig; "
                  "TransformerConfig(num_layers=2, hidden_size=8, num_attention_heads=2, moe_extended_tp=True)"),
    "config_attr": ("from megatron.core.transformer.transformer_config import TransformerConfig; "
                    "TransformerConfig(num_layers=2, hidden_size=8, num_attention_heads=2).moe_extended_tp"),
    "gpt_missing": "from megatron.core.models.gpt.gpt_model import GPTModel; GPTModel()",
    "too_many_positional": ("from megatron.core.parallel_state import initialize_model_parallel; "
                            "initialize_model_parallel(*range(30))"),
    "new_field_on_old": ("from megatron.core.transformer.transformer_config import TransformerConfig; "
                         "TransformerConfig(num_layers=2, hidden_size=8, num_attention_heads=2, "
                         "fused_residual_rmsnorm=True)"),
    "enum_member_removed": "from megatron.core.transformer.enums import ModelType; ModelType.encoder_and_decoder",
    "pre_core_module": "import megatron.optimizer",
    # A downstream provider: a dataclass subclassing TransformerConfig (as Megatron-Bridge's are).
    "provider_removed_field": (
        "import dataclasses; from megatron.core.transformer.transformer_config import TransformerConfig; "
        "P = dataclasses.dataclass(type('Qwen3MoEModelProvider', (TransformerConfig,), {'__module__': 'provider'})); "
        "P(num_layers=2, hidden_size=8, num_attention_heads=2, pipeline_model_parallel_split_rank=1)"),
    # A downstream MoE class in a layer spec, given what 0.19.2's TransformerLayer passes its mlp
    # (Megatron-Bridge#4077); the class is the user's, so the line is CPython's for any class.
    "spec_module_new_kwarg": (
        "class ErnieMultiTypeMoE:\n    def __init__(self, config, pg_collection=None, name=None): pass\n"
        "ErnieMultiTypeMoE(config=None, pg_collection=None, is_mtp_layer=False, name=None)"),
    # Megatron-LM#4669: the keyword 0.19.2's finalize_model_grads passes to every model chunk's
    # finish_grad_sync, given to the base class's own finish_grad_sync(self).
    "sibling_method_kwarg": ("from megatron.core.distributed.data_parallel_base import _BaseDataParallel; "
                             "_BaseDataParallel.finish_grad_sync(object(), force_all_reduce=True)"),
}
CHILD = """
import json, sys, traceback
out = {}
for key, stmt in json.loads(sys.argv[1]).items():
    try:
        exec(stmt, {})
        out[key] = None
    except BaseException as e:
        out[key] = traceback.format_exception_only(type(e), e)[-1].strip()
print(json.dumps(out))
"""


def _raised(python: Path) -> dict:
    r = subprocess.run([str(python), "-c", CHILD, json.dumps(PROBES)], capture_output=True, text=True,
                       timeout=300, cwd="/", env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def raised_0192():
    return _raised(REPO / ".venv" / "bin" / "python")


def _history(name: str) -> dict:
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "api_history.py"), "--json", name],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _name(text: str, version: str) -> dict:
    result = triage.match_log(tl.multi_rank_log(text, ranks=(0, 2)), megatron_version=version)
    assert result["names"], text
    return result["names"][0]


def test_a_removed_module(raised_0192):
    n = _name(raised_0192["module_removed"], "0.19.2")
    h = _history(n["key"])
    assert n["key"] == "megatron.core.transformer.custom_layers.transformer_engine"
    assert n["releases"] == h["releases"] and not n["in_your_release"]
    assert [e["change"] for e in n["events"]] == [e["change"] for e in h["events"]]
    # The first patch release without it (core_v0.16.1 has the file, core_v0.17.0 does not).
    assert "removed in 0.17.0" in n["answer"]


@pytest.mark.parametrize("probe", ["import_name", "module_attr"])
def test_a_name_that_lives_elsewhere(raised_0192, probe):
    n = _name(raised_0192[probe], "0.19.2")
    assert n["key"] == "megatron.core.utils:get_tensor_model_parallel_group_if_none"
    assert "megatron.core.parallel_state:get_tensor_model_parallel_group_if_none is in no indexed release" in n["answer"]
    assert n["releases"] == _history(n["key"])["releases"]


@pytest.mark.parametrize("probe", ["config_kw", "config_attr"])
def test_a_removed_config_field(raised_0192, probe):
    n = _name(raised_0192[probe], "0.19.2")
    h = _history("TransformerConfig.moe_extended_tp")
    assert n["key"] == h["name"] and n["releases"] == h["releases"]
    assert not n["in_your_release"] and "removed in 0.17.0" in n["answer"]
    assert n["next_command"] == f"python scripts/api_history.py {h['name']}"


def test_missing_required_parameters(raised_0192):
    n = _name(raised_0192["gpt_missing"], "0.19.2")
    assert n["key"] == "megatron.core.models.gpt.gpt_model:GPTModel" and n["parameter"] == "config"
    assert n["required_in"] == list(_history("GPTModel")["releases"])


def test_too_many_positional_arguments(raised_0192):
    text = raised_0192["too_many_positional"]
    assert "positional argument" in text, text
    n = _name(text, "0.19.2")
    h = _history("megatron.core.parallel_state:initialize_model_parallel")
    assert n["key"] == h["name"]
    assert n["events"] == [e for e in h["events"] if e["change"] == "signature_changed"][:len(n["events"])]
    assert n["events"] and n["events"][0]["version"] in n["answer"]


def test_a_field_added_after_the_users_release():
    text = _raised(old_envs.python_for("0.16.1"))["new_field_on_old"]
    assert text and "fused_residual_rmsnorm" in text, text
    n = _name(text, "0.16.1")
    h = _history("TransformerConfig.fused_residual_rmsnorm")
    assert n["releases"] == h["releases"] and n["releases"][0] == "0.17.1"
    assert not n["in_your_release"] and "added in 0.17.0" in n["answer"]


def test_a_name_outside_megatron_is_not_answered():
    result = triage.match_log("ImportError: cannot import name 'foo' from 'transformer_engine.pytorch'\n"
                              "AttributeError: 'Tensor' object has no attribute 'main_grad'\n")
    assert result["names"] == []


def test_names_are_answered_under_plain_python3_without_the_index_loader_importing_torch():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import triage; "
            "r = triage.match_log(\"AttributeError: 'TransformerConfig' object has no attribute 'moe_extended_tp'\\n\"); "
            "assert r['names'][0]['key'].endswith('moe_extended_tp'), r['names']; "
            "assert not {'torch', 'megatron'} & set(sys.modules)")
    r = subprocess.run(["python3", "-c", code, str(REPO / "scripts")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_removed_enum_member(raised_0192):
    # A downstream bridge comparing against ModelType.encoder_and_decoder (ISEEKYAN/mbridge#155).
    text = raised_0192["enum_member_removed"]
    assert text.startswith("AttributeError: type object 'ModelType' has no attribute 'encoder_and_decoder'"), text
    n = _name(text, "0.19.2")
    h = _history(n["key"])
    assert n["key"].endswith(":ModelType.encoder_and_decoder") and n["kind"] == "member"
    assert n["releases"] == h["releases"] and not n["in_your_release"]
    assert "removed in 0.14.0" in n["answer"]


def test_a_module_of_megatron_lms_pre_core_tree(raised_0192):
    # megatron.optimizer is Megatron-LM's old path (verl-project/verl#82): megatron-core has
    # megatron.core.optimizer in every indexed release.
    text = raised_0192["pre_core_module"]
    assert text == "ModuleNotFoundError: No module named 'megatron.optimizer'", text
    n = _name(text, "0.19.2")
    assert n["key"] == n["successor"] == "megatron.core.optimizer"
    assert n["releases"] == _history("megatron.core.optimizer")["releases"]
    assert "megatron.optimizer is in no indexed release" in n["answer"] and not n["in_your_release"]


def test_a_removed_config_field_passed_to_a_downstream_subclass(raised_0192):
    # NVIDIA-NeMo/RL#1118: a provider config saved by an older run sets a field Megatron removed.
    text = raised_0192["provider_removed_field"]
    assert text == ("TypeError: Qwen3MoEModelProvider.__init__() got an unexpected keyword argument "
                    "'pipeline_model_parallel_split_rank'"), text
    n = _name(text, "0.19.2")
    h = _history("ModelParallelConfig.pipeline_model_parallel_split_rank")
    assert n["key"] == h["name"] and n["releases"] == h["releases"] and not n["in_your_release"]
    assert "is not Megatron's" in n["answer"] and "removed in 0.14.0" in n["answer"]
    # A keyword your release still has explains nothing: no answer.
    assert triage.match_log("TypeError: Foo.__init__() got an unexpected keyword argument 'num_layers'\n")["names"] == []


def test_a_parameter_megatron_passes_to_a_spec_module(raised_0192):
    text = raised_0192["spec_module_new_kwarg"]
    assert text == "TypeError: ErnieMultiTypeMoE.__init__() got an unexpected keyword argument 'is_mtp_layer'", text
    # What the answer rests on: 0.19.2's TransformerLayer passes it to the mlp submodule it builds.
    import sysconfig

    src = Path(sysconfig.get_paths()["purelib"]) / "megatron" / "core" / "transformer" / "transformer_layer.py"
    assert "is_mtp_layer=self.is_mtp_layer," in src.read_text(encoding="utf-8")
    n = _name(text, "0.19.2")
    h = _history("MoELayer")
    assert n["key"] == "megatron.core.transformer.moe.moe_layer:BaseMoELayer" and not n["callee_is_megatron"]
    assert "added is_mtp_layer" in [e["detail"] for e in h["events"] if e["version"] == "0.17.1"][0]
    assert "added in 0.17.0 to" in n["answer"] and "MoELayer" in n["answer"] and "your release" not in n["answer"]
    # A release before the parameter existed: nothing Megatron passes explains it.
    assert triage.match_log(text + "\n", megatron_version="0.16")["names"] == []
    # A keyword no Megatron class gained: no answer.
    assert triage.match_log("TypeError: Foo.__init__() got an unexpected keyword argument 'zzz_unknown'\n")["names"] == []


def test_a_name_message_wrapped_onto_the_next_line():
    # ms-swift PR #9814 as pasted: the module on a line of its own.
    text = "ImportError: cannot import name 'tensor_a2a_cp2hp' from\n'megatron.core.ssm.gated_delta_net'\n"
    n = triage.match_log(text, megatron_version="0.16")["names"][0]
    h = _history("megatron.core.ssm.gated_delta_net:tensor_a2a_cp2hp")
    assert n["key"] == h["name"] and n["releases"] == h["releases"] and not n["in_your_release"]
    assert "added in 0.18.0" in n["answer"]
    # A next line that is a message of its own is not read as the rest of this one.
    other = "RuntimeError: boom\nImportError: cannot import name 'tensor_a2a_cp2hp' from 'megatron.core.ssm.gated_delta_net'\n"
    lines = [x["matched_line"] for x in triage.match_log(other, megatron_version="0.16")["names"]]
    assert lines == ["ImportError: cannot import name 'tensor_a2a_cp2hp' from 'megatron.core.ssm.gated_delta_net'"], lines


def test_a_plain_word_keyword_needs_build_module_to_be_megatrons():
    # 'name' is a constructor parameter Megatron added in 0.18.0, and any library's keyword too.
    plain = "TypeError: Foo.__init__() got an unexpected keyword argument 'name'\n"
    assert triage.match_log(plain)["names"] == []
    built = "TypeError: Foo.__init__() got an unexpected keyword argument 'name' when instantiating Foo\n"
    n = triage.match_log(built)["names"][0]
    assert "added in 0.18.0" in n["answer"] and not n["callee_is_megatron"]


def test_a_keyword_megatron_passes_to_a_method_of_another_class(raised_0192):
    text = raised_0192["sibling_method_kwarg"]
    assert text == ("TypeError: _BaseDataParallel.finish_grad_sync() got an unexpected keyword argument "
                    "'force_all_reduce'"), text
    # What the answer rests on: 0.19.2 calls every model chunk's finish_grad_sync with the keyword.
    import sysconfig

    src = Path(sysconfig.get_paths()["purelib"]) / "megatron" / "core" / "distributed" / "finalize_model_grads.py"
    assert "model_chunk.finish_grad_sync(force_all_reduce=force_all_reduce)" in src.read_text(encoding="utf-8")
    n = _name(text, "0.19.2")
    h = _history("DistributedDataParallel.finish_grad_sync")
    assert n["key"] == h["name"] and not n["callee_is_megatron"] and n["parameter"] == "force_all_reduce"
    added = [e for e in h["events"] if "added force_all_reduce" in (e["detail"] or "")][0]
    assert f"(from {added.get('since') or added['version']})" in n["answer"]
    assert "DistributedDataParallel.finish_grad_sync" in n["answer"] and "your release" not in n["answer"]
    # Before any Megatron finish_grad_sync took it, nothing Megatron passes explains it.
    assert triage.match_log(text + "\n", megatron_version="0.15")["names"] == []
    # A plain method name (forward) is any module's: no answer, though Megatron's forwards take the keyword.
    plain = "TypeError: Foo.forward() got an unexpected keyword argument 'packed_seq_params'\n"
    assert triage.match_log(plain)["names"] == []


def _parse_args_error(argv: list[str]) -> str:
    """What Megatron-LM's own parse_args (the installed wheel's megatron/training) prints last."""
    code = ("import sys; sys.argv = %r\n"
            "from megatron.training.arguments import parse_args\nparse_args()\n") % (["pretrain_gpt.py", *argv],)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/",
                       env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert r.returncode == 2, r.stderr[-1500:]
    return r.stderr.strip().splitlines()[-1]


def test_a_flag_a_later_release_renamed_is_answered_with_its_history():
    line = _parse_args_error(["--use-custom-fsdp", "--tensor-model-parallel-size", "2"])
    assert line == "pretrain_gpt.py: error: unrecognized arguments: --use-custom-fsdp", line
    n = _name(line, "0.19.2")
    h = _history("--use-custom-fsdp")
    assert n["key"] == h["name"] == "--use-custom-fsdp" and n["releases"] == h["releases"]
    renamed = [e for e in h["events"] if e["change"] == "renamed"][0]
    assert f"renamed in {renamed['since'] or renamed['version']} -> {renamed['successor']}" in n["answer"]
    assert not n["in_your_release"]


def test_a_flag_your_release_defines_points_at_the_parser_not_the_release():
    n = _name("train.py: error: unrecognized arguments: --foo 1 --tensor-model-parallel-size 2", "0.19.2")
    assert n["key"] == "--tensor-model-parallel-size" and "is not Megatron-LM's parse_args" in n["answer"]
    assert n["in_your_release"] and "pip show megatron-core" not in n["answer"]
    # No Megatron-LM flag among them: nothing to say.
    assert triage.match_log("train.py: error: unrecognized arguments: --foo 1\n")["names"] == []

"""Catalogue statements that are facts about Megatron's source, checked against that source.

Each test reads the release the statement names (the installed 0.19.2, or an older tag through
tests/upstream_sources.py) and the entry's own text, so a wrong count, a missing function or a
version off by one fails here: DP-05/CS-01 (where Core reads CUDA_DEVICE_MAX_CONNECTIONS),
HANG-04 (which groups get distributed_timeout_minutes), MOE-04 (what its cause can explain),
MOE-05 (when the MoE bias check arrived) and TP-08 (every function that raises its message).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import upstream_sources as up  # noqa: E402
from source_checks import checks_in_source  # noqa: E402
from test_troubleshooting import ENTRIES, SITE  # noqa: E402

BY_ID = {e.id: e for e in ENTRIES}
CORE = SITE / "megatron" / "core"
FIELD_REPORTS = Path(__file__).resolve().parent / "data" / "troubleshooting" / "field_reports.json"
INSTALLED = "installed"


def _source(ref: str, path: str) -> str:
    """``path`` at a git tag, or in the installed package for INSTALLED."""
    if ref == INSTALLED:
        return (SITE / path).read_text(encoding="utf-8")
    try:
        src = up.source_at(ref, path)
    except up.Unavailable as exc:
        pytest.skip(f"{ref}:{path} not readable here: {exc}")
    assert src is not None, f"{path} does not exist at {ref}"
    return src


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# --------------------------------------------------------------------------- DP-05 / CS-01

ENV = "CUDA_DEVICE_MAX_CONNECTIONS"


def _reads_env(node: ast.AST, name: str) -> bool:
    """``os.environ[name]``, ``os.environ.get(name)``, ``os.getenv(name)`` or ``name in os.environ``."""
    def is_name(n):
        return isinstance(n, ast.Constant) and n.value == name

    def is_environ(n):
        return isinstance(n, ast.Attribute) and n.attr == "environ"

    if isinstance(node, ast.Subscript) and is_environ(node.value) and is_name(node.slice):
        return True
    if isinstance(node, ast.Call) and node.args and is_name(node.args[0]):
        f = node.func
        return isinstance(f, ast.Attribute) and (
            (f.attr == "get" and is_environ(f.value)) or f.attr == "getenv")
    if isinstance(node, ast.Compare) and is_name(node.left):
        return any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) and any(
            is_environ(c) for c in node.comparators)
    return False


def env_read_sites(root: Path, name: str) -> set[tuple[str, str]]:
    """(file relative to ``megatron/``, enclosing function) of every read of environment variable ``name``."""
    sites = set()
    for path in sorted(root.rglob("*.py")):
        src = path.read_text(encoding="utf-8", errors="replace")
        if name not in src:
            continue
        tree = ast.parse(src)
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(_reads_env(n, name) for n in ast.walk(fn)):
                    sites.add((path.relative_to(root.parent).as_posix(), fn.name))
    return sites


def test_core_reads_cuda_device_max_connections_in_two_places():
    sites = env_read_sites(CORE, ENV)
    assert sites == {("core/tensor_parallel/layers.py", "linear_with_grad_accumulation_and_async_allreduce"),
                     ("core/parallel_state.py", "initialize_model_parallel")}, sites
    words = {1: "one", 2: "two", 3: "three", 4: "four"}[len(sites)]
    for entry_id in ("DP-05", "CS-01"):
        body = _flat(BY_ID[entry_id].body)
        assert f"in {words} places only" in body, f"{entry_id} does not say Core reads {ENV} in {words} places"
        for other in {"one", "two", "three", "four"} - {words}:
            assert f"in {other} places" not in body, f"{entry_id} still says {other} places"
        assert "tensor_parallel/layers.py" in body and ("UCC" in body), entry_id


def test_env_read_scan_finds_every_form():
    src = ("import os\n"
           "def a():\n    return os.environ.get('X_VAR')\n"
           "def b():\n    return os.environ['X_VAR']\n"
           "def c():\n    return 'X_VAR' in os.environ\n"
           "def d():\n    return os.getenv('X_VAR')\n"
           "def e():\n    return 'X_VAR is only named here'\n")
    tree = ast.parse(src)
    found = {fn.name for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
             and any(_reads_env(n, "X_VAR") for n in ast.walk(fn))}
    assert found == {"a", "b", "c", "d"}


# --------------------------------------------------------------------------- HANG-04

# Groups created without timeout=..., by release (group_desc; '*' where it is an f-string).
UNTIMED = {
    "core_v0.12.3": {"HIERARCHICAL_CONTEXT_PARALLEL_GROUP_L*", "EXPERT_MODEL_PARALLEL_GROUP",
                     "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    "core_v0.13.1": {"EXPERT_MODEL_PARALLEL_GROUP", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    "core_v0.14.0": {"EXPERT_MODEL_PARALLEL_GROUP", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    "core_v0.15.3": {"EXPERT_MODEL_PARALLEL_GROUP", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    "core_v0.16.1": {"HYBRID_DP_CP_GROUP_*", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    "core_v0.17.1": {"HYBRID_DP_CP_GROUP_*", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    "core_v0.18.2": {"HYBRID_DP_CP_GROUP_*", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
    INSTALLED: {"HYBRID_DP_CP_GROUP_*", "EXPERT_DATA_PARALLEL_GROUP_GLOO"},
}
GROUP_CALLS = ("create_group", "new_group")


def _desc(node: ast.AST | None) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in node.values)
    return "?"


def untimed_groups(src: str) -> set[str]:
    """group_desc of every create_group/new_group call in parallel_state that passes no timeout."""
    out = set()
    for fn in ast.walk(ast.parse(src)):
        if not isinstance(fn, ast.FunctionDef) or fn.name == "create_group":
            continue  # create_group itself forwards the timeout it was given
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            name = getattr(call.func, "id", None) or getattr(call.func, "attr", None)
            if name not in GROUP_CALLS:
                continue
            kws = {k.arg: k.value for k in call.keywords}
            if "timeout" in kws or len(call.args) >= 2:  # create_group(ranks, timeout, ...)
                continue
            out.add(_desc(kws.get("group_desc")))
    return out


@pytest.mark.parametrize("ref", sorted(UNTIMED))
def test_groups_created_without_distributed_timeout(ref):
    got = untimed_groups(_source(ref, "megatron/core/parallel_state.py"))
    assert got == UNTIMED[ref], f"{ref}: untimed groups {sorted(got)}, table says {sorted(UNTIMED[ref])}"


def test_hang04_names_every_untimed_group_and_torch_defaults():
    body = _flat(BY_ID["HANG-04"].body)
    names = set().union(*UNTIMED.values())
    for name in names:
        shown = name.replace("_L*", "_L<level>").replace("_*", "_<n>")
        assert shown in body, f"HANG-04 does not name {shown}"
    assert "not to every group" in body
    from datetime import timedelta

    import torch.distributed.distributed_c10d as c10d
    gloo = c10d._get_default_timeout(c10d.Backend.GLOO)
    nccl = c10d._get_default_timeout(c10d.Backend.NCCL)
    assert (gloo, nccl) == (timedelta(minutes=30), timedelta(minutes=10))
    assert "30 minutes for gloo, 10 minutes for NCCL" in body


def test_untimed_scan_on_a_fixture():
    src = ("def create_group(ranks=None, timeout=None, group_desc=None):\n    return new_group(ranks)\n"
           "def f(t):\n"
           "    create_group([0], timeout=t, group_desc='A')\n"
           "    create_group([0], t, group_desc='B')\n"
           "    create_group([0], group_desc='C')\n"
           "    create_group([0], group_desc=f'D_{t}')\n")
    assert untimed_groups(src) == {"C", "D_*"}


def test_hang04_field_report_finding_names_the_exceptions():
    reports = json.loads(FIELD_REPORTS.read_text(encoding="utf-8"))["reports"]
    finding = next(r["finding"] for r in reports if r["link"].endswith("Megatron-LM/pull/723"))
    assert "every group it creates except" in finding and "gloo" in finding and "hybrid" in finding


# --------------------------------------------------------------------------- MOE-04

def _expert_grid_expr(src: str) -> str:
    m = re.search(r"expert_tensor_model_pipeline_parallel_size = \(([^)]*)\)", src)
    assert m, "expert grid formula not found"
    return re.sub(r"#[^\n]*", "", m.group(1))


def _product(expr: str, sizes: dict[str, int]) -> int:
    """Value of a product of names (``a * b * c``), the only form the expert-grid formula takes."""
    node = ast.parse(" ".join(expr.split()), mode="eval").body

    def value(n):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            return value(n.left) * value(n.right)
        if isinstance(n, ast.Name):
            return sizes[n.id]
        raise ValueError(f"unexpected term {ast.unparse(n)}")
    return value(node)


def test_moe04_cause_cannot_explain_the_tp1_etp1_report():
    """NVIDIA-NeMo/Speech#14838: recipe tp1_pp2_ep2_etp1, message 'decoder world_size (4) ... (8)' (0.13 wording)."""
    src = _source("core_v0.13.1", "megatron/core/parallel_state.py")
    expr = _expert_grid_expr(src)
    assert "decoder world_size ({decoder_world_size}) is not divisible by" in src
    recipe = {"expert_tensor_parallel_size": 1, "expert_model_parallel_size": 2,
              "pipeline_model_parallel_size": 2, "tensor_model_parallel_size": 1}
    grid = _product(expr, recipe)  # the release's own formula on the recipe's sizes
    reported = 8
    assert grid != reported, "the recipe's sizes reproduce the report; MOE-04's note would be wrong"
    body = _flat(BY_ID["MOE-04"].body)
    assert "NVIDIA-NeMo/Speech#14838" in body and f"= {grid}" in body
    assert "not the ETP default" in body and "were not the recipe's" in body


def test_moe04_field_report_finding_is_not_the_etp_default():
    reports = json.loads(FIELD_REPORTS.read_text(encoding="utf-8"))["reports"]
    finding = next(r["finding"] for r in reports if r["link"].endswith("Speech/issues/14838"))
    assert "not the ETP-defaults-to-TP case" in finding


# --------------------------------------------------------------------------- MOE-05

CONFIG = "megatron/core/transformer/transformer_config.py"
OLD_MOE_BIAS = "Bias is not supported for MoE"
# Every check that reads add_bias_linear in 0.12.0's megatron/core: (file, function, message).
BIAS_CHECKS_0120 = {
    ("megatron/core/transformer/mlp.py", "MLP.forward", ""),
    ("megatron/core/transformer/moe/experts.py", "GroupedMLP.__init__",
     "bias not supported in Grouped GEMM yet, please set '--disable-bias-linear' instead."),
    ("megatron/core/transformer/moe/experts.py", "TEGroupedMLP.forward.bias_act_func", ""),
    ("megatron/core/transformer/moe/shared_experts.py", "SharedExpertMLP.__init__",
     "bias is not supported in the shared experts, "),
    ("megatron/core/transformer/moe/shared_experts.py", "SharedExpertMLP.linear_fc1_forward_and_act", ""),
    ("megatron/core/transformer/transformer_config.py", "TransformerConfig.__post_init__",
     "When bias_activation_fusion is True, gated_linear_unit is False, and activation function is gelu, add_bias_linear must also be True."),
}


@pytest.mark.parametrize("ref,present", [("core_v0.12.0", False), ("core_v0.12.1", True), ("core_v0.14.0", True),
                                         ("core_v0.15.0", False)])
def test_moe_bias_config_check_arrived_in_0121(ref, present):
    assert (OLD_MOE_BIAS in _source(ref, CONFIG)) == present, ref


def test_0120_checks_on_add_bias_linear_are_the_ones_moe05_names():
    try:
        files = [f for f in up.files_at("core_v0.12.0", "megatron/core/") if f.endswith(".py")]
    except up.Unavailable as exc:
        pytest.skip(f"core_v0.12.0 file list not readable here: {exc}")
    found = set()
    for f in files:
        for c in checks_in_source(up.source_at("core_v0.12.0", f) or "", f):
            if "add_bias_linear" in c.reads:
                found.add((c.file, c.function, c.message))
    assert found == BIAS_CHECKS_0120, sorted(found ^ BIAS_CHECKS_0120)
    assert not any(OLD_MOE_BIAS in m for _, _, m in found)
    body = _flat(BY_ID["MOE-05"].body)
    assert "0.12.1–0.14" in body and "0.12.0 has no config check" in body
    # The module-level refusals a 0.12.0 user meets instead of a config error.
    for _, function, message in found:
        if function in ("GroupedMLP.__init__", "SharedExpertMLP.__init__"):
            assert message.rstrip(", ") in body, f"MOE-05 does not quote {message!r}"


# --------------------------------------------------------------------------- TP-08

def test_tp08_names_every_function_that_raises_its_message():
    path = "megatron/core/tensor_parallel/mappings.py"
    text = BY_ID["TP-08"].text.split(": ", 1)[1]
    raisers = {c.function for c in checks_in_source(_source(INSTALLED, path), path) if c.message == text}
    assert raisers == {"_split_along_first_dim", "_reduce_scatter_along_first_dim"}, raisers
    raised_in = BY_ID["TP-08"].bullet("Raised in")
    for fn in raisers:
        assert f"`{fn}`" in raised_in, f"TP-08's Raised in omits {fn}"


# --------------------------------------------------------------------------- HANG-02 / RT-07 / HANG-06

P2P = "megatron/core/pipeline_parallel/p2p_communication.py"


def _method_source(src: str, cls: str, name: str) -> str:
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return ast.get_source_segment(src, item)
    raise AssertionError(f"no {cls}.{name}")


def test_hang02_shape_exchange_ignores_batch_p2p_comm():
    """0.19.2: _communicate picks _p2p_ops when batch_p2p_comm=False; _communicate_shapes never reads it."""
    src = _source(INSTALLED, P2P)
    shapes = _method_source(src, "P2PCommunicator", "_communicate_shapes")
    comm = _method_source(src, "P2PCommunicator", "_communicate")
    assert "batch_p2p_comm" not in shapes and "batch_isend_irecv" in shapes
    assert "config.batch_p2p_comm" in comm and "_p2p_ops" in comm
    flat = _flat(BY_ID["HANG-02"].body)
    assert "whatever `batch_p2p_comm` says" in flat and "https://github.com/NVIDIA/Megatron-LM/pull/5271" in flat


def test_rt07_layers_copy_the_config_field_they_fuse_on():
    """The linear layers take gradient_accumulation_fusion from the config (what RT-07 tells users to print)."""
    src = _source(INSTALLED, "megatron/core/tensor_parallel/layers.py")
    assert src.count("self.gradient_accumulation_fusion = config.gradient_accumulation_fusion") == 2
    te = _source(INSTALLED, "megatron/core/extensions/transformer_engine.py")
    assert "fuse_wgrad_accumulation=self.config.gradient_accumulation_fusion" in _flat(te)
    assert "model[0].config.gradient_accumulation_fusion" in BY_ID["RT-07"].body


@pytest.mark.parametrize("ref", ["core_v0.12.3", "core_v0.15.3", INSTALLED])
def test_hang06_destroy_model_parallel_destroys_only_gloo_groups(ref):
    src = _source(ref, "megatron/core/parallel_state.py")
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "destroy_model_parallel")
    destroyed = [
        ast.unparse(c.args[0]) for c in ast.walk(fn)
        if isinstance(c, ast.Call) and ast.unparse(c.func).endswith("destroy_process_group") and c.args
    ]
    assert destroyed and all(name.endswith("_GLOO") for name in destroyed), destroyed


# --------------------------------------------------------------------------- TE-03

def _offload_branches(src: str) -> list[tuple[str, bool]]:
    """(TE version gate, passes retain_pinned_cpu_buffers) per branch of get_cpu_offload_context."""
    tree = ast.parse(src)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_cpu_offload_context")
    out, node = [], next(n for n in fn.body if isinstance(n, ast.If))
    while isinstance(node, ast.If):
        gate = ast.literal_eval(node.test.args[0])
        out.append((gate, "retain_pinned_cpu_buffers=" in ast.unparse(node.body[0])))
        node = node.orelse[0] if node.orelse else None
    return out


@pytest.mark.parametrize("ref,first", [("core_v0.17.1", ("2.5.0", True)), ("core_v0.18.2", ("2.10.0", True)),
                                       (INSTALLED, ("2.10.0", True))])
def test_te03_retain_pinned_cpu_buffers_gate(ref, first):
    branches = _offload_branches(_source(ref, "megatron/core/extensions/transformer_engine.py"))
    assert branches[0] == first, branches
    if ref != "core_v0.17.1":
        assert ("2.5.0", False) in branches, branches
    assert "core_v0.17.1 passes `retain_pinned_cpu_buffers=`" in _flat(BY_ID["TE-03"].body)


# --------------------------------------------------------------------------- INST-01

def _requires_python(pyproject: str) -> str | None:
    m = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject, re.M)
    return m.group(1) if m else None


@pytest.mark.parametrize("ref,expected", [("core_v0.12.3", None), ("core_v0.13.1", ">=3.10"),
                                          ("core_v0.16.1", ">=3.10"),
                                          ("core_v0.17.0", ">=3.12"), ("core_v0.19.0", ">=3.12")])
def test_inst01_requires_python_per_release(ref, expected):
    try:
        src = up.source_at(ref, "pyproject.toml")
    except up.Unavailable as exc:  # a wheel does not ship pyproject.toml: the mirror is needed
        pytest.skip(f"{ref}:pyproject.toml not readable here: {exc}")
    assert _requires_python(src) == expected
    versions = BY_ID["INST-01"].bullet("Versions")
    name = ref.removeprefix("core_v")
    assert name.split("rc")[0] in versions or ref in versions


def test_inst01_installed_metadata_and_what_needs_312():
    from importlib.metadata import metadata

    assert metadata("megatron-core")["Requires-Python"] == ">=3.12"
    body = _flat(BY_ID["INST-01"].body)
    root = SITE / "megatron"
    files = sorted(root.rglob("*.py"))
    assert f"every one of the {len(files)} `.py` files" in body
    overrides = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.ImportFrom) and n.module == "typing" and any(a.name == "override" for a in n.names)
               for n in ast.walk(tree)):
            overrides.append(path.relative_to(SITE).as_posix())
    assert overrides == ["megatron/training/models/gpt.py", "megatron/training/models/hybrid.py"]
    assert all(f"`{f}`" in body for f in overrides)


def _python_311() -> str | None:
    import shutil
    import subprocess

    for cand in ("python3.11", "python3.10", "python3"):
        exe = shutil.which(cand)
        if exe:
            out = subprocess.run([exe, "-c", "import sys; print(sys.version_info[:2] < (3, 12))"],
                                 capture_output=True, text=True)
            if out.stdout.strip() == "True":
                return exe
    return None


def test_inst01_installed_source_compiles_before_312():
    import subprocess

    exe = _python_311()
    if exe is None:
        pytest.skip("no Python older than 3.12 on PATH")
    code = ("import pathlib, sys\nbad = []\n"
            "for p in pathlib.Path(sys.argv[1]).rglob('*.py'):\n"
            "    try: compile(p.read_text(encoding='utf-8'), str(p), 'exec')\n"
            "    except SyntaxError as e: bad.append(f'{p}:{e.lineno}')\n"
            "print(len(bad)); print(*bad[:5], sep='\\n')\n"
            "from typing import override\n")
    out = subprocess.run([exe, "-c", code, str(SITE / "megatron")], capture_output=True, text=True, timeout=300)
    assert out.stdout.split("\n", 1)[0] == "0", out.stdout
    assert "cannot import name 'override' from 'typing'" in out.stderr
    assert "cannot import name 'override' from 'typing'" in BY_ID["INST-01"].body


# --------------------------------------------------------------------------- CKPT-04

CKPT04_MESSAGES = (
    "Unexpected keys (not found in the checkpoint) encountered in the provided sharded state dict.",
    "Some keys found in the checkpoint are missing in the provided sharded state dict.",
)


@pytest.mark.parametrize("ref", ["core_v0.12.3", "core_v0.15.3", INSTALLED])
def test_ckpt04_megatron_key_reports_and_strictness(ref):
    src = _flat(_source(ref, "megatron/core/dist_checkpointing/validation.py"))
    for text in CKPT04_MESSAGES:
        assert text in src, (ref, text)
        assert text in _flat(BY_ID["CKPT-04"].body)
    tree = ast.parse(_source(ref, "megatron/core/dist_checkpointing/validation.py"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "StrictHandling")
    values = [ast.literal_eval(s.value) for s in cls.body if isinstance(s, ast.Assign)]
    assert len(values) == 8 and "assume_ok_unexpected" in values and "log_all" in values, values
    assert "`StrictHandling` (8 values)" in BY_ID["CKPT-04"].body


def test_ckpt04_flag_default_and_planner():
    from megatron.training.config.training_config import CheckpointConfig

    default = next(f.default for f in __import__("dataclasses").fields(CheckpointConfig)
                   if f.name == "dist_ckpt_strictness")
    assert default == "assume_ok_unexpected"
    strat = _flat(_source(INSTALLED, "megatron/core/dist_checkpointing/strategies/torch.py"))
    assert "from model not in state dict" in strat
    body = _flat(BY_ID["CKPT-04"].body)
    assert "default `assume_ok_unexpected`" in body and "from model not in state dict" in body


# --------------------------------------------------------------------------- DEP-09 / CKPT-05

DEP09_SITES = {"megatron/core/dist_checkpointing/exchange_utils.py", "megatron/core/dist_checkpointing/validation.py",
               "megatron/core/dist_checkpointing/mapping.py"}


def _np_product_files(ref: str) -> set[str]:
    files = up.files_at(ref, "megatron/") if ref != INSTALLED else [
        p.relative_to(SITE).as_posix() for p in (SITE / "megatron").rglob("*.py")]
    out = set()
    for f in files:
        if f.endswith(".py") and "np.product(" in (_source(ref, f) or ""):
            out.add(f)
    return out


@pytest.mark.parametrize("ref,expected", [("core_v0.13.1", DEP09_SITES), ("core_v0.15.3", DEP09_SITES),
                                          ("core_v0.16.1", set()), (INSTALLED, set())])
def test_dep09_np_product_call_sites(ref, expected):
    try:
        assert _np_product_files(ref) == expected
    except up.Unavailable as exc:
        pytest.skip(f"{ref} not readable here: {exc}")
    body = BY_ID["DEP-09"].body
    assert all(f"`{Path(f).name}`" in body for f in DEP09_SITES)


def test_dep09_numpy_message_is_the_installed_numpys():
    import numpy as np

    with pytest.raises(AttributeError) as info:
        np.product  # noqa: B018 - the removed alias
    assert str(info.value) == "module 'numpy' has no attribute 'product'"
    assert f"installed NumPy {np.__version__}" in BY_ID["DEP-09"].body


@pytest.mark.parametrize("ref,present", [("core_v0.12.3", True), ("core_v0.15.3", True), ("core_v0.16.1", False),
                                         (INSTALLED, False)])
def test_ckpt05_mcore_data_access(ref, present):
    src = _flat(_source(ref, "megatron/core/dist_checkpointing/strategies/torch.py"))
    assert ("ckpt_metadata.mcore_data[" in src) == present
    if ref == INSTALLED:
        assert "getattr(metadata, 'mcore_data', {})" in src


# --------------------------------------------------------------------------- RT-10

def _checker_gib(flags: list[str]) -> float:
    import json
    import subprocess

    script = Path(__file__).resolve().parent.parent / "scripts" / "check_parallel_layout.py"
    out = subprocess.run([sys.executable, str(script), *flags, "--json"], capture_output=True, text=True, timeout=120)
    return round(json.loads(out.stdout)["memory"]["total_bytes_per_gpu"] / 2**30, 2)


def test_rt10_memory_numbers_are_the_checkers():
    """The Fix paragraph's command, run as written, and each flag it adds: the GiB it states."""
    body = _flat(BY_ID["RT-10"].body)
    m = re.search(r"With `(--world-size[^`]+)`: ([\d.]+) GiB; with `(--use-distributed-optimizer)` ([\d.]+); "
                  r"plus `(--sequence-parallel)` ([\d.]+); plus `([^`]+)` ([\d.]+),", body)
    assert m, "RT-10's worked example is not where the test reads it"
    base = m.group(1).split()
    steps = [(base, m.group(2))]
    flags = list(base)
    for extra, gib in ((m.group(3), m.group(4)), (m.group(5), m.group(6)), (m.group(7), m.group(8))):
        flags = flags + extra.split()
        steps.append((flags, gib))
    for step_flags, gib in steps:
        assert _checker_gib(step_flags) == float(gib), (step_flags, gib)
    selective = base + ["--use-distributed-optimizer", "--sequence-parallel", "--recompute-activations"]
    assert abs(_checker_gib(selective) - float(m.group(6))) < 0.1  # "saves almost nothing"


# --------------------------------------------------------------------------- MOE-15

@pytest.mark.parametrize("ref,present", [("core_v0.15.3", False), ("core_v0.16.1", True), (INSTALLED, True)])
def test_moe15_router_replay_releases(ref, present):
    try:
        replay = up.source_at(ref, "megatron/core/transformer/moe/router_replay.py") if ref != INSTALLED else \
            _source(INSTALLED, "megatron/core/transformer/moe/router_replay.py")
    except up.Unavailable as exc:
        pytest.skip(f"{ref} not readable here: {exc}")
    assert (replay is not None) == present
    config = _source(ref, "megatron/core/transformer/transformer_config.py")
    assert ("moe_enable_routing_replay" in config) == present
    body = _flat(BY_ID["MOE-15"].body)
    assert "exist from core_v0.16.1 (absent in core_v0.12.3 through 0.15.3)" in body


def test_moe15_counts_come_from_the_boolean_routing_map():
    utils = _flat(_source(INSTALLED, "megatron/core/transformer/moe/moe_utils.py"))
    assert "scatter(1, top_indices, 1).bool()" in utils
    dispatcher = _flat(_source(INSTALLED, "megatron/core/transformer/moe/token_dispatcher.py"))
    assert "routing_map.sum(dim=0)" in dispatcher


# --------------------------------------------------------------------------- INST-02

@pytest.mark.parametrize("ref,path,line", [
    ("core_v0.11.0", "requirements/pytorch_24.10/requirements.txt", 'nvidia-resiliency-ext; platform_machine == "x86_64"'),
    ("core_v0.14.0", "pyproject.toml", '"nvidia-resiliency-ext>=0.4.0a0,<0.5.0",'),
    ("core_v0.16.1", "pyproject.toml", '"nvidia-resiliency-ext",'),
    ("core_v0.19.0", "pyproject.toml", '"nvidia-resiliency-ext==0.6.0",'),
])
def test_inst02_where_megatron_asks_for_nvidia_resiliency_ext(ref, path, line):
    repo = up.mirror()  # pyproject.toml and requirements/ are in no wheel: the git tags are needed
    if repo is None:
        pytest.skip("the Megatron-LM git mirror is not here")
    src = up.mirror_source_at(repo, ref, path)
    assert src is not None and line in src, (ref, path)
    assert line.strip('",').replace('"', "").split(";")[0] in BY_ID["INST-02"].bullet("Versions")


def test_inst02_only_the_dev_extra_and_core_imports_without_it():
    import importlib.util
    from importlib.metadata import requires

    reqs = [r for r in requires("megatron-core") if r.startswith("nvidia-resiliency-ext")]
    assert reqs == ['nvidia-resiliency-ext==0.6.0; extra == "dev"'], reqs
    assert importlib.util.find_spec("nvidia_resiliency_ext") is None
    import megatron.core.dist_checkpointing.strategies.torch  # noqa: F401 - imports without it


# --------------------------------------------------------------------------- RT-11

MTP = "megatron/core/transformer/multi_token_prediction.py"
MTP_POSITIONAL = "*args, *kwargs.values()"
# The call of 0.14-0.17's MultiTokenPredictionLayer.forward, in its order (packed_seq_params is 10th from 0).
MTP_CALL_KWARGS = ("hidden_states", "decoder_input", "attention_mask", "context", "context_mask", "rotary_pos_emb",
                   "rotary_pos_cos", "rotary_pos_sin", "attention_bias", "inference_params", "packed_seq_params",
                   "sequence_len_offset")
# Runs MultiTokenPredictionLayer._checkpointed_forward of the release installed in the child, on CPU:
# the CUDA RNG copy is stubbed, everything else is Megatron's own code.
MTP_CHILD = """
import inspect, types, torch
from megatron.core.tensor_parallel import random as tr
from megatron.core.transformer.multi_token_prediction import MultiTokenPredictionLayer
from megatron.core.packed_seq_params import PackedSeqParams
tr._get_all_rng_states = lambda: None
tr._get_cuda_rng_state = lambda *a, **k: None
tr.get_cuda_rng_tracker = lambda *a, **k: types.SimpleNamespace(get_states=lambda: {})
cfg = types.SimpleNamespace(fp8=None, fp4=None, recompute_method="uniform", recompute_num_layers=1,
                            distribute_saved_activations=False)
layer = types.SimpleNamespace(config=cfg, _proj_and_transformer_layer=lambda **kw: kw["hidden_states"] * 2)
x = torch.ones(2, 1, 4, requires_grad=True)
kw = {k: None for k in %r}
kw.update(hidden_states=x, decoder_input=x, packed_seq_params=PackedSeqParams())
f = MultiTokenPredictionLayer._checkpointed_forward
try:
    if "forward_func" in inspect.signature(f).parameters:  # 0.14-0.17
        f(layer, lambda *a: a[0] * 2, **kw)
    else:
        f(layer, **kw)
    print("no error")
except TypeError as e:
    print(type(e).__name__ + ": " + str(e))
"""


@pytest.mark.parametrize("ref,positional", [("core_v0.13.1", None), ("core_v0.14.0", True), ("core_v0.15.3", True),
                                            ("core_v0.16.1", True), ("core_v0.17.1", True), ("core_v0.18.0", False),
                                            (INSTALLED, False)])
def test_rt11_mtp_recompute_passes_keyword_values_positionally(ref, positional):
    src = _source(ref, MTP)
    if positional is None:  # no MTP recompute path yet
        assert "_checkpointed_forward" not in src
        return
    assert (MTP_POSITIONAL in src) == positional
    call = src[src.index("hidden_states = self._checkpointed_forward("):]
    assert "packed_seq_params=packed_seq_params" in call[:800]
    assert "ctx.save_for_backward(*args)" in _source(ref, "megatron/core/tensor_parallel/random.py")
    if positional:
        assert "recompute_num_layers must be 1 for MTP recompute" in src and "is not supported for MTP yet" in src


def _mtp_child(python) -> str:
    import subprocess

    r = subprocess.run([str(python), "-c", MTP_CHILD % (MTP_CALL_KWARGS,)], capture_output=True, text=True,
                       timeout=300, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.strip().splitlines()[-1]


def test_rt11_message_is_megatrons_mtp_path_on_0161_and_gone_in_0192():
    import old_envs

    body = _flat(BY_ID["RT-11"].body)
    assert _mtp_child(sys.executable) == "no error"
    assert "the same call runs without error on the installed 0.19.2" in body
    python, why = old_envs.python_or_reason("0.16.1")
    if python is None:
        pytest.skip(why)
    got = _mtp_child(python)
    want = BY_ID["RT-11"].message_fences[0][1].strip().replace("<n>", str(MTP_CALL_KWARGS.index("packed_seq_params")))
    assert got == want, got
    assert "10 with the call of 0.14-0.17" in body


# --------------------------------------------------------------------------- CKPT-06

ASYNC = "megatron/core/dist_checkpointing/strategies/async_utils.py"
PAC_CHILD = ("from megatron.core.dist_checkpointing.strategies.async_utils import PersistentAsyncCaller\n"
             "c = PersistentAsyncCaller()\ndel c\nprint('after del')\n")


@pytest.mark.parametrize("ref,eager", [("core_v0.12.3", True), ("core_v0.14.0", True), ("core_v0.16.1", True),
                                       ("core_v0.17.0", False), ("core_v0.19.0", False), (INSTALLED, False)])
def test_ckpt06_close_logs_the_rank_eagerly(ref, eager):
    src = _source(ref, ASYNC)
    close = src[src.index("class PersistentAsyncCaller"):]
    close = close[close.index("    def close("):]
    close = close[: close.index("    def __del__")]
    assert ('f"PersistentAsyncCaller: {torch.distributed.get_rank()}, Destroying Async Caller"' in close) == eager
    if not eager:
        assert "{safe_get_rank()}, Destroying Async Caller" in close


def _del_without_group(python) -> tuple[str, str]:
    import subprocess

    r = subprocess.run([str(python), "-c", PAC_CHILD], capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode == 0 and "after del" in r.stdout, r.stderr[-2000:]
    return r.stdout, r.stderr


@pytest.mark.parametrize("release", ["0.13.1", "0.16.1"])
def test_ckpt06_old_release_prints_the_ignored_exception(release):
    import old_envs

    python, why = old_envs.python_or_reason(release)
    if python is None:
        pytest.skip(why)
    _, err = _del_without_group(python)
    head = BY_ID["CKPT-06"].message_fences[0][1].strip().split("<address>")[0]
    assert head + "0x" in err, err[-1500:]
    assert err.rstrip().endswith("ValueError: Default process group has not been initialized, please make sure "
                                 "to call init_process_group."), err[-500:]
    assert "megatron-core 0.13.1 and 0.16.1" in _flat(BY_ID["CKPT-06"].body)


def test_ckpt06_installed_release_closes_without_a_group():
    _, err = _del_without_group(sys.executable)
    assert "Exception ignored" not in err and "Default process group" not in err, err[-1500:]

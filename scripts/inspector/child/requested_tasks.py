"""Child tasks run only on request: NVML GPU query (no nvidia-smi), --tiny-model (torch and
megatron.core, imported inside the task), --check-references (scripts/reference_facts.py)."""
import os
import socket
import sys

from inspector.child.protocol import describe, emit, stage


# ---------------------------------------------------------------- NVML (no CUDA context)
def task_nvml(params):
    import ctypes
    stage("load libnvidia-ml")
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError as exc:
        emit("status", "not_installed")
        emit("reason", "NVML library not found: " + describe(exc))
        return
    if lib.nvmlInit_v2() != 0:
        emit("status", "error")
        emit("reason", "nvmlInit_v2 failed")
        return
    try:
        emit("devices", _nvml_devices(lib, ctypes))
        buf = ctypes.create_string_buffer(96)
        if lib.nvmlSystemGetDriverVersion(buf, 96) == 0:
            emit("driver", buf.value.decode())
        emit("status", "available")
    finally:
        lib.nvmlShutdown()


def _nvml_devices(lib, ctypes):
    class Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]
    count = ctypes.c_uint()
    if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
        return []
    devices = []
    for i in range(count.value):
        handle = ctypes.c_void_p()
        if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
            continue
        name = ctypes.create_string_buffer(96)
        lib.nvmlDeviceGetName(handle, name, 96)
        mem, major, minor = Memory(), ctypes.c_int(), ctypes.c_int()
        lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(mem))
        cc = None
        if lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major),
                                                  ctypes.byref(minor)) == 0:
            cc = "%d.%d" % (major.value, minor.value)
        devices.append({"index": i, "name": name.value.decode(), "compute_capability": cc,
                        "memory_total_mib": int(mem.total // (1 << 20))})
    return devices


# ---------------------------------------------------------------- --tiny-model
TINY = {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 128,
        "max_sequence_length": 32}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def task_tiny_model(params):
    stage("import torch")
    import torch
    import torch.distributed as dist
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(_free_port())
    stage("init gloo process group (world size 1)")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        _build_and_count(torch, params)
    finally:
        stage("tear down")
        try:
            from megatron.core import parallel_state
            parallel_state.destroy_model_parallel()
        finally:
            dist.destroy_process_group()


def _build_and_count(torch, params):
    stage("import megatron.core")
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.transformer.transformer_config import TransformerConfig
    stage("initialize_model_parallel(1, 1)")
    parallel_state.initialize_model_parallel(1, 1)
    stage("build GPTModel")
    config = TransformerConfig(num_layers=TINY["num_layers"], hidden_size=TINY["hidden_size"],
                               num_attention_heads=TINY["num_attention_heads"],
                               use_cpu_initialization=True)
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=TINY["vocab_size"],
                     max_sequence_length=TINY["max_sequence_length"])
    children = {name: sum(p.numel() for p in mod.parameters())
                for name, mod in model.named_children()}
    emit("config", dict(TINY, layer_spec="get_gpt_layer_local_spec()"))
    emit("parameters", {"total": sum(p.numel() for p in model.parameters()),
                        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
                        "by_child": children})
    emit("status", "available")
    if params.get("cuda") and torch.cuda.is_available():
        _cuda_forward(torch, model)


def _cuda_forward(torch, model):
    stage("forward pass on cuda:0")
    try:
        from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
        model_parallel_cuda_manual_seed(1234)
        model = model.cuda()
        tokens = torch.randint(0, TINY["vocab_size"], (2, 16), device="cuda")
        position_ids = torch.arange(16, device="cuda").unsqueeze(0).expand(2, -1)
        mask = torch.ones(1, 1, 16, 16, dtype=torch.bool, device="cuda").tril().logical_not()
        with torch.no_grad():
            logits = model(tokens, position_ids, mask)
        emit("cuda_forward", {"status": "available", "output_shape": list(logits.shape),
                              "finite": bool(torch.isfinite(logits).all().item())})
    except BaseException as exc:
        emit("cuda_forward", {"status": "error", "reason": describe(exc)})


# ---------------------------------------------------------------- --check-references
def task_references(params):
    stage("import reference_facts")
    sys.path.insert(0, params["scripts_dir"])
    import reference_facts
    stage("extract_facts")
    facts = reference_facts.extract_facts(params["paths"])
    stage("check_facts")
    results = reference_facts.check_facts(facts)
    emit("results", [_plain(r) for r in results])
    emit("fact_count", len(facts))


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses
        return _plain(dataclasses.asdict(value))
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


TASKS = {"nvml": task_nvml, "tiny_model": task_tiny_model, "references": task_references}

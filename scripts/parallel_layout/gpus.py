"""GPU specifications for ``--gpu NAME``: peak dense FLOP/s per precision, HBM, links.

One record per GPU as NVIDIA publishes it (dense, i.e. without 2:4 sparsity; a system's total divided
by its GPU count where only the system is published).  HBM capacities are the marketed "GB", which
are binary gigabytes (nvidia-smi shows 81,559 MiB on an H100 80GB): ``memory_budget_gib`` returns them
as the memory check's budget.  Bandwidths are per GPU and per direction, in bytes/s.

Precision keys: ``bf16``, ``fp8`` (Megatron's --fp8-recipe delayed/tensorwise/blockwise), ``mxfp8``
(--fp8-recipe mxfp8, Blackwell only, runs at the FP8 rate) and ``nvfp4`` (--fp4-recipe nvfp4,
Blackwell only).  A GPU without a precision has no entry for it.
"""

from __future__ import annotations

from .errors import BadInput

T, P = 1e12, 1e15
GB = 1e9

# name: peak dense FLOP/s per precision, HBM (marketed GB), HBM bandwidth, NVLink domain (GPUs that
# reach each other over NVLink), NVLink and inter-node (InfiniBand/Ethernet NIC) bandwidth per GPU.
GPUS = {
    "a100-80g": dict(
        peak={"bf16": 312 * T}, hbm_gb=80, hbm_bandwidth=2.039e12,
        nvlink_domain=8, nvlink_bandwidth=300 * GB, internode_bandwidth=25 * GB,
        source="NVIDIA A100 Tensor Core GPU datasheet (SXM 80GB: BF16 312 TFLOPS dense, 2,039 GB/s, "
               "NVLink 600 GB/s bidirectional); DGX A100 datasheet (8 GPUs, 8x 200 Gb/s HDR for "
               "compute: 25 GB/s per GPU)"),
    "h100": dict(
        peak={"bf16": 989.4 * T, "fp8": 1978.9 * T}, hbm_gb=80, hbm_bandwidth=3.35e12,
        nvlink_domain=8, nvlink_bandwidth=450 * GB, internode_bandwidth=50 * GB,
        source="NVIDIA H100 Tensor Core GPU datasheet (SXM: BF16 1,979 / FP8 3,958 TFLOPS with "
               "sparsity, half dense; 80GB HBM3, 3.35 TB/s; NVLink 900 GB/s bidirectional); DGX H100 "
               "datasheet (8 GPUs, 8x 400 Gb/s ConnectX-7: 50 GB/s per GPU)"),
    "h200": dict(
        peak={"bf16": 989.4 * T, "fp8": 1978.9 * T}, hbm_gb=141, hbm_bandwidth=4.8e12,
        nvlink_domain=8, nvlink_bandwidth=450 * GB, internode_bandwidth=50 * GB,
        source="NVIDIA H200 Tensor Core GPU datasheet (SXM: same tensor FLOPS as H100 SXM; 141GB "
               "HBM3e, 4.8 TB/s; NVLink 900 GB/s); DGX H200 (8 GPUs, 8x 400 Gb/s ConnectX-7)"),
    "b200": dict(
        peak={"bf16": 2.25 * P, "fp8": 4.5 * P, "mxfp8": 4.5 * P, "nvfp4": 9 * P}, hbm_gb=180,
        hbm_bandwidth=8e12, nvlink_domain=8, nvlink_bandwidth=900 * GB,
        internode_bandwidth=50 * GB,
        source="NVIDIA DGX B200 datasheet (8 GPUs: 1,440 GB HBM3e, 64 TB/s, FP4 72 PFLOPS dense, "
               "FP8 72 PFLOPS with sparsity; NVLink 1.8 TB/s per GPU; 8x 400 Gb/s ConnectX-7); "
               "BF16 = FP8 / 2 as in the HGX B200 table"),
    "b300": dict(
        peak={"bf16": 2.25 * P, "fp8": 4.5 * P, "mxfp8": 4.5 * P, "nvfp4": 13.5 * P}, hbm_gb=288,
        hbm_bandwidth=8e12, nvlink_domain=8, nvlink_bandwidth=900 * GB,
        internode_bandwidth=100 * GB,
        source="NVIDIA DGX B300 datasheet (8 Blackwell Ultra GPUs: 2.3 TB HBM3e, FP8 72 PFLOPS "
               "training with sparsity, FP4 108 PFLOPS dense; NVLink 1.8 TB/s per GPU; 8x 800 Gb/s "
               "ConnectX-8)"),
    "gb200": dict(
        peak={"bf16": 2.5 * P, "fp8": 5 * P, "mxfp8": 5 * P, "nvfp4": 10 * P}, hbm_gb=186,
        hbm_bandwidth=8e12, nvlink_domain=72, nvlink_bandwidth=900 * GB,
        internode_bandwidth=50 * GB,
        source="NVIDIA GB200 NVL72 product page (72 GPUs: FP8 720 PFLOPS and BF16 360 PFLOPS with "
               "sparsity, FP4 720 PFLOPS dense; 13.4 TB HBM3e, 576 TB/s; NVLink 130 TB/s); DGX GB200 "
               "(ConnectX-7 400 Gb/s per GPU)"),
    "gb300": dict(
        peak={"bf16": 2.5 * P, "fp8": 5 * P, "mxfp8": 5 * P, "nvfp4": 15 * P}, hbm_gb=288,
        hbm_bandwidth=8e12, nvlink_domain=72, nvlink_bandwidth=900 * GB,
        internode_bandwidth=100 * GB,
        source="NVIDIA GB300 NVL72 product page (72 GPUs: FP4 1,080 PFLOPS dense, FP8 720 PFLOPS "
               "and BF16 360 PFLOPS with sparsity; 20.7 TB HBM3e, 576 TB/s; NVLink 130 TB/s; "
               "ConnectX-8 800 Gb/s per GPU)"),
}

# Megatron-Bridge's system names (tests/data/perf_published.json) -> GPU.
SYSTEMS = {"DGX-A100": "a100-80g", "DGX-H100": "h100", "DGX-H200": "h200", "DGX-B200": "b200",
           "DGX-B300": "b300", "DGX-GB200": "gb200", "DGX-GB300": "gb300"}


def names():
    return tuple(GPUS)


def get(name):
    """The record of ``name`` (case-insensitive), with its name; BadInput when unknown."""
    key = (name or "").strip().lower()
    if key not in GPUS:
        raise BadInput(f"--gpu: unknown GPU {name!r} (known: {', '.join(GPUS)})")
    return dict(GPUS[key], name=key)


def memory_budget_gib(name):
    """HBM capacity of ``name`` in GiB: the memory budget a layout must fit in with --gpu."""
    return float(get(name)["hbm_gb"])


def peak_flops(gpu, precision):
    """Peak dense FLOP/s of ``gpu`` (a record from ``get``) for ``precision``; BadInput when the
    GPU has no such tensor-core format (FP8 on A100, MXFP8/NVFP4 before Blackwell)."""
    if precision not in gpu["peak"]:
        raise BadInput(f"--gpu {gpu['name']} has no {precision} tensor cores "
                       f"(has: {', '.join(gpu['peak'])})")
    return gpu["peak"][precision]

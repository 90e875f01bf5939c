"""Environment variables Megatron-LM asserts on every rank, checked against each rank.

With ``--layout`` the layout says which requirement applies; each rank's own
environment and GPU say whether it holds.  One node without the right export
crashes the whole job at start-up, so a pre-flight names the ranks.

Source: ``validate_args`` in megatron/training/arguments.py, megatron-core 0.19.2
(the assertions run in Megatron-LM's training entry point, not in megatron.core).
Messages are the assertion texts, quoted exactly (upstream grammar included).
"""

from __future__ import annotations

from typing import Callable, Dict, List, NamedTuple, Optional

SOURCE = "megatron/training/arguments.py validate_args (megatron-core 0.19.2)"


class EnvRule(NamedTuple):
    id: str
    applies: Callable[[object], bool]  # on the LayoutInput
    # Only on GPUs whose compute capability major is below this (None: any rank).
    arch_below: Optional[int]
    variable: str
    holds: Callable[[Optional[str]], bool]
    message: str
    when: str


def _tp_or_cp(layout) -> bool:
    return layout.tensor_model_parallel_size > 1 or layout.context_parallel_size > 1


RULES = (
    EnvRule(
        id="tp-cp-cuda-device-max-connections",
        applies=lambda l: _tp_or_cp(l) and not (l.use_torch_fsdp2 or l.use_megatron_fsdp),
        arch_below=10,
        variable="CUDA_DEVICE_MAX_CONNECTIONS",
        holds=lambda value: value == "1",
        message="Using tensor model parallelism or context parallelism require setting the "
        "environment variable CUDA_DEVICE_MAX_CONNECTIONS to 1",
        when="TP > 1 or CP > 1 on GPUs before Blackwell (compute capability < 10), without "
        "FSDP (Megatron-LM only warns instead with --overlap-moe-expert-parallel-comm)",
    ),
    EnvRule(
        id="torch-fsdp2-cuda-device-max-connections",
        applies=lambda l: bool(l.use_torch_fsdp2),
        arch_below=None,
        variable="CUDA_DEVICE_MAX_CONNECTIONS",
        holds=lambda value: value != "1",
        message="FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one",
        when="--use-torch-fsdp2",
    ),
    EnvRule(
        id="megatron-fsdp-cuda-device-max-connections",
        applies=lambda l: bool(l.use_megatron_fsdp),
        arch_below=None,
        variable="CUDA_DEVICE_MAX_CONNECTIONS",
        holds=lambda value: value != "1",
        message="FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.",
        when="--use-megatron-fsdp",
    ),
)
VARIABLES = sorted({rule.variable for rule in RULES})


def rank_arch(post: dict) -> Optional[int]:
    """Compute capability major of the rank's cuda:0, from the probe's nvidia-smi rows."""
    devices = ((post.get("report") or {}).get("gpus") or {}).get("devices") or []
    visible = (post.get("cluster") or {}).get("CUDA_VISIBLE_DEVICES") or ""
    first = visible.split(",")[0].strip()
    chosen = next((d for d in devices if str(d.get("index")) == first), None)
    chosen = chosen or (devices[0] if devices else None)
    try:
        return int(str(chosen["compute_capability"]).split(".")[0])
    except (TypeError, KeyError, ValueError):
        return None


def check(layout, posts: Dict[int, dict]) -> List[dict]:
    """Failed requirements: [{rule, variable, message, when, source, ranks, values}].

    A rule with ``arch_below`` skips ranks whose GPU is unknown (no GPU, or no
    compute capability in the probe): Megatron-LM reads cuda:0 there, so a
    CPU run cannot tell.
    """
    out = []
    for rule in RULES:
        if not rule.applies(layout):
            continue
        failing: Dict[str, Optional[str]] = {}
        for rank, post in sorted(posts.items()):
            if rule.arch_below is not None:
                arch = rank_arch(post)
                if arch is None or arch >= rule.arch_below:
                    continue
            value = (post.get("cluster") or {}).get("env", {}).get(rule.variable)
            if not rule.holds(value):
                failing[str(rank)] = value
        if failing:
            out.append(
                {
                    "rule": rule.id,
                    "variable": rule.variable,
                    "message": rule.message,
                    "when": rule.when,
                    "source": SOURCE,
                    "ranks": [int(r) for r in failing],
                    "values": failing,
                }
            )
    return out

"""Shared by the review tests that build models in the test process."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def cpu_world():
    """A gloo world of size 1 (kept for the process: gloo cannot re-initialize cheaply) with
    model parallel sizes 1 for the duration."""
    import torch
    from megatron.core import parallel_state
    from procutil import free_port
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
                                             rank=0, world_size=1)
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    try:
        yield
    finally:
        parallel_state.destroy_model_parallel()

"""Megatron's initialize_model_parallel run past process-group creation, in one CPU process.

parallel_layout.verify does the same with the installed megatron-core; this runs it in any
release's environment (tests/old_envs.py). A child process of the given release runs the whole
function for a world of the given size with torch.distributed's new_group, get_world_size and
get_rank, and parallel_state.create_hierarchical_groups, stood in for: group creation is the only
thing replaced, every check is Megatron's own.
"""
import json
import subprocess

from procutil import free_port

PROBE = r'''
import json, logging, os, sys, warnings
warnings.simplefilter("ignore"); logging.disable(logging.CRITICAL)
from unittest import mock
import torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
from megatron.core import parallel_state as ps
out = []
for world, kwargs in json.loads(sys.argv[1]):
    with mock.patch.object(ps.torch.distributed, "new_group", lambda *a, **k: object()), \
         mock.patch.object(ps, "create_hierarchical_groups",
                           lambda *a, **k: ([object(), object()], [None, None])), \
         mock.patch.object(ps.torch.distributed, "get_world_size", lambda *a, **k: world), \
         mock.patch.object(ps.torch.distributed, "get_rank", lambda *a, **k: 0):
        try:
            ps.initialize_model_parallel(create_gloo_process_groups=False, **kwargs)
            out.append(None)
        except (AssertionError, RuntimeError) as e:
            out.append(f"{type(e).__name__}: {e}")
    ps.destroy_model_parallel()
print("RESULT " + json.dumps(out))
'''


def initialize_errors(python, cases, timeout=300):
    """For each (world_size, initialize_model_parallel kwargs): None when Megatron accepts it,
    else "AssertionError: <message>" (or RuntimeError)."""
    proc = subprocess.run([str(python), "-c", PROBE, json.dumps(cases), str(free_port())],
                          capture_output=True, text=True, timeout=timeout)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, proc.stderr[-2000:]
    return json.loads(line[len("RESULT "):])


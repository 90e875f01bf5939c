"""Per-rank keys in a TCPStore, read with deadlines.

Why a store and not a collective: ``all_gather_object`` blocks until every
rank arrives and, when one never does, fails everywhere without saying who
is missing.  Here each rank writes ``<phase>/<rank>`` and rank 0 polls for
the keys until a deadline, so it can name the ranks that never wrote.

Only the store server/client come from torch (imported when a Rendezvous is
built); no process group is needed for these phases.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Dict, Iterable, Optional

# Polling interval while waiting for keys: short enough that a 4-rank run on a
# laptop does not wait noticeably, long enough not to load the store.
POLL_S = 0.05
KEY_ROOT = "mcore_inspect"


class Deadline:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.end


class Rendezvous:
    """The job's TCPStore: rank 0 serves it unless torchrun's agent already does."""

    def __init__(self, info, timeout_s: float):
        import torch.distributed as dist

        serve = info.rank == 0 and not info.agent_store
        # wait_for_workers=False: the server must not block on ranks that never come.
        self.raw = dist.TCPStore(
            info.master_addr,
            info.master_port,
            info.world_size,
            serve,
            timeout=timedelta(seconds=timeout_s),
            wait_for_workers=False,
            multi_tenant=True,
        )
        self.store = dist.PrefixStore(f"{KEY_ROOT}/{info.attempt}", self.raw)
        self.rank = info.rank

    def sub_store(self, name: str):
        """A namespaced view, e.g. for init_process_group(store=...)."""
        import torch.distributed as dist

        return dist.PrefixStore(name, self.store)

    def post(self, phase: str, value, rank: Optional[int] = None) -> None:
        key = f"{phase}/{self.rank if rank is None else rank}"
        self.store.set(key, json.dumps(value, default=str))

    def has(self, key: str) -> bool:
        return bool(self.store.check([key]))

    def read(self, key: str):
        return json.loads(self.store.get(key).decode())

    def collect(self, phase: str, ranks: Iterable[int], deadline: Deadline) -> Dict[int, object]:
        """Values posted for ``phase`` by ``ranks`` before the deadline (missing ranks left out)."""
        waiting = set(ranks)
        found: Dict[int, object] = {}
        while True:
            for rank in sorted(waiting):
                key = f"{phase}/{rank}"
                if self.has(key):
                    found[rank] = self.read(key)
                    waiting.discard(rank)
            if not waiting or deadline.passed():
                return found
            time.sleep(POLL_S)

    def wait_for(self, key: str, deadline: Deadline):
        """The value at ``key`` or None if it did not appear before the deadline."""
        while not self.has(key):
            if deadline.passed():
                return None
            time.sleep(POLL_S)
        return self.read(key)

    def count(self, key: str, add: int = 0) -> int:
        return int(self.store.add(key, add))

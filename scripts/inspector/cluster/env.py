"""Where this process sits in the job: rank, world size, node, rendezvous address.

Read from the variables the launcher exports.  torchrun's variables win over
Slurm's because ``srun ... torchrun ...`` sets both and only torchrun's rank
numbering matches the processes that actually run the script.

Standard library only: this runs before torch is imported.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import asdict, dataclass
from typing import Mapping, Optional

# torch's own default rendezvous port (torchrun --master-port default).
DEFAULT_MASTER_PORT = 29500


class LaunchError(ValueError):
    """The environment does not describe a distributed launch."""


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    node_rank: Optional[int]
    local_world_size: Optional[int]
    master_addr: str
    master_port: int
    launcher: str  # "torchrun" or "slurm"
    hostname: str
    # True when torchrun's agent already serves a TCPStore at master_addr:master_port.
    agent_store: bool
    # Distinguishes torchrun restarts so store keys of an earlier attempt are ignored.
    attempt: str

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def node_key(self) -> str:
        """Name of this rank's node: the launcher's node index when known, else the host."""
        if self.node_rank is not None:
            return f"node{self.node_rank}"
        return self.hostname


# Each launcher: which variable holds which field.  Data, not branches, so a
# new launcher (e.g. MPI's OMPI_COMM_WORLD_*) is one more row.
LAUNCHERS = (
    {
        "name": "torchrun",
        "rank": "RANK",
        "world_size": "WORLD_SIZE",
        "local_rank": "LOCAL_RANK",
        "node_rank": "GROUP_RANK",
        "local_world_size": "LOCAL_WORLD_SIZE",
    },
    {
        "name": "slurm",
        "rank": "SLURM_PROCID",
        "world_size": "SLURM_NTASKS",
        "local_rank": "SLURM_LOCALID",
        "node_rank": "SLURM_NODEID",
        "local_world_size": "SLURM_NTASKS_PER_NODE",
    },
)

SLURM_NODELIST_VARS = ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST")


def _int(env: Mapping[str, str], name: str, required: bool) -> Optional[int]:
    raw = env.get(name)
    if raw is None or raw == "":
        if required:
            raise LaunchError(f"{name} is not set")
        return None
    # SLURM_NTASKS_PER_NODE can read "4(x2)" on heterogeneous allocations.
    match = re.fullmatch(r"\s*(-?\d+)(\(x\d+\))?\s*", raw)
    if not match:
        raise LaunchError(f"{name}={raw!r} is not an integer")
    return int(match.group(1))


def first_host(nodelist: str) -> str:
    """First host of a Slurm hostlist: 'gpu[003-010,12],cpu1' -> 'gpu003'."""
    depth = 0
    end = len(nodelist)
    for i, ch in enumerate(nodelist):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            end = i
            break
    item = nodelist[:end].strip()
    match = re.fullmatch(r"([^\[]*)\[([^\]]+)\](.*)", item)
    if not match:
        return item
    prefix, ranges, suffix = match.groups()
    first = ranges.split(",")[0].split("-")[0]
    return f"{prefix}{first}{suffix}"


def _master_addr(env: Mapping[str, str], launcher: str) -> str:
    if env.get("MASTER_ADDR"):
        return env["MASTER_ADDR"]
    if launcher == "slurm":
        for name in SLURM_NODELIST_VARS:
            if env.get(name):
                return first_host(env[name])
    raise LaunchError("MASTER_ADDR is not set (and no Slurm node list to take the first host from)")


def _pick_launcher(env: Mapping[str, str]) -> dict:
    for launcher in LAUNCHERS:
        if env.get(launcher["rank"]) not in (None, "") and env.get(launcher["world_size"]):
            return launcher
    wanted = " or ".join(f"{l['rank']}/{l['world_size']}" for l in LAUNCHERS)
    raise LaunchError(
        f"no rank found in the environment (looked for {wanted}); "
        "start with torchrun or srun"
    )


def from_environment(env: Optional[Mapping[str, str]] = None) -> RankInfo:
    """Build RankInfo from launcher variables; raise LaunchError if incomplete."""
    env = os.environ if env is None else env
    launcher = _pick_launcher(env)
    rank = _int(env, launcher["rank"], True)
    world_size = _int(env, launcher["world_size"], True)
    if world_size < 1 or not 0 <= rank < world_size:
        raise LaunchError(f"rank {rank} is outside world size {world_size}")
    local_rank = _int(env, launcher["local_rank"], False)
    port = _int(env, "MASTER_PORT", False)
    port = DEFAULT_MASTER_PORT if port is None else port
    if not 0 < port < 65536:
        raise LaunchError(f"MASTER_PORT={port} is not a TCP port")
    return RankInfo(
        rank=rank,
        world_size=world_size,
        local_rank=0 if local_rank is None else local_rank,
        node_rank=_int(env, launcher["node_rank"], False),
        local_world_size=_int(env, launcher["local_world_size"], False),
        master_addr=_master_addr(env, launcher["name"]),
        master_port=port,
        launcher=launcher["name"],
        hostname=socket.gethostname(),
        agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True",
        attempt=env.get("TORCHELASTIC_RESTART_COUNT", "0"),
    )


def in_launch(env: Optional[Mapping[str, str]] = None) -> bool:
    try:
        _pick_launcher(os.environ if env is None else env)
    except LaunchError:
        return False
    return True

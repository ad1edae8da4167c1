"""The environment that makes a process a rank of a fixed kolo job, for engines that start the
processes themselves (Ray actors, Spark tasks): what kolorun gives each rank (README "Running
jobs"), computed from the host each process runs on.

Threading: plain functions; free_port and interface_address touch sockets only.
"""

from __future__ import annotations

import fcntl
import os
import random
import secrets
import socket
import struct
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence


@dataclass(frozen=True)
class Place:
    """Where one process runs: `host` groups local ranks (kolo's KOLO_HOSTNAME: an engine's node
    id or name), `address` is where the other ranks reach it (its data port; for rank 0 also
    the controller)."""

    host: str
    address: str


def contiguous_order(places: Sequence[Place]) -> list[int]:
    """Indices of `places` in rank order: the processes of one host next to each other, hosts
    in the order they first appear (so index 0 stays rank 0), as kolorun places ranks."""
    first_seen: dict[str, int] = {}
    for index, place in enumerate(places):
        first_seen.setdefault(place.host, index)
    return sorted(range(len(places)), key=lambda i: (first_seen[places[i].host], i))


def rank_environments(places: Sequence[Place], controller_port: int, store_port: int,
                      secret: str, job_id: str,
                      start_timeout: Optional[float] = None) -> list[dict[str, str]]:
    """Each rank's variables (places in rank order): kolo's identity and controller, and what
    kolorun also exports for Horovod scripts (HOROVOD_RANK, ..., HOROVOD_CROSS_RANK) and for
    torch.distributed's env:// (RANK, ..., MASTER_PORT)."""
    size = len(places)
    by_host: dict[str, list[int]] = {}
    for rank, place in enumerate(places):
        by_host.setdefault(place.host, []).append(rank)
    local_rank = {rank: ranks.index(rank) for ranks in by_host.values() for rank in ranks}
    cross_size: dict[int, int] = {}
    cross_rank: dict[int, int] = {}
    for ranks in by_host.values():  # hosts in the order of their first rank
        for i, rank in enumerate(ranks):
            cross_rank[rank] = cross_size.get(i, 0)
            cross_size[i] = cross_size.get(i, 0) + 1
    controller = places[0].address
    result = []
    for rank, place in enumerate(places):
        local_size = len(by_host[place.host])
        env = {
            "KOLO_RANK": rank, "KOLO_SIZE": size,
            "KOLO_LOCAL_RANK": local_rank[rank], "KOLO_LOCAL_SIZE": local_size,
            "KOLO_CONTROLLER": "%s:%d" % (controller, controller_port),
            "KOLO_SECRET": secret, "KOLO_JOB_ID": job_id,
            "KOLO_HOSTNAME": place.host, "KOLO_DATA_ADDR": place.address,
            "HOROVOD_HOSTNAME": place.host, "HOROVOD_RANK": rank, "HOROVOD_SIZE": size,
            "HOROVOD_LOCAL_RANK": local_rank[rank], "HOROVOD_LOCAL_SIZE": local_size,
            "HOROVOD_CROSS_RANK": cross_rank[rank],
            "HOROVOD_CROSS_SIZE": cross_size[local_rank[rank]],
            "RANK": rank, "WORLD_SIZE": size, "LOCAL_RANK": local_rank[rank],
            "LOCAL_WORLD_SIZE": local_size, "MASTER_ADDR": controller, "MASTER_PORT": store_port,
        }
        if start_timeout is not None:
            env["KOLO_START_TIMEOUT_SECONDS"] = start_timeout
        result.append({name: str(value) for name, value in env.items()})
    return result


# What an earlier job on the same engine process may have left behind and would mislead
# this one (an elastic job's rendezvous in a process now in a fixed job, and the reverse).
STALE_VARIABLES = ("KOLO_ELASTIC_RENDEZVOUS", "KOLO_ELASTIC_WORKER_ID", "HOROVOD_ELASTIC",
                   "KOLO_SECRET_FILE")


def new_secret() -> str:
    """A fresh job secret: 32 random bytes as hex, as kolorun makes."""
    return secrets.token_hex(32)


def new_job_id(engine: str) -> str:
    """A fresh job id naming the engine (bound into every handshake; not secret)."""
    return "%s-%s" % (engine, secrets.token_hex(8))


def free_port(address: str = "") -> int:
    """A TCP port free on this host for a listener on `address`, outside the kernel's ephemeral
    range (as kolorun picks the controller's): a port inside it could be taken by any outgoing
    connection before the controller binds it."""
    low, high = 32768, 60999
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            low, high = (int(p) for p in ports.read().split())
    except (OSError, ValueError):
        pass
    candidates = list(range(20000, low)) if low > 21000 else list(range(high + 1, 65536))
    for _ in range(64):
        port = random.choice(candidates) if candidates else 0
        with socket.socket() as probe:
            try:
                probe.bind((address, port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise RuntimeError("kolo: found no free TCP port for the controller on %s"
                       % (address or socket.gethostname()))


def interface_address(nics: Optional[Iterable[str]]) -> Optional[str]:
    """The IPv4 address of the first of `nics` (network interface names, Horovod's `nics`) this
    host has, or None when `nics` is empty. Raises ValueError when it has none of them."""
    names = sorted(nics or [])
    if not names:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for name in names:
            try:
                packed = fcntl.ioctl(sock.fileno(), 0x8915,  # SIOCGIFADDR
                                     struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue
            return socket.inet_ntoa(packed[20:24])
    raise ValueError("kolo: none of the network interfaces %s has an IPv4 address on %s "
                     "(interfaces here: %s)" % (names, socket.gethostname(),
                                                ", ".join(sorted(os.listdir("/sys/class/net")))))


def current_kolo_rank() -> Optional[int]:
    """The rank of this process's initialized kolo binding (kolo.torch, kolo.tensorflow), or
    None. An elastic job renumbers its ranks, so the engines ask after the function ran."""
    import sys
    for name in ("kolo.torch", "kolo.tensorflow"):
        binding = sys.modules.get(name)
        if binding is not None and binding.is_initialized():
            return int(binding.rank())
    return None

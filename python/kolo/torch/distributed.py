"""kolo as a torch.distributed backend: ``dist.init_process_group("kolo")``.

Importing this module (``import kolo.torch`` does) registers the backend; so does torch itself,
through the ``torch.distributed.backends`` entry point kolo's package declares, when a script
names "kolo" without importing kolo. Then DDP, FSDP, ``torch.distributed``'s collectives and
``dist.new_group`` run on kolo, under torchrun or kolorun (docs/TORCH-DISTRIBUTED.md).

What happens at ``init_process_group("kolo")``:

- kolo's runtime starts (the one kolo.torch's ``hvd.*`` use too; if ``hvd.init()`` already
  started it, that one is used). Under kolorun
  (``KOLO_CONTROLLER`` set) it joins kolorun's job. Otherwise (torchrun, or any other
  ``init_method``) rank 0 picks the controller's port, a fresh job secret and a job id and
  passes them to the other ranks through the store torch gives the backend; torch's store is
  not authenticated, so whoever can reach it can read the secret, as they could join torch's
  own rendezvous.
- ``timeout=`` bounds every wait: the store, kolo's start and deadlines
  (``KOLO_TIMEOUT_SECONDS`` and ``KOLO_START_TIMEOUT_SECONDS`` are capped by it), and every
  ``Work.wait()`` that is given no timeout of its own.
- The process group is a ``KoloProcessGroup``, whose ``new_group`` torch calls on every rank,
  members or not, so that kolo can make the group's process set with every rank of the job.

``destroy_process_group()`` closes the groups; the kolo runtime they started is shut down at
the next ``init_process_group`` (before it starts a new one) or at exit. Shutting it down in
``destroy_process_group`` would make the ranks wait for each other there, rank 0 last (its
controller outlives the others), so rank 0 would close torch's store after the others had
left: their next ``env://`` rendezvous could reach the store that is about to close.
"""

from __future__ import annotations

import os
import random
import secrets
import socket
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Optional

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import _unregister_process_group

from kolo.torch import _C

if TYPE_CHECKING:
    from torch._C._distributed_c10d import Backend as C10dBackend
    from torch.distributed.distributed_c10d import GroupName

__all__ = ["KoloProcessGroup", "register"]

_NAME = "kolo"
_DEVICES = ["cpu", "cuda"]
_started: dict[str, bool] = {"runtime": False}  # whether this module started kolo's running runtime


class _SubgroupSet:
    """A kolo process set a sub-group made, on every rank of the job (members or not), and
    whether this rank, a member, has destroyed the group."""

    def __init__(self, process_set: int, ranks: list[int]) -> None:
        self.process_set = process_set
        self.ranks = ranks
        self.destroyed = False


# The sets kolo's sub-groups made in the running kolo job and not yet removed, in the order every
# rank made them (torch calls new_group on every rank), and how many times new_group has looked
# for destroyed ones (names its allreduce). Main thread (new_group), as torch's group calls.
_subgroup_sets: list[_SubgroupSet] = []
_release_rounds = [0]


class KoloProcessGroup(_C.ProcessGroupBase):
    """A process group on kolo: torch's ProcessGroup with kolo's backend for CPU and CUDA
    tensors, and a ``new_group`` torch calls on every rank (see the module's text). Its base is
    torch's C++ ProcessGroup without the Python-override lookup a subclass of
    ``dist.ProcessGroup`` pays on every collective (python/csrc/c10d/c10d_bindings.cc)."""

    def __init__(self, store: dist.Store, rank: int, size: int, backend: C10dBackend,
                 timeout: timedelta) -> None:
        super().__init__(store, rank, size)
        self._kolo_timeout = timeout
        self._kolo_store = store
        self._kolo_set: Optional[_SubgroupSet] = None  # a sub-group's process set
        for device in _DEVICES:
            self._register_backend(torch.device(device), dist.ProcessGroup.BackendType.CUSTOM,
                                   backend)
        self._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)

    def shutdown(self) -> None:
        """destroy_process_group: closes the group. On the world group of a rank other than 0,
        also waits (at most 5 s) until rank 0 has closed torch's store it hosts: a second
        env:// init_process_group on the same MASTER_PORT could otherwise reach that store,
        which rank 0 is about to close, and fail there (seen at 4 ranks)."""
        super().shutdown()
        if self._kolo_set is not None:
            # Removed, with its shared memory, at the next new_group: a removal needs every
            # rank of the job, and torch destroys a group on its members only.
            self._kolo_set.destroyed = True
        if self.rank() == 0 or self is not dist.distributed_c10d._world.default_pg:
            return
        _wait_for_store_close(self._kolo_store, min(5.0, self._kolo_timeout.total_seconds()))

    def new_group(self, ranks: list[int], timeout: Optional[timedelta] = None,
                  backend: Optional[str] = None, pg_options: Any = None,
                  group_name: Optional[GroupName] = None, group_desc: Optional[str] = None
                  ) -> Optional[dist.ProcessGroup]:
        """Called by ``dist.new_group`` on every rank of the job: returns the new group on
        its members and None on the others. A kolo group gets a kolo process set (made by
        every rank, as kolo requires); another backend's group is made as torch makes it."""
        if group_name is None:  # torch always names the group it asks for
            raise ValueError("kolo: new_group needs the group_name torch gives it")
        ranks = list(ranks)
        c10d = dist.distributed_c10d
        default_store = c10d._world.pg_map[self][1]
        if backend is not None and str(backend).lower() != _NAME:
            return _foreign_group(ranks, timeout or self._kolo_timeout, backend, pg_options,
                                  group_name, group_desc, default_store)
        timeout = _subgroup_timeout(timeout, self._kolo_timeout)
        everyone = ranks == list(range(self.size()))
        subgroup_set = None
        if not everyone:
            _release_destroyed_sets(timeout)
            subgroup_set = _SubgroupSet(
                _C.c10d_add_process_set(ranks, timeout.total_seconds()), ranks)
            _subgroup_sets.append(subgroup_set)
        process_set = subgroup_set.process_set if subgroup_set else 0
        if self.rank() not in ranks:
            return None
        rank = ranks.index(self.rank())
        kolo_backend = _C.c10d_backend(rank, len(ranks), process_set, ranks, group_name,
                                       timeout.total_seconds())
        store = dist.PrefixStore(group_name + "/", default_store)
        group = KoloProcessGroup(store, rank, len(ranks), kolo_backend, timeout)
        group._kolo_set = subgroup_set
        group._set_group_name(group_name)
        group._set_group_desc(group_desc or "undefined")
        return group


def _subgroup_timeout(given: Optional[timedelta], inherited: timedelta) -> timedelta:
    """A kolo sub-group's timeout: new_group's timeout= when the script gave one, else the
    world group's (init_process_group's timeout bounds every wait). torch hands new_group its
    30-minute default when the script gives none, which cannot be told from an explicit 30
    minutes: that value also means "inherit"."""
    if given is None or given == dist.distributed_c10d._get_default_timeout(dist.Backend(_NAME)):
        return inherited
    return given


def _release_destroyed_sets(timeout: timedelta) -> None:
    """Removes the process sets (and their shared memory) of the sub-groups every member
    has destroyed: every rank calls it from new_group, and one allreduce over the job makes
    them agree on which (_C.c10d_release_destroyed_sets)."""
    if not _subgroup_sets:
        return
    _release_rounds[0] += 1
    removed = set(_C.c10d_release_destroyed_sets(
        [s.process_set for s in _subgroup_sets], [int(s.destroyed) for s in _subgroup_sets],
        [len(s.ranks) for s in _subgroup_sets], _release_rounds[0], timeout.total_seconds()))
    _subgroup_sets[:] = [s for s in _subgroup_sets if s.process_set not in removed]


def _foreign_group(ranks: list[int], timeout: timedelta, backend: str, pg_options: Any,
                   group_name: GroupName, group_desc: Optional[str], store: dist.Store
                   ) -> Optional[dist.ProcessGroup]:
    """A sub-group of another backend (e.g. gloo) under a kolo default group: made by torch's
    own helper, whose registration is undone because torch registers the group again once
    new_group returns it."""
    c10d = dist.distributed_c10d
    me = dist.get_rank()
    group, _ = c10d._new_process_group_helper(
        len(ranks), ranks.index(me) if me in ranks else None, ranks, backend, store,
        group_name, backend_options=pg_options, timeout=timeout, group_desc=group_desc)
    if not isinstance(group, dist.ProcessGroup):  # c10d.GroupMember.NON_GROUP_MEMBER
        return None
    _unregister_process_group(group_name)
    tag = "ptd:" + group_name
    if group in c10d._world.tags_to_pg.get(tag, []):
        c10d._world.tags_to_pg[tag].remove(group)
    return group


def _wait_for_store_close(store: dist.Store, seconds: float) -> None:
    """Returns once the TCPStore server behind `store` has closed (or at once for another kind
    of store), at most `seconds` later. Watches a connection of its own that sends nothing,
    which the server closes when it stops, rather than polling through torch's client, which
    logs a warning and a C++ stack trace on every rank when the server goes away."""
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    if not isinstance(store, dist.TCPStore) or seconds <= 0:
        return
    try:
        with socket.create_connection((store.host, store.port), timeout=seconds) as probe:
            probe.settimeout(seconds)
            while probe.recv(4096):  # the server never writes to a client that asked nothing
                pass
    except OSError:  # refused (already closed), reset, or the deadline passed
        pass


def _free_port() -> int:
    """A TCP port for rank 0's controller, outside the kernel's ephemeral range (as kolorun
    picks one): a port inside it could be taken by any outgoing connection before the
    controller binds it."""
    low, high = 32768, 60999
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            low, high = (int(p) for p in ports.read().split())
    except (OSError, ValueError):
        pass
    candidates = [p for p in (range(20000, low) if low > 21000 else range(high + 1, 65536))]
    for _ in range(64):
        port = random.choice(candidates) if candidates else 0
        with socket.socket() as probe:
            try:
                probe.bind(("", port))
            except OSError:
                continue
            return probe.getsockname()[1]
    raise RuntimeError("kolo: init_process_group found no free port for kolo's controller")


def _controller_host(store: dist.Store) -> str:
    """The address the other ranks reach rank 0 at: MASTER_ADDR (env:// and torchrun), else
    the host of torch's TCPStore (tcp://), else this host's name."""
    if os.environ.get("MASTER_ADDR"):
        return os.environ["MASTER_ADDR"]
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    if isinstance(store, dist.TCPStore):
        return store.host
    return socket.gethostname()


def _rendezvous(store: dist.Store, rank: int, size: int) -> tuple[str, str, str]:
    """Rank 0's controller address, a job secret and a job id, through torch's store. Each
    init_process_group is a generation of its own (a store may outlive a process group:
    torchrun's agent store does), counted by the ranks' arrivals."""
    arrival = store.add("kolo/arrivals/%d" % size, 1)
    key = "kolo/job/%d/%d" % (size, (arrival - 1) // size)
    if rank == 0:
        port = int(os.environ.get("KOLO_CONTROLLER_PORT") or _free_port())
        store.set(key, "%s:%d %s torch-%s" % (_controller_host(store), port,
                                             secrets.token_hex(32), secrets.token_hex(8)))
    controller, secret, job_id = store.get(key).decode().split()
    return controller, secret, job_id


def _start_kolo(store: dist.Store, rank: int, size: int, timeout: float) -> None:
    """Starts kolo for the world group, or keeps the runtime kolo.torch.init() started."""
    if _started["runtime"] and _C.is_initialized():
        _C.shutdown()  # the previous process group's: every rank is here, past torch's store
    _started["runtime"] = False
    if not _C.is_initialized():  # a new kolo job starts below: the old one's sets went with it
        _subgroup_sets.clear()
        _release_rounds[0] = 0
    if _C.is_initialized():
        if (_C.rank(), _C.size()) != (rank, size):
            raise RuntimeError(
                "kolo: init_process_group: kolo is already running as rank %d of %d "
                "(kolo.torch.init()), but torch.distributed asks for rank %d of %d"
                % (_C.rank(), _C.size(), rank, size))
        return
    if os.environ.get("KOLO_CONTROLLER"):  # kolorun's job (or one described by hand)
        kolo_rank = os.environ.get("KOLO_RANK")
        if kolo_rank is not None and int(kolo_rank) != rank:
            raise RuntimeError(
                "kolo: init_process_group: KOLO_RANK is %s but torch.distributed's rank is %d "
                "(under kolorun, leave RANK and WORLD_SIZE as kolorun sets them)"
                % (kolo_rank, rank))
        _C.c10d_init(rank, size, "", "", "", timeout)
    else:
        controller, secret, job_id = _rendezvous(store, rank, size)
        _C.c10d_init(rank, size, controller, secret, job_id, timeout)
    _started["runtime"] = True


def _create(options: Any, backend_options: Any) -> KoloProcessGroup:
    """torch's creator for the "kolo" backend (extended API): the default group, or a group
    torch makes itself, which must then be every rank (kolo makes other groups through
    KoloProcessGroup.new_group, on every rank)."""
    rank, size = options.group_rank, options.group_size
    timeout = options.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout))
    ranks = list(options.global_ranks_in_group) or list(range(size))
    if ranks != list(range(size)):
        raise RuntimeError(
            "kolo: a kolo sub-group (ranks %s) needs kolo as the default group's backend: "
            "dist.init_process_group('kolo'), so that every rank takes part in making it"
            % ranks)
    _start_kolo(options.store, rank, size, timeout.total_seconds())
    backend = _C.c10d_backend(rank, size, 0, ranks, options.group_id, timeout.total_seconds())
    return KoloProcessGroup(options.store, rank, size, backend, timeout)


def register() -> None:
    """Registers "kolo" with torch.distributed (idempotent). torch calls it through kolo's
    entry point; importing kolo.torch calls it too."""
    if _NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(_NAME, _create, extended_api=True, devices=_DEVICES)


register()

"""Horovod's process sets (horovod.common.process_sets names and semantics) on kolo's, for any
binding: the binding calls bind() with its native backend, an object with is_initialized(),
rank(), size(), process_set_rank(id), process_set_size(id), process_set_ranks(id),
add_process_set(ranks) -> id and remove_process_set(id) (kolo.torch._C has exactly these;
kolo.tensorflow.basics too), which raise the binding's own errors.

A ProcessSet is a subset of the job's ranks; ops given `process_set=` run among its members
only (kolo::ProcessSetScope around the enqueue, in the native code). Sets are registered
with kolo at init (`init(process_sets=[...])`, the same as KOLO_PROCESS_SETS) or later with
add_process_set, both collective over every rank of the job. Within a set, its members in
ascending order are its ranks 0, 1, ...; broadcast roots and join's last rank stay job ranks.

Threading: add_process_set / remove_process_set are collective and one at a time per process;
the rest may be called from any thread.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, Protocol

    class NativeProcessSets(Protocol):
        """What bind() needs of a binding's native backend (kolo's process set calls)."""

        def is_initialized(self) -> bool: ...
        def rank(self) -> int: ...
        def size(self) -> int: ...
        def process_set_rank(self, process_set: int, /) -> int: ...
        def process_set_size(self, process_set: int, /) -> int: ...
        def process_set_ranks(self, process_set: int, /) -> Sequence[int]: ...
        def add_process_set(self, ranks: list[int], /) -> int: ...
        def remove_process_set(self, process_set: int, /) -> Any: ...


_C: NativeProcessSets = None  # type: ignore[assignment]  # the native backend, set by bind()
_binding = "kolo"  # the package named in messages

_registry_lock = threading.Lock()


def bind(native: NativeProcessSets, binding: str) -> None:
    """Makes `native` the backend of every process set; `binding` ("kolo.tensorflow") names the
    package in messages."""
    global _C, _binding
    _C = native
    _binding = binding


# process set id -> ProcessSet, for the sets kolo has now (not the global one)
_live: dict[int, ProcessSet] = {}


class ProcessSet:
    """A set of job ranks. `ranks` is sorted; `process_set_id` is None until the set is
    registered (init(process_sets=...) or add_process_set) and again after removal."""

    def __init__(self, ranks_or_comm: Sequence[int] | range) -> None:
        """`ranks_or_comm`: the job ranks of the set (a list, tuple or range; an MPI
        communicator is refused with ValueError, as is a rank listed twice)."""
        if not isinstance(ranks_or_comm, (list, tuple, range)):
            raise ValueError("ProcessSet takes a list of ranks (MPI communicators "
                             "are not supported), got %s" % type(ranks_or_comm).__name__)
        ranks = [int(r) for r in ranks_or_comm]
        if len(set(ranks)) != len(ranks):
            raise ValueError("ProcessSet: rank listed twice in %s" % (ranks,))
        self.ranks: list[int] = sorted(ranks)
        self.process_set_id: int | None = None
        self._removed_id: int | None = None  # the id it had before remove_process_set

    def size(self) -> int | None:
        """The number of ranks in the set; None when the set is not registered."""
        if self.process_set_id is None:
            return None
        return _checked(self.process_set_id, _C.process_set_size(self.process_set_id))

    def rank(self) -> int | None:
        """This process's rank within the set; None when the set is not registered. Raises
        ValueError when this process is not a member."""
        if self.process_set_id is None:
            return None
        rank = _C.process_set_rank(self.process_set_id)
        if rank < 0:
            _checked(self.process_set_id, _C.process_set_size(self.process_set_id))
            raise ValueError("rank %d is not in process set %d (ranks %s)"
                             % (_C.rank(), self.process_set_id, self.ranks))
        return rank

    def included(self) -> bool | None:
        """Whether this process is a member; None when the set is not registered."""
        if self.process_set_id is None:
            return None
        _checked(self.process_set_id, _C.process_set_size(self.process_set_id))
        return _C.process_set_rank(self.process_set_id) >= 0

    def __repr__(self) -> str:
        if self.process_set_id == 0:
            return "ProcessSet(process_set_id=0, ranks=%s, global)" % (self.ranks,)
        return "ProcessSet(process_set_id=%s, ranks=%s)" % (self.process_set_id, self.ranks)


def _checked(process_set_id: int, value: int) -> int:
    if value < 0:
        if not _C.is_initialized():
            raise ValueError("kolo has not been initialized; use %s.init()." % _binding)
        raise ValueError("process set %d is unknown or was removed" % process_set_id)
    return value


# The set of every rank of the job (id 0); its ranks are filled in at init.
global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _set_id(process_set: ProcessSet | None) -> int:
    """The kolo id an op runs in: 0 for None or the global set. A removed set passes its old
    id, so that kolo refuses the op with its own message."""
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError("process_set must be a ProcessSet, got %s"
                         % type(process_set).__name__)
    if process_set.process_set_id is not None:
        return process_set.process_set_id
    if process_set._removed_id is not None:
        return process_set._removed_id
    raise ValueError("%s has not been added: use %s.add_process_set() or "
                     "init(process_sets=[...])" % (process_set, _binding))


def _static_spec(process_sets: Iterable[ProcessSet]) -> str:
    """KOLO_PROCESS_SETS's value for init(process_sets=[...])."""
    return ";".join(",".join(str(r) for r in ps.ranks) for ps in process_sets)


def _before_init(process_sets: Iterable[ProcessSet] | str | None) -> list[ProcessSet]:
    """Checks init's process_sets and returns the list of ProcessSets to register (making
    kolo create them at init through KOLO_PROCESS_SETS)."""
    if process_sets is None:
        return []
    if isinstance(process_sets, str):
        if process_sets.lower() != "dynamic":
            raise ValueError("init: process_sets is a list of ProcessSet or 'dynamic', got %r"
                             % process_sets)
        return []  # kolo's sets are always dynamic
    sets = list(process_sets)
    for index, ps in enumerate(sets):
        if not isinstance(ps, ProcessSet):
            raise ValueError("init: process_sets entry %d is not a ProcessSet" % index)
        if ps is global_process_set:
            raise ValueError("init: global_process_set is always there; do not list it")
        if ps.process_set_id is not None:
            raise ValueError("init: process_sets entry %d (%s) is registered already"
                             % (index, ps))
        if any(ps.ranks == other.ranks for other in sets[:index]):
            raise ValueError("init: process_sets entry %d is a duplicate: %s" % (index, ps))
    if not sets:
        return []
    spec = _static_spec(sets)
    existing = os.environ.get("KOLO_PROCESS_SETS")
    if existing is not None and existing.strip() and existing.replace(" ", "") != spec:
        raise ValueError("init: process_sets %s differ from KOLO_PROCESS_SETS=%r; give the "
                         "same sets or only one of the two" % (spec, existing))
    os.environ["KOLO_PROCESS_SETS"] = spec
    return sets


def _after_init(process_sets: list[ProcessSet]) -> None:
    """Registers the sets kolo made at init (KOLO_PROCESS_SETS: ids 1, 2, ...), giving the
    ProcessSets of init(process_sets=...) their ids."""
    global_process_set.ranks = list(range(_C.size()))
    with _registry_lock:
        process_set_id = 1
        while _C.process_set_size(process_set_id) > 0:
            ranks = list(_C.process_set_ranks(process_set_id))
            index = process_set_id - 1
            if index < len(process_sets):
                ps = process_sets[index]
                if ps.ranks != ranks:
                    raise ValueError("init: kolo made process set %d with ranks %s, expected %s"
                                     % (process_set_id, ranks, ps.ranks))
            else:
                ps = ProcessSet(ranks)
            ps.process_set_id = process_set_id
            ps._removed_id = None
            _live[process_set_id] = ps
            process_set_id += 1


def _after_shutdown() -> None:
    """kolo forgot its sets: so do the ProcessSets (ids None, as if never added)."""
    with _registry_lock:
        for ps in _live.values():
            ps.process_set_id = None
            ps._removed_id = None
        _live.clear()


def add_process_set(process_set: ProcessSet | Sequence[int]) -> ProcessSet:
    """Registers a ProcessSet (or a list of ranks) with kolo and returns the ProcessSet.
    Collective: every rank of the job calls it with the same ranks. Raises ValueError for a
    set that is registered already or has the same ranks as one that is."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError("add_process_set: %s is registered already" % (process_set,))
    with _registry_lock:
        same = [ps for ps in _live.values() if ps.ranks == process_set.ranks]
    if same or process_set.ranks == global_process_set.ranks:
        raise ValueError("add_process_set: a process set with ranks %s exists already (%s)"
                         % (process_set.ranks, same[0] if same else global_process_set))
    process_set_id = _C.add_process_set(process_set.ranks)
    with _registry_lock:
        process_set.process_set_id = process_set_id
        process_set._removed_id = None
        _live[process_set_id] = process_set
    return process_set


def remove_process_set(process_set: ProcessSet) -> bool:
    """Removes a registered set from kolo (collective over every rank of the job). Returns
    True when it was removed, False for the global set or a set that is not registered; raises
    KoloError with kolo's message when kolo refuses (an op of the set still in flight)."""
    if not isinstance(process_set, ProcessSet):
        raise ValueError("remove_process_set takes a ProcessSet, got %s"
                         % type(process_set).__name__)
    process_set_id = process_set.process_set_id
    if process_set_id is None or process_set_id == 0:
        return False
    _C.remove_process_set(process_set_id)
    with _registry_lock:
        _live.pop(process_set_id, None)
        process_set.process_set_id = None
        process_set._removed_id = process_set_id
    return True

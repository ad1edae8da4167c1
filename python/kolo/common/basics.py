"""Horovod's init, shutdown, identity and timeline calls (horovod.common.basics.HorovodBasics)
over a binding's native backend: an object with init(), shutdown(), is_initialized(), rank(),
size(), local_rank(), local_size(), cross_rank(), cross_size() (-1 before init),
start_timeline(path, mark_cycles) and stop_timeline() that raises the binding's errors
(kolo.torch._C has these names; so does kolo.tensorflow.basics.Basics).

Threading: init and shutdown are one at a time per process; the rest from any thread.
"""

from __future__ import annotations

import atexit
import warnings
from typing import TYPE_CHECKING

from kolo.common import process_sets as _process_sets
from kolo.common.errors import KoloError

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Iterable, Sequence
    from typing import Protocol

    from kolo.common.process_sets import ProcessSet

    class NativeBasics(Protocol):
        """What HorovodBasics needs of a binding's native backend."""

        def init(self) -> object: ...
        def shutdown(self) -> object: ...
        def is_initialized(self) -> bool: ...
        def rank(self) -> int: ...
        def size(self) -> int: ...
        def local_rank(self) -> int: ...
        def local_size(self) -> int: ...
        def cross_rank(self) -> int: ...
        def cross_size(self) -> int: ...
        def start_timeline(self, path: str, mark_cycles: bool, /) -> object: ...
        def stop_timeline(self) -> object: ...


class HorovodBasics:
    """Horovod's init, shutdown, identity and timeline calls of one binding (its module-level
    functions are this object's bound methods, as in Horovod)."""

    def __init__(self, native: NativeBasics, binding: str,
                 after_shutdown: Callable[[], None] | None = None) -> None:
        """`native`: the binding's native backend; `binding` ("kolo.tensorflow") names the
        package in messages; `after_shutdown`: what the binding forgets when kolo shuts down
        (its ops in flight, its numbering of unnamed ops), so that init() after shutdown() (an
        elastic job's reset) starts as a fresh process does. Registers a shutdown at exit."""
        self._native = native
        self._binding = binding
        self._after_shutdown = after_shutdown
        self._static_sets: list[ProcessSet] = []  # init's process_sets, made again by re-init
        atexit.register(self._shutdown_at_exit)

    def init(self, comm: Sequence[int] | None = None,
             process_sets: Iterable[ProcessSet] | str | None = None) -> None:
        """Joins the job the environment describes (kolorun, torchrun, mpirun or SLURM
        variables). A second call while initialized does nothing, as in Horovod.
        `process_sets`: a list of ProcessSet made at init with ids 1, 2, ... (every rank passes
        the same), or "dynamic". `comm`: a list of ranks is accepted when it names every rank
        of the job; an MPI communicator is refused (kolo does not use MPI). Raises ValueError for
        a bad `comm` or `process_sets`, the binding's error when kolo cannot start."""
        if comm is not None and not isinstance(comm, (list, tuple)):
            raise ValueError("%s.init: comm must be a list of ranks; kolo does not use MPI, so "
                             "an MPI communicator cannot be passed (kolo reads the job from the "
                             "environment)" % self._binding)
        if self._native.is_initialized():
            return
        if process_sets is None and self._static_sets:
            # init() again after shutdown() (an elastic reset): kolo makes the sets of
            # KOLO_PROCESS_SETS again, and they are the same ProcessSet objects.
            static_sets = self._static_sets
        else:
            static_sets = _process_sets._before_init(process_sets)
        self._native.init()
        if comm is not None and sorted(int(r) for r in comm) != list(range(self._native.size())):
            # Every rank sees the same comm, so every rank leaves the job here.
            job_size = self._native.size()
            self._native.shutdown()
            raise ValueError(
                "%s.init(comm=%s): kolo's job is every rank the launcher started (0..%d); it "
                "cannot run on a subset of them. Start only those ranks (kolorun -np %d), or "
                "init() every rank and use hvd.add_process_set(%s) and process_set= on the ops"
                % (self._binding, list(comm), job_size - 1, len(comm), list(comm)))
        _process_sets._after_init(static_sets)
        self._static_sets = static_sets

    def shutdown(self) -> None:
        """Leaves the job (waits for every rank to shut down too). No-op when not
        initialized. init() may be called again after it (a new job, or an elastic job's
        next generation)."""
        if self._native.is_initialized():
            try:
                self._native.shutdown()
            finally:
                _process_sets._after_shutdown()
                if self._after_shutdown is not None:
                    self._after_shutdown()

    def _shutdown_at_exit(self) -> None:
        try:
            self.shutdown()
        except KoloError as error:
            warnings.warn("%s: shutdown at exit failed: %s" % (self._binding, error))

    def is_initialized(self) -> bool:
        """Whether init() ran (and shutdown() did not since)."""
        return self._native.is_initialized()

    def _identity(self, value: int) -> int:
        if value < 0:
            raise ValueError("kolo has not been initialized; use %s.init()." % self._binding)
        return value

    def rank(self) -> int:
        """This process's rank in the job, 0..size()-1. Raises ValueError before init()."""
        return self._identity(self._native.rank())

    def size(self) -> int:
        """The number of ranks in the job. Raises ValueError before init()."""
        return self._identity(self._native.size())

    def local_rank(self) -> int:
        """This process's rank among the ranks on its host. Raises ValueError before
        init()."""
        return self._identity(self._native.local_rank())

    def local_size(self) -> int:
        """The number of ranks on this host. Raises ValueError before init()."""
        return self._identity(self._native.local_size())

    def cross_rank(self) -> int:
        """This host's index among the hosts (this process's rank among the ranks with its
        local rank). Raises ValueError before init()."""
        return self._identity(self._native.cross_rank())

    def cross_size(self) -> int:
        """The number of hosts with a rank of this local rank. Raises ValueError before
        init()."""
        return self._identity(self._native.cross_size())

    def is_homogeneous(self) -> bool:
        """Whether every host runs the same number of ranks. Raises ValueError before
        init()."""
        return self.size() == self.local_size() * self.cross_size()

    def start_timeline(self, file_path: str | os.PathLike[str],
                       mark_cycles: bool = False) -> None:
        """Starts writing this rank's timeline (kolo inserts .rank<r> before the extension)."""
        self._native.start_timeline(str(file_path), bool(mark_cycles))

    def stop_timeline(self) -> None:
        """Stops writing the timeline start_timeline() started."""
        self._native.stop_timeline()

"""Horovod's init, shutdown, identity and timeline calls (horovod.common.basics.HorovodBasics)
over a binding's native backend: an object with init(), shutdown(), is_initialized(), rank(),
size(), local_rank(), local_size(), cross_rank(), cross_size() (-1 before init),
start_timeline(path, mark_cycles) and stop_timeline() that raises the binding's errors
(kolo.torch._C has these names; so does kolo.tensorflow.basics.Basics).

Threading: init and shutdown are one at a time per process; the rest from any thread.
"""

import atexit
import warnings

from kolo.common import process_sets as _process_sets
from kolo.common.errors import KoloError


class HorovodBasics:
    def __init__(self, native, binding):
        """`binding` ("kolo.tensorflow") names the package in messages."""
        self._native = native
        self._binding = binding
        atexit.register(self._shutdown_at_exit)

    def init(self, comm=None, process_sets=None):
        """Joins the job the environment describes (kolorun, torchrun, mpirun or SLURM
        variables). A second call while initialized does nothing, as in Horovod.
        `process_sets`: a list of ProcessSet made at init with ids 1, 2, ... (every rank passes
        the same), or "dynamic". `comm`: a list of ranks is accepted when it names every rank
        of the job; an MPI communicator is refused (kolo does not use MPI)."""
        if comm is not None and not isinstance(comm, (list, tuple)):
            raise ValueError("%s.init: comm must be a list of ranks; kolo does not use MPI, so "
                             "an MPI communicator cannot be passed (kolo reads the job from the "
                             "environment)" % self._binding)
        if self._native.is_initialized():
            return
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

    def shutdown(self):
        """Leaves the job (waits for every rank to shut down too). No-op when not
        initialized."""
        if self._native.is_initialized():
            try:
                self._native.shutdown()
            finally:
                _process_sets._after_shutdown()

    def _shutdown_at_exit(self):
        try:
            self.shutdown()
        except KoloError as error:
            warnings.warn("%s: shutdown at exit failed: %s" % (self._binding, error))

    def is_initialized(self):
        return self._native.is_initialized()

    def _identity(self, value):
        if value < 0:
            raise ValueError("kolo has not been initialized; use %s.init()." % self._binding)
        return value

    def rank(self):
        return self._identity(self._native.rank())

    def size(self):
        return self._identity(self._native.size())

    def local_rank(self):
        return self._identity(self._native.local_rank())

    def local_size(self):
        return self._identity(self._native.local_size())

    def cross_rank(self):
        return self._identity(self._native.cross_rank())

    def cross_size(self):
        return self._identity(self._native.cross_size())

    def is_homogeneous(self):
        """Whether every host runs the same number of ranks."""
        return self.size() == self.local_size() * self.cross_size()

    def start_timeline(self, file_path, mark_cycles=False):
        """Starts writing this rank's timeline (kolo inserts .rank<r> before the extension)."""
        self._native.start_timeline(str(file_path), bool(mark_cycles))

    def stop_timeline(self):
        self._native.stop_timeline()

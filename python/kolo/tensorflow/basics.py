"""kolo's default runtime for kolo.tensorflow, outside TensorFlow's ops: init, shutdown, identity,
process sets, the timeline and kolorun's elastic driver, through ctypes on the C functions of
the op library (python/tensorflow/basics.cc). ctypes releases the GIL around each call. A failed
call raises kolo.common.errors' KoloError, or HorovodInternalError when the job failed.

The names are those of kolo.torch's native module, so that kolo.common.process_sets and
kolo.common.elastic work on either."""

from __future__ import annotations

import ctypes

from typing import TYPE_CHECKING

from kolo.common.errors import from_status

if TYPE_CHECKING:
    from collections.abc import Iterable


class Basics:
    """The op library's C functions, with kolo's failures raised as exceptions."""

    def __init__(self, library_path: str) -> None:
        """Opens the op library at `library_path` and declares its C functions' types."""
        lib = ctypes.CDLL(library_path)
        self._lib = lib
        for name in ("last_error", "status_name", "version"):
            getattr(lib, "kolo_tf_" + name).restype = ctypes.c_char_p
        lib.kolo_tf_status_name.argtypes = [ctypes.c_int]
        lib.kolo_tf_add_process_set.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                                ctypes.POINTER(ctypes.c_int)]
        lib.kolo_tf_process_set_ranks.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                                  ctypes.c_int]
        lib.kolo_tf_start_timeline.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.kolo_tf_elastic_poll.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                             ctypes.POINTER(ctypes.c_int)]
        lib.kolo_tf_elastic_generation.restype = ctypes.c_int64

    def _check(self, code: int) -> None:
        if code != 0:
            name = self._lib.kolo_tf_status_name(code).decode()
            raise from_status(name, self._lib.kolo_tf_last_error().decode())

    def version(self) -> str:
        """kolo's version."""
        return self._lib.kolo_tf_version().decode()

    def init(self) -> None:
        """Joins the job the environment describes (blocks until every rank is there)."""
        self._check(self._lib.kolo_tf_init())

    def shutdown(self) -> None:
        """Leaves the job (every op in flight completes first)."""
        self._check(self._lib.kolo_tf_shutdown())

    def is_initialized(self) -> bool:
        """Whether init() succeeded and shutdown() has not been called since."""
        return bool(self._lib.kolo_tf_is_initialized())

    def rank(self) -> int:
        """This process's rank in the job (-1 before init)."""
        return self._lib.kolo_tf_rank()

    def size(self) -> int:
        """The number of ranks (-1 before init)."""
        return self._lib.kolo_tf_size()

    def local_rank(self) -> int:
        """The rank among this host's ranks (-1 before init)."""
        return self._lib.kolo_tf_local_rank()

    def local_size(self) -> int:
        """The number of ranks on this host (-1 before init)."""
        return self._lib.kolo_tf_local_size()

    def cross_rank(self) -> int:
        """The rank of this host among the hosts (-1 before init)."""
        return self._lib.kolo_tf_cross_rank()

    def cross_size(self) -> int:
        """The number of hosts (-1 before init)."""
        return self._lib.kolo_tf_cross_size()

    def add_process_set(self, ranks: Iterable[int]) -> int:
        """Adds a process set of `ranks` (every rank calls it) and returns its id."""
        ranks = list(ranks)
        array = (ctypes.c_int * len(ranks))(*ranks)
        process_set_id = ctypes.c_int(-1)
        self._check(self._lib.kolo_tf_add_process_set(array, len(ranks),
                                                      ctypes.byref(process_set_id)))
        return process_set_id.value

    def remove_process_set(self, process_set_id: int) -> None:
        """Removes the process set (every rank calls it)."""
        self._check(self._lib.kolo_tf_remove_process_set(int(process_set_id)))

    def process_set_rank(self, process_set_id: int) -> int:
        """This rank's rank in the set (negative when not a member)."""
        return self._lib.kolo_tf_process_set_rank(int(process_set_id))

    def process_set_size(self, process_set_id: int) -> int:
        """The set's size (negative for an unknown set)."""
        return self._lib.kolo_tf_process_set_size(int(process_set_id))

    def process_set_ranks(self, process_set_id: int) -> list[int]:
        """The job ranks of the set's members, in the set's rank order."""
        capacity = max(self.size(), 0)
        array = (ctypes.c_int * max(capacity, 1))()
        count = self._lib.kolo_tf_process_set_ranks(int(process_set_id), array, capacity)
        return list(array[:min(count, capacity)])

    def start_timeline(self, path: str, mark_cycles: bool) -> None:
        """Starts writing the timeline to `path`."""
        self._check(self._lib.kolo_tf_start_timeline(str(path).encode(), int(bool(mark_cycles))))

    def stop_timeline(self) -> None:
        """Stops writing the timeline."""
        self._check(self._lib.kolo_tf_stop_timeline())

    # kolo.common.elastic's NativeElastic (kolo/elastic.h), as kolo.torch._C's.
    def elastic_enabled(self) -> bool:
        """Whether this is an elastic job (kolorun's elastic driver runs it)."""
        return bool(self._lib.kolo_tf_elastic_enabled())

    def elastic_poll(self, since: int) -> tuple[int, int]:
        """(timestamp, kinds): what changed in the job's hosts after `since`."""
        timestamp, kinds = ctypes.c_int64(0), ctypes.c_int(0)
        self._check(self._lib.kolo_tf_elastic_poll(int(since), ctypes.byref(timestamp),
                                                   ctypes.byref(kinds)))
        return timestamp.value, kinds.value

    def elastic_generation(self) -> int:
        """The elastic job's generation (how many times it re-formed)."""
        return self._lib.kolo_tf_elastic_generation()

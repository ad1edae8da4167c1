"""kolo's default runtime for kolo.tensorflow, outside TensorFlow's ops: init, shutdown, identity,
process sets, the timeline and kolorun's elastic driver, through ctypes on the C functions of
the op library (python/tensorflow/basics.cc). ctypes releases the GIL around each call. A failed
call raises kolo.common.errors' KoloError, or HorovodInternalError when the job failed.

The names are those of kolo.torch's native module, so that kolo.common.process_sets and
kolo.common.elastic work on either."""

import ctypes

from kolo.common.errors import from_status


class Basics:
    """The op library's C functions, with kolo's failures raised as exceptions."""

    def __init__(self, library_path):
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

    def _check(self, code):
        if code != 0:
            name = self._lib.kolo_tf_status_name(code).decode()
            raise from_status(name, self._lib.kolo_tf_last_error().decode())

    def version(self):
        return self._lib.kolo_tf_version().decode()

    def init(self):
        self._check(self._lib.kolo_tf_init())

    def shutdown(self):
        self._check(self._lib.kolo_tf_shutdown())

    def is_initialized(self):
        return bool(self._lib.kolo_tf_is_initialized())

    def rank(self):
        return self._lib.kolo_tf_rank()

    def size(self):
        return self._lib.kolo_tf_size()

    def local_rank(self):
        return self._lib.kolo_tf_local_rank()

    def local_size(self):
        return self._lib.kolo_tf_local_size()

    def cross_rank(self):
        return self._lib.kolo_tf_cross_rank()

    def cross_size(self):
        return self._lib.kolo_tf_cross_size()

    def add_process_set(self, ranks):
        ranks = list(ranks)
        array = (ctypes.c_int * len(ranks))(*ranks)
        process_set_id = ctypes.c_int(-1)
        self._check(self._lib.kolo_tf_add_process_set(array, len(ranks),
                                                      ctypes.byref(process_set_id)))
        return process_set_id.value

    def remove_process_set(self, process_set_id):
        self._check(self._lib.kolo_tf_remove_process_set(int(process_set_id)))

    def process_set_rank(self, process_set_id):
        return self._lib.kolo_tf_process_set_rank(int(process_set_id))

    def process_set_size(self, process_set_id):
        return self._lib.kolo_tf_process_set_size(int(process_set_id))

    def process_set_ranks(self, process_set_id):
        capacity = max(self.size(), 0)
        array = (ctypes.c_int * max(capacity, 1))()
        count = self._lib.kolo_tf_process_set_ranks(int(process_set_id), array, capacity)
        return list(array[:min(count, capacity)])

    def start_timeline(self, path, mark_cycles):
        self._check(self._lib.kolo_tf_start_timeline(str(path).encode(), int(bool(mark_cycles))))

    def stop_timeline(self):
        self._check(self._lib.kolo_tf_stop_timeline())

    # kolo.common.elastic's NativeElastic (kolo/elastic.h), as kolo.torch._C's.
    def elastic_enabled(self):
        return bool(self._lib.kolo_tf_elastic_enabled())

    def elastic_poll(self, since):
        """(timestamp, kinds): what changed in the job's hosts after `since`."""
        timestamp, kinds = ctypes.c_int64(0), ctypes.c_int(0)
        self._check(self._lib.kolo_tf_elastic_poll(int(since), ctypes.byref(timestamp),
                                                   ctypes.byref(kinds)))
        return timestamp.value, kinds.value

    def elastic_generation(self):
        return self._lib.kolo_tf_elastic_generation()

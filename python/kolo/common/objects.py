"""The byte framing of Horovod's broadcast_object and allgather_object, without a framework:
objects are pickled (the standard library's pickle; Horovod uses cloudpickle, one more
dependency), sent as uint8 tensors by the binding, and unpickled here."""

import io
import pickle

import numpy as np


def dumps(obj):
    """The object's bytes as a uint8 numpy array."""
    buffer = io.BytesIO()
    pickle.dump(obj, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def loads(array):
    """The object a uint8 array from dumps() holds."""
    return pickle.loads(np.asarray(array, dtype=np.uint8).tobytes())


def split_gathered(gathered, sizes):
    """The objects of an allgather: `gathered` holds every rank's bytes in rank order, `sizes`
    each rank's byte count."""
    gathered = np.asarray(gathered, dtype=np.uint8)
    objects = []
    start = 0
    for size in sizes:
        size = int(size)
        objects.append(loads(gathered[start:start + size]))
        start += size
    return objects

"""The byte framing of Horovod's broadcast_object and allgather_object, without a framework:
objects are pickled (the standard library's pickle; Horovod uses cloudpickle, one more
dependency), sent as uint8 tensors by the binding, and unpickled here."""

from __future__ import annotations

import io
import pickle
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy.typing as npt


def dumps(obj: object) -> npt.NDArray[np.uint8]:
    """The object's bytes as a uint8 numpy array."""
    buffer = io.BytesIO()
    pickle.dump(obj, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def loads(array: npt.ArrayLike) -> object:
    """The object a uint8 array from dumps() holds."""
    return pickle.loads(np.asarray(array, dtype=np.uint8).tobytes())


def split_gathered(gathered: npt.ArrayLike, sizes: Iterable[int]) -> list[object]:
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

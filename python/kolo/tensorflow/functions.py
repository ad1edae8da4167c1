"""Horovod's TensorFlow helpers (horovod/tensorflow/functions.py): broadcast_variables,
broadcast_object and allgather_object, on kolo's ops."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from kolo.common import objects
from kolo.common.process_sets import global_process_set
from kolo.tensorflow.mpi_ops import allgather, broadcast, rank
from kolo.tensorflow.op_names import executing_eagerly

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from kolo.common.process_sets import ProcessSet


def broadcast_variables(variables: Iterable[Any], root_rank: int,
                        process_set: ProcessSet = global_process_set, inplace: bool = False) -> Any:
    """Assigns root_rank's value of every variable to it on every rank of `process_set`.
    Eagerly the broadcasts run inside one tf.function, so that they travel together, as in
    Horovod; in a graph, returns the op that does them. `inplace` is accepted (kolo always
    assigns the broadcast value)."""
    variables = list(variables)

    def broadcast_variables_group() -> None:
        for v in variables:
            v.assign(broadcast(v, root_rank, process_set=process_set))
    if not executing_eagerly():
        return tf.group(*[v.assign(broadcast(v, root_rank, process_set=process_set))
                          for v in variables])
    # A function of its own each call: it captures these variables (traced once, as Horovod's
    # cached function is traced once per list of variables).
    tf.function(broadcast_variables_group, autograph=False)()


def optimizer_variables(optimizer: Any) -> list[Any]:
    """A Keras optimizer's variables as a list: Keras 3's and tf-keras's optimizers have a
    `variables` property, Keras 2's legacy ones a `variables()` method."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def _to_numpy(value: Any, session: Any) -> Any:
    if executing_eagerly():
        return value.numpy()
    return (session or tf.compat.v1.get_default_session()).run(value)


def broadcast_object(obj: Any, root_rank: int = 0, session: Any = None, name: str | None = None,
                     process_set: ProcessSet = global_process_set) -> Any:
    """Returns root_rank's `obj` (pickled) on every rank of `process_set`."""
    name = name or type(obj).__name__
    if rank() == root_rank:
        data = objects.dumps(obj)
        size = np.array([data.size], dtype=np.int64)
        _to_numpy(broadcast(tf.constant(size), root_rank, name=name + ".sz",
                            process_set=process_set), session)
    else:
        size = _to_numpy(broadcast(tf.constant([0], dtype=tf.int64), root_rank,
                                   name=name + ".sz", process_set=process_set), session)
        data = np.zeros(int(size[0]), dtype=np.uint8)
    data = _to_numpy(broadcast(tf.constant(data), root_rank, name=name + ".t",
                               process_set=process_set), session)
    return obj if rank() == root_rank else objects.loads(data)


def allgather_object(obj: Any, session: Any = None, name: str | None = None,
                     process_set: ProcessSet = global_process_set) -> list[Any]:
    """Returns the list of every rank's `obj` (pickled), in the set's rank order."""
    name = name or type(obj).__name__
    data = objects.dumps(obj)
    sizes = _to_numpy(allgather(tf.constant([data.size], dtype=tf.int64), name=name + ".sz",
                                process_set=process_set), session)
    gathered = _to_numpy(allgather(tf.constant(data), name=name + ".t",
                                   process_set=process_set), session)
    return objects.split_gathered(gathered, sizes)


def broadcast_object_fn(root_rank: int = 0, session: Any = None, name: str | None = None,
                        process_set: ProcessSet = global_process_set) -> Callable[[Any], Any]:
    """Horovod's: returns a function obj -> root_rank's obj, for broadcasting many objects.
    In a TensorFlow 1 graph (Horovod's case) it builds the two broadcasts once, on
    placeholders, and each call runs them in `session` (default: the default session). Eagerly,
    where Horovod's fails (TensorFlow 2 has no tf.placeholder), each call is
    broadcast_object(obj, root_rank, name=name, process_set=process_set)."""
    name = name or "broadcast_object_fn"
    if executing_eagerly():
        return lambda obj: broadcast_object(obj, root_rank, name=name, process_set=process_set)
    size_in = tf.compat.v1.placeholder(tf.int64, [1], name="bcast_object_size")
    size_out = broadcast(size_in, root_rank, name=name + ".sz", process_set=process_set)
    data_in = tf.compat.v1.placeholder(tf.uint8, [None], name="bcast_object_data")
    data_out = broadcast(data_in, root_rank, name=name + ".t", process_set=process_set)
    session = session or tf.compat.v1.get_default_session()

    def broadcast_one(obj: Any) -> Any:
        if rank() == root_rank:
            data = objects.dumps(obj)
            session.run(size_out, feed_dict={size_in: [data.size]})
        else:
            size = session.run(size_out, feed_dict={size_in: [0]})
            data = np.zeros(int(size[0]), dtype=np.uint8)
        data = session.run(data_out, feed_dict={data_in: data})
        return obj if rank() == root_rank else objects.loads(data)
    return broadcast_one


def broadcast_global_variables(root_rank: int) -> Any:
    """Horovod's TensorFlow 1 helper: the op that assigns root_rank's value of every global
    variable (tf.compat.v1.global_variables()) to it on every rank. Eagerly there are no global
    variables: raises RuntimeError, as Horovod does."""
    if executing_eagerly():
        raise RuntimeError(
            "hvd.broadcast_global_variables() does not support eager execution. "
            "Please use `hvd.broadcast_variables(<model/optimizer variables>)` instead.")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Horovod's TensorFlow 1 SessionRunHook: once a session is created (e.g. by
    tf.compat.v1.train.MonitoredTrainingSession), broadcasts every global variable from
    root_rank, so that every rank starts from the same initialization or checkpoint."""

    def __init__(self, root_rank: int, device: str = "") -> None:
        """`root_rank`: the rank whose values every rank takes; `device` is accepted (kolo's
        ops run on the CPU)."""
        super().__init__()
        self.root_rank = root_rank
        self.bcast_op = None
        self.device = device

    def begin(self) -> None:
        """Builds the broadcast op in the graph being finalized (again if it changed)."""
        if not self.bcast_op or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session: Any, coord: Any) -> None:
        """Runs the broadcast in the new session."""
        session.run(self.bcast_op)

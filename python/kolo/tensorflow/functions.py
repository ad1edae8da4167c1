"""Horovod's TensorFlow helpers (horovod/tensorflow/functions.py): broadcast_variables,
broadcast_object and allgather_object, on kolo's ops."""

import numpy as np
import tensorflow as tf

from kolo.common import objects
from kolo.common.process_sets import global_process_set
from kolo.tensorflow.mpi_ops import allgather, broadcast, rank
from kolo.tensorflow.op_names import executing_eagerly


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=False):
    """Assigns root_rank's value of every variable to it on every rank of `process_set`.
    Eagerly the broadcasts run inside one tf.function, so that they travel together, as in
    Horovod; in a graph, returns the op that does them. `inplace` is accepted (kolo always
    assigns the broadcast value)."""
    variables = list(variables)

    def broadcast_variables_group():
        for v in variables:
            v.assign(broadcast(v, root_rank, process_set=process_set))
    if not executing_eagerly():
        return tf.group(*[v.assign(broadcast(v, root_rank, process_set=process_set))
                          for v in variables])
    # A function of its own each call: it captures these variables (traced once, as Horovod's
    # cached function is traced once per list of variables).
    tf.function(broadcast_variables_group, autograph=False)()


def optimizer_variables(optimizer):
    """A Keras optimizer's variables as a list: Keras 3's and tf-keras's optimizers have a
    `variables` property, Keras 2's legacy ones a `variables()` method."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def _to_numpy(value, session):
    if executing_eagerly():
        return value.numpy()
    return (session or tf.compat.v1.get_default_session()).run(value)


def broadcast_object(obj, root_rank=0, session=None, name=None, process_set=global_process_set):
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


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Returns the list of every rank's `obj` (pickled), in the set's rank order."""
    name = name or type(obj).__name__
    data = objects.dumps(obj)
    sizes = _to_numpy(allgather(tf.constant([data.size], dtype=tf.int64), name=name + ".sz",
                                process_set=process_set), session)
    gathered = _to_numpy(allgather(tf.constant(data), name=name + ".t",
                                   process_set=process_set), session)
    return objects.split_gathered(gathered, sizes)

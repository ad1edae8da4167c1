"""kolo.tensorflow.keras (and kolo.keras): Horovod's Keras API (horovod.tensorflow.keras) on kolo,
for Keras 3 and for tf-keras (Keras 2, TF_USE_LEGACY_KERAS=1).

    import kolo.tensorflow.keras as hvd   # instead of: import horovod.tensorflow.keras as hvd
"""

import tensorflow as tf

from kolo.common.errors import HorovodInternalError, KoloError  # noqa: F401
from kolo.tensorflow import collectives as _collectives
from kolo.tensorflow import functions as _functions
from kolo.tensorflow import mpi_ops as _mpi_ops
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.keras import callbacks  # noqa: F401
from kolo.tensorflow.keras import elastic  # noqa: F401  (hvd.elastic, as in Horovod)
from kolo.tensorflow.mpi_ops import (Average, ProcessSet, Sum, add_process_set,  # noqa: F401
                                     ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                                     global_process_set, gloo_built, gloo_enabled, init,
                                     is_initialized, local_rank, local_size, mpi_built,
                                     mpi_enabled, mpi_threads_supported, nccl_built, rank,
                                     remove_process_set, rocm_built, shutdown, size,
                                     start_timeline, stop_timeline)
from kolo.tensorflow.optimizer import DistributedOptimizer as _DistributedOptimizer


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps a Keras optimizer so that model.fit (or apply_gradients) applies gradients reduced
    over the ranks (Horovod's horovod.tensorflow.keras.DistributedOptimizer)."""
    return _DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups, process_set=process_set, scale_local_gradients=scale_local_gradients)


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average, groups=None,
                                process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """Horovod's (horovod.keras): DistributedOptimizer whose `local_layers`' (a Keras layer or
    a list of them) trainable variables keep their gradients local: not reduced, divided by
    the set's size when scale_local_gradients. Raises ValueError for an op other than Average
    or Sum and for a local layer that is not a Keras layer, as Horovod does."""
    if op != Average and op != Sum:
        raise ValueError("op currently only supports Average and Sum")
    layer_class = tf.keras.layers.Layer
    if local_layers is None:
        local_layers = []
    elif isinstance(local_layers, layer_class):
        local_layers = [local_layers]
    elif not all(isinstance(layer, layer_class) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    wrapped = DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients)
    for layer in local_layers:
        for variable in layer.trainable_weights:
            wrapped.register_local_var(variable)
    return wrapped


def _value(result):
    return result.numpy() if hasattr(result, "numpy") else result


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=Compression.none):
    """Reduces a tensor-compatible value over the ranks (op Average by default); returns a
    numpy value."""
    return _value(_collectives.allreduce(tf.constant(value), average=average,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor, op=op,
                                         compression=compression, name=name))


def allgather(value, name=None):
    """Concatenates every rank's value along dimension 0; returns a numpy value."""
    return _value(_mpi_ops.allgather(tf.constant(value), name=name))


def broadcast(value, root_rank, name=None):
    """root_rank's value on every rank; returns a numpy value."""
    return _value(_mpi_ops.broadcast(tf.constant(value), root_rank, name=name))


def reducescatter(value, name=None, op=Average):
    """This rank's part of the reduction of value over the ranks; returns a numpy value."""
    return _value(_collectives.reducescatter(tf.constant(value), op=op, name=name))


def broadcast_global_variables(root_rank):
    """Horovod's TensorFlow 1 helper: broadcasts every global variable from root_rank, in the
    Keras backend's session. Eagerly (TensorFlow 2) there are no global variables: raises the
    RuntimeError Horovod raises."""
    op = _functions.broadcast_global_variables(root_rank)
    session = tf.compat.v1.get_default_session() or tf.compat.v1.keras.backend.get_session()
    return session.run(op)


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, legacy_opts=False):
    """Loads a saved Keras model whose optimizer is wrapped in DistributedOptimizer."""
    import keras

    def wrap(cls):
        return lambda **kwargs: DistributedOptimizer(cls(**kwargs), compression=compression)
    base = keras.optimizers.legacy.Optimizer if legacy_opts else keras.optimizers.Optimizer
    objects = {sub.__name__.lower(): wrap(sub) for sub in base.__subclasses__()}
    objects.update({cls.__name__: wrap(cls) for cls in custom_optimizers or []})
    objects.update(custom_objects or {})
    return keras.models.load_model(filepath, custom_objects=objects)

"""kolo.tensorflow.keras (and kolo.keras): Horovod's Keras API (horovod.tensorflow.keras) on kolo,
for Keras 3 and for tf-keras (Keras 2, TF_USE_LEGACY_KERAS=1).

    import kolo.tensorflow.keras as hvd   # instead of: import horovod.tensorflow.keras as hvd
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from kolo.tensorflow.compression import Compressor
    from kolo.tensorflow.gradient_tape import Groups


def DistributedOptimizer(optimizer: Any, name: str | None = None, device_dense: str = "",
                         device_sparse: str = "", compression: type[Compressor] = Compression.none,
                         sparse_as_dense: bool = False, gradient_predivide_factor: float = 1.0,
                         op: int = Average, backward_passes_per_step: int = 1,
                         average_aggregated_gradients: bool = False, num_groups: int = 0,
                         groups: Groups = None, process_set: ProcessSet = global_process_set,
                         scale_local_gradients: bool = True) -> Any:
    """Wraps a Keras optimizer so that model.fit (or apply_gradients) applies gradients reduced
    over the ranks (Horovod's horovod.tensorflow.keras.DistributedOptimizer)."""
    return _DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op,
        backward_passes_per_step=backward_passes_per_step,
        average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
        groups=groups, process_set=process_set, scale_local_gradients=scale_local_gradients)


def PartialDistributedOptimizer(optimizer: Any, name: str | None = None,
                                device_dense: str = "", device_sparse: str = "",
                                compression: type[Compressor] = Compression.none,
                                sparse_as_dense: bool = False,
                                gradient_predivide_factor: float = 1.0, op: int = Average,
                                groups: Groups = None,
                                process_set: ProcessSet = global_process_set,
                                local_layers: Any = None,
                                scale_local_gradients: bool = True) -> Any:
    """Horovod's (horovod.keras): DistributedOptimizer whose `local_layers`' (a Keras layer or
    a list of them) trainable variables keep their gradients local: not reduced, divided by
    the set's size when scale_local_gradients. Raises ValueError for an op other than Average
    or Sum and for a local layer that is not a Keras layer, as Horovod does."""
    if op != Average and op != Sum:
        raise ValueError("op currently only supports Average and Sum")
    layer_class = tf.keras.layers.Layer
    layers: Iterable[Any]
    if local_layers is None:
        layers = []
    elif isinstance(local_layers, layer_class):
        layers = [local_layers]
    elif not all(isinstance(layer, layer_class) for layer in local_layers):
        raise ValueError("All local layers must be of tf.keras.layers.Layer type.")
    else:
        layers = local_layers
    wrapped = DistributedOptimizer(
        optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
        compression=compression, sparse_as_dense=sparse_as_dense,
        gradient_predivide_factor=gradient_predivide_factor, op=op, groups=groups,
        process_set=process_set, scale_local_gradients=scale_local_gradients)
    for layer in layers:
        for variable in layer.trainable_weights:
            wrapped.register_local_var(variable)
    return wrapped


def _value(result: Any) -> Any:
    return result.numpy() if hasattr(result, "numpy") else result


def allreduce(value: Any, name: str | None = None, average: bool | None = None,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              op: int | None = None, compression: type[Compressor] = Compression.none) -> Any:
    """Reduces a tensor-compatible value over the ranks (op Average by default); returns a
    numpy value."""
    return _value(_collectives.allreduce(tf.constant(value), average=average,
                                         prescale_factor=prescale_factor,
                                         postscale_factor=postscale_factor, op=op,
                                         compression=compression, name=name))


def allgather(value: Any, name: str | None = None) -> Any:
    """Concatenates every rank's value along dimension 0; returns a numpy value."""
    return _value(_mpi_ops.allgather(tf.constant(value), name=name))


def broadcast(value: Any, root_rank: int, name: str | None = None) -> Any:
    """root_rank's value on every rank; returns a numpy value."""
    return _value(_mpi_ops.broadcast(tf.constant(value), root_rank, name=name))


def reducescatter(value: Any, name: str | None = None, op: int = Average) -> Any:
    """This rank's part of the reduction of value over the ranks; returns a numpy value."""
    return _value(_collectives.reducescatter(tf.constant(value), op=op, name=name))


def broadcast_global_variables(root_rank: int) -> Any:
    """Horovod's TensorFlow 1 helper: broadcasts every global variable from root_rank, in the
    Keras backend's session. Eagerly (TensorFlow 2) there are no global variables: raises the
    RuntimeError Horovod raises."""
    op = _functions.broadcast_global_variables(root_rank)
    session = tf.compat.v1.get_default_session() or tf.compat.v1.keras.backend.get_session()
    return session.run(op)


def load_model(filepath: Any, custom_optimizers: Iterable[type] | None = None,
               custom_objects: dict[str, Any] | None = None,
               compression: type[Compressor] = Compression.none, legacy_opts: bool = False) -> Any:
    """Loads a saved Keras model whose optimizer is wrapped in DistributedOptimizer."""
    import keras

    def wrap(cls: Any) -> Callable[..., Any]:
        return lambda **kwargs: DistributedOptimizer(cls(**kwargs), compression=compression)
    base = keras.optimizers.legacy.Optimizer if legacy_opts else keras.optimizers.Optimizer
    objects = {sub.__name__.lower(): wrap(sub) for sub in base.__subclasses__()}
    objects.update({cls.__name__: wrap(cls) for cls in custom_optimizers or []})
    objects.update(custom_objects or {})
    return keras.models.load_model(filepath, custom_objects=objects)

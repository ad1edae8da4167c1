"""Horovod's public TensorFlow collectives with compression and sparse tensors
(horovod/tensorflow/__init__.py: allreduce, grouped_allreduce, reducescatter,
grouped_reducescatter) over the ops of mpi_ops.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tensorflow as tf

from kolo.common.process_sets import global_process_set
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.mpi_ops import (Adasum, Average, Sum, _allreduce, _grouped_allreduce,
                                     _grouped_reducescatter, _reducescatter, allgather,
                                     grouped_allgather, handle_average_backwards_compatibility)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kolo.common.process_sets import ProcessSet
    from kolo.tensorflow.compression import Compressor


def _check_sparse(op: int, prescale_factor: float, postscale_factor: float) -> None:
    if op == Adasum:
        raise NotImplementedError("The Adasum reduction does not currently support sparse "
                                  "tensors. As a workaround please pass sparse_as_dense=True "
                                  "to DistributedOptimizer")
    if op not in (Sum, Average):
        raise NotImplementedError("Only Sum and Average ops are supported with tf.IndexedSlices")
    if prescale_factor != 1.0 or postscale_factor != 1.0:
        raise NotImplementedError("Pre/postscale_factor are not supported with tf.IndexedSlices")


def _sparse_result(values: tf.Tensor, indices: tf.Tensor, dense_shape: Any, op: int,
                   process_set: ProcessSet) -> tf.IndexedSlices:
    """Horovod's sparse allreduce: the gathered values (divided by the set's size for
    Average) at the gathered indices; duplicate indices add up where the result is used."""
    if op == Average:
        values = values / tf.cast(process_set.size(), dtype=values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=dense_shape)


def allreduce(tensor: Any, average: bool | None = None, device_dense: str = "",
              device_sparse: str = "", compression: type[Compressor] = Compression.none,
              op: int | None = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              name: str | None = None, process_set: ProcessSet = global_process_set,
              ignore_name_scope: bool = False) -> Any:
    """Reduces a tf.Tensor, tf.Variable or tf.IndexedSlices over the ranks of `process_set`
    (op Average by default). An IndexedSlices is two allgathers (values and indices), as in
    Horovod. device_dense and device_sparse are accepted; kolo's ops run on the CPU."""
    op = handle_average_backwards_compatibility(op, average)
    if isinstance(tensor, tf.IndexedSlices):
        _check_sparse(op, prescale_factor, postscale_factor)
        values = allgather(tensor.values, process_set=process_set,
                           ignore_name_scope=ignore_name_scope)
        indices = allgather(tensor.indices, process_set=process_set,
                            ignore_name_scope=ignore_name_scope)
        return _sparse_result(values, indices, tensor.dense_shape, op, process_set)
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    reduced = _allreduce(compressed, op=op, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, name=name, process_set=process_set,
                         ignore_name_scope=ignore_name_scope)
    return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors: Sequence[Any], average: bool | None = None,
                      device_dense: str = "", device_sparse: str = "",
                      compression: type[Compressor] = Compression.none, op: int | None = None,
                      prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: ProcessSet = global_process_set, ignore_name_scope: bool = False,
                      name: str | None = None) -> Any:
    """Reduces a list of tensors (and IndexedSlices) as one fused transfer; returns the list of
    results in the same order."""
    if not tensors:
        return tensors
    op = handle_average_backwards_compatibility(op, average)
    results: list[Any] = [None] * len(tensors)
    sparse = [(i, t) for i, t in enumerate(tensors) if isinstance(t, tf.IndexedSlices)]
    dense = [(i, t) for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    if sparse:
        _check_sparse(op, prescale_factor, postscale_factor)
        values = grouped_allgather([t.values for _, t in sparse], process_set=process_set,
                                   ignore_name_scope=ignore_name_scope)
        indices = grouped_allgather([t.indices for _, t in sparse], process_set=process_set,
                                    ignore_name_scope=ignore_name_scope)
        for (i, t), v, ix in zip(sparse, values, indices):
            results[i] = _sparse_result(v, ix, t.dense_shape, op, process_set)
    if dense:
        compressed, ctxs = zip(*[compression.compress(tf.convert_to_tensor(t))
                                 for _, t in dense])
        reduced = _grouped_allreduce(list(compressed), op=op, prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor, process_set=process_set,
                                     name=name, ignore_name_scope=ignore_name_scope)
        for (i, _), r, ctx in zip(dense, reduced, ctxs):
            results[i] = compression.decompress(r, ctx)
    return results


def reducescatter(tensor: Any, device_dense: str = "",
                  compression: type[Compressor] = Compression.none,
                  op: int = Average, name: str | None = None,
                  process_set: ProcessSet = global_process_set, ignore_name_scope: bool = False,
                  prescale_factor: float = 1.0, postscale_factor: float = 1.0) -> tf.Tensor:
    """Reduces `tensor` over the ranks (op Average by default); each rank gets its part of
    dimension 0."""
    compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
    reduced = _reducescatter(compressed, op=op, name=name, process_set=process_set,
                             ignore_name_scope=ignore_name_scope,
                             prescale_factor=prescale_factor, postscale_factor=postscale_factor)
    return compression.decompress(reduced, ctx)


def grouped_reducescatter(tensors: Sequence[Any], device_dense: str = "",
                          compression: type[Compressor] = Compression.none, op: int = Average,
                          process_set: ProcessSet = global_process_set,
                          prescale_factor: float = 1.0, postscale_factor: float = 1.0) -> Any:
    """Reducescatters a list of tensors as one fused transfer."""
    if not tensors:
        return tensors
    compressed, ctxs = zip(*[compression.compress(tf.convert_to_tensor(t)) for t in tensors])
    reduced = _grouped_reducescatter(list(compressed), op=op, process_set=process_set,
                                     prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor)
    return [compression.decompress(r, ctx) for r, ctx in zip(reduced, ctxs)]

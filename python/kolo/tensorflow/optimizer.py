"""Horovod's DistributedOptimizer for Keras optimizers, on kolo: Keras 3 (TensorFlow 2.16 and
later's tf.keras) and Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1: what Horovod 0.28 supports).

The wrapped optimizer becomes an instance of a class made on the fly that derives from its class
and keeps its name (so that saved models load without kolo, as Horovod's), with the same config.
Keras 3 calls apply(grads, variables) from apply_gradients and from model.fit's train step:
the override reduces the gradients there. Keras 2 optimizers get apply_gradients overridden
instead (minimize and model.fit call it). kolo.tensorflow.keras.DistributedOptimizer is the same
function."""

import tensorflow as tf

from kolo.common.process_sets import global_process_set
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.gradient_aggregation import LocalGradientAggregation
from kolo.tensorflow.gradient_tape import (check_groups, make_allreduce_grads_fn,
                                           reduce_except_local, variable_key)
from kolo.tensorflow.mpi_ops import Adasum, Average, Sum


def _is_keras3(optimizer):
    try:
        import keras
    except ImportError:
        return False
    return (getattr(keras, "__version__", "0").split(".")[0] >= "3"
            and isinstance(optimizer, keras.optimizers.Optimizer))


class _DistributedMixin:
    """What the class made for a wrapped optimizer adds (self.__class__ is that class)."""

    def _kolo_setup(self, name, allreduce_grads, aggregation, process_set,
                    scale_local_gradients):
        self._kolo_name = name
        self._kolo_allreduce_grads = allreduce_grads
        self._kolo_aggregation = aggregation
        self._kolo_process_set = process_set
        self._kolo_scale_local_gradients = scale_local_gradients
        self._kolo_local_vars = set()
        if aggregation is not None:  # the N-th pass reduces the sums as a single pass would
            aggregation.allreduce_grads = self._kolo_reduce

    def register_local_var(self, var):
        """Its gradient is not reduced (but scaled by 1 / size when scale_local_gradients)."""
        self._kolo_local_vars.add(variable_key(var))

    def _kolo_reduce(self, grads, variables):
        return reduce_except_local(self._kolo_allreduce_grads, grads, variables,
                                   self._kolo_local_vars, self._kolo_scale_local_gradients,
                                   self._kolo_process_set)

    def _kolo_apply(self, grads, variables, apply):
        """Reduces (or aggregates) `grads` of `variables`, then calls apply(reduced grads)."""
        grads = list(grads)
        variables = list(variables)
        if self._kolo_aggregation is None:
            return apply(self._kolo_reduce(grads, variables))
        aggregated = self._kolo_aggregation.compute_gradients(grads, variables)
        self._kolo_aggregation.apply_gradients(lambda: apply(aggregated), self.iterations)


class _Keras3Mixin(_DistributedMixin):
    def apply(self, grads, trainable_variables=None):
        base = super(self.__class__, self)
        if trainable_variables is None:
            variables = self._trainable_variables
        else:
            variables = list(trainable_variables)
            if not self.built:  # outside the tf.cond of backward_passes_per_step
                self.build(variables)
                self.built = True
        self._kolo_apply(grads, variables, lambda g: base.apply(g, trainable_variables))


class _Keras2Mixin(_DistributedMixin):
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        base = super(self.__class__, self)
        grads, variables = zip(*list(grads_and_vars))
        result = []
        self._kolo_apply(grads, variables, lambda g: result.append(
            base.apply_gradients(zip(g, variables), *args, **kwargs)))
        return result[0] if result else None


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """Wraps a Keras optimizer so that it applies gradients reduced over the ranks of
    `process_set` (averaged by default). Horovod's arguments: compression, sparse_as_dense,
    backward_passes_per_step (local aggregation) with average_aggregated_gradients, op (Average
    or Sum), gradient_predivide_factor, groups, process_set, scale_local_gradients.
    use_locking and the device arguments are accepted and change nothing."""
    if op == Adasum:
        raise ValueError("op == Adasum is not supported yet with Keras")
    if op not in (Average, Sum):
        raise ValueError("op currently only supports Average and Sum")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op == Adasum and average_aggregated_gradients:
        raise ValueError("Adasum does not support average_aggregated_gradients == True")
    groups = check_groups(groups, num_groups)
    keras3 = _is_keras3(optimizer)
    if not keras3 and not hasattr(optimizer, "apply_gradients"):
        raise ValueError("DistributedOptimizer wraps a Keras optimizer (Keras 3, or tf-keras "
                         "with TF_USE_LEGACY_KERAS=1), got %s" % type(optimizer).__name__)
    name = name or "Distributed%s" % type(optimizer).__name__
    allreduce_grads = make_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                              sparse_as_dense, op, gradient_predivide_factor,
                                              groups, process_set)
    aggregation = None
    if backward_passes_per_step > 1:
        aggregation = LocalGradientAggregation(backward_passes_per_step, None,
                                               sparse_as_dense, average_aggregated_gradients)
    mixin = _Keras3Mixin if keras3 else _Keras2Mixin
    methods = {k: v for k, v in vars(mixin).items() if not k.startswith("__")}
    for base in mixin.__mro__[1:-1]:
        for k, v in vars(base).items():
            if not k.startswith("__"):
                methods.setdefault(k, v)
    cls = type(type(optimizer).__name__, (type(optimizer),), methods)
    wrapped = cls.from_config(optimizer.get_config())
    wrapped._kolo_setup(name, allreduce_grads, aggregation, process_set, scale_local_gradients)
    return wrapped

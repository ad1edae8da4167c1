"""Horovod's DistributedOptimizer for Keras optimizers, on kolo: Keras 3 (TensorFlow 2.16 and
later's tf.keras) and Keras 2 (tf-keras, TF_USE_LEGACY_KERAS=1: what Horovod 0.28 supports).

The wrapped optimizer becomes an instance of a class made on the fly that derives from its class
and keeps its name (so that saved models load without kolo, as Horovod's), with the same config.
Keras 3 calls apply(grads, variables) from apply_gradients and from model.fit's train step:
the override reduces the gradients there. Keras 2 (tf-keras) optimizers reduce where Horovod's
wrapper does, in _compute_gradients (minimize and model.fit call it), and in apply_gradients
for gradients that did not come from there; they have Horovod's _agg_helper. A Keras 3
LossScaleOptimizer around a wrapped optimizer is made to decide on finiteness alike on every
rank (_agree_on_finiteness). kolo.tensorflow.keras.DistributedOptimizer is the same function."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from kolo.common.process_sets import global_process_set
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.gradient_aggregation import LocalGradientAggregation
from kolo.tensorflow.gradient_tape import (check_groups, make_allreduce_grads_fn,
                                           reduce_except_local, variable_key)
from kolo.tensorflow.mpi_ops import Adasum, Average, Min, Sum, _allreduce

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from kolo.common.process_sets import ProcessSet
    from kolo.tensorflow.compression import Compressor
    from kolo.tensorflow.gradient_tape import AllreduceGrads, Groups

    # The mixins' methods run on the Keras optimizer class they are copied into (untyped).
    _OptimizerBase = Any
else:
    _OptimizerBase = object


def _is_keras3(optimizer: Any) -> bool:
    """Whether `optimizer` is a Keras 3 optimizer (else tf-keras's, or not Keras)."""
    try:
        import keras
    except ImportError:
        return False
    return (getattr(keras, "__version__", "0").split(".")[0] >= "3"
            and isinstance(optimizer, keras.optimizers.Optimizer))


class _DistributedMixin(_OptimizerBase):
    """What the class made for a wrapped optimizer adds (self.__class__ is that class)."""

    def _kolo_setup(self, name: str, allreduce_grads: AllreduceGrads,
                    aggregation: LocalGradientAggregation | None, process_set: ProcessSet,
                    scale_local_gradients: bool) -> None:
        self._kolo_name = name
        self._kolo_allreduce_grads = allreduce_grads
        self._kolo_aggregation = aggregation
        # Horovod's name for the local aggregation helper (None without
        # backward_passes_per_step > 1): scripts and Horovod's tests read its `counter`.
        self._agg_helper = aggregation
        self._kolo_process_set = process_set
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._kolo_local_vars: set[Any] = set()
        self._kolo_reduced = False  # gradients handed out by _compute_gradients, not applied
        if aggregation is not None:  # the N-th pass reduces the sums as a single pass would
            aggregation.allreduce_grads = self._kolo_reduce

    def register_local_var(self, var: Any) -> None:
        """Its gradient is not reduced (but scaled by 1 / size when scale_local_gradients)."""
        self._kolo_local_vars.add(variable_key(var))

    def _kolo_reduce(self, grads: Sequence[Any], variables: Sequence[Any]) -> list[Any]:
        return reduce_except_local(self._kolo_allreduce_grads, grads, variables,
                                   self._kolo_local_vars, self._kolo_scale_local_gradients,
                                   self._kolo_process_set)

    @property
    def _kolo_scale_local_gradients(self) -> bool:
        return self.scale_local_gradients

    def _kolo_gradients(self, grads: Iterable[Any], variables: Iterable[Any]) -> list[Any]:
        """What this optimizer applies for `grads` of `variables`: reduced over the ranks, or
        with backward_passes_per_step the local sums, reduced on the N-th pass."""
        grads = list(grads)
        variables = list(variables)
        if self._kolo_aggregation is None:
            return self._kolo_reduce(grads, variables)
        return self._kolo_aggregation.compute_gradients(grads, variables)

    def _kolo_apply_reduced(self, apply: Callable[[], Any]) -> Any:
        """Calls apply() for gradients _kolo_gradients made: with backward_passes_per_step on
        the pass that reduced only (the other passes count the step in `iterations`)."""
        if self._kolo_aggregation is None:
            return apply()
        return self._kolo_aggregation.apply_gradients(apply, self.iterations)

    def _kolo_apply(self, grads: Iterable[Any], variables: Iterable[Any],
                    apply: Callable[[list[Any]], Any]) -> Any:
        """Reduces (or aggregates) `grads` of `variables`, then calls apply(reduced grads)."""
        reduced = self._kolo_gradients(grads, variables)
        return self._kolo_apply_reduced(lambda: apply(reduced))


def _agree_on_finiteness(loss_scale_optimizer: Any, process_set: ProcessSet) -> None:
    """Makes a Keras 3 LossScaleOptimizer around a kolo optimizer decide on every rank of
    `process_set` alike whether the step's gradients are finite. It checks them before its
    inner optimizer's apply, which reduces them, and applies only if they are: on its own a
    rank whose scaled gradients overflowed would skip the step (and the allreduce) that the
    others run. Its check_finite becomes "finite on every rank" (one allreduce of a flag, Min).
    tf-keras's LossScaleOptimizer needs no help: its inner optimizer's compute_gradients
    reduces before it checks (docs/TENSORFLOW.md, "Mixed precision")."""
    local = loss_scale_optimizer.check_finite

    def check_finite(grads: Any) -> Any:
        finite = local(grads)
        if not (process_set.included() and (process_set.size() or 0) > 1):
            return finite
        flag = tf.reshape(tf.cast(finite, tf.int32), [1])
        agreed = _allreduce(flag, op=Min, process_set=process_set)
        return tf.reshape(agreed, []) > 0
    object.__setattr__(loss_scale_optimizer, "check_finite", check_finite)
    object.__setattr__(loss_scale_optimizer, "_kolo_agrees_on_finiteness", True)


def _outer_loss_scale_optimizer(inner: Any) -> Any:
    """The Keras 3 LossScaleOptimizer whose build is building `inner` (its inner optimizer),
    found in the calling frames, or None."""
    frame: Any = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return None
        caller = frame.f_locals.get("self")
        if caller is not inner and getattr(caller, "inner_optimizer", None) is inner and \
                callable(getattr(caller, "check_finite", None)):
            return caller
        frame = frame.f_back
    return None


class _Keras3Mixin(_DistributedMixin):
    """Keras 3 optimizers: gradients are reduced in apply()."""

    if TYPE_CHECKING:
        built: bool  # Keras 3's Optimizer's

    def build(self, variables: Any) -> None:
        """Builds the optimizer's variables; when a LossScaleOptimizer around this one builds
        it, makes that optimizer's finiteness check agree over the ranks first."""
        outer = _outer_loss_scale_optimizer(self)
        if outer is not None and not getattr(outer, "_kolo_agrees_on_finiteness", False):
            _agree_on_finiteness(outer, self._kolo_process_set)
        super(self.__class__, self).build(variables)

    def apply(self, grads: Any, trainable_variables: Any = None) -> None:
        """Applies `grads` reduced over the ranks (Keras 3's apply_gradients and model.fit
        call it)."""
        base: Any = super(self.__class__, self)
        if trainable_variables is None:
            variables = self._trainable_variables
        else:
            variables = list(trainable_variables)
            if not self.built:  # outside the tf.cond of backward_passes_per_step
                self.build(variables)
                self.built = True
        self._kolo_apply(grads, variables, lambda g: base.apply(g, trainable_variables))


class _Keras2Mixin(_DistributedMixin):
    """tf-keras (Keras 2) optimizers, new and legacy: gradients are reduced where Horovod's
    wrapper reduces them, in _compute_gradients (which minimize and model.fit call, through
    compute_gradients for the new optimizers) and get_gradients; apply_gradients then applies
    them as they are. Gradients given to apply_gradients without passing through those (a
    custom step with a GradientTape) are reduced there (kolo's addition: Horovod applies them
    unreduced)."""

    _HAS_AGGREGATE_GRAD = True

    def compute_gradients(self, loss: Any, var_list: Any, tape: Any = None) -> list[Any]:
        """Horovod's: the (gradient, variable) pairs of `loss`, gradients reduced."""
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss: Any, var_list: Any, grad_loss: Any = None,
                           tape: Any = None) -> list[Any]:
        """The (gradient, variable) pairs of `loss` (a tensor recorded on `tape`, or a
        callable), the gradients reduced over the ranks (or aggregated locally, with
        backward_passes_per_step), as Horovod's wrapper computes them."""
        base: Any = super(self.__class__, self)
        tape = tf.GradientTape() if tape is None else tape
        if hasattr(base, "_compute_gradients"):  # the legacy optimizers
            grads_and_vars = base._compute_gradients(loss, var_list, grad_loss, tape=tape)
        else:
            grads_and_vars = base.compute_gradients(loss, var_list, tape=tape)
        grads, variables = zip(*grads_and_vars)
        reduced = self._kolo_gradients(grads, variables)
        self._kolo_reduced = True
        return list(zip(reduced, variables))

    def get_gradients(self, loss: Any, params: Any) -> list[Any]:
        """The gradients of `loss` for `params`, reduced (Keras 2's graph-mode path)."""
        grads = super(self.__class__, self).get_gradients(loss, params)
        reduced = self._kolo_gradients(grads, params)
        self._kolo_reduced = True
        return reduced

    def apply_gradients(self, grads_and_vars: Iterable[Any], *args: Any, **kwargs: Any) -> Any:
        """Applies the (gradient, variable) pairs: as they are when they come from
        _compute_gradients (or get_gradients), else reduced first."""
        base: Any = super(self.__class__, self)
        pairs = list(grads_and_vars)
        if self._kolo_reduced:
            self._kolo_reduced = False
            return self._kolo_apply_reduced(lambda: base.apply_gradients(pairs, *args, **kwargs))
        grads, variables = zip(*pairs)
        return self._kolo_apply(grads, variables, lambda g: base.apply_gradients(
            zip(g, variables), *args, **kwargs))


def DistributedOptimizer(optimizer: Any, name: str | None = None, use_locking: bool = False,
                         device_dense: str = "", device_sparse: str = "",
                         compression: type[Compressor] = Compression.none,
                         sparse_as_dense: bool = False, backward_passes_per_step: int = 1,
                         op: int = Average, gradient_predivide_factor: float = 1.0,
                         average_aggregated_gradients: bool = False, num_groups: int = 0,
                         groups: Groups = None, process_set: ProcessSet = global_process_set,
                         scale_local_gradients: bool = True) -> Any:
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
    cls: Any = type(type(optimizer).__name__, (type(optimizer),), methods)
    wrapped = cls.from_config(optimizer.get_config())
    wrapped._kolo_setup(name, allreduce_grads, aggregation, process_set, scale_local_gradients)
    return wrapped

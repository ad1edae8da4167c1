"""Local gradient aggregation for DistributedOptimizer(backward_passes_per_step=N), as Horovod's
LocalGradientAggregationHelper(Eager): each pass adds its gradients to local accumulators; the
N-th pass reduces the sums over the ranks (divided by N when average_aggregated_gradients), the
optimizer applies them and the accumulators start again from zero. On the other passes the
optimizer applies nothing and only counts the step (its iterations grow every pass, as in
Horovod). Works eagerly and inside tf.function (tf.cond on a step counter)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tensorflow as tf

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    # Reduces (gradients, their variables) over the ranks: the reduced gradients.
    ReduceGrads = Callable[[list[Any], list[Any]], list[Any]]


class LocalGradientAggregation:
    """The local sums of backward_passes_per_step passes and the pass counter (Horovod's
    optimizer has it as `_agg_helper`). Training thread only."""

    def __init__(self, backward_passes_per_step: int, allreduce_grads: ReduceGrads | None,
                 sparse_as_dense: bool, average_aggregated_gradients: bool) -> None:
        """`allreduce_grads` reduces the sums on the N-th pass (the optimizer sets it when
        None). Raises ValueError for backward_passes_per_step < 1."""
        if backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step must be >= 1, got %r"
                             % (backward_passes_per_step,))
        self.backward_passes_per_step = int(backward_passes_per_step)
        self.allreduce_grads = allreduce_grads
        self.sparse_as_dense = sparse_as_dense
        self.average_aggregated_gradients = average_aggregated_gradients
        # The passes since the last reduction (Horovod's helper has it as `counter` too).
        with tf.init_scope():
            self.counter = tf.Variable(0, dtype=tf.int64, trainable=False,
                                       name="kolo_backward_passes")
        self.accumulators: list[Any] | None = None

    def _dense(self, grads: Sequence[Any]) -> list[Any]:
        result = []
        for g in grads:
            if isinstance(g, tf.IndexedSlices):
                if not self.sparse_as_dense:
                    raise ValueError("IndexedSlices are not supported when "
                                     "`backward_passes_per_step` > 1 and `sparse_as_dense` is "
                                     "False.")
                g = tf.convert_to_tensor(g)
            result.append(g)
        return result

    def _create(self, grads: Sequence[Any]) -> None:
        # Lifted out of any tf.function being traced: made once, on the first pass.
        with tf.init_scope():
            self.accumulators = [
                None if g is None else tf.Variable(tf.zeros(g.shape, dtype=g.dtype),
                                                   trainable=False, name="kolo_aggregated")
                for g in grads]

    def compute_gradients(self, grads: Sequence[Any], variables: Sequence[Any]) -> list[Any]:
        """Adds this pass's gradients and returns what the optimizer gets: the reduced sums on
        the N-th pass, the local sums on the others (which apply_gradients then skips)."""
        grads = self._dense(grads)
        if self.accumulators is None:
            self._create(grads)
        accumulators: list[Any] = self.accumulators or []
        reduce_sums = self.allreduce_grads
        if reduce_sums is None:
            raise RuntimeError("LocalGradientAggregation: no allreduce_grads to reduce with")
        present = [i for i, g in enumerate(grads) if g is not None]
        for i in present:
            accumulators[i].assign_add(grads[i])
        self.counter.assign_add(1)
        present_vars = [variables[i] for i in present]

        def reduce() -> list[Any]:
            sums = [accumulators[i].read_value() for i in present]
            reduced = reduce_sums(sums, present_vars)
            if self.average_aggregated_gradients:
                reduced = [r / tf.cast(self.backward_passes_per_step, r.dtype) for r in reduced]
            with tf.control_dependencies(reduced):
                self.counter.assign(0)
                for i in present:
                    accumulators[i].assign(tf.zeros_like(accumulators[i]))
            return [tf.identity(r) for r in reduced]

        def local() -> list[Any]:
            return [accumulators[i].read_value() for i in present]

        chosen = tf.cond(tf.equal(self.counter, self.backward_passes_per_step), reduce, local)
        result: list[Any] = [None] * len(grads)
        for i, g in zip(present, chosen):
            result[i] = g
        return result

    def apply_gradients(self, apply: Callable[[], Any], iterations: Any) -> Any:
        """Runs `apply` on the pass that reduced; on the others counts the step in
        `iterations` (the optimizer's variable) instead."""
        def skip() -> tf.Tensor:
            iterations.assign_add(1)
            return tf.constant(False)

        def run() -> tf.Tensor:
            apply()
            return tf.constant(True)
        return tf.cond(tf.equal(self.counter, 0), run, skip)

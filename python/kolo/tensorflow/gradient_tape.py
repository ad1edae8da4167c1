"""Horovod's gradient allreduce for TensorFlow (horovod/tensorflow/__init__.py:
_make_allreduce_grads_fn, DistributedGradientTape, PartialDistributedGradientTape) on kolo.

The gradients of one step are reduced by one function: eagerly it is a tf.function (Horovod's
_make_subgraph), so that TensorFlow runs every gradient's allreduce at once and kolo fuses them;
in a graph it adds the allreduces to the graph being built."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from kolo.common.process_sets import global_process_set
from kolo.tensorflow.collectives import allreduce, grouped_allreduce
from kolo.tensorflow.compression import Compression
from kolo.tensorflow.mpi_ops import Average
from kolo.tensorflow.op_names import executing_eagerly

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from kolo.common.process_sets import ProcessSet
    from kolo.tensorflow.compression import Compressor

    # Horovod's `groups`: a number of groups, or lists of variables reduced together.
    Groups = int | list[list[Any]] | None
    # The positions of the gradients each group reduces together.
    IndexGroups = tuple[tuple[int, ...], ...] | None
    # allreduce_grads(grads, variables=None, use_generic_names=False): the reduced gradients.
    AllreduceGrads = Callable[..., list[Any]]


def split_list(items: Sequence[Any], count: int) -> list[Sequence[Any]]:
    """Horovod's split_list: `count` consecutive parts of nearly equal length."""
    quotient, remainder = divmod(len(items), count)
    return [items[i * quotient + min(i, remainder):(i + 1) * quotient + min(i + 1, remainder)]
            for i in range(count)]


def check_groups(groups: Groups, num_groups: int) -> Groups:
    """Horovod's checks of `groups` and the deprecated `num_groups`; returns the groups."""
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed "
                      "in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if groups is not None and not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of "
                         "tf.Variable.")
    return groups


def variable_key(variable: Any) -> Any:
    """A hashable identity of a tf.Variable (its ref(), as Horovod) or a Keras 3 variable."""
    ref = getattr(variable, "ref", None)
    return ref() if callable(ref) else id(variable)


def _index_groups(groups: Groups, grads: list[Any], variables: list[Any]) -> IndexGroups:
    """The positions of the gradients each group reduces together (None: no groups). A list of
    lists of variables groups them (by identity: Keras 3's variable names are not unique);
    gradients of variables in no list are one group each; None gradients are left out, as in
    Horovod."""
    if groups is None:
        return None
    present = [i for i, g in enumerate(grads) if g is not None]
    if isinstance(groups, list):
        position = {variable_key(variables[i]): i for i in present}
        result = []
        for group in groups:
            members = [position.pop(variable_key(v)) for v in group
                       if variable_key(v) in position]
            result.append(tuple(members))
        result.extend((i,) for i in position.values())
        return tuple(g for g in result if g)
    return tuple(tuple(part) for part in split_list(present, groups) if part)


def make_allreduce_grads_fn(name: str, device_dense: str, device_sparse: str,
                            compression: type[Compressor], sparse_as_dense: bool, op: int,
                            gradient_predivide_factor: float, groups: Groups,
                            process_set: ProcessSet) -> AllreduceGrads:
    """Returns allreduce_grads(grads, vars=None, use_generic_names=False): the list of reduced
    gradients (None stays None)."""
    if op == Average:
        # kolo's Average divides by the set's size after the sum: the predivide factor moves
        # part of it before the sum, as in Horovod.
        prescale_factor = 1.0 / gradient_predivide_factor
        postscale_factor = gradient_predivide_factor
    else:
        prescale_factor = postscale_factor = 1.0

    def allreduce_grads(grads: Sequence[Any], index_groups: IndexGroups,
                        use_generic_names: bool) -> list[Any]:
        with tf.name_scope(name + "_Allreduce"):
            grads = list(grads)
            if sparse_as_dense:
                grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g
                         for g in grads]
            if not (process_set.included() and (process_set.size() or 0) > 1):
                return grads  # Horovod's _allreduce_cond: nothing to reduce with
            kwargs: dict[str, Any] = dict(device_dense=device_dense, device_sparse=device_sparse,
                          compression=compression, op=op, prescale_factor=prescale_factor,
                          postscale_factor=postscale_factor, process_set=process_set,
                          ignore_name_scope=use_generic_names)
            if index_groups is None:
                return [allreduce(g, name="grad_%d" % i if use_generic_names else None, **kwargs)
                        if g is not None else None for i, g in enumerate(grads)]
            reduced = list(grads)
            for i, group in enumerate(index_groups):
                results = grouped_allreduce([grads[j] for j in group],
                                            name="grad_%d" % i if use_generic_names else None,
                                            **kwargs)
                for j, result in zip(group, results):
                    reduced[j] = result
            return reduced

    compiled = tf.function(allreduce_grads) if executing_eagerly() else None

    def reduce(grads: Sequence[Any], variables: Sequence[Any] | None = None,
               use_generic_names: bool = False) -> list[Any]:
        index_groups = _index_groups(groups, list(grads), list(variables or []))
        if compiled is not None and executing_eagerly():
            return compiled(list(grads), index_groups, bool(use_generic_names))
        return allreduce_grads(grads, index_groups, use_generic_names)
    return reduce


def _scale_local(grad: Any, size: int) -> Any:
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / size, grad.indices, grad.dense_shape)
    return grad / size


def reduce_except_local(allreduce_grads: AllreduceGrads, grads: Sequence[Any],
                        variables: Sequence[Any], local_refs: set[Any],
                        scale_local_gradients: bool, process_set: ProcessSet,
                        use_generic_names: bool = False) -> list[Any]:
    """Reduces the gradients of the variables not registered as local; the local ones are
    divided by the set's size when scale_local_gradients (Horovod's register_local_var)."""
    grads = list(grads)
    variables = list(variables)
    shared = [i for i, v in enumerate(variables) if variable_key(v) not in local_refs]
    reduced = allreduce_grads([grads[i] for i in shared], [variables[i] for i in shared],
                              use_generic_names)
    result = list(grads)
    for i, g in zip(shared, reduced):
        result[i] = g
    if scale_local_gradients and local_refs:
        size = process_set.size() or 1
        for i, v in enumerate(variables):
            if variable_key(v) in local_refs and result[i] is not None:
                result[i] = _scale_local(result[i], size)
    return result


class _DistributedGradientTape(tf.GradientTape):
    """The methods DistributedGradientTape adds to the class of the tape it wraps."""

    def __init__(self, tape: Any, device_dense: str, device_sparse: str,
                 compression: type[Compressor], sparse_as_dense: bool, op: int,
                 gradient_predivide_factor: float, groups: Groups, persistent: bool = False,
                 watch_accessed_variables: bool = True,
                 process_set: ProcessSet = global_process_set,
                 scale_local_gradients: bool = True) -> None:
        """Takes over `tape` (the recording of the tape being wrapped); the rest as
        DistributedGradientTape's arguments."""
        super(self.__class__, self).__init__(persistent, watch_accessed_variables)
        self._tape = tape
        self._allreduce_grads = make_allreduce_grads_fn(
            "DistributedGradientTape", device_dense, device_sparse, compression,
            sparse_as_dense, op, gradient_predivide_factor, groups, process_set)
        self.process_set = process_set
        self.scale_local_gradients = scale_local_gradients
        self._local_sources: set[Any] = set()

    def register_local_source(self, source: Any) -> None:
        """Its gradient is not reduced (but scaled by 1 / size when scale_local_gradients)."""
        self._local_sources.add(variable_key(source))

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 use_generic_names: bool = False) -> list[Any]:
        """The gradients of `target` for `sources`, reduced over the ranks of the process set
        (local sources' only scaled); None for a source `target` does not depend on."""
        gradients = super(self.__class__, self).gradient(target, sources, output_gradients)
        return reduce_except_local(self._allreduce_grads, gradients, sources,
                                   self._local_sources, self.scale_local_gradients,
                                   self.process_set, use_generic_names)

    def get_local_and_global_gradients(self, target: Any, sources: Any,
                                       output_gradients: Any = None,
                                       use_generic_names: bool = False
                                       ) -> tuple[list[Any], list[Any]]:
        """(local, shared): the (source, gradient) pairs of the local sources and of the
        others, gradients as gradient() gives them."""
        gradients = self.gradient(target, sources, output_gradients, use_generic_names)
        local: list[Any] = []
        shared: list[Any] = []
        for s, g in zip(sources, gradients):
            (local if variable_key(s) in self._local_sources else shared).append((s, g))
        return local, shared


def DistributedGradientTape(gradtape: Any, device_dense: str = "", device_sparse: str = "",
                            compression: type[Compressor] = Compression.none,
                            sparse_as_dense: bool = False,
                            op: int = Average, gradient_predivide_factor: float = 1.0,
                            num_groups: int = 0, groups: Groups = None,
                            process_set: ProcessSet = global_process_set,
                            scale_local_gradients: bool = True) -> Any:
    """A tape like `gradtape` (which has recorded the forward pass) whose gradient() returns the
    gradients reduced over the ranks of `process_set` (averaged by default). Horovod's
    arguments: compression, sparse_as_dense, op, gradient_predivide_factor (Average only:
    gradients are divided by it before the sum and by size / it after), groups (a number, or
    lists of variables reduced together), process_set, scale_local_gradients."""
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    groups = check_groups(groups, num_groups)
    cls = type(gradtape.__class__.__name__, (gradtape.__class__,),
               dict(_DistributedGradientTape.__dict__))
    return cls(gradtape._tape, device_dense, device_sparse, compression, sparse_as_dense, op,
               gradient_predivide_factor, groups, gradtape._persistent,
               gradtape._watch_accessed_variables, process_set=process_set,
               scale_local_gradients=scale_local_gradients)


def PartialDistributedGradientTape(gradtape: Any, device_dense: str = "",
                                   device_sparse: str = "",
                                   compression: type[Compressor] = Compression.none,
                                   sparse_as_dense: bool = False, op: int = Average,
                                   gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                                   groups: Groups = None,
                                   process_set: ProcessSet = global_process_set,
                                   local_layers: Any = None,
                                   scale_local_gradients: bool = True) -> Any:
    """DistributedGradientTape whose `local_layers`' gradients are not reduced."""
    if local_layers is None:
        local_layers = []
    elif not isinstance(local_layers, (list, tuple)):
        local_layers = [local_layers]
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for layer in local_layers:
        for variable in layer.trainable_weights:
            tape.register_local_source(variable)
    return tape

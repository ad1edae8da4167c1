"""Horovod's TensorFlow ops (horovod/tensorflow/mpi_ops.py names, arguments and semantics) on
kolo: the op library's TensorFlow ops wrapped with the names kolo matches them by
(op_names.py), their gradients registered as Horovod registers them, and init, shutdown,
identity and process sets (kolo.common, over the op library's C functions).

Every op runs eagerly and inside tf.function. Its kernel enqueues into kolo and completes from
kolo's callback: no TensorFlow thread waits for the network. An op that fails raises a TensorFlow
error carrying kolo's message (tf.errors.FailedPreconditionError for ranks that disagree,
InvalidArgumentError for a bad argument); eagerly, a job failure (a lost rank, a deadline) raises
HorovodInternalError instead. Inside a tf.function the job failure stays the TensorFlow error
(AbortedError, DeadlineExceededError, UnavailableError, InternalError).
"""

from __future__ import annotations

import ctypes
import functools
import os
import warnings
from typing import TYPE_CHECKING, Any, Callable, ParamSpec, TypeVar

import tensorflow as tf
from tensorflow.python.framework import ops

from kolo.common import process_sets as _process_sets
from kolo.common.basics import HorovodBasics
from kolo.common.errors import HorovodInternalError
from kolo.common.process_sets import (ProcessSet, add_process_set,  # noqa: F401 (re-exported)
                                      global_process_set, remove_process_set)
from kolo.tensorflow.basics import Basics
from kolo.tensorflow.op_names import executing_eagerly, forget_unnamed_ops, joined, named_op

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _load_libkolo() -> ctypes.CDLL:
    """Loads libkolo.so (and gRPC, protobuf, OpenSSL with it) before the op library, with
    RTLD_DEEPBIND: TensorFlow has put its own protobuf, BoringSSL, zlib and re2 symbols in the
    process's global scope, and without deep binding libkolo.so's dependencies would call those
    instead of their own (a crash in the first handshake). The op library then finds libkolo.so
    loaded."""
    from kolo.tensorflow._libkolo import LIBKOLO
    path = LIBKOLO if os.path.isabs(LIBKOLO) else os.path.join(_HERE, LIBKOLO)
    return ctypes.CDLL(path, mode=os.RTLD_DEEPBIND | os.RTLD_LOCAL | os.RTLD_NOW)


_HERE = os.path.dirname(os.path.abspath(__file__))
_LIBRARY = os.path.join(_HERE, "_kolo_ops.so")
_libkolo = _load_libkolo()
_ops = tf.load_op_library(_LIBRARY)
_basics = Basics(_LIBRARY)
_process_sets.bind(_basics, "kolo.tensorflow")

# Horovod's reduce op constants (its values: the ops keep them in their reduce_op attribute).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

# TensorFlow's codes for kolo's job-fatal statuses (tf_tensor_view.cc), named as kolo names them.
_JOB_FATAL_CODES = {tf.errors.ABORTED: "ABORTED", tf.errors.DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
                    tf.errors.UNAVAILABLE: "UNAVAILABLE", tf.errors.INTERNAL: "INTERNAL"}


def _job_failure_raises_internal_error(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Eagerly, a kolo op that failed because the job failed raises HorovodInternalError (with
    the TensorFlow error as its cause); other failures stay TensorFlow errors."""
    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return fn(*args, **kwargs)
        except tf.errors.OpError as error:
            if error.error_code in _JOB_FATAL_CODES:
                raise HorovodInternalError(error.message,
                                           _JOB_FATAL_CODES[error.error_code]) from error
            raise
    return wrapper


# ---- init, identity, timeline (kolo.common.basics) ----

# shutdown() forgets the numbering of unnamed ops: init() after it (an elastic reset) starts it
# again on every rank, as a worker that just joined starts it.
_api = HorovodBasics(_basics, "kolo.tensorflow", after_shutdown=forget_unnamed_ops)
init = _api.init
shutdown = _api.shutdown
is_initialized = _api.is_initialized
rank = _api.rank
size = _api.size
local_rank = _api.local_rank
local_size = _api.local_size
cross_rank = _api.cross_rank
cross_size = _api.cross_size
is_homogeneous = _api.is_homogeneous
start_timeline = _api.start_timeline
stop_timeline = _api.stop_timeline


# What this build has: kolo's TensorFlow ops are CPU ops; kolo is neither MPI nor Gloo.
def mpi_threads_supported() -> bool:
    """False: kolo does not use MPI."""
    return False


def mpi_enabled() -> bool:
    """False: kolo does not use MPI."""
    return False


def mpi_built() -> bool:
    """False: kolo is not built with MPI."""
    return False


def gloo_enabled() -> bool:
    """False: kolo.tensorflow's ops are kolo's, not Gloo's."""
    return False


def gloo_built() -> bool:
    """False: kolo.tensorflow's ops are kolo's, not Gloo's."""
    return False


def nccl_built() -> bool:
    """False: kolo.tensorflow's ops are CPU ops."""
    return False


def ddl_built() -> bool:
    """False: kolo has no IBM DDL."""
    return False


def ccl_built() -> bool:
    """False: kolo has no oneCCL."""
    return False


def cuda_built() -> bool:
    """False: kolo.tensorflow's ops are CPU ops."""
    return False


def rocm_built() -> bool:
    """False: kolo has no ROCm."""
    return False


def _set_id(process_set: ProcessSet | None) -> int:
    return _process_sets._set_id(process_set)


def _temp_process_set_object(process_set_id: int) -> ProcessSet:
    """The ProcessSet an op's process_set_id attribute names (for its gradient)."""
    if process_set_id == 0:
        return global_process_set
    ps = _process_sets._live.get(process_set_id)
    if ps is None:
        ps = ProcessSet(_basics.process_set_ranks(process_set_id))
        ps.process_set_id = process_set_id
    return ps


def _check_op(op: int) -> int:
    if op == Adasum:
        raise NotImplementedError("kolo.tensorflow has no Adasum reduction (kolo.torch has one)")
    if op not in (Average, Sum, Min, Max, Product):
        raise ValueError("unknown reduce op %r" % (op,))
    return op


def _first(tensors: Sequence[tf.Tensor]) -> tf.Tensor | None:
    """The first tensor of a group (its graph name comes from it), or None for an empty one."""
    return tensors[0] if tensors else None


# ---- allreduce ----

@_job_failure_raises_internal_error
def _allreduce(tensor: Any, name: str | None = None, op: int = Sum, prescale_factor: float = 1.0,
               postscale_factor: float = 1.0, ignore_name_scope: bool = False,
               process_set: ProcessSet = global_process_set) -> tf.Tensor:
    """Reduces `tensor` over the ranks (of `process_set`); returns a tensor of its shape and
    dtype."""
    set_id = _set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    reduce_op = _check_op(op)
    return named_op("allreduce", name, set_id, tensor, ignore_name_scope,
                    lambda names: _ops.kolo_allreduce(
                        tensor, names, reduce_op=reduce_op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()))


@ops.RegisterGradient("KoloAllreduce")
def _allreduce_grad(op: tf.Operation, grad: tf.Tensor) -> list[Any]:
    """Horovod's: the allreduce of the output's gradient with the same op and factors."""
    return [_allreduce(grad, op=op.get_attr("reduce_op"),
                       prescale_factor=op.get_attr("prescale_factor"),
                       postscale_factor=op.get_attr("postscale_factor"),
                       ignore_name_scope=op.get_attr("ignore_name_scope"),
                       process_set=_temp_process_set_object(op.get_attr("process_set_id"))),
            None]


@_job_failure_raises_internal_error
def _grouped_allreduce(tensors: Sequence[Any], name: str | None = None, op: int = Sum,
                       prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                       ignore_name_scope: bool = False,
                       process_set: ProcessSet = global_process_set) -> list[tf.Tensor]:
    """Reduces every tensor of the list as one fused transfer; returns the list of results."""
    set_id = _set_id(process_set)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    reduce_op = _check_op(op)
    return named_op("grouped_allreduce", name, set_id, _first(tensors), ignore_name_scope,
                    lambda names: _ops.kolo_grouped_allreduce(
                        tensors, names, reduce_op=reduce_op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()), len(tensors))


@ops.RegisterGradient("KoloGroupedAllreduce")
def _grouped_allreduce_grad(op: tf.Operation, *grads: tf.Tensor) -> list[Any]:
    return list(_grouped_allreduce(
        list(grads), op=op.get_attr("reduce_op"), prescale_factor=op.get_attr("prescale_factor"),
        postscale_factor=op.get_attr("postscale_factor"),
        ignore_name_scope=op.get_attr("ignore_name_scope"),
        process_set=_temp_process_set_object(op.get_attr("process_set_id")))) + [None]


# ---- allgather ----

@_job_failure_raises_internal_error
def allgather(tensor: Any, name: str | None = None, ignore_name_scope: bool = False,
              process_set: ProcessSet = global_process_set) -> tf.Tensor:
    """Concatenates every rank's `tensor` along dimension 0 (which may differ per rank), in
    rank order."""
    set_id = _set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    return named_op("allgather", name, set_id, tensor, ignore_name_scope,
                    lambda names: _ops.kolo_allgather(
                        tensor, names, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()))


def _my_rows(grad: tf.Tensor, x: tf.Tensor, ignore_name_scope: bool,
             process_set: ProcessSet) -> tf.Tensor:
    """This rank's rows of `grad`, the gradient of an allgather of `x` (Horovod's: the rows of
    every rank come from an allgather of their first dimensions)."""
    with tf.device("/cpu:0"):
        rows = tf.reshape(tf.shape(x, out_type=tf.int64)[0], [1])
        rows = tf.reshape(allgather(rows, ignore_name_scope=ignore_name_scope,
                                    process_set=process_set), [process_set.size()])
    return tf.split(grad, num_or_size_splits=rows, axis=0)[process_set.rank()]


@ops.RegisterGradient("KoloAllgather")
def _allgather_grad(op: tf.Operation, grad: tf.Tensor) -> list[Any]:
    """Horovod's: the average of the output's gradient over the ranks, this rank's rows of it."""
    ignore_name_scope = op.get_attr("ignore_name_scope")
    process_set = _temp_process_set_object(op.get_attr("process_set_id"))
    grad = _allreduce(grad, op=Average, ignore_name_scope=ignore_name_scope,
                      process_set=process_set)
    return [_my_rows(grad, op.inputs[0], ignore_name_scope, process_set), None]


@_job_failure_raises_internal_error
def grouped_allgather(tensors: Sequence[Any], name: str | None = None,
                      ignore_name_scope: bool = False,
                      process_set: ProcessSet = global_process_set) -> list[tf.Tensor]:
    """Allgathers every tensor of the list as one fused transfer."""
    set_id = _set_id(process_set)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    return named_op("grouped_allgather", name, set_id, _first(tensors), ignore_name_scope,
                    lambda names: _ops.kolo_grouped_allgather(
                        tensors, names, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()), len(tensors))


@ops.RegisterGradient("KoloGroupedAllgather")
def _grouped_allgather_grad(op: tf.Operation, *grads: tf.Tensor) -> list[Any]:
    ignore_name_scope = op.get_attr("ignore_name_scope")
    process_set = _temp_process_set_object(op.get_attr("process_set_id"))
    # One allreduce each, as Horovod: TensorFlow may give float32 zeros for an unused float64.
    reduced = [_allreduce(g, op=Average, ignore_name_scope=ignore_name_scope,
                          process_set=process_set) for g in grads]
    return [_my_rows(g, x, ignore_name_scope, process_set)
            for g, x in zip(reduced, op.inputs[:-1])] + [None]


# ---- broadcast ----

@_job_failure_raises_internal_error
def broadcast(tensor: Any, root_rank: int, name: str | None = None,
              ignore_name_scope: bool = False,
              process_set: ProcessSet = global_process_set) -> tf.Tensor:
    """Returns root_rank's `tensor` on every rank (root_rank is a job rank, also in a process
    set)."""
    set_id = _set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    root = int(root_rank)
    return named_op("broadcast", name, set_id, tensor, ignore_name_scope,
                    lambda names: _ops.kolo_broadcast(
                        tensor, names, root_rank=root, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()))


@ops.RegisterGradient("KoloBroadcast")
def _broadcast_grad(op: tf.Operation, grad: tf.Tensor) -> list[Any]:
    """Horovod's: the average of the output's gradient over the ranks on the root, zeros
    elsewhere."""
    reduced = _allreduce(grad, op=Average, ignore_name_scope=op.get_attr("ignore_name_scope"),
                         process_set=_temp_process_set_object(op.get_attr("process_set_id")))
    if rank() != op.get_attr("root_rank"):
        return [reduced * 0, None]
    return [reduced, None]


def broadcast_(variables: Iterable[tf.Variable], root_rank: int, name: str | None = None,
               process_set: ProcessSet = global_process_set) -> list[Any]:
    """Assigns root_rank's value of each variable to it on every rank; returns their new
    values. (Horovod's broadcasts into the variables' memory; kolo's assigns the broadcast
    result, the same values.)"""
    variables = list(variables)
    values = [broadcast(v, root_rank, name=None if name is None else "%s.%d" % (name, i),
                        process_set=process_set) for i, v in enumerate(variables)]
    return [v.assign(value) for v, value in zip(variables, values)]


# ---- alltoall ----

@_job_failure_raises_internal_error
def alltoall(tensor: Any, splits: Any = None, name: str | None = None,
             ignore_name_scope: bool = False, process_set: ProcessSet = global_process_set) -> Any:
    """Sends splits[d] rows of `tensor` to rank d of the set (no splits: equal parts) and
    returns the rows received, in rank order, and, when `splits` was given, the rows received
    from each rank."""
    set_id = _set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    splits_ = (tf.cast(tf.convert_to_tensor(splits), tf.int32) if splits is not None
               else tf.constant([], dtype=tf.int32))
    output, received_splits = named_op(
        "alltoall", name, set_id, tensor, ignore_name_scope,
        lambda names: _ops.kolo_alltoall(tensor, splits_, names,
                                         ignore_name_scope=ignore_name_scope,
                                         process_set_id=set_id, drive=executing_eagerly()))
    return (output, received_splits) if splits is not None else output


@ops.RegisterGradient("KoloAlltoall")
def _alltoall_grad(op: tf.Operation, grad_wrt_output: tf.Tensor,
                   grad_wrt_received_splits: tf.Tensor) -> list[Any]:
    """Horovod's: the output's gradient sent back where its rows came from."""
    grad, _ = alltoall(grad_wrt_output, splits=op.outputs[1],
                       ignore_name_scope=op.get_attr("ignore_name_scope"),
                       process_set=_temp_process_set_object(op.get_attr("process_set_id")))
    return [grad, None, None]


# ---- reducescatter ----

@_job_failure_raises_internal_error
def _reducescatter(tensor: Any, name: str | None = None, op: int = Sum,
                   ignore_name_scope: bool = False, process_set: ProcessSet = global_process_set,
                   prescale_factor: float = 1.0, postscale_factor: float = 1.0) -> tf.Tensor:
    """Reduces `tensor` over the ranks; each gets its part of dimension 0 (rows / size, the
    first rows % size ranks one more)."""
    set_id = _set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    reduce_op = _check_op(op)
    return named_op("reducescatter", name, set_id, tensor, ignore_name_scope,
                    lambda names: _ops.kolo_reducescatter(
                        tensor, names, reduce_op=reduce_op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()))


def _scaled_for_reducescatter_grad(op: tf.Operation, grads: Sequence[tf.Tensor]) -> list[Any]:
    """Horovod's reducescatter gradient: the output's gradient times the set's size for Sum,
    times the scale factors, then allgathered."""
    process_set = _temp_process_set_object(op.get_attr("process_set_id"))
    factor = 1.0
    if op.get_attr("reduce_op") == Sum:
        factor *= process_set.size() or 1
    factor *= op.get_attr("prescale_factor") * op.get_attr("postscale_factor")
    ignore_name_scope = op.get_attr("ignore_name_scope")
    return [allgather(g * tf.cast(factor, g.dtype) if factor != 1.0 else g,
                      ignore_name_scope=ignore_name_scope, process_set=process_set)
            for g in grads]


@ops.RegisterGradient("KoloReducescatter")
def _reducescatter_grad(op: tf.Operation, grad: tf.Tensor) -> list[Any]:
    return _scaled_for_reducescatter_grad(op, [grad]) + [None]


@_job_failure_raises_internal_error
def _grouped_reducescatter(tensors: Sequence[Any], name: str | None = None, op: int = Sum,
                           ignore_name_scope: bool = False,
                           process_set: ProcessSet = global_process_set,
                           prescale_factor: float = 1.0,
                           postscale_factor: float = 1.0) -> list[tf.Tensor]:
    set_id = _set_id(process_set)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    reduce_op = _check_op(op)
    return named_op("grouped_reducescatter", name, set_id, _first(tensors), ignore_name_scope,
                    lambda names: _ops.kolo_grouped_reducescatter(
                        tensors, names, reduce_op=reduce_op, prescale_factor=prescale_factor,
                        postscale_factor=postscale_factor, ignore_name_scope=ignore_name_scope,
                        process_set_id=set_id, drive=executing_eagerly()), len(tensors))


@ops.RegisterGradient("KoloGroupedReducescatter")
def _grouped_reducescatter_grad(op: tf.Operation, *grads: tf.Tensor) -> list[Any]:
    return _scaled_for_reducescatter_grad(op, grads) + [None]


# ---- join, barrier and the identity ops ----

@_job_failure_raises_internal_error
def join(process_set: ProcessSet = global_process_set) -> tf.Tensor:
    """Called by a rank that ran out of data: it contributes zeros to the allreduces the others
    still submit until every rank joined. Returns the last rank to join (an int32 tensor)."""
    set_id = _set_id(process_set)
    eager = executing_eagerly()
    last_rank = _ops.kolo_join(process_set_id=set_id, drive=eager)
    if eager:  # every rank of the set is here at once: unnamed ops number anew
        joined(set_id)
    return last_rank


@_job_failure_raises_internal_error
def barrier(process_set: ProcessSet = global_process_set) -> Any:
    """Returns once every rank (of `process_set`) called it (in a graph: the op to run)."""
    return _ops.kolo_barrier(process_set_id=_set_id(process_set),
                             drive=executing_eagerly())


def size_op(process_set_id: int = 0, name: str | None = None) -> tf.Tensor:
    """The set's size, read when the op runs (Horovod's size_op)."""
    return _ops.kolo_size(process_set_id=process_set_id, name=name)


def local_size_op(name: str | None = None) -> tf.Tensor:
    """The number of ranks on this host, read when the op runs."""
    return _ops.kolo_local_size(name=name)


def rank_op(name: str | None = None) -> tf.Tensor:
    """This rank, read when the op runs."""
    return _ops.kolo_rank(name=name)


def local_rank_op(name: str | None = None) -> tf.Tensor:
    """This rank among its host's, read when the op runs."""
    return _ops.kolo_local_rank(name=name)


def process_set_included_op(process_set_id: int = 0, name: str | None = None) -> tf.Tensor:
    """1 when this rank is in the set, 0 when not; -1 before init, -2 for an unknown set."""
    return _ops.kolo_process_set_included(process_set_id=process_set_id, name=name)


for _op_type in ("KoloJoin", "KoloBarrier", "KoloSize", "KoloLocalSize", "KoloRank",
                 "KoloLocalRank", "KoloProcessSetIncluded"):
    ops.NotDifferentiable(_op_type)


def handle_average_backwards_compatibility(op: int | None, average: bool | None) -> int:
    """Horovod's handling of the deprecated `average` argument beside `op`."""
    if op is not None:
        if average is not None:
            raise ValueError("The op parameter supersedes average. Please provide only one "
                             "of them.")
        return op
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed in "
                      "v1.0", DeprecationWarning)
        return Average if average else Sum
    return Average


def check_num_rank_power_of_2(num_rank: int) -> bool:
    """Whether num_rank is a power of 2 (Horovod's, for Adasum)."""
    return num_rank != 0 and (num_rank & (num_rank - 1)) == 0


_executing_eagerly = executing_eagerly

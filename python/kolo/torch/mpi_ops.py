"""Horovod's torch collective ops (horovod/torch/mpi_ops.py names and semantics) on kolo.

Every *_async function enqueues at once and returns an integer handle for poll() and
synchronize(); the blocking forms are *_async + synchronize. The tensors an op reads and writes
stay referenced (in the native module) until it completed. Contiguous CPU tensors are handed to
kolo as they are (no copy); a non-contiguous one is copied to a contiguous buffer first (and,
for the in-place forms, back afterwards). The out-of-place ops are autograd Functions
(functions.py); the in-place ones (trailing underscore) are not, as in Horovod.

Ops are matched across ranks by name. Without a name, each process numbers its unnamed ops in
the order it submits them, as Horovod does: then every rank must submit them in the same order.
Only ops kolo took count, and a completed join starts the numbering anew (see _submit), so a
failure on one rank does not leave the ranks' numbers apart.
"""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable

import torch

from kolo.common.basics import HorovodBasics
from kolo.common.op_names import UnnamedOps
from kolo.torch import _C
from kolo.torch import adasum as _adasum
from kolo.torch import process_sets as _process_sets
from kolo.torch.errors import HorovodInternalError
from kolo.torch.process_sets import global_process_set  # noqa: F401  (Horovod has it here)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kolo.torch.process_sets import ProcessSet

    # Turns the native result of a handle's op (outputs, received splits, last joined rank)
    # into what synchronize() returns.
    _Finish = Callable[[list[torch.Tensor], list[int], int], Any]

# Horovod's reduce op constants (its values, so that code comparing them keeps working).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_KOLO_OPS: dict[int, int] = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}

# handle -> the function turning the native result into the Python one
_handle_map: dict[int, _Finish] = {}
_handle_lock = threading.Lock()


# ---- init, identity, timeline ----
# kolo.common's, over the native module, as Horovod's mpi_ops takes them from its basics.

def _after_shutdown() -> None:
    """kolo shut down (every op it had completed): forgets the handles of ops nobody waited
    for (their tensors with them) and the numbering of unnamed ops, so that after init() again
    (an elastic job's next generation, whose new ranks number from 0) the ranks' numbers pair."""
    forgotten = _C.forget_completed_ops()
    with _handle_lock:
        for handle in forgotten:
            _handle_map.pop(handle, None)
    _unnamed.forget()


_basics = HorovodBasics(_C, "kolo.torch", _after_shutdown)
init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
rank = _basics.rank
size = _basics.size
local_rank = _basics.local_rank
local_size = _basics.local_size
cross_rank = _basics.cross_rank
cross_size = _basics.cross_size
is_homogeneous = _basics.is_homogeneous
start_timeline = _basics.start_timeline
stop_timeline = _basics.stop_timeline


# What this build has, answered as Horovod built with Gloo and without MPI (horovodrun --gloo,
# the configuration kolo stands in for) answers, types included: scripts gate on these
# (`nccl_built() >= 2700`, `gloo_enabled()`). kolo's CPU data plane does Gloo's job; it has no
# MPI, DDL, oneCCL or ROCm.
def mpi_threads_supported() -> bool:
    """Whether MPI supports multi-threading: Horovod raises ValueError when MPI is not enabled,
    as here (kolo does not use MPI)."""
    raise ValueError("Horovod MPI is not enabled: kolo does not use MPI "
                     "(mpi_threads_supported is about MPI multi-threading)")


def mpi_enabled() -> bool:
    """False: kolo does not use MPI."""
    return False


def mpi_built() -> bool:
    """False: kolo is not built with MPI."""
    return False


def gloo_enabled() -> bool:
    """True: kolo's CPU data plane does what Horovod's Gloo does."""
    return True


def gloo_built() -> bool:
    """True, as Horovod built with Gloo answers (kolo's CPU data plane stands in)."""
    return True


def nccl_built() -> int:
    """NCCL's version code (22809 for 2.28.9) when kolo was built with NCCL, else 0 (an int,
    as Horovod)."""
    return int(_C.nccl_version)


def ddl_built() -> bool:
    """False: kolo has no IBM DDL."""
    return False


def ccl_built() -> bool:
    """False: kolo has no oneCCL."""
    return False


def cuda_built() -> bool:
    """Whether kolo was built with CUDA (GPU tensors go through its GPU path)."""
    return bool(_C.cuda_built)


def rocm_built() -> bool:
    """False: kolo has no ROCm."""
    return False


# ---- helpers ----

def _reduce_op(average: bool | None, op: int | None, name: str = "op") -> int:
    """Horovod's handling of the deprecated `average` argument beside `op`."""
    if op is not None and average is not None:
        raise ValueError("%s: the op parameter supersedes average; do not pass both" % name)
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning)
        return Average if average else Sum
    return Average if op is None else op


def _kolo_op(op: int) -> int:
    """kolo's reduce op for Horovod's `op`; HorovodInternalError (Horovod's class: its C++
    refuses these) for Adasum outside allreduce and for an unknown op."""
    if op == Adasum:
        raise HorovodInternalError("Adasum is an allreduce reduction (allreduce, "
                                   "grouped_allreduce and DistributedOptimizer); kolo, like "
                                   "Horovod, has no Adasum for other ops", "INVALID_ARGUMENT")
    if op not in _KOLO_OPS:
        raise HorovodInternalError("unknown reduce op %r" % (op,), "INVALID_ARGUMENT")
    return _KOLO_OPS[op]


# ---- names of unnamed ops ----
# Ranks pair ops by name; an unnamed op is numbered, and the nth unnamed op of a process set on
# one rank pairs with the nth on the others (docs/TORCH.md, "Unnamed ops"). kolo.common.op_names
# keeps the numbers paired whatever failed on one rank only: an op refused before it was
# submitted (a bad argument, a dtype kolo lacks: an exception without `submitted`) gives its
# number back, and a completed join starts a new numbering (an epoch) in its set.
_unnamed = UnnamedOps()
# _submit(kind, name, set_id, enqueue, count=None) returns enqueue(names): [the op's name], or
# for a group of `count` tensors its members' names; an unnamed op's base is the set's next
# number. (The bound method itself, not a wrapper: the unnamed allreduce_ path pays per call.)
_submit = _unnamed.submit


def _set_id(process_set: ProcessSet | None) -> int:
    """The kolo process set id of `process_set` (None: the global set)."""
    return _process_sets._set_id(process_set)


def _ready(tensor: torch.Tensor) -> torch.Tensor:
    """The contiguous tensor kolo reads; a GPU tensor's pending work is waited for first,
    because kolo runs on its own stream."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("expected a torch.Tensor, got %s" % type(tensor).__name__)
    tensor = tensor.detach()
    if tensor.is_cuda:
        torch.cuda.current_stream(tensor.device).synchronize()
    return tensor.contiguous()


def _register(handle: int, finish: _Finish) -> int:
    with _handle_lock:
        _handle_map[handle] = finish
    return handle


def _in_place(targets: list[torch.Tensor], buffers: list[torch.Tensor]) -> list[torch.Tensor]:
    """After an in-place op on copies of non-contiguous tensors: copies the results back."""
    for target, buffer in zip(targets, buffers):
        if target.data_ptr() != buffer.data_ptr():
            with torch.no_grad():
                target.copy_(buffer)
    return targets


# ---- poll and synchronize ----

def poll(handle: int) -> bool:
    """Whether the op of `handle` completed (synchronize then returns at once). Raises
    ValueError for an unknown handle."""
    return _C.poll(handle)


def synchronize(handle: int) -> Any:
    """Waits for the op of `handle` and returns its output. Raises HorovodInternalError (a
    RuntimeError) or, for a bad argument, ValueError with kolo's message, as Horovod (errors.py).
    An unknown handle returns None, as in Horovod. The GIL is released while
    waiting, and Ctrl-C interrupts the wait (the op stays in flight)."""
    with _handle_lock:
        if handle not in _handle_map:
            return None
    try:
        outputs, splits, last_rank = _C.synchronize(handle)
    except KeyboardInterrupt:
        raise
    except BaseException:
        with _handle_lock:
            _handle_map.pop(handle, None)
        raise
    with _handle_lock:
        finish = _handle_map.pop(handle)
    return finish(outputs, splits, last_rank)


# ---- allreduce ----

def _allreduce_async(tensors: list[torch.Tensor], outputs: list[torch.Tensor], kind: str,
                     name: str | None, op: int, prescale_factor: float, postscale_factor: float,
                     grouped: bool, set_id: int, finish: _Finish) -> int:
    count = len(tensors) if grouped else None
    if op == Adasum:
        return _submit(kind, name, set_id, lambda names: _adasum_async(
            tensors, outputs, names, prescale_factor, postscale_factor, grouped, set_id,
            finish), count)
    kolo_op = _kolo_op(op)
    handle = _submit(kind, name, set_id, lambda names: _C.allreduce_async(
        names, tensors, outputs, kolo_op, float(prescale_factor), float(postscale_factor),
        grouped, set_id), count)
    return _register(handle, finish)


def _adasum_async(tensors: list[torch.Tensor], outputs: list[torch.Tensor], names: list[str],
                  prescale_factor: float, postscale_factor: float, grouped: bool, set_id: int,
                  finish: _Finish) -> int:
    """op=Adasum: an allgather of the (prescaled) tensors, each flattened to one row, then
    Horovod's Adasum tree on every rank (adasum.py), written into `outputs`."""
    for tensor in tensors:
        _adasum.check(tensor, set_id, size())
    rows = [(t * prescale_factor if prescale_factor != 1.0 else t).reshape(1, -1)
            for t in tensors]
    handle = _C.allgather_async(names, rows, grouped, set_id)

    def combine(gathered: list[torch.Tensor], splits: list[int], last_rank: int) -> Any:
        for tensor, output, rows_of_ranks in zip(tensors, outputs, gathered):
            with torch.no_grad():
                output.copy_(_adasum.reduce_gathered(rows_of_ranks, tensor.shape,
                                                     postscale_factor))
        return finish(outputs, splits, last_rank)
    return _register(handle, combine)


def allreduce_async(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
                    op: int | None = None, prescale_factor: float = 1.0,
                    postscale_factor: float = 1.0, process_set: ProcessSet | None = None) -> int:
    """Starts an out-of-place allreduce of `tensor` and returns its handle; synchronize()
    returns the result (a new tensor). Arguments and errors as allreduce_."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "allreduce_async")
    source = _ready(tensor)
    output = torch.empty_like(source, memory_format=torch.contiguous_format)
    return _allreduce_async([source], [output], "allreduce", name, op, prescale_factor,
                            postscale_factor, False, set_id, lambda outs, *_: outs[0])


def allreduce_async_(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
                     op: int | None = None, prescale_factor: float = 1.0,
                     postscale_factor: float = 1.0, process_set: ProcessSet | None = None) -> int:
    """Starts an in-place allreduce of `tensor` and returns its handle; synchronize()
    returns `tensor`. Arguments and errors as allreduce_."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "allreduce_async_")
    buffer = _ready(tensor)
    return _allreduce_async([buffer], [buffer], "allreduce", name, op, prescale_factor,
                            postscale_factor, False, set_id,
                            lambda *_: _in_place([tensor], [buffer])[0])


def allreduce_(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
               op: int | None = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               process_set: ProcessSet | None = None) -> torch.Tensor:
    """Allreduces `tensor` in place and returns it: the average over the ranks (of
    `process_set`), or op=Sum/Min/Max/Product/Adasum. `average` is Horovod's deprecated form of
    op; `name` pairs the op across ranks (without one, unnamed ops pair in submission order).
    Raises ValueError for a bad argument, HorovodInternalError when the op fails."""
    op = _reduce_op(average, op, "allreduce_")
    # is_cpu, not device.type: building the device object costs 0.2 us, a tenth of a 4 KiB op.
    if op != Adasum and isinstance(tensor, torch.Tensor) and tensor.is_cpu \
            and tensor.is_contiguous():
        # The common case, measured (docs/TORCH-RACE.md): one C++ call that enqueues and
        # waits, with no handle id, table entry, finishing closure or copy-back. (Adasum is not
        # one kolo reduction: it takes the general path, adasum.py.)
        set_id = 0 if process_set is None else _set_id(process_set)
        kolo_op = _kolo_op(op)
        if name is not None:  # a named op takes no number: no closure or list (0.5 us a call)
            _C.allreduce_in_place(str(name), tensor, kolo_op, float(prescale_factor),
                                  float(postscale_factor), set_id)
        else:
            _submit("allreduce", name, set_id, lambda names: _C.allreduce_in_place(
                names[0], tensor, kolo_op, float(prescale_factor), float(postscale_factor),
                set_id))
        return tensor
    return synchronize(allreduce_async_(tensor, None, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async(tensors: Sequence[torch.Tensor], average: bool | None = None,
                            name: str | None = None, op: int | None = None,
                            prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                            process_set: ProcessSet | None = None) -> int:
    """Starts one fused allreduce of every tensor of the list; synchronize() returns the list
    of results."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "grouped_allreduce_async")
    sources = [_ready(t) for t in tensors]
    outputs = [torch.empty_like(s, memory_format=torch.contiguous_format) for s in sources]
    return _allreduce_async(sources, outputs, "grouped_allreduce", name, op, prescale_factor,
                            postscale_factor, True, set_id, lambda outs, *_: tuple(outs))


def grouped_allreduce_async_(tensors: Sequence[torch.Tensor], average: bool | None = None,
                             name: str | None = None, op: int | None = None,
                             prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                             process_set: ProcessSet | None = None) -> int:
    """Starts one fused in-place allreduce of every tensor of the list;
    synchronize() returns them as a tuple. Arguments as allreduce_."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "grouped_allreduce_async_")
    tensors = list(tensors)
    buffers = [_ready(t) for t in tensors]
    return _allreduce_async(buffers, buffers, "grouped_allreduce", name, op, prescale_factor,
                            postscale_factor, True, set_id,
                            lambda *_: tuple(_in_place(tensors, buffers)))


def grouped_allreduce_(tensors: Sequence[torch.Tensor], average: bool | None = None,
                       name: str | None = None, op: int | None = None, prescale_factor: float = 1.0,
                       postscale_factor: float = 1.0,
                       process_set: ProcessSet | None = None) -> tuple[torch.Tensor, ...]:
    """Allreduces every tensor of the list in place, as one fused op, and returns
    them as a tuple. Arguments and errors as allreduce_."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- allgather ----

def allgather_async(tensor: torch.Tensor, name: str | None = None,
                    process_set: ProcessSet | None = None) -> int:
    """Starts concatenating every rank's `tensor` (of `process_set`) along dimension 0,
    whose length may differ between ranks, and returns its handle; synchronize() returns the
    result."""
    set_id = _set_id(process_set)
    source = _ready(tensor)
    handle = _submit("allgather", name, set_id,
                     lambda names: _C.allgather_async(names, [source], False, set_id))
    return _register(handle, lambda outs, *_: outs[0])


def grouped_allgather_async(tensors: Sequence[torch.Tensor], name: str | None = None,
                            process_set: ProcessSet | None = None) -> int:
    """Starts one fused allgather of every tensor of the list;
    synchronize() returns the tuple of results."""
    set_id = _set_id(process_set)
    sources = [_ready(t) for t in tensors]
    handle = _submit("grouped_allgather", name, set_id,
                     lambda names: _C.allgather_async(names, sources, True, set_id), len(sources))
    return _register(handle, lambda outs, *_: tuple(outs))


def sparse_allreduce_async(tensor: torch.Tensor, name: str, op: int,
                           process_set: ProcessSet | None = None) -> Callable[[], torch.Tensor]:
    """Reduces a sparse tensor as Horovod does: allgathers of its indices (transposed, so
    that they concatenate along the nonzeros) and values, uncoalesced (duplicates add up when
    the tensor is used). Returns a callable that waits and returns that tensor (values divided
    by the ranks for Average; Horovod treats every other op as Sum, and so does this)."""
    ranks = size() if process_set is None else process_set.size()
    indices = allgather_async(tensor._indices().t().contiguous(), name="%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(tensor._values(), name="%s.values" % name,
                             process_set=process_set)

    def wait() -> torch.Tensor:
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / ranks
        if gathered_indices.dim() == 0 or gathered_values.dim() == 0:
            # (torch's stubs lack its size-only form: an empty sparse tensor)
            return torch.sparse_coo_tensor(size=tensor.size(),  # type: ignore[call-arg]
                                           dtype=tensor.dtype)
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, tensor.size(),
                                       check_invariants=True)
    return wait


# ---- broadcast ----

def broadcast_async(tensor: torch.Tensor, root_rank: int, name: str | None = None,
                    process_set: ProcessSet | None = None) -> int:
    """Starts an out-of-place broadcast of root_rank's `tensor` and returns its handle;
    synchronize() returns the result (a new tensor)."""
    set_id = _set_id(process_set)
    source = _ready(tensor)
    output = torch.empty_like(source, memory_format=torch.contiguous_format)
    handle = _submit("broadcast", name, set_id, lambda names: _C.broadcast_async(
        names[0], source, output, int(root_rank), set_id))
    return _register(handle, lambda outs, *_: outs[0])


def broadcast_async_(tensor: torch.Tensor, root_rank: int, name: str | None = None,
                     process_set: ProcessSet | None = None) -> int:
    """Starts broadcasting root_rank's `tensor` into `tensor` of every rank and returns its
    handle; synchronize() returns `tensor`."""
    set_id = _set_id(process_set)
    buffer = _ready(tensor)
    handle = _submit("broadcast", name, set_id, lambda names: _C.broadcast_async(
        names[0], buffer, buffer, int(root_rank), set_id))
    return _register(handle, lambda *_: _in_place([tensor], [buffer])[0])


def broadcast_(tensor: torch.Tensor, root_rank: int, name: str | None = None,
               process_set: ProcessSet | None = None) -> torch.Tensor:
    """Copies root_rank's `tensor` into `tensor` of every rank (of `process_set`;
    root_rank is a job rank) and returns it. Raises ValueError for a bad argument,
    HorovodInternalError when the op fails."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall ----

def _splits_list(splits: torch.Tensor | Sequence[int] | None) -> list[int]:
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        splits = splits.reshape(-1).tolist()
    splits = [int(s) for s in splits]
    if any(s < 0 for s in splits):  # Horovod's C++ refuses them: a RuntimeError there too
        raise HorovodInternalError("alltoall: splits must not be negative, got %s" % splits,
                                   "INVALID_ARGUMENT")
    return splits


def alltoall_async(tensor: torch.Tensor,
                   splits: torch.Tensor | Sequence[int] | None = None,
                   name: str | None = None, process_set: ProcessSet | None = None) -> int:
    """Starts sending splits[d] rows of `tensor` to rank d (no splits: equal parts) and
    returns its handle; synchronize() returns (received rows, received splits as an int32
    tensor). Raises HorovodInternalError for a negative split, as Horovod."""
    set_id = _set_id(process_set)
    source, split_list = _ready(tensor), _splits_list(splits)
    handle = _submit("alltoall", name, set_id, lambda names: _C.alltoall_async(
        names[0], source, split_list, set_id))
    return _register(handle, lambda outs, received, _: (
        outs[0], torch.tensor(received, dtype=torch.int32)))


# ---- reducescatter ----

def reducescatter_async(tensor: torch.Tensor, name: str | None = None, op: int = Average,
                        process_set: ProcessSet | None = None, prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0) -> int:
    """Starts reducing `tensor` over the ranks (of `process_set`; op Average by default)
    and returns its handle; synchronize() returns this rank's part of dimension 0."""
    set_id = _set_id(process_set)
    source, kolo_op = _ready(tensor), _kolo_op(op)
    handle = _submit("reducescatter", name, set_id, lambda names: _C.reducescatter_async(
        names, [source], kolo_op, float(prescale_factor), float(postscale_factor), False,
        set_id))
    return _register(handle, lambda outs, *_: outs[0])


def grouped_reducescatter_async(tensors: Sequence[torch.Tensor], name: str | None = None,
                                op: int = Average, process_set: ProcessSet | None = None,
                                prescale_factor: float = 1.0, postscale_factor: float = 1.0) -> int:
    """Starts one fused reducescatter of every tensor of the list;
    synchronize() returns the tuple of this rank's parts."""
    set_id = _set_id(process_set)
    sources, kolo_op = [_ready(t) for t in tensors], _kolo_op(op)
    handle = _submit("grouped_reducescatter", name, set_id, lambda names: _C.reducescatter_async(
        names, sources, kolo_op, float(prescale_factor), float(postscale_factor), True, set_id),
        len(sources))
    return _register(handle, lambda outs, *_: tuple(outs))


# ---- join and barrier ----

def join(device: int = -1, process_set: ProcessSet | None = None) -> int:
    """Called by a rank that ran out of data: it contributes zeros to the allreduces the others
    still submit until every rank (of `process_set`) joined. Returns the last rank to join (a
    job rank)."""
    set_id = _set_id(process_set)
    handle = _register(_C.join_async(set_id), lambda outs, splits, last_rank: last_rank)
    last_rank = synchronize(handle)
    _unnamed.joined(set_id)  # every rank of the set is here at once: unnamed ops number anew
    return last_rank


def barrier(process_set: ProcessSet | None = None) -> None:
    """Returns once every rank (of `process_set`) called it."""
    set_id = _set_id(process_set)
    synchronize(_register(_C.barrier_async(set_id), lambda *_: None))

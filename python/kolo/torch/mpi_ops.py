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

import atexit
import threading
import warnings

import torch

from kolo.torch import _C
from kolo.torch import adasum as _adasum
from kolo.torch import process_sets as _process_sets
from kolo.torch.errors import HorovodInternalError, KoloError
from kolo.torch.process_sets import global_process_set  # noqa: F401  (Horovod has it here)

# Horovod's reduce op constants (its values, so that code comparing them keeps working).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_KOLO_OPS = {Sum: 0, Average: 1, Min: 2, Max: 3, Product: 4}

_handle_map = {}  # handle -> function turning the native result into the Python one
_handle_lock = threading.Lock()
_next_number = {}  # process set id -> the number of its next unnamed op
_joins = {}  # process set id -> joins completed in it (0: the global set)


# ---- init, identity, timeline ----

def init(comm=None, process_sets=None):
    """Joins the job the environment describes (kolorun, torchrun, mpirun or SLURM variables).
    A second call while initialized does nothing, as in Horovod. `process_sets`: a list of
    ProcessSet made at init with ids 1, 2, ... (kolo's KOLO_PROCESS_SETS; every rank passes
    the same), or "dynamic" (accepted: kolo can always add sets later). `comm`: a list of
    ranks is accepted when it names every rank of the job (kolo's job is always every rank
    the launcher started); an MPI communicator is refused (kolo does not use MPI)."""
    if comm is not None and not isinstance(comm, (list, tuple)):
        raise ValueError("kolo.torch.init: comm must be a list of ranks; kolo does not use "
                         "MPI, so an MPI communicator cannot be passed (kolo reads the job "
                         "from the environment)")
    if _C.is_initialized():
        return
    static_sets = _process_sets._before_init(process_sets)
    _C.init()
    if comm is not None and sorted(int(r) for r in comm) != list(range(_C.size())):
        # Every rank sees the same comm, so every rank leaves the job here.
        job_size = _C.size()
        _C.shutdown()
        raise ValueError(
            "kolo.torch.init(comm=%s): kolo's job is every rank the launcher started "
            "(0..%d); it cannot run on a subset of them. Start only those ranks (kolorun -np "
            "%d), or init() every rank and use hvd.add_process_set(%s) and "
            "process_set= on the ops" % (list(comm), job_size - 1, len(comm), list(comm)))
    _process_sets._after_init(static_sets)


def shutdown():
    """Leaves the job (waits for every rank to shut down too). No-op when not initialized."""
    if _C.is_initialized():
        try:
            _C.shutdown()
        finally:
            _process_sets._after_shutdown()


def _shutdown_at_exit():
    try:
        shutdown()
    except KoloError as error:
        warnings.warn("kolo.torch: shutdown at exit failed: %s" % error)


atexit.register(_shutdown_at_exit)


def is_initialized():
    return _C.is_initialized()


def _identity(value):
    if value < 0:
        raise ValueError("kolo has not been initialized; use kolo.torch.init().")
    return value


def rank():
    return _identity(_C.rank())


def size():
    return _identity(_C.size())


def local_rank():
    return _identity(_C.local_rank())


def local_size():
    return _identity(_C.local_size())


def cross_rank():
    return _identity(_C.cross_rank())


def cross_size():
    return _identity(_C.cross_size())


def is_homogeneous():
    """Whether every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


def start_timeline(file_path, mark_cycles=False):
    """Starts writing this rank's timeline (kolo inserts .rank<r> before the extension)."""
    _C.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    _C.stop_timeline()


# What this build has, answered as Horovod built with Gloo and without MPI (horovodrun --gloo,
# the configuration kolo stands in for) answers, types included: scripts gate on these
# (`nccl_built() >= 2700`, `gloo_enabled()`). kolo's CPU data plane does Gloo's job; it has no
# MPI, DDL, oneCCL or ROCm.
def mpi_threads_supported():
    """Horovod raises ValueError when MPI is not enabled, as here."""
    raise ValueError("Horovod MPI is not enabled: kolo does not use MPI "
                     "(mpi_threads_supported is about MPI multi-threading)")


def mpi_enabled():
    return False


def mpi_built():
    return False


def gloo_enabled():
    return True


def gloo_built():
    return True


def nccl_built():
    """NCCL's version code (22809 for 2.28.9) when kolo was built with NCCL, else 0 (an int,
    as Horovod)."""
    return int(_C.nccl_version)


def ddl_built():
    return False


def ccl_built():
    return False


def cuda_built():
    return bool(_C.cuda_built)


def rocm_built():
    return False


# ---- helpers ----

def _reduce_op(average, op, name="op"):
    """Horovod's handling of the deprecated `average` argument beside `op`."""
    if op is not None and average is not None:
        raise ValueError("%s: the op parameter supersedes average; do not pass both" % name)
    if average is not None:
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed",
                      DeprecationWarning)
        return Average if average else Sum
    return Average if op is None else op


def _kolo_op(op):
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
# one rank pairs with the nth on the others (docs/TORCH.md, "Unnamed ops"). So that the
# numbers stay paired whatever failed on one rank only:
# - a number is used only by an op kolo took: an op refused before it was submitted (a bad
#   argument, a dtype kolo lacks) gives its number back;
# - a completed join starts a new numbering (an epoch) in its set, the global set's in every
#   set: it returns on every rank of the set at once, whatever each submitted before (a rank
#   may have submitted ops its joined peers never will).

def _epoch(set_id):
    return _joins.get(0, 0) + (_joins.get(set_id, 0) if set_id != 0 else 0)


def _take_number(set_id):
    with _handle_lock:
        number = _next_number.get(set_id, 0)
        _next_number[set_id] = number + 1
        return _epoch(set_id), number


def _give_back(set_id, epoch, number):
    """Returns an unused number, unless a later one was taken since (ops submitted from
    several threads at once have no order to pair by anyway)."""
    with _handle_lock:
        if _epoch(set_id) == epoch and _next_number.get(set_id) == number + 1:
            _next_number[set_id] = number


def _joined(set_id):
    """A join of `set_id` (0: every rank) completed: its sets number from 0 in a new epoch."""
    with _handle_lock:
        _joins[set_id] = _joins.get(set_id, 0) + 1
        for numbered in list(_next_number):
            if set_id == 0 or numbered == set_id:
                _next_number[numbered] = 0


def _submit(kind, name, set_id, enqueue, count=None):
    """Returns enqueue(names): [the op's name], or for a group of `count` tensors its members'
    names (base.0, base.1, ...). Without a name, the base is the next number of the set
    (kind.noname.<n>, kind.noname.<epoch>.<n> after a join), given back when enqueue raises
    before kolo took the op (an exception without `submitted`)."""
    taken = None
    if name is None:
        taken = _take_number(set_id)
        epoch, number = taken
        base = "%s.noname.%d" % (kind, number) if epoch == 0 else \
            "%s.noname.%d.%d" % (kind, epoch, number)
    else:
        base = str(name)
    names = [base] if count is None else ["%s.%d" % (base, i) for i in range(count)]
    try:
        return enqueue(names)
    except Exception as error:  # not KeyboardInterrupt: a wait interrupted, the op in flight
        if taken is not None and not getattr(error, "submitted", False):
            _give_back(set_id, *taken)
        raise


def _set_id(process_set):
    """The kolo process set id of `process_set` (None: the global set)."""
    return _process_sets._set_id(process_set)


def _ready(tensor):
    """The contiguous tensor kolo reads; a GPU tensor's pending work is waited for first,
    because kolo runs on its own stream."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError("expected a torch.Tensor, got %s" % type(tensor).__name__)
    tensor = tensor.detach()
    if tensor.is_cuda:
        torch.cuda.current_stream(tensor.device).synchronize()
    return tensor.contiguous()


def _register(handle, finish):
    with _handle_lock:
        _handle_map[handle] = finish
    return handle


def _in_place(targets, buffers):
    """After an in-place op on copies of non-contiguous tensors: copies the results back."""
    for target, buffer in zip(targets, buffers):
        if target.data_ptr() != buffer.data_ptr():
            with torch.no_grad():
                target.copy_(buffer)
    return targets


# ---- poll and synchronize ----

def poll(handle):
    """Whether the op of `handle` completed (synchronize then returns at once)."""
    return _C.poll(handle)


def synchronize(handle):
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

def _allreduce_async(tensors, outputs, kind, name, op, prescale_factor, postscale_factor,
                     grouped, set_id, finish):
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


def _adasum_async(tensors, outputs, names, prescale_factor, postscale_factor, grouped, set_id,
                  finish):
    """op=Adasum: an allgather of the (prescaled) tensors, each flattened to one row, then
    Horovod's Adasum tree on every rank (adasum.py), written into `outputs`."""
    for tensor in tensors:
        _adasum.check(tensor, set_id, size())
    rows = [(t * prescale_factor if prescale_factor != 1.0 else t).reshape(1, -1)
            for t in tensors]
    handle = _C.allgather_async(names, rows, grouped, set_id)

    def combine(gathered, splits, last_rank):
        for tensor, output, rows_of_ranks in zip(tensors, outputs, gathered):
            with torch.no_grad():
                output.copy_(_adasum.reduce_gathered(rows_of_ranks, tensor.shape,
                                                     postscale_factor))
        return finish(outputs, splits, last_rank)
    return _register(handle, combine)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=None):
    """Starts an out-of-place allreduce of `tensor`; synchronize() returns the result."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "allreduce_async")
    source = _ready(tensor)
    output = torch.empty_like(source, memory_format=torch.contiguous_format)
    return _allreduce_async([source], [output], "allreduce", name, op, prescale_factor,
                            postscale_factor, False, set_id, lambda outs, *_: outs[0])


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=None):
    """Starts an in-place allreduce of `tensor`; synchronize() returns `tensor`."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "allreduce_async_")
    buffer = _ready(tensor)
    return _allreduce_async([buffer], [buffer], "allreduce", name, op, prescale_factor,
                            postscale_factor, False, set_id,
                            lambda *_: _in_place([tensor], [buffer])[0])


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    op = _reduce_op(average, op, "allreduce_")
    # is_cpu, not device.type: building the device object costs 0.2 us, a tenth of a 4 KiB op.
    if op != Adasum and isinstance(tensor, torch.Tensor) and tensor.is_cpu \
            and tensor.is_contiguous():
        # The common case, measured (docs/TORCH-RACE.md): one C++ call that enqueues and
        # waits, with no handle id, table entry, finishing closure or copy-back. (Adasum is not
        # one kolo reduction: it takes the general path, adasum.py.)
        set_id = _set_id(process_set)
        kolo_op = _kolo_op(op)
        _submit("allreduce", name, set_id, lambda names: _C.allreduce_in_place(
            names[0], tensor, kolo_op, float(prescale_factor), float(postscale_factor), set_id))
        return tensor
    return synchronize(allreduce_async_(tensor, None, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=None):
    """Starts one fused allreduce of every tensor of the list; synchronize() returns the list
    of results."""
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "grouped_allreduce_async")
    sources = [_ready(t) for t in tensors]
    outputs = [torch.empty_like(s, memory_format=torch.contiguous_format) for s in sources]
    return _allreduce_async(sources, outputs, "grouped_allreduce", name, op, prescale_factor,
                            postscale_factor, True, set_id, lambda outs, *_: tuple(outs))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=None):
    set_id = _set_id(process_set)
    op = _reduce_op(average, op, "grouped_allreduce_async_")
    tensors = list(tensors)
    buffers = [_ready(t) for t in tensors]
    return _allreduce_async(buffers, buffers, "grouped_allreduce", name, op, prescale_factor,
                            postscale_factor, True, set_id,
                            lambda *_: tuple(_in_place(tensors, buffers)))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=None):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# ---- allgather ----

def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's `tensor` along dimension 0 (which may differ)."""
    set_id = _set_id(process_set)
    source = _ready(tensor)
    handle = _submit("allgather", name, set_id,
                     lambda names: _C.allgather_async(names, [source], False, set_id))
    return _register(handle, lambda outs, *_: outs[0])


def grouped_allgather_async(tensors, name=None, process_set=None):
    set_id = _set_id(process_set)
    sources = [_ready(t) for t in tensors]
    handle = _submit("grouped_allgather", name, set_id,
                     lambda names: _C.allgather_async(names, sources, True, set_id), len(sources))
    return _register(handle, lambda outs, *_: tuple(outs))


def sparse_allreduce_async(tensor, name, op, process_set=None):
    """Reduces a sparse tensor as Horovod does: allgathers of its indices (transposed, so
    that they concatenate along the nonzeros) and values, uncoalesced (duplicates add up when
    the tensor is used). Returns a callable that waits and returns that tensor (values divided
    by the ranks for Average; Horovod treats every other op as Sum, and so does this)."""
    ranks = size() if process_set is None else process_set.size()
    indices = allgather_async(tensor._indices().t().contiguous(), name="%s.indices" % name,
                              process_set=process_set)
    values = allgather_async(tensor._values(), name="%s.values" % name,
                             process_set=process_set)

    def wait():
        gathered_values = synchronize(values)
        gathered_indices = synchronize(indices)
        if op == Average:
            gathered_values = gathered_values / ranks
        if gathered_indices.dim() == 0 or gathered_values.dim() == 0:
            return torch.sparse_coo_tensor(size=tensor.size(), dtype=tensor.dtype)
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, tensor.size(),
                                       check_invariants=True)
    return wait


# ---- broadcast ----

def broadcast_async(tensor, root_rank, name=None, process_set=None):
    """Starts an out-of-place broadcast of root_rank's `tensor`."""
    set_id = _set_id(process_set)
    source = _ready(tensor)
    output = torch.empty_like(source, memory_format=torch.contiguous_format)
    handle = _submit("broadcast", name, set_id, lambda names: _C.broadcast_async(
        names[0], source, output, int(root_rank), set_id))
    return _register(handle, lambda outs, *_: outs[0])


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    """Starts broadcasting root_rank's `tensor` into `tensor` of every rank."""
    set_id = _set_id(process_set)
    buffer = _ready(tensor)
    handle = _submit("broadcast", name, set_id, lambda names: _C.broadcast_async(
        names[0], buffer, buffer, int(root_rank), set_id))
    return _register(handle, lambda *_: _in_place([tensor], [buffer])[0])


def broadcast_(tensor, root_rank, name=None, process_set=None):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# ---- alltoall ----

def _splits_list(splits):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        splits = splits.reshape(-1).tolist()
    splits = [int(s) for s in splits]
    if any(s < 0 for s in splits):  # Horovod's C++ refuses them: a RuntimeError there too
        raise HorovodInternalError("alltoall: splits must not be negative, got %s" % splits,
                                   "INVALID_ARGUMENT")
    return splits


def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts sending splits[d] rows of `tensor` to rank d (no splits: equal parts);
    synchronize() returns (received rows, received splits as an int32 tensor)."""
    set_id = _set_id(process_set)
    source, split_list = _ready(tensor), _splits_list(splits)
    handle = _submit("alltoall", name, set_id, lambda names: _C.alltoall_async(
        names[0], source, split_list, set_id))
    return _register(handle, lambda outs, received, _: (
        outs[0], torch.tensor(received, dtype=torch.int32)))


# ---- reducescatter ----

def reducescatter_async(tensor, name=None, op=Average, process_set=None, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Starts reducing `tensor` over the ranks; each gets its part of dimension 0."""
    set_id = _set_id(process_set)
    source, kolo_op = _ready(tensor), _kolo_op(op)
    handle = _submit("reducescatter", name, set_id, lambda names: _C.reducescatter_async(
        names, [source], kolo_op, float(prescale_factor), float(postscale_factor), False,
        set_id))
    return _register(handle, lambda outs, *_: outs[0])


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=None,
                                prescale_factor=1.0, postscale_factor=1.0):
    set_id = _set_id(process_set)
    sources, kolo_op = [_ready(t) for t in tensors], _kolo_op(op)
    handle = _submit("grouped_reducescatter", name, set_id, lambda names: _C.reducescatter_async(
        names, sources, kolo_op, float(prescale_factor), float(postscale_factor), True, set_id),
        len(sources))
    return _register(handle, lambda outs, *_: tuple(outs))


# ---- join and barrier ----

def join(device=-1, process_set=None):
    """Called by a rank that ran out of data: it contributes zeros to the allreduces the others
    still submit until every rank (of `process_set`) joined. Returns the last rank to join (a
    job rank)."""
    set_id = _set_id(process_set)
    handle = _register(_C.join_async(set_id), lambda outs, splits, last_rank: last_rank)
    last_rank = synchronize(handle)
    _joined(set_id)  # every rank of the set is here at once: unnamed ops number anew
    return last_rank


def barrier(process_set=None):
    """Returns once every rank (of `process_set`) called it."""
    set_id = _set_id(process_set)
    synchronize(_register(_C.barrier_async(set_id), lambda *_: None))

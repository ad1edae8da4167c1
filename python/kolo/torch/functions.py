"""The blocking out-of-place ops as autograd Functions, and Horovod's helpers built on the ops:
broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object.

Gradients are Horovod's (horovod/torch/mpi_ops.py), so that a script trains to the same bits:
allreduce's is the allreduce of the output's gradient with the same op and factors;
allgather's is this rank's rows of the *averaged* gradient; broadcast's is the averaged
gradient on the root and zero elsewhere; alltoall's sends the gradient back the way the rows
came; reducescatter's is the allgather of the gradient, multiplied by the set's size for Sum
and by the prescale and postscale factors (not divided for Average). The grouped forms do the
same per tensor, as one grouped op.
"""

from __future__ import annotations

import collections
import pickle
from typing import TYPE_CHECKING, Any, cast

import torch

from kolo.torch import mpi_ops
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import Average, Sum, synchronize

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from kolo.torch.compression import Compressor
    from kolo.torch.process_sets import ProcessSet

    # broadcast_parameters' params: a state_dict, or a list of tensors or of (name, tensor)
    # pairs (a dict or a list: what the function checks).
    Params = dict[str, Any] | list[Any]


def _rank_in(process_set: ProcessSet | None) -> int:
    """This rank's rank within `process_set` (None: the global set)."""
    # A set the op ran in is registered: its rank() is an int.
    return mpi_ops.rank() if process_set is None else cast(int, process_set.rank())


def _size_of(process_set: ProcessSet | None) -> int:
    """The number of ranks of `process_set` (None: the global set)."""
    return mpi_ops.size() if process_set is None else cast(int, process_set.size())


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, name: Any, op: Any, prescale_factor: Any,
                postscale_factor: Any, process_set: Any) -> Any:
        ctx.op, ctx.factors = op, (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return synchronize(mpi_ops.allreduce_async(tensor, None, name, op, prescale_factor,
                                                   postscale_factor, process_set))

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        prescale_factor, postscale_factor = ctx.factors
        grad = synchronize(mpi_ops.allreduce_async(grad_output, None, None, ctx.op,
                                                   prescale_factor, postscale_factor,
                                                   ctx.process_set))
        return grad, None, None, None, None, None


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, name: Any, op: Any, prescale_factor: Any, postscale_factor: Any,
                process_set: Any, *tensors: Any) -> Any:
        ctx.op, ctx.factors = op, (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return tuple(synchronize(mpi_ops.grouped_allreduce_async(
            list(tensors), None, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        prescale_factor, postscale_factor = ctx.factors
        grads = synchronize(mpi_ops.grouped_allreduce_async(list(grad_outputs), None, None,
                                                            ctx.op, prescale_factor,
                                                            postscale_factor, ctx.process_set))
        return (None, None, None, None, None) + tuple(grads)


def _rows_before(rows: torch.Tensor, process_set: ProcessSet | None) -> int:
    """This rank's first row in an allgather whose ranks gave `rows` rows each."""
    return int(rows[:_rank_in(process_set)].sum().item())


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, name: Any, process_set: Any) -> Any:
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(mpi_ops.allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        ps = ctx.process_set
        averaged = allreduce(grad_output, op=Average, process_set=ps)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int32), process_set=ps)
        return averaged.narrow(0, _rows_before(rows, ps), ctx.rows), None, None


class _GroupedAllgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, name: Any, process_set: Any, *tensors: Any) -> Any:
        ctx.rows = [t.shape[0] if t.dim() > 0 else 1 for t in tensors]
        ctx.process_set = process_set
        return tuple(synchronize(mpi_ops.grouped_allgather_async(list(tensors), name,
                                                                 process_set)))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        ps = ctx.process_set
        averaged = grouped_allreduce(list(grad_outputs), op=Average, process_set=ps)
        rows = grouped_allgather([torch.tensor([r], dtype=torch.int32) for r in ctx.rows],
                                 process_set=ps)
        return (None, None) + tuple(g.narrow(0, _rows_before(r, ps), n)
                                    for g, r, n in zip(averaged, rows, ctx.rows))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, root_rank: Any, name: Any, process_set: Any) -> Any:
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(mpi_ops.broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        averaged = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if mpi_ops.rank() != ctx.root_rank:  # the job rank, as Horovod compares it
            averaged = averaged * 0
        return averaged, None, None, None


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, splits: Any, name: Any, process_set: Any) -> Any:
        output, received = synchronize(mpi_ops.alltoall_async(tensor, splits, name,
                                                              process_set))
        ctx.received, ctx.process_set = received, process_set
        if splits is None:  # Horovod returns the received splits only when given splits
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx: Any, grad_output: Any, *unused: Any) -> Any:
        grad, _ = alltoall(grad_output, splits=ctx.received, process_set=ctx.process_set)
        return grad, None, None, None


def _reducescatter_grad_scale(ctx: Any) -> list[float]:
    """What reducescatter's gradient is multiplied by before its allgather (Horovod's)."""
    factors = [_size_of(ctx.process_set)] if ctx.op == Sum else []
    return factors + [f for f in (ctx.prescale_factor, ctx.postscale_factor) if f != 1.0]


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, tensor: Any, name: Any, op: Any, prescale_factor: Any,
                postscale_factor: Any, process_set: Any) -> Any:
        ctx.op, ctx.process_set = op, process_set
        ctx.prescale_factor, ctx.postscale_factor = prescale_factor, postscale_factor
        return synchronize(mpi_ops.reducescatter_async(tensor, name, op, process_set,
                                                       prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx: Any, grad_output: Any) -> Any:
        for factor in _reducescatter_grad_scale(ctx):
            grad_output = grad_output * factor
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None


class _GroupedReducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, name: Any, op: Any, prescale_factor: Any, postscale_factor: Any,
                process_set: Any, *tensors: Any) -> Any:
        ctx.op, ctx.process_set = op, process_set
        ctx.prescale_factor, ctx.postscale_factor = prescale_factor, postscale_factor
        return tuple(synchronize(mpi_ops.grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        grads = list(grad_outputs)
        for factor in _reducescatter_grad_scale(ctx):
            grads = [g * factor for g in grads]
        return (None,) * 5 + tuple(grouped_allgather(grads, process_set=ctx.process_set))


def allreduce(tensor: torch.Tensor, average: bool | None = None, name: str | None = None,
              compression: type[Compressor] = Compression.none, op: int | None = None,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              process_set: ProcessSet | None = None) -> torch.Tensor:
    """Returns the allreduce of `tensor` over the ranks (of `process_set`): a new tensor,
    through which gradients flow. op: Average (default), Sum, Min, Max, Product or Adasum;
    `average` is Horovod's deprecated form of op. `compression` shrinks what travels
    (Compression.fp16) and restores the dtype after. `name` pairs the op across ranks (without
    one, unnamed ops pair in submission order). Raises ValueError for a bad argument,
    HorovodInternalError when the op fails."""
    mpi_ops._set_id(process_set)
    op = mpi_ops._reduce_op(average, op, "allreduce")
    compressed, ctx = compression.compress(tensor)
    summed = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                              process_set)
    return compression.decompress(summed, ctx)


def grouped_allreduce(tensors: Sequence[torch.Tensor], average: bool | None = None,
                      name: str | None = None, compression: type[Compressor] = Compression.none,
                      op: int | None = None, prescale_factor: float = 1.0,
                      postscale_factor: float = 1.0,
                      process_set: ProcessSet | None = None) -> list[torch.Tensor]:
    """Returns the allreduce of each tensor of the list (new tensors, gradients
    flow through them), done as one fused op. Arguments and errors as allreduce."""
    mpi_ops._set_id(process_set)
    op = mpi_ops._reduce_op(average, op, "grouped_allreduce")
    pairs = [compression.compress(t) for t in tensors]
    outputs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                      *[t for t, _ in pairs])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(outputs, pairs)]


def allgather(tensor: torch.Tensor, name: str | None = None,
              process_set: ProcessSet | None = None) -> torch.Tensor:
    """Returns every rank's `tensor` concatenated along dimension 0, in rank order."""
    mpi_ops._set_id(process_set)
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather(tensors: Sequence[torch.Tensor], name: str | None = None,
                      process_set: ProcessSet | None = None) -> tuple[torch.Tensor, ...]:
    """Returns the allgather of each tensor of the list, in one fused op (gradients flow
    through it)."""
    mpi_ops._set_id(process_set)
    return _GroupedAllgather.apply(name, process_set, *tensors)  # a tuple, as in Horovod


def broadcast(tensor: torch.Tensor, root_rank: int, name: str | None = None,
              process_set: ProcessSet | None = None) -> torch.Tensor:
    """Returns root_rank's `tensor` on every rank (a new tensor)."""
    mpi_ops._set_id(process_set)
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def alltoall(tensor: torch.Tensor, splits: torch.Tensor | Sequence[int] | None = None,
             name: str | None = None, process_set: ProcessSet | None = None
             ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Returns the rows every rank sent this one; with `splits`, (those rows, the received
    splits), as Horovod."""
    mpi_ops._set_id(process_set)
    return _Alltoall.apply(tensor, splits, name, process_set)


def reducescatter(tensor: torch.Tensor, name: str | None = None,
                  compression: type[Compressor] = Compression.none, op: int = Average,
                  process_set: ProcessSet | None = None, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> torch.Tensor:
    """Returns this rank's part (of dimension 0) of the reduction of `tensor`
    over the ranks of `process_set` (op Average by default; gradients flow through it).
    Raises ValueError for a bad argument, HorovodInternalError when the op fails."""
    mpi_ops._set_id(process_set)
    compressed, ctx = compression.compress(tensor)
    part = _Reducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                                process_set)
    return compression.decompress(part, ctx)


def grouped_reducescatter(tensors: Sequence[torch.Tensor], name: str | None = None,
                          compression: type[Compressor] = Compression.none, op: int = Average,
                          process_set: ProcessSet | None = None, prescale_factor: float = 1.0,
                          postscale_factor: float = 1.0) -> list[torch.Tensor]:
    """Returns the reducescatter of each tensor of the list, done as one
    fused op. Arguments and errors as reducescatter."""
    mpi_ops._set_id(process_set)
    pairs = [compression.compress(t) for t in tensors]
    parts = _GroupedReducescatter.apply(name, op, prescale_factor, postscale_factor,
                                        process_set, *[t for t, _ in pairs])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(parts, pairs)]


# ---- helpers over the ops ----

def broadcast_parameters(params: Params, root_rank: int,
                         process_set: ProcessSet | None = None) -> None:
    """Copies root_rank's parameters into every rank's, in place: `params` is a state_dict or
    a list of tensors or of (name, tensor) pairs (model.named_parameters())."""
    mpi_ops._set_id(process_set)
    pairs: list[tuple[str | None, torch.Tensor | None]]
    if isinstance(params, dict):
        pairs = sorted(params.items())
    elif isinstance(params, list):
        pairs = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in pairs:
        if p is None:
            continue
        tensor = p.data if isinstance(p, torch.nn.Parameter) else p
        handles.append(mpi_ops.broadcast_async_(tensor, root_rank,
                                                None if name is None else "bp." + name,
                                                process_set))
    for handle in handles:
        synchronize(handle)


def _init_optimizer_state(optimizer: torch.optim.Optimizer,
                          model: torch.nn.Module | None) -> None:
    """Horovod's way of giving a fresh optimizer its state: a zero gradient for every
    parameter that trains (sparse for SparseAdam, and for SGD on a sparse Embedding of
    `model`), then one step of the wrapped optimizer (a DistributedOptimizer's own step would
    allreduce, which every rank would have to call)."""
    sparse: set[int] = set()
    if model is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Embedding) and module.sparse:
                sparse.update(id(p) for p in module.parameters())
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.requires_grad:
                p.grad = torch.zeros_like(p.data)
                if isinstance(optimizer, torch.optim.SparseAdam) or \
                        (isinstance(optimizer, torch.optim.SGD) and id(p) in sparse):
                    p.grad = p.grad.to_sparse()
    if type(optimizer).__module__ in _DISTRIBUTED_OPTIMIZER_MODULES:
        super(type(optimizer), optimizer).step()  # type: ignore[misc]  # the wrapped class's
    else:
        optimizer.step()


_DISTRIBUTED_OPTIMIZER_MODULES = ("kolo.torch.optimizer", "kolo.torch.adasum_optimizer")


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int,
                              model: torch.nn.Module | None = None,
                              process_set: ProcessSet | None = None) -> None:
    """Makes every rank's optimizer state root_rank's, as Horovod does: a fresh optimizer
    first gets its state from a step with zero gradients (on every rank), then the state's
    tensors are broadcast in place (named by state key and occurrence) and its other values
    and every param group's options (the learning rate, ...) go in one broadcast_object.
    `model` (Horovod's argument) marks sparse Embeddings. Call it after broadcast_parameters."""
    mpi_ops._set_id(process_set)
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state_dict = optimizer.state_dict()
    if not state_dict["state"]:
        _init_optimizer_state(optimizer, model)
        state_dict = optimizer.state_dict()
    if not state_dict["state"]:
        return  # a stateless optimizer: nothing to send
    tensors: list[Any] = []
    scalars: dict[str, Any] = {}
    assign: dict[str, tuple[dict[str, Any], str]] = {}
    occurrences: collections.Counter[str] = collections.Counter()
    for index, group in enumerate(state_dict["param_groups"]):
        for key, value in group.items():
            if key != "params":
                scalars["%s.%d" % (key, index)] = value
                assign["%s.%d" % (key, index)] = (optimizer.param_groups[index], key)
        for pid in group["params"]:
            for key, value in state_dict["state"].get(pid, {}).items():
                occurrences[key] += 1
                unique = "%s.%d" % (key, occurrences[key])
                if torch.is_tensor(value):
                    tensors.append((unique, value))
                else:
                    scalars[unique] = value
                    assign[unique] = (state_dict["state"][pid], key)
    broadcast_parameters(tensors, root_rank, process_set)
    for key, value in broadcast_object(scalars, root_rank, process_set=process_set).items():
        target, field = assign[key]
        target[field] = value


try:  # Horovod pickles objects with cloudpickle (lambdas, local classes): so does kolo, when
    import cloudpickle as _pickler  # it is installed (it is wherever Horovod is)
except ImportError:
    _pickler = pickle


def _to_bytes(obj: object) -> torch.Tensor:
    return torch.frombuffer(bytearray(_pickler.dumps(obj)), dtype=torch.uint8)


def _from_bytes(tensor: torch.Tensor) -> Any:
    return pickle.loads(tensor.numpy().tobytes())


def broadcast_object(obj: Any, root_rank: int = 0, name: str | None = None,
                     process_set: ProcessSet | None = None) -> Any:
    """Returns root_rank's `obj` (pickled, with cloudpickle where installed, as Horovod).
    Without a name, the ops are numbered like other unnamed ops (docs/TORCH.md: Horovod names
    them after the object's type, which differs between ranks in `obj if root else None`)."""
    mpi_ops._set_id(process_set)
    names = (None, None) if name is None else (name + ".sz", name + ".t")
    if mpi_ops.rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int32)
    else:
        length = torch.zeros(1, dtype=torch.int32)
    mpi_ops.broadcast_(length, root_rank, name=names[0], process_set=process_set)
    if mpi_ops.rank() != root_rank:
        payload = torch.zeros(int(length.item()), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name=names[1], process_set=process_set)
    return obj if mpi_ops.rank() == root_rank else _from_bytes(payload)


def allgather_object(obj: Any, name: str | None = None,
                     process_set: ProcessSet | None = None) -> list[Any]:
    """Returns the list of every rank's `obj`, in rank order. Without a name, the ops are
    numbered like other unnamed ops (see broadcast_object)."""
    mpi_ops._set_id(process_set)
    names = (None, None) if name is None else (name + ".sz", name + ".t")
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int32), name=names[0],
                        process_set=process_set)
    data = allgather(payload, name=names[1], process_set=process_set)
    objects, offset = [], 0
    for length in lengths.tolist():
        objects.append(_from_bytes(data[offset:offset + length]))
        offset += length
    return objects

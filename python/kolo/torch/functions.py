"""The blocking out-of-place ops as autograd Functions, and Horovod's helpers built on the ops:
broadcast_parameters, broadcast_optimizer_state, broadcast_object, allgather_object.

Gradients flow through the ops as in Horovod, for a total loss that is the sum of every rank's
loss: allreduce's gradient is the allreduce (same op and factors) of the output's gradient;
allgather's is this rank's rows of the summed gradient; broadcast's is the summed gradient on
the root and zero elsewhere; alltoall's sends the gradient back the way the rows came;
reducescatter's is the allgather of the gradient (divided by the ranks for Average).
"""

import io
import pickle

import torch

from kolo.torch import mpi_ops
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import Average, Sum, synchronize


def _rank_in(process_set):
    """This rank's rank within `process_set` (None: the global set)."""
    return mpi_ops.rank() if process_set is None else process_set.rank()


def _size_of(process_set):
    return mpi_ops.size() if process_set is None else process_set.size()


class _Allreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.factors = op, (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return synchronize(mpi_ops.allreduce_async(tensor, None, name, op, prescale_factor,
                                                   postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(mpi_ops.allreduce_async(grad_output, None, None, ctx.op,
                                                   *ctx.factors, ctx.process_set))
        return grad, None, None, None, None, None


class _GroupedAllreduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, op, prescale_factor, postscale_factor, process_set, *tensors):
        ctx.op, ctx.factors = op, (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return tuple(synchronize(mpi_ops.grouped_allreduce_async(
            list(tensors), None, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = synchronize(mpi_ops.grouped_allreduce_async(list(grad_outputs), None, None,
                                                            ctx.op, *ctx.factors,
                                                            ctx.process_set))
        return (None, None, None, None, None) + tuple(grads)


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(mpi_ops.allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        ps = ctx.process_set
        summed = synchronize(mpi_ops.allreduce_async(grad_output, op=Sum, process_set=ps))
        rows = synchronize(mpi_ops.allgather_async(torch.tensor([ctx.rows], dtype=torch.int64),
                                                   process_set=ps))
        offset = int(rows[:_rank_in(ps)].sum().item())
        return summed.narrow(0, offset, ctx.rows), None, None


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return synchronize(mpi_ops.broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        summed = synchronize(mpi_ops.allreduce_async(grad_output, op=Sum,
                                                     process_set=ctx.process_set))
        if mpi_ops.rank() != ctx.root_rank:
            summed = summed * 0
        return summed, None, None, None


class _Alltoall(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received = synchronize(mpi_ops.alltoall_async(tensor, splits, name,
                                                              process_set))
        ctx.received, ctx.process_set = received, process_set
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx, grad_output, grad_splits):
        grad, _ = synchronize(mpi_ops.alltoall_async(grad_output.contiguous(), ctx.received,
                                                     process_set=ctx.process_set))
        return grad, None, None, None


class _Reducescatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor, process_set):
        ctx.op, ctx.process_set = op, process_set
        ctx.scale = prescale_factor * postscale_factor
        return synchronize(mpi_ops.reducescatter_async(tensor, name, op, process_set,
                                                       prescale_factor, postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        grad = synchronize(mpi_ops.allgather_async(grad_output.contiguous(),
                                                   process_set=ctx.process_set))
        if ctx.op == Average:
            grad = grad / _size_of(ctx.process_set)
        if ctx.scale != 1.0:
            grad = grad * ctx.scale
        return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    """Returns the allreduce of `tensor` (a new tensor; gradients flow through it).
    `compression` shrinks what travels (Compression.fp16) and restores the dtype after."""
    mpi_ops._set_id(process_set)
    op = mpi_ops._reduce_op(average, op, "allreduce")
    compressed, ctx = compression.compress(tensor)
    summed = _Allreduce.apply(compressed, name, op, prescale_factor, postscale_factor,
                              process_set)
    return compression.decompress(summed, ctx)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=None):
    mpi_ops._set_id(process_set)
    op = mpi_ops._reduce_op(average, op, "grouped_allreduce")
    pairs = [compression.compress(t) for t in tensors]
    outputs = _GroupedAllreduce.apply(name, op, prescale_factor, postscale_factor, process_set,
                                      *[t for t, _ in pairs])
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(outputs, pairs)]


def allgather(tensor, name=None, process_set=None):
    """Returns every rank's `tensor` concatenated along dimension 0, in rank order."""
    mpi_ops._set_id(process_set)
    return _Allgather.apply(tensor, name, process_set)


def grouped_allgather(tensors, name=None, process_set=None):
    """Returns the allgather of each tensor of the list, in one fused op."""
    return synchronize(mpi_ops.grouped_allgather_async(tensors, name, process_set))


def broadcast(tensor, root_rank, name=None, process_set=None):
    """Returns root_rank's `tensor` on every rank (a new tensor)."""
    mpi_ops._set_id(process_set)
    return _Broadcast.apply(tensor, root_rank, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=None):
    """Returns (the rows every rank sent this one, the received splits)."""
    mpi_ops._set_id(process_set)
    return _Alltoall.apply(tensor, splits, name, process_set)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    mpi_ops._set_id(process_set)
    compressed, ctx = compression.compress(tensor)
    part = _Reducescatter.apply(compressed, name, op, prescale_factor, postscale_factor,
                                process_set)
    return compression.decompress(part, ctx)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    pairs = [compression.compress(t) for t in tensors]
    parts = synchronize(mpi_ops.grouped_reducescatter_async(
        [t for t, _ in pairs], name, op, process_set, prescale_factor, postscale_factor))
    return [compression.decompress(t, ctx) for t, (_, ctx) in zip(parts, pairs)]


# ---- helpers over the ops ----

def broadcast_parameters(params, root_rank, process_set=None):
    """Copies root_rank's parameters into every rank's, in place: `params` is a state_dict or
    a list of tensors or of (name, tensor) pairs (model.named_parameters())."""
    mpi_ops._set_id(process_set)
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError("invalid params of type: %s" % type(params))
    handles = []
    for name, p in params:
        if p is None:
            continue
        tensor = p.data if isinstance(p, torch.nn.Parameter) else p
        handles.append(mpi_ops.broadcast_async_(tensor, root_rank,
                                                None if name is None else "bp." + name,
                                                process_set))
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, process_set=None):
    """Makes every rank's optimizer state (its state_dict: step counts, moments, the param
    groups' hyperparameters) root_rank's. Call it after broadcast_parameters."""
    mpi_ops._set_id(process_set)
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("cannot broadcast torch.optim.LBFGS state")
    state = broadcast_object(optimizer.state_dict() if mpi_ops.rank() == root_rank else None,
                             root_rank, name="broadcast_optimizer_state",
                             process_set=process_set)
    if mpi_ops.rank() != root_rank:
        optimizer.load_state_dict(state)


def _to_bytes(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer, pickle_module=pickle)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _from_bytes(tensor):
    return torch.load(io.BytesIO(tensor.numpy().tobytes()), weights_only=False)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Returns root_rank's `obj` (pickled; tensors inside are saved as torch.save does).
    Without a name, the ops are numbered like other unnamed ops (same call order on all
    ranks)."""
    mpi_ops._set_id(process_set)
    names = (None, None) if name is None else ("%s.size" % name, "%s.data" % name)
    if mpi_ops.rank() == root_rank:
        payload = _to_bytes(obj)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        length = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name=names[0], process_set=process_set)
    if mpi_ops.rank() != root_rank:
        payload = torch.zeros(int(length.item()), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name=names[1], process_set=process_set)
    return obj if mpi_ops.rank() == root_rank else _from_bytes(payload)


def allgather_object(obj, name=None, process_set=None):
    """Returns the list of every rank's `obj`, in rank order."""
    mpi_ops._set_id(process_set)
    names = (None, None) if name is None else ("%s.size" % name, "%s.data" % name)
    payload = _to_bytes(obj)
    lengths = allgather(torch.tensor([payload.numel()], dtype=torch.int64), name=names[0],
                        process_set=process_set)
    data = allgather(payload, name=names[1], process_set=process_set)
    objects, offset = [], 0
    for length in lengths.tolist():
        objects.append(_from_bytes(data[offset:offset + length]))
        offset += length
    return objects

"""Gradients through the out-of-place ops, Horovod's (horovod/torch/mpi_ops.py): allgather's
and broadcast's average the output gradients, reducescatter's multiplies by the size for Sum
(and not divides for Average). tests/python/parity compares them with Horovod's bits."""

import torch

import kolo.torch as hvd


def leaf(shape):
    return torch.full(shape, float(hvd.rank() + 1), dtype=torch.float64, requires_grad=True)


def test_allreduce_grad():
    for op, factor in ((hvd.Sum, hvd.size()), (hvd.Average, 1)):
        x = leaf([3, 2])
        hvd.allreduce(x, op=op).sum().backward()
        assert torch.allclose(x.grad, torch.full([3, 2], float(factor), dtype=torch.float64))


def test_grouped_allreduce_grad():
    a, b = leaf([2]), leaf([3])
    outputs = hvd.grouped_allreduce([a, b], op=hvd.Sum)
    (outputs[0].sum() + 2 * outputs[1].sum()).backward()
    assert a.grad.tolist() == [float(hvd.size())] * 2
    assert b.grad.tolist() == [2.0 * hvd.size()] * 3


def test_allgather_grad():
    x = leaf([hvd.rank() + 1, 2])
    gathered = hvd.allgather(x)
    weights = torch.arange(gathered.shape[0], dtype=torch.float64).unsqueeze(1)
    (gathered * weights).sum().backward()
    offset = sum(r + 1 for r in range(hvd.rank()))
    expected = weights[offset:offset + hvd.rank() + 1].expand(-1, 2)  # the ranks' average
    assert torch.allclose(x.grad, expected)


def test_grouped_allgather_grad():
    a, b = leaf([hvd.rank() + 1]), leaf([2, 3])
    ga, gb = hvd.grouped_allgather([a, b])
    assert ga.grad_fn is not None and gb.grad_fn is not None
    (ga * torch.arange(ga.shape[0], dtype=torch.float64)).sum().backward()
    offset = sum(r + 1 for r in range(hvd.rank()))
    assert a.grad.tolist() == [float(i) for i in range(offset, offset + hvd.rank() + 1)]


def test_broadcast_grad():
    x = leaf([4])
    hvd.broadcast(x, 0).sum().backward()
    expected = 1.0 if hvd.rank() == 0 else 0.0  # the average of the ranks' ones, on the root
    assert x.grad.tolist() == [expected] * 4


def test_alltoall_grad():
    x = leaf([hvd.size(), 2])
    received = hvd.alltoall(x)  # without splits: the tensor alone, as in Horovod
    (received * 3).sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0]] * hvd.size()


def test_reducescatter_grad():
    x = leaf([2 * hvd.size(), 3])
    hvd.reducescatter(x, op=hvd.Average).sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))  # Horovod does not divide for Average
    y = leaf([2 * hvd.size(), 3])
    hvd.reducescatter(y, op=hvd.Sum, prescale_factor=0.5).sum().backward()
    assert torch.equal(y.grad, torch.full_like(y, hvd.size() * 0.5))


def test_grouped_reducescatter_grad():
    a = leaf([hvd.size(), 2])
    (part,) = hvd.grouped_reducescatter([a], op=hvd.Sum)
    part.sum().backward()
    assert torch.equal(a.grad, torch.full_like(a, float(hvd.size())))

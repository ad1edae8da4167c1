"""Gradients through the out-of-place ops, for a total loss that is the sum of every rank's
loss (each rank's loss: the sum of its output, so each output gradient is ones)."""

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
    expected = weights[offset:offset + hvd.rank() + 1].expand(-1, 2) * hvd.size()
    assert torch.allclose(x.grad, expected)


def test_broadcast_grad():
    x = leaf([4])
    hvd.broadcast(x, 0).sum().backward()
    expected = float(hvd.size()) if hvd.rank() == 0 else 0.0
    assert x.grad.tolist() == [expected] * 4


def test_alltoall_grad():
    x = leaf([hvd.size(), 2])
    received, _ = hvd.alltoall(x)
    (received * 3).sum().backward()
    assert x.grad.tolist() == [[3.0, 3.0]] * hvd.size()


def test_reducescatter_grad():
    x = leaf([2 * hvd.size(), 3])
    hvd.reducescatter(x, op=hvd.Average).sum().backward()
    assert torch.allclose(x.grad, torch.full_like(x, 1.0 / hvd.size()))

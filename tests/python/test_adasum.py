"""op=Adasum: allreduce (in-place, grouped, scaled) against a NumPy reference of Horovod's
pairwise tree computed here; bit-identical results on every rank; zero vectors; the
refusals (integer tensors, process sets, non-Adasum ops); DistributedOptimizer(op=Adasum) as
Horovod's delta optimizer."""

import numpy as np
import pytest
import torch

import kolo.torch as hvd


def reference_pair(a, b):
    """Horovod's Adasum of two vectors, in NumPy (float64 products)."""
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    dot, a_sq, b_sq = a64 @ b64, a64 @ a64, b64 @ b64
    a_coeff = 1.0 - dot / a_sq * 0.5 if a_sq != 0 else 1.0
    b_coeff = 1.0 - dot / b_sq * 0.5 if b_sq != 0 else 1.0
    return (a_coeff * a.astype(np.float64) + b_coeff * b.astype(np.float64)).astype(a.dtype)


def reference_tree(arrays):
    """Level by level, neighbours first: ((r0 r1) (r2 r3))."""
    while len(arrays) > 1:
        arrays = [reference_pair(arrays[i], arrays[i + 1]) for i in range(0, len(arrays), 2)]
    return arrays[0]


def tensor_of(rank, shape=(5, 3), dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def expected(shape=(5, 3), dtype=torch.float32, seed=0):
    arrays = [tensor_of(r, shape, dtype, seed).numpy() for r in range(hvd.size())]
    return torch.from_numpy(reference_tree(arrays))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_allreduce_matches_the_reference(dtype):
    result = hvd.allreduce(tensor_of(hvd.rank(), dtype=dtype), op=hvd.Adasum)
    assert result.dtype == dtype
    assert torch.allclose(result, expected(dtype=dtype), rtol=1e-5, atol=1e-6)
    # Every rank computed the same bytes.
    gathered = hvd.allgather(result.unsqueeze(0))
    assert all(torch.equal(gathered[0], row) for row in gathered)


def test_in_place_grouped_and_scaled():
    tensor = tensor_of(hvd.rank(), seed=1)
    hvd.allreduce_(tensor, op=hvd.Adasum, name="adasum.in_place")
    assert torch.allclose(tensor, expected(seed=1), rtol=1e-5, atol=1e-6)

    shapes = [(4,), (2, 3), (0,)]
    outputs = hvd.grouped_allreduce([tensor_of(hvd.rank(), s, seed=2 + i)
                                     for i, s in enumerate(shapes)], op=hvd.Adasum)
    for i, (shape, output) in enumerate(zip(shapes, outputs)):
        assert output.shape == shape
        assert torch.allclose(output, expected(shape, seed=2 + i), rtol=1e-5, atol=1e-6)

    scaled = hvd.allreduce(tensor_of(hvd.rank(), seed=5), op=hvd.Adasum, prescale_factor=2.0,
                           postscale_factor=0.25)
    arrays = [2.0 * tensor_of(r, seed=5).numpy() for r in range(hvd.size())]
    assert torch.allclose(scaled, 0.25 * torch.from_numpy(reference_tree(arrays)), rtol=1e-5,
                          atol=1e-6)


def test_zero_vectors_keep_coefficient_one():
    # Rank 0 sends zeros: its pair's result is the other vector unchanged.
    tensor = torch.zeros(4) if hvd.rank() == 0 else tensor_of(hvd.rank(), (4,))
    result = hvd.allreduce(tensor, op=hvd.Adasum)
    arrays = [np.zeros(4, np.float32)] + [tensor_of(r, (4,)).numpy()
                                          for r in range(1, hvd.size())]
    assert torch.allclose(result, torch.from_numpy(reference_tree(arrays)), atol=1e-6)
    assert torch.equal(hvd.allreduce(torch.zeros(3), op=hvd.Adasum), torch.zeros(3))


def test_identical_vectors_combine_to_themselves():
    # adasum(a, a) = a: parallel gradients are not summed.
    result = hvd.allreduce(torch.tensor([3.0, -4.0]), op=hvd.Adasum)
    assert torch.allclose(result, torch.tensor([3.0, -4.0]))


def test_refusals():
    with pytest.raises(TypeError, match="floating point"):
        hvd.allreduce(torch.ones(3, dtype=torch.int32), op=hvd.Adasum)
    # Horovod's reducescatter refuses it in C++: a RuntimeError (HorovodInternalError).
    with pytest.raises(hvd.HorovodInternalError, match="Adasum is an allreduce reduction"):
        hvd.reducescatter(torch.ones(4), op=hvd.Adasum)


def model_for(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))


def batch_for(rank):
    generator = torch.Generator().manual_seed(50 + rank)
    return torch.randn(6, 4, generator=generator), torch.randn(6, 1, generator=generator)


def test_optimizer_combines_the_ranks_steps_with_adasum():
    model = model_for(3)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Adasum)
    start = [p.detach().clone() for p in model.parameters()]
    x, y = batch_for(hvd.rank())
    torch.nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()

    # Each rank's SGD step is -lr * its gradient; the new weights are the start plus the
    # Adasum of the steps.
    steps = [[] for _ in start]
    for r in range(hvd.size()):
        reference = model_for(3)
        rx, ry = batch_for(r)
        torch.nn.functional.mse_loss(reference(rx), ry).backward()
        for i, p in enumerate(reference.parameters()):
            steps[i].append((-0.5 * p.grad).numpy())
    for p, begin, rank_steps in zip(model.parameters(), start, steps):
        want = begin + torch.from_numpy(reference_tree(rank_steps))
        assert torch.allclose(p.detach(), want, rtol=1e-5, atol=1e-6)
    if hvd.size() > 1:
        with pytest.raises(AssertionError, match="not supported when using Adasum"):
            with optimizer.skip_synchronize():
                pass

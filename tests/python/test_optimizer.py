"""DistributedOptimizer: gradients averaged over the ranks before step(), accumulation over
backward_passes_per_step, compression, the named_parameters checks, synchronize() and
skip_synchronize(), broadcast of parameters and optimizer state giving identical training, and
groups (gradients allreduced together per group)."""

import contextlib

import pytest
import torch

import kolo.torch as hvd


def model_for(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def batch_for(rank, step=0):
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(8, 5, generator=generator), torch.randn(8, 1, generator=generator)


def local_grads(model, rank, step=0):
    """The gradients rank `rank`'s batch gives, computed locally (no kolo)."""
    model.zero_grad()
    x, y = batch_for(rank, step)
    torch.nn.functional.mse_loss(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def expected_average(seed, step=0, passes=1):
    reference = model_for(seed)
    total = None
    for r in range(hvd.size()):
        for s in range(passes):
            grads = local_grads(reference, r, step + s)
            total = grads if total is None else [t + g for t, g in zip(total, grads)]
    return [t / hvd.size() for t in total]


def run_backward(model, step=0):
    x, y = batch_for(hvd.rank(), step)
    torch.nn.functional.mse_loss(model(x), y).backward()


def test_gradients_are_averaged():
    model = model_for(1)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    run_backward(model)
    optimizer.synchronize()
    for p, expected in zip(model.parameters(), expected_average(1)):
        assert torch.allclose(p.grad, expected, atol=1e-6)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_accumulation_over_backward_passes():
    model = model_for(2)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         backward_passes_per_step=2)
    run_backward(model, 0)
    run_backward(model, 1)
    optimizer.synchronize()
    for p, expected in zip(model.parameters(), expected_average(2, passes=2)):
        assert torch.allclose(p.grad, expected, atol=1e-6)
    with optimizer.skip_synchronize():
        optimizer.step()
    optimizer.zero_grad()
    if hvd.size() > 1:
        run_backward(model, 0)
        run_backward(model, 1)
        with pytest.raises(AssertionError, match="backward_passes_per_step"):
            run_backward(model, 2)
        optimizer.synchronize()


def test_fp16_compression_and_predivide():
    model = model_for(3)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.fp16,
                                         gradient_predivide_factor=2.0)
    run_backward(model)
    optimizer.synchronize()
    for p, expected in zip(model.parameters(), expected_average(3)):
        assert p.grad.dtype == torch.float32
        assert torch.allclose(p.grad, expected, atol=2e-3, rtol=2e-3)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_sum_op():
    model = model_for(4)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(), op=hvd.Sum)
    run_backward(model)
    optimizer.synchronize()
    for p, expected in zip(model.parameters(), expected_average(4)):
        assert torch.allclose(p.grad, expected * hvd.size(), atol=1e-5)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_named_parameters_checks():
    model = model_for(5)
    params = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("same", p) for _, p in params])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=params[:1])
    with pytest.raises(ValueError, match="tuples"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[p for _, p in params])


def test_zero_grad_before_step_is_refused():
    model = model_for(6)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    run_backward(model)
    if hvd.size() > 1:
        with pytest.raises(AssertionError, match="zero_grad"):
            optimizer.zero_grad()
    optimizer.step()


def test_broadcast_state_then_identical_training():
    # Each rank starts from its own weights and its own Adam state; after the broadcasts and
    # five steps on different data, every rank holds the same weights.
    model = model_for(100 + hvd.rank())
    base = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    run_backward(model)
    base.step()  # rank-specific state
    base.zero_grad()
    optimizer = hvd.DistributedOptimizer(base, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.01)
    for step in range(5):
        optimizer.zero_grad()
        run_backward(model, step)
        optimizer.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = hvd.allgather(flat.unsqueeze(0))
    for r in range(hvd.size()):
        assert torch.equal(everyone[r], flat)


def test_broadcast_state_of_a_fresh_optimizer_whose_parameters_have_no_gradient():
    # Issue 32: no parameter has a gradient yet, one is frozen. As in Horovod, a step with
    # zero gradients gives the optimizer its state, then rank 0's state and options win.
    model = model_for(100 + hvd.rank())
    frozen = next(model.parameters())
    frozen.requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    assert optimizer.param_groups[0]["lr"] == 0.1
    training = [p for p in model.parameters() if p.requires_grad]
    assert frozen not in optimizer.state and frozen.grad is None
    for p in training:
        assert torch.equal(optimizer.state[p]["momentum_buffer"], torch.zeros_like(p))
        assert torch.equal(p.grad, torch.zeros_like(p))


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_sparse_gradients(sparse_as_dense):
    # Each rank looks up its own rows of an embedding with sparse gradients; the averaged
    # gradient is the mean of the ranks' dense gradients.
    def embedding():
        torch.manual_seed(9)
        return torch.nn.Embedding(10, 3, sparse=True)

    def lookup(module, rank):
        rows = torch.tensor([rank, rank + 1, 9])
        module(rows).pow(2).sum().backward()

    model = embedding()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         sparse_as_dense=sparse_as_dense)
    lookup(model, hvd.rank())
    optimizer.synchronize()
    expected = torch.zeros(10, 3)
    for r in range(hvd.size()):
        reference = embedding()
        lookup(reference, r)
        expected += reference.weight.grad.to_dense() / hvd.size()
    grad = model.weight.grad
    # As Horovod's: with sparse_as_dense only the allreduce is dense, and the average goes
    # back into the sparse gradient (an optimizer such as SparseAdam takes nothing else).
    assert grad.is_sparse
    assert torch.allclose(grad.to_dense(), expected, atol=1e-6)
    with optimizer.skip_synchronize():
        optimizer.step()


@pytest.mark.parametrize("groups", ["two", "lists", "num_groups"])
def test_groups_reduce_gradients_together(groups):
    model = model_for(7)
    params = list(model.parameters())
    if groups == "two":
        kwargs = {"groups": 2}
    elif groups == "lists":
        kwargs = {"groups": [[params[0], params[3]], [params[1]]]}  # params[2]: on its own
    else:
        kwargs = {"num_groups": 3}
    with pytest.warns(DeprecationWarning) if groups == "num_groups" else contextlib.nullcontext():
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                             named_parameters=model.named_parameters(),
                                             **kwargs)
    run_backward(model)
    if hvd.size() > 1:
        # The hooks started one grouped allreduce per complete group.
        started = [key for key in optimizer._handles if isinstance(key, tuple)]
        sizes = {"two": [2, 2], "lists": [1, 1, 2], "num_groups": [1, 1, 2]}[groups]
        assert sorted(len(group) for group in started) == sizes
    optimizer.synchronize()
    for p, expected in zip(model.parameters(), expected_average(7)):
        assert torch.allclose(p.grad, expected, atol=1e-6)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_groups_checks():
    model = model_for(8)
    params = list(model.parameters())
    with pytest.raises(ValueError, match="only appear once"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 groups=[[params[0]], [params[0]]])
    with pytest.raises(ValueError, match="torch.Tensor"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), groups=[["w"]])
    with pytest.raises(ValueError, match="non-negative integer"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), groups=-1)

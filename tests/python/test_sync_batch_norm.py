"""SyncBatchNorm: on every rank's part of a batch (the parts of different sizes), the output,
the input gradient, the summed weight and bias gradients and the running statistics are those
of torch's BatchNorm on the whole batch in one process; eval mode uses the running
statistics."""

import pytest
import torch

import kolo.torch as hvd


def rows_of(rank):
    return 2 + 3 * rank  # uneven parts: 2, 5, 8, 11 rows


def part(rank, step, shape):
    generator = torch.Generator().manual_seed(100 * rank + step)
    x = torch.randn((rows_of(rank),) + shape, generator=generator, dtype=torch.float64)
    loss_weights = torch.randn((rows_of(rank),) + shape, generator=generator,
                               dtype=torch.float64)
    return x * (1 + rank) + rank, loss_weights  # the ranks' means and spreads differ


def whole_batch(step, shape):
    parts = [part(r, step, shape) for r in range(hvd.size())]
    return torch.cat([x for x, _ in parts]), torch.cat([w for _, w in parts])


def my_rows():
    start = sum(rows_of(r) for r in range(hvd.rank()))
    return slice(start, start + rows_of(hvd.rank()))


@pytest.mark.parametrize("shape,reference_class", [((3,), torch.nn.BatchNorm1d),
                                                   ((3, 4, 2), torch.nn.BatchNorm2d)])
def test_matches_batch_norm_on_the_whole_batch(shape, reference_class):
    channels = shape[0]
    sync = hvd.SyncBatchNorm(channels, momentum=0.3).double()
    reference = reference_class(channels, momentum=0.3).double()
    with torch.no_grad():
        for module in (sync, reference):
            module.weight.copy_(torch.linspace(0.5, 2.0, channels))
            module.bias.copy_(torch.linspace(-1.0, 1.0, channels))
    for step in range(2):
        x, loss_weights = part(hvd.rank(), step, shape)
        x.requires_grad_(True)
        sync.zero_grad()
        out = sync(x)
        (out * loss_weights).sum().backward()

        whole_x, whole_weights = whole_batch(step, shape)
        whole_x.requires_grad_(True)
        reference.zero_grad()
        expected = reference(whole_x)
        (expected * whole_weights).sum().backward()

        rows = my_rows()
        assert torch.allclose(out, expected[rows], atol=1e-10)
        assert torch.allclose(x.grad, whole_x.grad[rows], atol=1e-10)
        grads = hvd.allreduce(torch.cat([sync.weight.grad, sync.bias.grad]), op=hvd.Sum)
        assert torch.allclose(grads, torch.cat([reference.weight.grad, reference.bias.grad]),
                              atol=1e-10)
        assert torch.allclose(sync.running_mean, reference.running_mean, atol=1e-12)
        assert torch.allclose(sync.running_var, reference.running_var, atol=1e-12)
    assert int(sync.num_batches_tracked) == 2

    sync.eval()
    reference.eval()
    x, _ = part(hvd.rank(), 7, shape)
    assert torch.allclose(sync(x), reference(x), atol=1e-12)


def test_float32_and_no_affine():
    sync = hvd.SyncBatchNorm(3, affine=False, momentum=None)
    reference = torch.nn.BatchNorm1d(3, affine=False, momentum=None)
    x, _ = part(hvd.rank(), 3, (3,))
    whole_x, _ = whole_batch(3, (3,))
    out = sync(x.float())
    assert out.dtype == torch.float32
    assert torch.allclose(out, reference(whole_x.float())[my_rows()], atol=1e-5)
    assert torch.allclose(sync.running_var, reference.running_var, atol=1e-5)


def test_input_of_one_dimension_is_refused():
    with pytest.raises(ValueError, match="expected at least 2D input"):
        hvd.SyncBatchNorm(3)(torch.zeros(3))

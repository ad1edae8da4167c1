"""kolo.torch's collective ops against values every rank can compute: each rank's input is a
function of its rank, so the expected result is known exactly. Runs at 1, 2 and 4 ranks."""

import os
import tempfile

import pytest
import torch

import kolo.torch as hvd

FLOAT_TYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INT_TYPES = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
ALL_TYPES = FLOAT_TYPES + INT_TYPES


def ranked(shape, dtype, rank=None):
    """rank + 1 everywhere (small: exact in every dtype and sum of up to 4 ranks)."""
    rank = hvd.rank() if rank is None else rank
    return torch.full(shape, rank + 1, dtype=dtype)


def rank_sum():
    n = hvd.size()
    return n * (n + 1) // 2


def test_identity():
    assert hvd.is_initialized()
    assert 0 <= hvd.rank() < hvd.size()
    assert hvd.local_size() * hvd.cross_size() == hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size()
    assert hvd.cross_rank() == 0
    assert hvd.is_homogeneous()
    hvd.init()  # a second init is a no-op, as in Horovod


def test_built_queries_answer_as_horovod_on_gloo():
    assert not hvd.mpi_built() and not hvd.mpi_enabled()
    assert hvd.gloo_built() and hvd.gloo_enabled()  # kolo's CPU path does Gloo's job
    assert not hvd.ddl_built() and not hvd.ccl_built() and not hvd.rocm_built()
    with pytest.raises(ValueError, match="MPI is not enabled"):
        hvd.mpi_threads_supported()
    # NCCL's version code (an int) or 0, as in Horovod: `nccl_built() >= 2700` works.
    assert type(hvd.nccl_built()) is int and isinstance(hvd.cuda_built(), bool)
    assert hvd.nccl_built() == 0 or (hvd.nccl_built() >= 2700 and hvd.cuda_built())


@pytest.mark.parametrize("dtype", ALL_TYPES)
def test_allreduce_sum_every_dtype(dtype):
    result = hvd.allreduce(ranked([5, 3], dtype), op=hvd.Sum)
    assert result.dtype == dtype and result.shape == (5, 3)
    assert torch.equal(result, torch.full([5, 3], rank_sum(), dtype=dtype))


def test_allreduce_bool_is_logical_or():
    mine = torch.tensor([hvd.rank() == 0, False, True])
    assert hvd.allreduce(mine, op=hvd.Sum).tolist() == [True, False, True]
    assert hvd.allreduce(mine, op=hvd.Min).tolist() == [hvd.size() == 1, False, True]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_allreduce_ops(dtype):
    n = hvd.size()
    mine = ranked([4], dtype)
    expected_average = torch.full([4], rank_sum() / n, dtype=torch.float64).to(dtype)
    assert torch.equal(hvd.allreduce(mine), expected_average)  # Average is the default
    assert torch.equal(hvd.allreduce(mine, op=hvd.Min), torch.ones(4, dtype=dtype))
    assert torch.equal(hvd.allreduce(mine, op=hvd.Max), torch.full([4], n, dtype=dtype))
    product = 1
    for r in range(n):
        product *= r + 1
    assert torch.equal(hvd.allreduce(mine, op=hvd.Product), torch.full([4], product,
                                                                       dtype=dtype))


def test_allreduce_average_argument_and_factors():
    mine = ranked([3], torch.float64)
    with pytest.warns(DeprecationWarning):
        summed = hvd.allreduce(mine, average=False)
    assert torch.equal(summed, torch.full([3], float(rank_sum()), dtype=torch.float64))
    scaled = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5)
    assert torch.allclose(scaled, summed)
    with pytest.raises(ValueError):
        hvd.allreduce(mine, average=True, op=hvd.Sum)


def test_allreduce_in_place_and_out_of_place():
    tensor = ranked([6], torch.float32)
    original = tensor.clone()
    out = hvd.allreduce(tensor, op=hvd.Sum)
    assert torch.equal(tensor, original)  # out of place leaves the input
    assert out.data_ptr() != tensor.data_ptr()
    result = hvd.allreduce_(tensor, op=hvd.Sum)
    assert result is tensor and torch.equal(tensor, out)


def test_allreduce_in_place_zero_copy():
    tensor = ranked([1000], torch.float32)
    pointer = tensor.data_ptr()
    hvd.allreduce_(tensor, op=hvd.Sum)
    assert tensor.data_ptr() == pointer


def test_allreduce_non_contiguous():
    base = ranked([4, 6], torch.float32)
    view = base.t()  # not contiguous
    assert not view.is_contiguous()
    assert torch.equal(hvd.allreduce(view, op=hvd.Sum), view.contiguous() * 0 + rank_sum())
    hvd.allreduce_(view, op=hvd.Sum)
    assert torch.equal(base, torch.full([4, 6], float(rank_sum())))


def test_allreduce_fp16_compression():
    mine = ranked([8], torch.float32) / 4
    result = hvd.allreduce(mine, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert result.dtype == torch.float32
    assert torch.allclose(result, torch.full([8], rank_sum() / 4))


def test_allreduce_async_poll_synchronize():
    handles = [hvd.allreduce_async(ranked([16], torch.float32), name="async.%d" % i,
                                   op=hvd.Sum) for i in range(5)]
    for handle in handles:
        result = hvd.synchronize(handle)
        assert torch.equal(result, torch.full([16], float(rank_sum())))
    tensor = ranked([4], torch.int64)
    handle = hvd.allreduce_async_(tensor, op=hvd.Sum)
    while not hvd.poll(handle):
        pass
    assert hvd.synchronize(handle) is tensor
    assert tensor.tolist() == [rank_sum()] * 4


def test_grouped_allreduce():
    tensors = [ranked([3], torch.float32), ranked([2, 2], torch.float64), ranked([5], torch.int32)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum)
    for tensor, result in zip(tensors, results):
        assert result.dtype == tensor.dtype and result.shape == tensor.shape
        assert torch.equal(result, torch.full_like(tensor, rank_sum()))
    hvd.grouped_allreduce_(tensors, op=hvd.Sum)
    for tensor, result in zip(tensors, results):
        assert torch.equal(tensor, result)
    handle = hvd.grouped_allreduce_async([ranked([2], torch.float32)] * 1, op=hvd.Max)
    assert hvd.synchronize(handle)[0].tolist() == [hvd.size()] * 2


@pytest.mark.parametrize("dtype", ALL_TYPES + [torch.bool])
def test_allgather_uneven_rows(dtype):
    mine = torch.full([hvd.rank() + 1, 2], hvd.rank() + 1).to(dtype)
    gathered = hvd.allgather(mine)
    expected = torch.cat([torch.full([r + 1, 2], r + 1).to(dtype) for r in range(hvd.size())])
    assert gathered.dtype == dtype and torch.equal(gathered, expected)


def test_allgather_async_and_grouped():
    handle = hvd.allgather_async(torch.tensor([hvd.rank()], dtype=torch.int32))
    assert hvd.synchronize(handle).tolist() == list(range(hvd.size()))
    a, b = hvd.grouped_allgather([torch.tensor([float(hvd.rank())]),
                                  torch.ones(hvd.rank() + 1, dtype=torch.int64)])
    assert a.tolist() == [float(r) for r in range(hvd.size())]
    assert b.numel() == rank_sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
def test_broadcast(dtype):
    for root in range(hvd.size()):
        mine = torch.full([3, 2], hvd.rank() + 1).to(dtype)
        out = hvd.broadcast(mine, root)
        assert torch.equal(out, torch.full([3, 2], root + 1).to(dtype))
        assert torch.equal(mine, torch.full([3, 2], hvd.rank() + 1).to(dtype))
        hvd.broadcast_(mine, root)
        assert torch.equal(mine, out)


def test_broadcast_async():
    tensor = ranked([7], torch.float32)
    handle = hvd.broadcast_async_(tensor, 0, name="broadcast.async")
    assert hvd.synchronize(handle) is tensor and tensor.tolist() == [1.0] * 7
    handle = hvd.broadcast_async(ranked([2], torch.float32), hvd.size() - 1)
    assert hvd.synchronize(handle).tolist() == [float(hvd.size())] * 2


def test_alltoall_even_and_with_splits():
    n, r = hvd.size(), hvd.rank()
    # Even: row d goes to rank d, holding 100 * r + d.
    mine = torch.tensor([[100 * r + d] for d in range(n)], dtype=torch.float32)
    received = hvd.alltoall(mine)  # without splits: the tensor alone, as in Horovod
    assert received.reshape(-1).tolist() == [100 * s + r for s in range(n)]
    received, splits = hvd.synchronize(hvd.alltoall_async(mine))
    assert received.reshape(-1).tolist() == [100 * s + r for s in range(n)]
    assert splits.tolist() == [1] * n and splits.dtype == torch.int32
    # Splits: rank r sends d + 1 rows to rank d.
    splits = torch.tensor([d + 1 for d in range(n)], dtype=torch.int32)
    rows = torch.cat([torch.full([d + 1, 2], 10 * r + d, dtype=torch.int64) for d in range(n)])
    received, received_splits = hvd.synchronize(hvd.alltoall_async(rows, splits))
    assert received_splits.tolist() == [r + 1] * n
    assert torch.equal(received, torch.cat([torch.full([r + 1, 2], 10 * s + r,
                                                       dtype=torch.int64) for s in range(n)]))


def test_reducescatter():
    n, r = hvd.size(), hvd.rank()
    rows = 2 * n + 1
    mine = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) * (r + 1)
    full = torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) * rank_sum()
    start = r * (rows // n) + min(r, rows % n)
    count = rows // n + (1 if r < rows % n else 0)
    part = hvd.reducescatter(mine, op=hvd.Sum)
    assert torch.equal(part, full[start:start + count])
    averaged = hvd.synchronize(hvd.reducescatter_async(mine))  # Average by default
    assert torch.allclose(averaged, full[start:start + count] / n)
    parts = hvd.grouped_reducescatter([mine, mine.double()], op=hvd.Sum)
    assert torch.equal(parts[0], part) and torch.equal(parts[1], part.double())


def test_barrier_and_join():
    hvd.barrier()
    assert 0 <= hvd.join() < hvd.size()


def test_join_with_uneven_batches():
    # Rank r has r + 1 batches; a joined rank contributes zeros to the others' allreduces.
    batches = hvd.rank() + 1
    totals = []
    for step in range(batches):
        totals.append(hvd.allreduce(torch.ones(2), name="uneven.%d" % step, op=hvd.Sum))
    last = hvd.join()
    assert last == hvd.size() - 1
    for step, total in enumerate(totals):
        assert total.tolist() == [float(hvd.size() - step)] * 2


def test_objects():
    obj = {"rank": hvd.rank(), "data": [1, 2, 3], "tensor": torch.arange(3)}
    got = hvd.broadcast_object(obj, root_rank=hvd.size() - 1)
    assert got["rank"] == hvd.size() - 1 and torch.equal(got["tensor"], torch.arange(3))
    gathered = hvd.allgather_object(("rank", hvd.rank()))
    assert gathered == [("rank", r) for r in range(hvd.size())]


def test_broadcast_parameters_state_dict_and_named():
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(4, 3)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    torch.manual_seed(0)
    reference = torch.nn.Linear(4, 3)
    assert torch.equal(model.weight, reference.weight) and torch.equal(model.bias, reference.bias)
    with torch.no_grad():
        model.weight.add_(hvd.rank())
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0)
    assert torch.equal(model.weight, reference.weight)


def test_timeline_start_stop():
    directory = hvd.broadcast_object(str(tempfile.mkdtemp()) if hvd.rank() == 0 else None)
    path = os.path.join(directory, "timeline.json")
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(3), name="timeline.traced")
    hvd.stop_timeline()
    mine = os.path.join(directory, "timeline.rank%d.json" % hvd.rank())
    assert os.path.exists(mine)
    with open(mine) as trace:
        assert "timeline.traced" in trace.read()


def test_tensors_stay_alive_until_the_op_completes():
    import gc
    handle = hvd.allreduce_async_(ranked([1 << 16], torch.float32), op=hvd.Sum)
    gc.collect()  # the only reference is kolo.torch's
    result = hvd.synchronize(handle)
    assert torch.equal(result, torch.full([1 << 16], float(rank_sum())))


@pytest.mark.skipif(hvd.size() < 2, reason="needs a rank to wait for")
def test_gil_released_while_waiting():
    import threading
    import time
    ticks, stop = [0], threading.Event()

    def tick():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    if hvd.rank() == 0:
        thread = threading.Thread(target=tick)
        thread.start()
        hvd.allreduce(torch.ones(2), name="gil")  # waits ~0.5 s for the others
        stop.set()
        thread.join()
        assert ticks[0] >= 10  # with the GIL held during the wait, the thread would not run
    else:
        time.sleep(0.5)
        hvd.allreduce(torch.ones(2), name="gil")

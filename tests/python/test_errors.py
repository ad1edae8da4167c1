"""Errors raise Horovod's exception classes carrying kolo's message: ValueError for a bad
argument, HorovodInternalError (a RuntimeError) for the rest; a mismatch or a local mistake
fails that op only and the job goes on. Multi-rank mismatches need 2+ ranks (skipped on 1)."""

import os
import signal
import threading
import time

import pytest
import torch

import kolo.torch as hvd

multi_rank = pytest.mark.skipif(hvd.size() < 2, reason="needs 2 or more ranks")


def job_still_works():
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(hvd.size())] * 2


@multi_rank
def test_shape_mismatch_fails_on_every_rank():
    with pytest.raises(hvd.HorovodInternalError) as info:  # Horovod's class for it
        hvd.allreduce(torch.ones(hvd.rank() + 1), name="mismatch.shape")
    assert info.value.code == "MISMATCH" and not info.value.job_failed
    assert "mismatch.shape" in str(info.value) and "shape" in str(info.value)
    job_still_works()


@multi_rank
def test_interrupted_allreduce_raises_and_still_completes_into_its_tensor():
    # Rank 0's in-place allreduce waits for the others, who hold theirs back: a SIGINT raises
    # KeyboardInterrupt within the wait's 100 ms slice, and the op, kept with its tensor,
    # still completes into it once the others submit.
    tensor = torch.ones(8)
    if hvd.rank() == 0:
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            hvd.allreduce_(tensor, name="interrupted", op=hvd.Sum)
        assert time.monotonic() - start < 2.0
        hvd.barrier()
        want = torch.full((8,), float(hvd.size()))
        deadline = time.monotonic() + 20
        while not torch.equal(tensor, want) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert torch.equal(tensor, want)
    else:
        hvd.barrier()
        hvd.allreduce_(tensor, name="interrupted", op=hvd.Sum)
    job_still_works()


@multi_rank
def test_dtype_mismatch():
    dtype = torch.float32 if hvd.rank() == 0 else torch.float64
    with pytest.raises(hvd.KoloError, match="mismatch.dtype"):
        hvd.allreduce(torch.ones(3, dtype=dtype), name="mismatch.dtype")
    job_still_works()


@multi_rank
def test_op_mismatch():
    op = hvd.Sum if hvd.rank() == 0 else hvd.Max
    with pytest.raises(hvd.KoloError, match="mismatch.op"):
        hvd.allreduce(torch.ones(3), name="mismatch.op", op=op)
    job_still_works()


@multi_rank
def test_broadcast_root_mismatch():
    with pytest.raises(hvd.KoloError, match="mismatch.root"):
        hvd.broadcast(torch.ones(3), hvd.rank(), name="mismatch.root")
    job_still_works()


@multi_rank
def test_duplicate_name_in_flight_fails_locally():
    # Rank 0 submits the name twice while the others hold theirs back (so it is in flight).
    if hvd.rank() == 0:
        first = hvd.allreduce_async(torch.ones(4), name="duplicate")
        with pytest.raises(ValueError, match="duplicate"):  # as in Horovod
            hvd.allreduce_async(torch.ones(4), name="duplicate")
        hvd.barrier()
    else:
        hvd.barrier()
        first = hvd.allreduce_async(torch.ones(4), name="duplicate")
    assert torch.equal(hvd.synchronize(first), torch.ones(4))
    job_still_works()


def test_local_mistakes():
    with pytest.raises(ValueError, match="(?i)complex"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError):
        hvd.broadcast(torch.ones(2), hvd.size() + 3)
    with pytest.raises(ValueError):
        hvd.allgather(torch.tensor(1.0))  # a scalar
    with pytest.raises(ValueError, match="ProcessSet"):
        hvd.allreduce(torch.ones(2), process_set=object())
    with pytest.raises(ValueError, match="has not been added"):
        hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]))
    with pytest.raises(TypeError):
        hvd.allreduce([1.0, 2.0])
    job_still_works()


def test_synchronize_of_unknown_handle_returns_none():
    assert hvd.synchronize(123456789) is None

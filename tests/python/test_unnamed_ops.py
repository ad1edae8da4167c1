"""Unnamed ops stay paired across ranks whatever failed on one of them (issue 32): an op
refused on one rank before it was submitted gives its number back, and a completed join
starts the numbering anew on every rank of the set. Needs 2+ ranks (skipped on 1)."""

import pytest
import torch

import kolo.torch as hvd

multi_rank = pytest.mark.skipif(hvd.size() < 2, reason="needs 2 or more ranks")


@multi_rank
def test_unnamed_ops_pair_after_join_and_an_op_that_failed_on_some_ranks():
    # Issue 32's hang: rank 0 joins while the others allgather (allgather does not take part
    # in join: it fails), then they join too. Their failed allgather used an unnamed number
    # rank 0 never did; after the join every rank numbers from the same start again.
    if hvd.rank() == 0:
        assert 1 <= hvd.join() < hvd.size()  # one of the others joined last
    else:
        with pytest.raises(hvd.HorovodInternalError, match="(?i)join"):
            hvd.allgather(torch.ones(1))
        hvd.join()
    assert hvd.allgather_object({"rank": hvd.rank()}) == \
        [{"rank": r} for r in range(hvd.size())]
    gathered = hvd.allgather(torch.tensor([float(hvd.rank())]))
    assert gathered.tolist() == [float(r) for r in range(hvd.size())]
    assert hvd.broadcast(torch.tensor([hvd.rank()]), 0).tolist() == [0]


@multi_rank
def test_an_op_refused_on_one_rank_before_submission_keeps_the_numbers_paired():
    if hvd.rank() == 0:
        with pytest.raises(ValueError, match="(?i)complex"):
            hvd.allreduce(torch.ones(2, dtype=torch.complex64))
        with pytest.raises(ValueError, match="root"):
            hvd.broadcast(torch.ones(1), hvd.size() + 3)
        with pytest.raises(TypeError):
            hvd.allreduce_async([1.0])
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(hvd.size())] * 2
    assert hvd.allgather(torch.ones(1)).tolist() == [1.0] * hvd.size()


def test_unnamed_ops_of_every_kind_pair_in_order():
    handles = [hvd.allreduce_async(torch.ones(1) * i, op=hvd.Sum) for i in range(3)]
    assert [hvd.synchronize(h).item() for h in handles] == [i * hvd.size() for i in range(3)]
    assert hvd.broadcast(torch.ones(1) * hvd.rank(), 0).item() == 0
    assert hvd.grouped_allgather([torch.ones(1)])[0].tolist() == [1.0] * hvd.size()
    hvd.join()
    assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()

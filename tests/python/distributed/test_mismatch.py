"""A rank that calls a different collective, shape or dtype gets kolo's error naming the ranks
and both values, on every rank, instead of a hang or a wrong result (gloo gives that only under
TORCH_DISTRIBUTED_DEBUG=DETAIL); the group then refuses further collectives, since its ranks no
longer agree on what comes next. Each test breaks a group of its own (every rank, kolo's global
process set), so the world group stays usable."""

import pytest
import torch
import torch.distributed as dist

RANK = dist.get_rank()
SIZE = dist.get_world_size()
LAST = SIZE - 1


def fresh_group():
    return dist.new_group(list(range(SIZE)))


def test_different_shapes_fail_on_every_rank_naming_both():
    group = fresh_group()
    dist.all_reduce(torch.ones(4), group=group)  # the groups' first collective agrees
    shape = 5 if RANK == LAST else 4
    with pytest.raises(RuntimeError) as raised:
        dist.all_reduce(torch.ones(shape), group=group)
    text = str(raised.value)
    assert "Mismatched allreduce shapes" in text, text
    assert "[4]" in text and "[5]" in text, text
    assert "allreduce #2 of process group" in text, text
    with pytest.raises(RuntimeError, match="no longer call the same collectives"):
        dist.all_reduce(torch.ones(4), group=group)


def test_a_different_collective_fails_naming_both():
    group = fresh_group()
    tensor = torch.ones(3)
    with pytest.raises(RuntimeError) as raised:
        if RANK == LAST:
            dist.broadcast(tensor, src=0, group=group)
        else:
            dist.all_reduce(tensor, group=group)
    text = str(raised.value)
    assert "Mismatched operations" in text, text
    assert "allreduce" in text and "broadcast" in text, text


def test_different_dtypes_fail_naming_both():
    group = fresh_group()
    dtype = torch.float64 if RANK == LAST else torch.float32
    with pytest.raises(RuntimeError, match="Mismatched data types") as raised:
        dist.all_gather_into_tensor(torch.empty(SIZE * 2, dtype=dtype), torch.ones(2, dtype=dtype),
                                    group=group)
    assert "float32" in str(raised.value) and "float64" in str(raised.value)


def test_allgather_inputs_of_different_sizes_fail_naming_both():
    group = fresh_group()
    count = 3 if RANK == LAST else 2
    outputs = [torch.empty(count) for _ in range(SIZE)]
    with pytest.raises(RuntimeError, match="Mismatched allgather inner dimensions"):
        dist.all_gather(outputs, torch.ones(count), group=group)


def test_ranks_disagreeing_on_a_scatter_root_fail_instead_of_mixing_data():
    if SIZE < 2:
        pytest.skip("needs two ranks")
    group = fresh_group()
    root = 1 if RANK == LAST else 0
    out = torch.empty(2)
    pieces = [torch.full((2,), float(r)) for r in range(SIZE)] if RANK == root else None
    failed = False
    try:
        dist.scatter(out, pieces, src=root, group=group)
    except RuntimeError as error:
        failed = True
        assert "scatter" in str(error)
    # The rank that names another root receives rows from a rank it did not expect (at 2
    # ranks, from two roots; at 4, from rank 0 instead of rank 1): it fails, whatever the
    # others see, and the group goes on (the root is not part of the next collective's name).
    if RANK == LAST:
        assert failed, "the rank that named root 1 got no error"
    flags = torch.tensor([1.0 if failed else 0.0])
    dist.all_reduce(flags, group=group)
    assert flags.item() >= 1


def test_ranks_disagreeing_on_a_gather_root_fail():
    if SIZE < 2:
        pytest.skip("needs two ranks")
    group = fresh_group()
    root = 1 if RANK == LAST else 0
    gathered = [torch.empty(2) for _ in range(SIZE)] if RANK == root else None
    failed = False
    try:
        dist.gather(torch.full((2,), float(RANK)), gathered, dst=root, group=group)
    except RuntimeError as error:
        failed = True
        assert "gather" in str(error)
    flags = torch.tensor([1.0 if failed else 0.0])
    dist.all_reduce(flags, group=group)
    assert flags.item() >= 1

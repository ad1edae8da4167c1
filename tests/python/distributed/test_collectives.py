"""Every c10d collective on the "kolo" backend against gloo, run as a peer in the same job on
the same inputs, and against a reference each rank computes from every rank's inputs: exact for
integers and bool, within the dtype's tolerance for floats (the two may add in different
orders). Sizes 0, 1, a prime and one the group does not divide; every dtype both support (where
gloo refuses one, the reference alone judges kolo)."""

import threading
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

RANK = dist.get_rank()
SIZE = dist.get_world_size()
DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool]
COUNTS = [0, 1, 7, 3 * SIZE + 1]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT,
       "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}


def data(rank, count, dtype, salt=0):
    """Rank `rank`'s input: small values, so products and sums stay exact in every dtype."""
    g = torch.Generator().manual_seed(7919 * rank + 31 * count + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, (count,), generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randint(-8, 9, (count,), generator=g).double() / 4).to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, (count,), generator=g).to(dtype)


def reference(op, count, dtype, salt=0, ranks=None):
    ranks = list(range(SIZE)) if ranks is None else ranks
    rows = torch.stack([data(r, count, dtype, salt).double() for r in ranks])
    if op == "sum":
        out = rows.sum(0)
    elif op == "product":
        out = rows.prod(0)
    elif op == "min":
        out = rows.min(0).values
    elif op == "max":
        out = rows.max(0).values
    else:  # avg: integers truncate toward zero, as kolo's integer average does
        out = rows.sum(0) / len(ranks)
        if not dtype.is_floating_point:
            out = torch.trunc(out)
    if dtype == torch.bool:
        return out.bool() if op in ("sum", "max") else (rows.min(0).values.bool())
    return out.to(dtype)


def same(actual, expected):
    if actual.dtype.is_floating_point:
        torch.testing.assert_close(actual, expected, equal_nan=True)
    else:
        assert torch.equal(actual, expected), (actual, expected)


COMPARED = []  # the comparisons with gloo that ran (the last test checks there were many)


def on_gloo(call):
    """Runs `call` on gloo: True, or False where gloo refuses that dtype or op (int16, integer
    AVG, bitwise ops on floats)."""
    try:
        call()
        COMPARED.append(1)
        return True
    except (RuntimeError, ValueError):
        return False  # gloo is the reference here, not under test


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_reduce_matches_gloo_and_the_reference(op, dtype, gloo):
    if dtype == torch.bool and op == "avg":
        with pytest.raises(RuntimeError, match="average"):
            dist.all_reduce(data(RANK, 4, dtype), op=OPS[op])
        return
    for count in COUNTS:
        tensor = data(RANK, count, dtype)
        dist.all_reduce(tensor, op=OPS[op])
        same(tensor, reference(op, count, dtype))
        peer = data(RANK, count, dtype)
        if on_gloo(lambda: dist.all_reduce(peer, op=OPS[op], group=gloo)):
            same(tensor, peer)


def test_all_reduce_on_a_non_contiguous_tensor_writes_it_back():
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) * (RANK + 1)
    view = base.t()
    dist.all_reduce(view)
    factor = SIZE * (SIZE + 1) / 2
    same(base, torch.arange(12, dtype=torch.float32).reshape(3, 4) * factor)


def test_premul_sum_scales_before_the_sum():
    tensor = data(RANK, 9, torch.float64)
    dist.all_reduce(tensor, op=dist._make_nccl_premul_sum(2.5))
    same(tensor, reference("sum", 9, torch.float64) * 2.5)


def test_bitwise_and_or_work_on_bool_and_xor_is_refused(gloo):
    for op, name in ((dist.ReduceOp.BAND, "min"), (dist.ReduceOp.BOR, "max")):
        tensor = data(RANK, 11, torch.bool)
        dist.all_reduce(tensor, op=op)
        same(tensor, reference(name, 11, torch.bool))
        peer = data(RANK, 11, torch.bool)
        if on_gloo(lambda: dist.all_reduce(peer, op=op, group=gloo)):
            same(tensor, peer)
    with pytest.raises(RuntimeError, match="kolo has no BXOR reduction"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BXOR)
    with pytest.raises(RuntimeError, match="BAND reduction except on bool"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND)


def test_async_all_reduce_completes_its_future_and_chained_callbacks():
    tensor = torch.full((5,), float(RANK + 1))
    work = dist.all_reduce(tensor, async_op=True)
    doubled = work.get_future().then(lambda fut: fut.value()[0] * 2)
    assert work.wait()
    assert work.is_completed() and work.is_success()
    expected = torch.full((5,), SIZE * (SIZE + 1) / 2)
    same(tensor, expected)
    same(doubled.wait(), expected * 2)
    # A future asked for after completion is complete at once.
    same(work.get_future().wait()[0], expected)


def test_many_async_all_reduces_in_flight_complete_in_any_wait_order():
    tensors = [torch.full((3 + i % 2,), float(RANK + i)) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for work in reversed(works):
        work.wait()
    for i, t in enumerate(tensors):
        same(t, torch.full((3 + i % 2,), float(sum(r + i for r in range(SIZE)))))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32, torch.float64],
                         ids=str)
def test_all_reduce_coalesced_reduces_each_tensor_as_gloo(dtype, gloo):
    tensors = [data(RANK, n, dtype, salt=1) for n in (3, 0, 5)]
    dist.all_reduce_coalesced(tensors)
    for t, n in zip(tensors, (3, 0, 5)):
        same(t, reference("sum", n, dtype, salt=1))
    peers = [data(RANK, n, dtype, salt=1) for n in (3, 0, 5)]
    if on_gloo(lambda: dist.all_reduce_coalesced(peers, group=gloo)):
        for t, peer in zip(tensors, peers):
            same(t, peer)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_from_every_root_matches_gloo(dtype, gloo):
    for root in range(SIZE):
        for count in COUNTS:
            tensor = data(RANK, count, dtype, salt=root)
            dist.broadcast(tensor, src=root)
            same(tensor, data(root, count, dtype, salt=root))
            peer = data(RANK, count, dtype, salt=root)
            if on_gloo(lambda: dist.broadcast(peer, src=root, group=gloo)):
                same(tensor, peer)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_gather_and_all_gather_into_tensor_match_gloo(dtype, gloo):
    for count in COUNTS:
        mine = data(RANK, count, dtype, salt=2)
        outputs = [torch.empty(count, dtype=dtype) for _ in range(SIZE)]
        dist.all_gather(outputs, mine)
        flat = torch.empty(SIZE * count, dtype=dtype)
        dist.all_gather_into_tensor(flat, mine)
        expected = [data(r, count, dtype, salt=2) for r in range(SIZE)]
        for r in range(SIZE):
            same(outputs[r], expected[r])
        same(flat, torch.cat(expected))
        peer = [torch.empty(count, dtype=dtype) for _ in range(SIZE)]
        if on_gloo(lambda: dist.all_gather(peer, mine, group=gloo)):
            for r in range(SIZE):
                same(outputs[r], peer[r])


def test_all_gather_into_tensor_with_the_input_inside_the_output_as_fsdp_does():
    count = 6
    output = torch.zeros(SIZE * count)
    own = output.narrow(0, RANK * count, count)
    own.copy_(data(RANK, count, torch.float32, salt=3))
    dist.all_gather_into_tensor(output, own)
    same(output, torch.cat([data(r, count, torch.float32, salt=3) for r in range(SIZE)]))


def test_all_gather_into_tensor_refuses_an_output_of_the_wrong_size():
    with pytest.raises(RuntimeError, match="group's size"):
        dist.all_gather_into_tensor(torch.empty(SIZE * 3 + 1), torch.ones(3))


@pytest.mark.parametrize("op", ["sum", "max", "avg"])
@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != torch.bool], ids=str)
def test_reduce_scatter_and_reduce_scatter_tensor_match_the_reference(op, dtype, gloo):
    for count in (0, 1, 5):
        chunks = [data(RANK, count, dtype, salt=10 + r) for r in range(SIZE)]
        out = torch.empty(count, dtype=dtype)
        dist.reduce_scatter(out, chunks, op=OPS[op])
        rows = torch.stack([torch.stack([data(q, count, dtype, salt=10 + r) for r in range(SIZE)])
                            for q in range(SIZE)]).double()  # [sender, receiver, count]
        mine = rows[:, RANK]
        if op == "sum":
            expected = mine.sum(0)
        elif op == "max":
            expected = mine.max(0).values
        else:
            expected = mine.sum(0) / SIZE
            if not dtype.is_floating_point:
                expected = torch.trunc(expected)
        same(out, expected.to(dtype))
        flat_out = torch.empty(count, dtype=dtype)
        dist.reduce_scatter_tensor(flat_out, torch.cat(chunks), op=OPS[op])
        same(flat_out, out)
        peer = torch.empty(count, dtype=dtype)
        if on_gloo(lambda: dist.reduce_scatter_tensor(peer, torch.cat(chunks), op=OPS[op],
                                                      group=gloo)):
            same(out, peer)


def test_all_to_all_single_with_equal_and_uneven_splits_matches_gloo(gloo):
    rows = 2 * SIZE
    table = lambda r: torch.arange(rows * 3, dtype=torch.float32).reshape(rows, 3) + 100 * r
    out = torch.empty(rows, 3)
    dist.all_to_all_single(out, table(RANK))
    expected = torch.cat([table(r)[2 * RANK:2 * RANK + 2] for r in range(SIZE)])
    same(out, expected)
    peer = torch.empty(rows, 3)
    dist.all_to_all_single(peer, table(RANK), group=gloo)
    same(out, peer)
    # Rank r sends d + 1 rows to rank d; receives r + 1 rows from each rank.
    send = [d + 1 for d in range(SIZE)]
    source = lambda r: torch.arange(sum(send) * 2, dtype=torch.int64).reshape(-1, 2) + 1000 * r
    recv = [RANK + 1] * SIZE
    out = torch.empty(sum(recv), 2, dtype=torch.int64)
    dist.all_to_all_single(out, source(RANK), output_split_sizes=recv, input_split_sizes=send)
    offset = sum(range(1, RANK + 1))
    expected = torch.cat([source(r)[offset:offset + RANK + 1] for r in range(SIZE)])
    same(out, expected)
    peer = torch.empty(sum(recv), 2, dtype=torch.int64)
    dist.all_to_all_single(peer, source(RANK), output_split_sizes=recv, input_split_sizes=send,
                           group=gloo)
    same(out, peer)


def test_all_to_all_of_lists_with_different_sizes_matches_gloo(gloo):
    inputs = [torch.full((RANK + d + 1,), float(10 * RANK + d)) for d in range(SIZE)]
    outputs = [torch.empty(r + RANK + 1) for r in range(SIZE)]
    dist.all_to_all(outputs, inputs)
    for r in range(SIZE):
        same(outputs[r], torch.full((r + RANK + 1,), float(10 * r + RANK)))
    peer = [torch.empty(r + RANK + 1) for r in range(SIZE)]
    if on_gloo(lambda: dist.all_to_all(peer, inputs, group=gloo)):
        for r in range(SIZE):
            same(outputs[r], peer[r])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reduce_gather_and_scatter_to_and_from_every_root(dtype, gloo):
    for root in range(SIZE):
        tensor = data(RANK, 7, dtype, salt=root)
        before = tensor.clone()
        dist.reduce(tensor, dst=root)
        if RANK == root:
            same(tensor, reference("sum", 7, dtype, salt=root))
        else:
            same(tensor, before)  # the others' tensors stay as they were
        peer = data(RANK, 7, dtype, salt=root)
        if on_gloo(lambda: dist.reduce(peer, dst=root, group=gloo)) and RANK == root:
            same(tensor, peer)
        mine = data(RANK, 4, dtype, salt=20 + root)
        gathered = [torch.empty(4, dtype=dtype) for _ in range(SIZE)] if RANK == root else None
        dist.gather(mine, gathered, dst=root)
        if RANK == root:
            for r in range(SIZE):
                same(gathered[r], data(r, 4, dtype, salt=20 + root))
        peers = [torch.empty(4, dtype=dtype) for _ in range(SIZE)] if RANK == root else None
        if on_gloo(lambda: dist.gather(mine, peers, dst=root, group=gloo)) and RANK == root:
            for r in range(SIZE):
                same(gathered[r], peers[r])
        out = torch.empty(4, dtype=dtype)
        pieces = [data(root, 4, dtype, salt=40 + r) for r in range(SIZE)] if RANK == root \
            else None
        dist.scatter(out, pieces, src=root)
        same(out, data(root, 4, dtype, salt=40 + RANK))
        peer = torch.empty(4, dtype=dtype)
        if on_gloo(lambda: dist.scatter(peer, pieces, src=root, group=gloo)):
            same(out, peer)


def test_object_collectives_run_on_kolo():
    objects = [None] * SIZE
    dist.all_gather_object(objects, {"rank": RANK, "name": "r%d" % RANK})
    assert objects == [{"rank": r, "name": "r%d" % r} for r in range(SIZE)]
    box = [("from", RANK)] if RANK == SIZE - 1 else [None]
    dist.broadcast_object_list(box, src=SIZE - 1)
    assert box == [("from", SIZE - 1)]


def test_barrier_completes_after_the_groups_earlier_collectives():
    tensor = torch.ones(1 << 16)
    if RANK == 0:
        time.sleep(0.2)  # the others' barrier is in flight before this rank's all_reduce
    work = dist.all_reduce(tensor, async_op=True)
    barrier = dist.barrier(async_op=True)
    barrier.wait()
    assert work.is_completed()
    same(tensor, torch.full((1 << 16,), float(SIZE)))
    for _ in range(5):
        dist.barrier()


def test_wait_releases_the_gil_while_a_late_rank_arrives():
    ticks = []
    stop = threading.Event()

    def count():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    thread = threading.Thread(target=count)
    thread.start()
    try:
        if RANK == SIZE - 1:
            time.sleep(0.5)
        before = len(ticks)
        dist.all_reduce(torch.ones(3))
        during = len(ticks) - before
    finally:
        stop.set()
        thread.join()
    if RANK != SIZE - 1:
        assert during > 20, "the counting thread ran %d times while all_reduce waited" % during


def test_a_wait_with_a_timeout_returns_once_the_op_completed():
    # Past the timeout the job would end on every rank (faults/test_faults.py checks that);
    # within it, wait(timeout=) is an ordinary wait.
    tensor = torch.ones(2)
    if RANK == SIZE - 1:
        time.sleep(0.3)
    work = dist.all_reduce(tensor, async_op=True)
    assert work.wait(timeout=timedelta(seconds=20))
    same(tensor, torch.full((2,), float(SIZE)))


def test_sub_groups_are_kolo_process_sets():
    pairs = [list(range(i, min(i + 2, SIZE))) for i in range(0, SIZE, 2)]
    groups = [dist.new_group(ranks) for ranks in pairs]  # every rank makes every group
    everyone = dist.new_group(list(range(SIZE)))
    mine = [(g, ranks) for g, ranks in zip(groups, pairs) if RANK in ranks][0]
    group, ranks = mine
    assert dist.get_backend(group) == "kolo"
    assert dist.get_world_size(group) == len(ranks)
    tensor = torch.full((4,), float(RANK + 1))
    dist.all_reduce(tensor, group=group)
    same(tensor, torch.full((4,), float(sum(r + 1 for r in ranks))))
    root = ranks[-1]
    box = torch.full((2,), float(RANK))
    dist.broadcast(box, src=root, group=group)
    same(box, torch.full((2,), float(root)))
    gathered = [torch.empty(1) for _ in ranks]
    dist.all_gather(gathered, torch.tensor([float(RANK)]), group=group)
    assert [int(t.item()) for t in gathered] == ranks
    tensor = torch.ones(3)
    dist.all_reduce(tensor, group=everyone)
    same(tensor, torch.full((3,), float(SIZE)))
    for g in groups:
        if g != dist.GroupMember.NON_GROUP_MEMBER:
            assert g is group


def test_the_groups_sequence_number_counts_its_collectives():
    group = dist.new_group(list(range(SIZE)))
    backend = group._get_backend(torch.device("cpu"))
    start = backend._get_sequence_number_for_group()
    for _ in range(3):
        dist.all_reduce(torch.ones(1), group=group)
    assert backend._get_sequence_number_for_group() == start + 3


def test_gloo_took_part_in_the_comparisons():
    # gloo has every dtype here but int16, and AVG for floating types only.
    assert len(COMPARED) > 300, len(COMPARED)

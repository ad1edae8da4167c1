"""kolo.torch's process sets (Horovod's hvd.ProcessSet, add_process_set, remove_process_set,
process_set= on every op) at 4 ranks, against values every rank can compute. Adding and
removing a set is collective, so every rank runs every test, members and non-members alike."""

import pytest
import torch

import kolo.torch as hvd

pytestmark = pytest.mark.skipif(hvd.size() != 4, reason="written for 4 ranks")


@pytest.fixture
def three_of_four():
    """Ranks 0, 1 and 3: set ranks 0, 1, 2 differ from job ranks for rank 3."""
    ps = hvd.add_process_set([3, 0, 1])
    yield ps
    assert hvd.remove_process_set(ps)


def test_global_process_set():
    g = hvd.global_process_set
    assert g.process_set_id == 0
    assert g.ranks == [0, 1, 2, 3]
    assert (g.size(), g.rank(), g.included()) == (4, hvd.rank(), True)


def test_rank_size_included(three_of_four):
    ps = three_of_four
    assert ps.process_set_id > 0
    assert ps.ranks == [0, 1, 3]
    assert ps.size() == 3
    if hvd.rank() == 2:
        assert ps.included() is False
        with pytest.raises(ValueError, match="rank 2 is not in process set"):
            ps.rank()
        with pytest.raises(ValueError, match="rank 2 is not in process set %d"
                           % ps.process_set_id):
            hvd.allreduce(torch.ones(2), process_set=ps)
    else:
        assert ps.included() is True
        assert ps.rank() == [0, 1, 3].index(hvd.rank())
    unregistered = hvd.ProcessSet([1, 2])
    assert (unregistered.process_set_id, unregistered.size(), unregistered.rank()) == (
        None, None, None)


def test_duplicate_sets_are_refused(three_of_four):
    with pytest.raises(ValueError, match="registered already"):
        hvd.add_process_set(three_of_four)
    with pytest.raises(ValueError, match="exists already"):
        hvd.add_process_set([0, 1, 3])
    with pytest.raises(ValueError, match="exists already"):
        hvd.add_process_set(range(4))  # the global set's ranks
    with pytest.raises(ValueError, match="twice"):
        hvd.ProcessSet([1, 1])


def test_two_disjoint_sets_allreduce_concurrently():
    even = hvd.add_process_set([0, 2])
    odd = hvd.add_process_set(hvd.ProcessSet([1, 3]))
    mine = even if hvd.rank() % 2 == 0 else odd
    x = torch.full((5000,), float(hvd.rank() + 1))
    # The same names in both sets, several in flight at once.
    handles = [hvd.allreduce_async(x * k, name="g%d" % k, op=hvd.Sum, process_set=mine)
               for k in range(1, 4)]
    expected = (1 + 3) if mine is even else (2 + 4)
    for k, handle in enumerate(handles, start=1):
        assert torch.equal(hvd.synchronize(handle), torch.full((5000,), float(expected * k)))
    assert torch.equal(hvd.allreduce(x, process_set=mine), torch.full((5000,), expected / 2))
    hvd.barrier()
    assert hvd.remove_process_set(even) and hvd.remove_process_set(odd)


def test_every_op_in_three_of_four(three_of_four):
    ps = three_of_four
    me = hvd.rank()
    if not ps.included():
        return  # rank 2 only takes part in adding and removing the set
    r = ps.rank()
    members = [0, 1, 3]
    total = sum(m + 1 for m in members)  # 7
    x = torch.full((3, 2), float(me + 1))

    # allreduce: out-of-place (autograd), async, in place, Average, grouped.
    assert torch.equal(hvd.allreduce(x, op=hvd.Sum, process_set=ps), torch.full((3, 2), 7.0))
    assert torch.allclose(hvd.allreduce(x, process_set=ps), torch.full((3, 2), total / 3))
    h = hvd.allreduce_async(x, op=hvd.Max, process_set=ps)
    assert torch.equal(hvd.synchronize(h), torch.full((3, 2), 4.0))
    y = x.clone()
    hvd.allreduce_(y, op=hvd.Sum, process_set=ps)
    assert torch.equal(y, torch.full((3, 2), 7.0))
    h = hvd.allreduce_async_(y, op=hvd.Min, process_set=ps)
    assert hvd.synchronize(h) is y and torch.equal(y, torch.full((3, 2), 7.0))
    a, b = hvd.grouped_allreduce([x, x[0] * 2], op=hvd.Sum, process_set=ps)
    assert torch.equal(a, torch.full((3, 2), 7.0)) and torch.equal(b, torch.full((2,), 14.0))
    group = [x.clone(), x[0].clone()]
    hvd.grouped_allreduce_(group, op=hvd.Sum, process_set=ps)
    assert torch.equal(group[1], torch.full((2,), 7.0))
    h = hvd.grouped_allreduce_async(group, op=hvd.Product, process_set=ps)
    assert torch.equal(hvd.synchronize(h)[1], torch.full((2,), 343.0))
    # The gradient of an allreduce in a set is reduced in the same set.
    leaf = torch.ones(2, requires_grad=True)
    hvd.allreduce(leaf, op=hvd.Sum, process_set=ps).sum().backward()
    assert torch.equal(leaf.grad, torch.full((2,), 3.0))

    # allgather: rows in the order of the set's ranks; grouped.
    rows = torch.full((r + 1, 2), float(me))
    expected = torch.cat([torch.full((i + 1, 2), float(m)) for i, m in enumerate(members)])
    assert torch.equal(hvd.allgather(rows, process_set=ps), expected)
    assert torch.equal(hvd.synchronize(hvd.allgather_async(rows, process_set=ps)), expected)
    g = hvd.grouped_allgather([rows, rows * 2], process_set=ps)
    assert torch.equal(g[0], expected) and torch.equal(g[1], expected * 2)

    # broadcast: roots are job ranks; a root outside the set fails at enqueue.
    assert torch.equal(hvd.broadcast(x, 3, process_set=ps), torch.full((3, 2), 4.0))
    z = x.clone()
    hvd.broadcast_(z, 1, process_set=ps)
    assert torch.equal(z, torch.full((3, 2), 2.0))
    h = hvd.broadcast_async_(x.clone(), 0, process_set=ps)
    assert torch.equal(hvd.synchronize(h), torch.full((3, 2), 1.0))
    with pytest.raises(ValueError, match="root rank 2 is not in process set"):
        hvd.broadcast(x, 2, process_set=ps)

    # alltoall: one split per member; row value = 10 * sender + receiver's set rank.
    send = torch.tensor([10.0 * me + d for d in range(3)]).reshape(3, 1)
    received, splits = hvd.alltoall(send, [1, 1, 1], process_set=ps)
    assert torch.equal(received.reshape(-1), torch.tensor([10.0 * m + r for m in members]))
    assert splits.tolist() == [1, 1, 1]
    received, _ = hvd.synchronize(hvd.alltoall_async(send, process_set=ps))
    assert torch.equal(received.reshape(-1), torch.tensor([10.0 * m + r for m in members]))

    # reducescatter: parts of dimension 0 by set rank.
    data = torch.arange(6, dtype=torch.float64) * (me + 1)
    part = hvd.reducescatter(data, op=hvd.Sum, process_set=ps)
    assert torch.equal(part, torch.arange(6, dtype=torch.float64)[2 * r:2 * r + 2] * total)
    h = hvd.reducescatter_async(data, op=hvd.Average, process_set=ps)
    assert torch.allclose(hvd.synchronize(h),
                          torch.arange(6, dtype=torch.float64)[2 * r:2 * r + 2] * total / 3)
    parts = hvd.grouped_reducescatter([data, data * 2], op=hvd.Sum, process_set=ps)
    assert torch.equal(parts[1], torch.arange(6, dtype=torch.float64)[2 * r:2 * r + 2] * 14)

    # helpers
    assert hvd.broadcast_object({"from": me}, root_rank=3, process_set=ps) == {"from": 3}
    assert hvd.allgather_object(me * 100, process_set=ps) == [0, 100, 300]
    params = {"w": torch.full((2,), float(me))}
    hvd.broadcast_parameters(params, root_rank=1, process_set=ps)
    assert torch.equal(params["w"], torch.full((2,), 1.0))

    # barrier and join among the members only (rank 2 never calls them).
    hvd.barrier(process_set=ps)
    assert hvd.join(process_set=ps) in members


def test_remove_then_use_fails_with_kolos_message():
    ps = hvd.add_process_set([0, 1])
    old_id = ps.process_set_id
    if ps.included():
        assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=ps),
                           torch.full((2,), 2.0))
    assert hvd.remove_process_set(ps) is True
    assert ps.process_set_id is None and ps.size() is None
    with pytest.raises(ValueError, match="process set %d is unknown" % old_id):
        hvd.allreduce(torch.ones(2), process_set=ps)
    with pytest.raises(ValueError, match="process set %d is unknown" % old_id):
        hvd.barrier(process_set=ps)
    assert hvd.remove_process_set(ps) is False
    assert hvd.remove_process_set(hvd.global_process_set) is False
    # The same object can be added again; it gets a new id.
    hvd.add_process_set(ps)
    assert ps.process_set_id > old_id
    if ps.included():
        assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=ps),
                           torch.full((2,), 2.0))
    assert hvd.remove_process_set(ps)


def test_optimizer_within_a_set():
    """Ranks 1, 2, 3 train with averaged gradients and end with identical weights; rank 0,
    outside the set, steps on its own gradients and ends elsewhere."""
    ps = hvd.add_process_set([1, 2, 3])
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    generator = torch.Generator().manual_seed(100 + hvd.rank())
    inputs = torch.randn(32, 4, generator=generator)
    targets = torch.randn(32, 1, generator=generator)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         process_set=ps)
    for _ in range(5):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(inputs), targets).backward()
        optimizer.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).reshape(1, -1)
    everyone = hvd.allgather(flat)  # over the whole job
    for row in (2, 3):
        assert torch.equal(everyone[row], everyone[1])
    assert not torch.equal(everyone[0], everyone[1])
    assert hvd.remove_process_set(ps)


def test_adasum_is_refused_in_a_process_set(three_of_four):
    # As in Horovod: Adasum runs on the global set only (checked before anything is sent).
    with pytest.raises(NotImplementedError, match="non-global process sets"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum, process_set=three_of_four)
    model = torch.nn.Linear(2, 1)
    with pytest.raises(NotImplementedError, match="non-global process sets"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 process_set=three_of_four)

"""2-D device meshes on the "kolo" backend: HSDP (FSDP2's fully_shard over a mesh whose first
dimension replicates and second shards) and DDP across one mesh dimension with a tensor-parallel
MLP across the other (its activations all-reduced in that dimension's groups, forward and
backward). Each trains a few SGD steps on a mesh built on kolo (the default group's backend:
every sub-group a kolo process set) and on the same mesh built on gloo in the same job
(init_device_mesh's backend_override), and every rank must end with gloo's weights.

4 ranks: a 2 x 2 mesh. 2 ranks: the 1 x 2 and 2 x 1 meshes (one dimension a group of one
rank), the only 2-D meshes of two ranks. Other sizes skip. Every group in these meshes has one or two
ranks: a sum of two floats does not depend on their order and halving it is exact, so kolo and
gloo agree bit for bit and the weights are compared with zero tolerance (a wrong group, a
missing average or a sum over the wrong ranks is far beyond any tolerance anyway)."""

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

from training_steps import full_state as state
from training_steps import train

RANK = dist.get_rank()
SIZE = dist.get_world_size()
STEPS = 3
SHAPES = {4: [(2, 2)], 2: [(1, 2), (2, 1)]}.get(SIZE, [])
pytestmark = pytest.mark.skipif(not SHAPES, reason="the meshes are written for 2 and 4 ranks, "
                                "not %d" % SIZE)


def mesh(backend, shape, names):
    """A mesh of `shape` on `backend` ("kolo": the default group's; "gloo": every dimension
    overridden). Every rank makes every group of it."""
    override = None if backend == "kolo" else {name: backend for name in names}
    made = init_device_mesh("cpu", shape, mesh_dim_names=names, backend_override=override)
    for name in names:
        assert dist.get_backend(made.get_group(name)) == backend, name
    return made


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(8, 16, generator=g), torch.randint(0, 4, (8,), generator=g))
            for _ in range(STEPS)]




def equal(on_kolo, on_gloo):
    assert on_kolo.keys() == on_gloo.keys()
    for name in on_kolo:
        torch.testing.assert_close(on_kolo[name], on_gloo[name], rtol=0, atol=0,
                                   msg=lambda text, name=name: "%s: %s" % (name, text))


def same_in_group(values, group):
    """Every member of `group` holds the same `values`, bit for bit."""
    for name, value in values.items():
        gathered = [torch.empty_like(value) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, value.contiguous(), group=group)
        for r, other in enumerate(gathered):
            assert torch.equal(other, value), "%s differs on group rank %d" % (name, r)


# HSDP -------------------------------------------------------------------------------------


def hsdp(backend, shape):
    m = mesh(backend, shape, ("replicate", "shard"))
    torch.manual_seed(99)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=m)
    fully_shard(model, mesh=m)
    return state(train(model, batches(100 + RANK)))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d" % s)
def test_hsdp_on_a_kolo_mesh_ends_with_the_weights_of_gloo(shape):
    on_kolo = hsdp("kolo", shape)
    on_gloo = hsdp("gloo", shape)
    same_in_group(on_kolo, None)  # the whole job trained one model
    equal(on_kolo, on_gloo)


# DDP across "dp", tensor parallel across "tp" ---------------------------------------------


class _Gather(torch.autograd.Function):
    """Megatron's f: the identity forward, the gradient all-reduced in the tp group backward
    (every tp rank's shard of the next layer saw the whole input)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _Reduce(torch.autograd.Function):
    """Megatron's g: the partial outputs all-reduced in the tp group forward, the identity
    backward."""

    @staticmethod
    def forward(ctx, x, group):
        x = x.contiguous()
        dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class TensorParallelMLP(torch.nn.Module):
    """Linear(16, 16) replicated, then Linear(16, 32) split by output rows and Linear(32, 4)
    split by input columns across the tp group, from the same whole model on every rank."""

    def __init__(self, tp_group):
        super().__init__()
        self.group = tp_group
        torch.manual_seed(7)
        whole = [torch.nn.Linear(16, 16), torch.nn.Linear(16, 32), torch.nn.Linear(32, 4)]
        tp, part = dist.get_rank(tp_group), 32 // dist.get_world_size(tp_group)
        rows = slice(tp * part, (tp + 1) * part)
        self.embed = whole[0]
        self.column = torch.nn.Linear(16, part)
        self.row = torch.nn.Linear(part, 4, bias=False)
        self.bias = torch.nn.Parameter(whole[2].bias.detach().clone())
        with torch.no_grad():
            self.column.weight.copy_(whole[1].weight[rows])
            self.column.bias.copy_(whole[1].bias[rows])
            self.row.weight.copy_(whole[2].weight[:, rows])

    def forward(self, x):
        x = _Gather.apply(torch.relu(self.embed(x)), self.group)
        return _Reduce.apply(self.row(torch.relu(self.column(x))), self.group) + self.bias


def ddp_tp(backend, shape):
    m = mesh(backend, shape, ("dp", "tp"))
    dp = m.get_group("dp")
    model = DDP(TensorParallelMLP(m.get_group("tp")), process_group=dp)
    # Each dp replica its own data; the ranks of a tp group the same.
    return state(train(model, batches(100 + dist.get_rank(dp)))), m


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d" % s)
def test_ddp_across_dp_with_tensor_parallel_across_tp_on_kolo_ends_with_gloos_weights(shape):
    on_kolo, m = ddp_tp("kolo", shape)
    on_gloo, _ = ddp_tp("gloo", shape)
    same_in_group(on_kolo, m.get_group("dp"))  # DDP kept the replicas of a shard together
    equal(on_kolo, on_gloo)

"""Differential scenarios of the rest of Horovod's torch API: identity and version queries, the
launcher's environment, error types, barrier and join, object helpers, broadcast_parameters
and broadcast_optimizer_state, DistributedOptimizer, SyncBatchNorm, process sets, sparse
allreduce and the numbering of unnamed ops. See recording.py."""

import os

import torch

from recording import ranked, scenario


@scenario()
def identity(hvd, rec):
    for query in ("rank", "size", "local_rank", "local_size", "cross_rank", "cross_size",
                  "is_initialized"):
        rec.call(query, getattr(hvd, query))
    for name in ("__version__", "HorovodInternalError", "sparse_allreduce_async", "join",
                 "elastic", "Compression", "SyncBatchNorm", "global_process_set"):
        rec.value("has." + name, hasattr(hvd, name))


@scenario()
def versions(hvd, rec):
    for query in ("mpi_built", "mpi_enabled", "gloo_built", "gloo_enabled", "ddl_built",
                  "ccl_built", "rocm_built", "mpi_threads_supported"):
        rec.call(query, getattr(hvd, query))
    # What the build has: the types (Horovod was built for CPU, kolo may have CUDA and NCCL);
    # nccl_built is NCCL's version code or 0, so code gating on ">= 2700" works.
    for query in ("nccl_built", "cuda_built"):
        rec.value(query + ".type", type(getattr(hvd, query)()).__name__)
    rec.value("nccl_built.code_or_0", hvd.nccl_built() == 0 or hvd.nccl_built() >= 2700)


@scenario()
def launcher_environment(hvd, rec):
    for name in ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE",
                 "HOROVOD_CROSS_RANK", "HOROVOD_CROSS_SIZE", "HOROVOD_HOSTNAME"):
        value = os.environ.get(name)
        rec.value(name, value if name != "HOROVOD_HOSTNAME" or value is None else "set")
    rec.value("rank_matches", os.environ.get("HOROVOD_RANK") == str(hvd.rank()))


def _hold_back(hvd, name, start, second):
    """Rank 0 starts op `name` twice while the others wait at a barrier (so the first is still
    in flight); returns what the second start raised. The others then start theirs."""
    record = None
    if hvd.rank() == 0:
        first = start()
        try:
            second()
        except Exception as error:
            record = type(error).__mro__
        hvd.barrier()
    else:
        hvd.barrier()
        first = start()
    hvd.synchronize(first)
    return record


@scenario(last=1)
def errors(hvd, rec):
    size = hvd.size()
    t = torch.ones(4)
    starts = {
        "allreduce": lambda n: hvd.allreduce_async(t, name=n),
        "allreduce_": lambda n: hvd.allreduce_async_(t.clone(), name=n),
        "allgather": lambda n: hvd.allgather_async(t, name=n),
        "broadcast": lambda n: hvd.broadcast_async(t, 0, name=n),
        "broadcast_": lambda n: hvd.broadcast_async_(t.clone(), 0, name=n),
        "reducescatter": lambda n: hvd.reducescatter_async(t, name=n),
        "alltoall": lambda n: hvd.alltoall_async(torch.ones(size), name=n),
    }
    for kind, start in starts.items():
        name = "dup." + kind
        # One rank: an op completes at once, no name is in flight. Four: Horovod 0.28.1 hung
        # in one of these under the recorder (its Gloo alltoall hung at 4 ranks elsewhere too).
        if size == 1 or size > 3:
            continue
        raised = _hold_back(hvd, name, lambda: start(name), lambda: start(name))
        if hvd.rank() == 0:
            builtin = next((c for c in raised or () if c.__module__ == "builtins"), None)
            rec.value("duplicate_name." + kind, builtin.__name__ if builtin else "no error")
    rec.call("not_a_tensor", lambda: hvd.allreduce([1.0, 2.0], name="err.list"))
    rec.call("complex", lambda: hvd.allreduce(torch.ones(2, dtype=torch.complex64),
                                              name="err.complex"))
    rec.call("unknown_op", lambda: hvd.allreduce(torch.ones(2), op=17, name="err.op"))
    rec.call("synchronize_unknown", lambda: hvd.synchronize(987654321))
    rec.call("poll_unknown", lambda: hvd.poll(987654321))
    if size > 1:
        rec.call("shape_mismatch", lambda: hvd.allreduce(torch.ones(hvd.rank() + 1),
                                                         name="err.shape"))
        rec.call("dtype_mismatch", lambda: hvd.allreduce(
            torch.ones(2, dtype=torch.float32 if hvd.rank() else torch.float64),
            name="err.dtype"))
        rec.call("op_mismatch", lambda: hvd.allreduce(
            torch.ones(2), op=hvd.Sum if hvd.rank() else hvd.Max, name="err.opmix"))
        rec.call("root_mismatch", lambda: hvd.broadcast(torch.ones(2), hvd.rank(),
                                                        name="err.root"))
        rec.call("still_works", lambda: hvd.allreduce(torch.ones(2), op=hvd.Sum,
                                                      name="err.after"))
    hvd.barrier()


@scenario(last=1)
def barrier_and_join(hvd, rec):
    rank, size = hvd.rank(), hvd.size()
    rec.call("barrier", hvd.barrier)
    last = hvd.join()  # whichever rank joined last: record what does not depend on timing
    rec.value("join_all", [type(last).__name__, 0 <= last < size])
    # The last rank keeps reducing while the others joined: they contribute zeros.
    if rank == size - 1:
        rec.call("allreduce_after_others_joined", lambda: hvd.allreduce(
            ranked(hvd, 3, torch.float32), op=hvd.Sum, name="join.ar"))
        rec.call("average_after_others_joined", lambda: hvd.allreduce(
            ranked(hvd, 3, torch.float32), name="join.avg"))
    rec.call("join_last", hvd.join)
    rec.call("after_join", lambda: hvd.allreduce(torch.ones(2), op=hvd.Sum, name="join.after"))


@scenario(min_ranks=2, last=2)
def join_then_failed_op(hvd, rec):
    """Issue 32's hang: rank 0 joins while the others allgather (which fails: allgather does
    not take part in join), then they join too, then allgather_object. Horovod's unnamed ops
    never pair again after this (the others' failed allgather took a handle number rank 0 did
    not): it hangs in any unnamed op, so this scenario runs last, names its allgather (the
    ranks' handles differ after the scenarios before) and has no unnamed op after
    allgather_object, which Horovod names after the object's type (kolo's pairing of unnamed
    ops here: test_unnamed_ops.py)."""
    if hvd.rank() == 0:
        rec.value("join", hvd.join() > 0)
    else:
        rec.call("allgather_while_joined", lambda: hvd.allgather(torch.ones(1),
                                                                 name="join.allgather"))
        rec.value("join", hvd.join() > 0)
    rec.call("allgather_object", lambda: hvd.allgather_object({"rank": hvd.rank()}))


@scenario()
def objects(hvd, rec):
    rank = hvd.rank()
    obj = {"rank": rank, "tensor": torch.arange(3) * rank, "text": "x" * (rank + 1)}
    rec.call("broadcast_object_root0", lambda: hvd.broadcast_object(obj, 0))
    rec.call("broadcast_object_last", lambda: hvd.broadcast_object(obj, hvd.size() - 1,
                                                                   name="obj.last"))
    rec.call("allgather_object", lambda: hvd.allgather_object(obj))
    rec.call("allgather_object_sizes", lambda: hvd.allgather_object("y" * (10 * rank + 1),
                                                                    name="obj.sizes"))
    rec.call("allgather_object_none", lambda: hvd.allgather_object(None))


def _model(seed_rank):
    torch.manual_seed(1234 + seed_rank)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():  # dyadic weights: sums and averages of gradients stay exact
        for p in model.parameters():
            p.copy_(torch.round(p * 8) / 8)
    return model


@scenario()
def broadcast_parameters(hvd, rec):
    model = _model(hvd.rank())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    rec.value("state_dict", list(model.state_dict().values()))
    model = _model(hvd.rank())
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=hvd.size() - 1)
    rec.value("named_parameters", list(model.parameters()))
    model = _model(hvd.rank())
    hvd.broadcast_parameters(list(model.parameters()), root_rank=0)
    rec.value("parameters_list", list(model.parameters()))
    rec.call("bad_type", lambda: hvd.broadcast_parameters(model.parameters(), root_rank=0))


def _optimizer_state(optimizer):
    state = optimizer.state_dict()
    return {"state": {str(k): v for k, v in state["state"].items()},
            "groups": [{k: v for k, v in g.items() if k != "params"}
                       for g in state["param_groups"]]}


@scenario()
def broadcast_optimizer_state(hvd, rec):
    rank = hvd.rank()
    for kind in ("SGD", "Adam"):
        model = _model(rank)
        if kind == "SGD":
            optimizer = torch.optim.SGD(model.parameters(), lr=0.5 + rank, momentum=0.25)
        else:
            optimizer = torch.optim.Adam(model.parameters(), lr=0.125 * (rank + 1))
        if rank == 0:
            model(torch.ones(2, 3)).sum().backward()
            optimizer.step()
        rec.call(kind, lambda: hvd.broadcast_optimizer_state(optimizer, root_rank=0))
        rec.value(kind + ".state", _optimizer_state(optimizer))
    # Fresh optimizers, no gradient anywhere yet (and one frozen parameter).
    model = _model(rank)
    model[0].bias.requires_grad_(False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.25 * (rank + 1), momentum=0.5)
    rec.call("fresh_no_grads", lambda: hvd.broadcast_optimizer_state(optimizer, root_rank=0))
    rec.value("fresh_no_grads.state", _optimizer_state(optimizer))
    rec.value("fresh_no_grads.params", list(model.parameters()))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.25 * (rank + 1))
    rec.call("stateless", lambda: hvd.broadcast_optimizer_state(optimizer, root_rank=0))
    rec.value("stateless.state", _optimizer_state(optimizer))
    rec.call("lbfgs", lambda: hvd.broadcast_optimizer_state(
        torch.optim.LBFGS(model.parameters()), root_rank=0))


def _train(hvd, steps=3, **kwargs):
    model = _model(0)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.125),
                                         named_parameters=model.named_parameters(), **kwargs)
    passes = kwargs.get("backward_passes_per_step", 1)
    for step in range(steps):
        optimizer.zero_grad()
        for micro in range(passes):
            data = torch.full((2, 3), float(hvd.rank() + step + micro + 1)) / 4
            model(data).sum().backward()
        optimizer.step()
    return list(model.parameters())


@scenario()
def distributed_optimizer(hvd, rec):
    rec.call("average", lambda: _train(hvd))
    rec.call("sum", lambda: _train(hvd, op=hvd.Sum))
    rec.call("backward_passes_2", lambda: _train(hvd, backward_passes_per_step=2))
    rec.call("fp16", lambda: _train(hvd, compression=hvd.Compression.fp16))
    rec.call("predivide", lambda: _train(hvd, gradient_predivide_factor=2.0))
    rec.call("predivide_sum", lambda: _train(hvd, op=hvd.Sum, gradient_predivide_factor=2.0))
    rec.call("groups_2", lambda: _train(hvd, groups=2))

    def extra_pass():
        model = _model(0)
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                             named_parameters=model.named_parameters())
        model(torch.ones(1, 3)).sum().backward()
        try:
            model(torch.ones(1, 3)).sum().backward()
        finally:
            optimizer.step()
    rec.call("extra_backward_pass", extra_pass)

    def duplicate_names():
        model = _model(0)
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[("a", p) for p in model.parameters()])
    rec.call("duplicate_names", duplicate_names)


@scenario()
def compression(hvd, rec):
    x = ranked(hvd, 5, torch.float32) / 4
    rec.call("fp16_allreduce", lambda: hvd.allreduce(x, op=hvd.Sum, name="cmp.fp16",
                                                     compression=hvd.Compression.fp16))
    rec.call("none_allreduce", lambda: hvd.allreduce(x, op=hvd.Sum, name="cmp.none",
                                                     compression=hvd.Compression.none))
    rec.call("fp16_compress", lambda: hvd.Compression.fp16.compress(x))
    rec.call("fp16_of_int", lambda: hvd.Compression.fp16.compress(ranked(hvd, 2, torch.int64)))


@scenario()
def sync_batch_norm(hvd, rec):
    torch.manual_seed(7 + hvd.rank())
    layer = hvd.SyncBatchNorm(3)
    x = (torch.randn(4, 3, 2) * 8).round() / 8

    def forward_backward():
        leaf = x.clone().requires_grad_(True)
        out = layer(leaf)
        (out * torch.arange(out.numel()).reshape(out.shape)).sum().backward()
        return [out.detach(), leaf.grad, layer.running_mean, layer.running_var]
    rec.close("forward_backward", forward_backward)


@scenario(min_ranks=2, last=1)
def process_sets(hvd, rec):
    rank, size = hvd.rank(), hvd.size()
    evens = hvd.add_process_set([r for r in range(size) if r % 2 == 0])
    rec.value("id_type", type(evens.process_set_id).__name__)
    rec.value("included", evens.included())
    rec.call("rank", evens.rank)
    rec.value("size", evens.size())
    if evens.included():
        rec.call("allreduce", lambda: hvd.allreduce(ranked(hvd, 3, torch.float32), op=hvd.Sum,
                                                    name="ps.ar", process_set=evens))
        rec.call("average", lambda: hvd.allreduce(ranked(hvd, 3, torch.float32),
                                                  name="ps.avg", process_set=evens))
        rec.call("allgather", lambda: hvd.allgather(ranked(hvd, 2, torch.int32),
                                                    name="ps.ag", process_set=evens))
        rec.call("broadcast", lambda: hvd.broadcast(ranked(hvd, 2, torch.int32), 0,
                                                    name="ps.bc", process_set=evens))
        rec.call("reducescatter", lambda: hvd.reducescatter(
            ranked(hvd, 4, torch.float32), op=hvd.Sum, name="ps.rs", process_set=evens))
        rec.call("alltoall", lambda: hvd.alltoall(ranked(hvd, evens.size(), torch.int32),
                                                  name="ps.a2a", process_set=evens))
        rec.call("broadcast_object", lambda: hvd.broadcast_object(rank, 0, process_set=evens))
        rec.call("barrier", lambda: hvd.barrier(process_set=evens))
    else:
        rec.call("non_member_allreduce", lambda: hvd.allreduce(
            torch.ones(2), name="ps.out", process_set=evens))
    rec.call("global_after", lambda: hvd.allreduce(torch.ones(2), op=hvd.Sum, name="ps.global"))
    rec.call("add_duplicate", lambda: hvd.add_process_set(evens.ranks))
    rec.call("remove", lambda: hvd.remove_process_set(evens))
    rec.value("id_after_remove", evens.process_set_id)
    rec.call("remove_again", lambda: hvd.remove_process_set(evens))
    rec.call("remove_global", lambda: hvd.remove_process_set(hvd.global_process_set))


@scenario()
def sparse_allreduce(hvd, rec):
    rank, size = hvd.rank(), hvd.size()
    indices = torch.tensor([[rank % 3, 2]])
    values = torch.tensor([float(rank + 1), 0.5])
    sparse = torch.sparse_coo_tensor(indices, values, (4,), check_invariants=True)
    for op in ("Sum", "Average"):
        rec.call("async." + op, lambda: hvd.sparse_allreduce_async(
            sparse, "sp." + op, getattr(hvd, op))().to_dense())

    def embedding():
        torch.manual_seed(3)
        layer = torch.nn.Embedding(5, 2, sparse=True)
        with torch.no_grad():
            layer.weight.copy_(torch.arange(10, dtype=torch.float32).reshape(5, 2) / 4)
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(layer.parameters(), lr=0.5),
                                             named_parameters=layer.named_parameters())
        layer(torch.tensor([rank % 5, 4])).sum().backward()
        optimizer.step()
        return layer.weight
    rec.call("sparse_optimizer", embedding)

    def sparse_adam(sparse_as_dense):
        # Horovod's test_sparse_embeddings: SparseAdam takes sparse gradients only, so with
        # sparse_as_dense the averaged dense gradient must go back into a sparse one.
        layer = torch.nn.Embedding(6, 2, sparse=True)
        with torch.no_grad():
            layer.weight.copy_(torch.arange(12, dtype=torch.float32).reshape(6, 2) / 4)
        optimizer = hvd.DistributedOptimizer(torch.optim.SparseAdam(list(layer.parameters()),
                                                                    lr=0.125),
                                             named_parameters=layer.named_parameters(),
                                             sparse_as_dense=sparse_as_dense)
        indices = [[1, 2, 4], [4, 3, 2 + rank % 3]] if rank % 2 == 0 else [[1, 3], [4, 5]]
        optimizer.zero_grad()
        layer(torch.tensor(indices)).sum().backward()
        optimizer.step()
        return [layer.weight, layer.weight.grad]
    rec.call("sparse_adam", lambda: sparse_adam(False))
    rec.call("sparse_adam_as_dense", lambda: sparse_adam(True))
    del size


@scenario()
def unnamed_ops(hvd, rec):
    """Unnamed ops pair up by order, also after one that failed on every rank."""
    rec.call("first", lambda: hvd.allreduce(torch.ones(2), op=hvd.Sum))
    rec.call("failed_everywhere", lambda: hvd.allgather(torch.tensor(1.0)))
    rec.call("after_failure", lambda: hvd.allreduce(torch.ones(2) * 2, op=hvd.Sum))
    handles = [hvd.allreduce_async(torch.ones(1) * i, op=hvd.Sum) for i in range(3)]
    rec.value("async_in_order", [hvd.synchronize(h) for h in handles])
    rec.call("mixed_kinds", lambda: [hvd.broadcast(torch.ones(1), 0),
                                     hvd.allgather(torch.ones(1)),
                                     hvd.allreduce(torch.ones(1), op=hvd.Sum)])

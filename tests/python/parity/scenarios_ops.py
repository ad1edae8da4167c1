"""Differential scenarios of the collective ops: every form (blocking, async, in place,
grouped), every dtype and reduce op, prescale/postscale, and the gradients of the autograd
ops. See recording.py for how results are recorded."""

import torch

from recording import DTYPES, FLOATS, INTS, dtype_name, ranked, scenario, spread

OPS = ["Sum", "Average", "Min", "Max", "Product"]


@scenario()
def allreduce_dtypes(hvd, rec):
    for dtype in DTYPES:
        for op in OPS:
            rec.call("%s.%s" % (dtype_name(dtype), op), lambda: hvd.allreduce(
                ranked(hvd, 5, dtype), name="ar.%s.%s" % (dtype_name(dtype), op),
                op=getattr(hvd, op)))


@scenario()
def allreduce_forms(hvd, rec):
    t = ranked(hvd, 6, torch.float32)
    rec.call("blocking_default_op", lambda: hvd.allreduce(t, name="arf.default"))
    rec.call("average_true", lambda: hvd.allreduce(t, average=True, name="arf.avg"))
    rec.call("average_false", lambda: hvd.allreduce(t, average=False, name="arf.sum"))
    rec.call("average_and_op", lambda: hvd.allreduce(t, average=True, op=hvd.Sum,
                                                     name="arf.both"))
    inplace = t.clone()
    rec.call("in_place_returns", lambda: hvd.allreduce_(inplace, op=hvd.Sum, name="arf.ip")
             is inplace)
    rec.value("in_place_tensor", inplace)
    handle = hvd.allreduce_async(t, op=hvd.Sum, name="arf.async")
    rec.value("handle_type", type(handle).__name__)
    rec.value("async_result", hvd.synchronize(handle))
    buffer = t.clone()
    handle = hvd.allreduce_async_(buffer, op=hvd.Max, name="arf.async_")
    rec.value("async_in_place_result_is_tensor", hvd.synchronize(handle) is buffer)
    rec.value("async_in_place_tensor", buffer)
    wide = ranked(hvd, 12, torch.float32).reshape(3, 4).t()  # not contiguous
    rec.call("non_contiguous", lambda: hvd.allreduce(wide, op=hvd.Sum, name="arf.nc"))
    wide_copy = wide.clone().t().contiguous().t()
    rec.call("non_contiguous_in_place", lambda: hvd.allreduce_(wide_copy, op=hvd.Sum,
                                                               name="arf.ncip"))
    rec.value("non_contiguous_in_place_tensor", wide_copy)
    rec.call("scalar", lambda: hvd.allreduce(torch.tensor(float(hvd.rank() + 1)), op=hvd.Sum,
                                             name="arf.scalar"))
    rec.call("empty", lambda: hvd.allreduce(torch.zeros(0, 3), op=hvd.Sum, name="arf.empty"))
    big = torch.arange(1000, dtype=torch.float32) * (hvd.rank() + 1)
    rec.call("thousand", lambda: hvd.allreduce(big, op=hvd.Sum, name="arf.big"))
    group = [ranked(hvd, 3, torch.float32), ranked(hvd, 2, torch.int32)]
    rec.call("grouped", lambda: hvd.grouped_allreduce(group, op=hvd.Sum, name="arf.g"))
    rec.call("grouped_average", lambda: hvd.grouped_allreduce(
        [ranked(hvd, 3, torch.float64)], name="arf.ga"))
    copies = [g.clone() for g in group]
    rec.call("grouped_in_place", lambda: hvd.grouped_allreduce_(copies, op=hvd.Max,
                                                                name="arf.gip"))
    rec.value("grouped_in_place_tensors", copies)
    handle = hvd.grouped_allreduce_async(group, op=hvd.Sum, name="arf.gasync")
    rec.value("grouped_async", hvd.synchronize(handle))
    copies = [g.clone() for g in group]
    handle = hvd.grouped_allreduce_async_(copies, op=hvd.Min, name="arf.gasync_")
    rec.value("grouped_async_in_place", hvd.synchronize(handle))
    rec.call("grouped_empty_list", lambda: hvd.grouped_allreduce([], name="arf.gempty"))
    rec.call("poll_type", lambda: type(hvd.poll(hvd.allreduce_async(t, name="arf.poll")))
             .__name__)
    hvd.barrier()


def _scaled(hvd, rec, key, function, dtype, values, pre, post):
    rec.call(key, lambda: function(spread(hvd, values, dtype), pre, post))


@scenario()
def scaling(hvd, rec):
    """prescale/postscale in each dtype: Horovod scales in the tensor's dtype (float16 through
    float32, integers through float64, truncating)."""
    values = [0.7, 1.3, 2.9, 3.3, -5.1, 7.7, 11.1, 0.1]
    factors = [(0.1, 1.0), (1.0, 0.3), (0.37, 2.9), (1.0 / 3, 3.0), (2.5, 0.5)]
    for dtype in FLOATS + INTS:
        vals = [abs(round(v)) + 1 for v in values] if dtype in INTS else values
        for index, (pre, post) in enumerate(factors):
            name = "%s.%d" % (dtype_name(dtype), index)
            for op in ("Sum", "Average"):
                _scaled(hvd, rec, "allreduce.%s.%s" % (op, name), lambda t, a, b: hvd.allreduce(
                    t, op=getattr(hvd, op), prescale_factor=a, postscale_factor=b,
                    name="sc.ar.%s.%s" % (op, name)), dtype, vals, pre, post)
            _scaled(hvd, rec, "allreduce_.%s" % name, lambda t, a, b: hvd.allreduce_(
                t, op=hvd.Sum, prescale_factor=a, postscale_factor=b, name="sc.ip." + name),
                dtype, vals, pre, post)
            _scaled(hvd, rec, "grouped.%s" % name, lambda t, a, b: hvd.grouped_allreduce(
                [t, t * 3], op=hvd.Sum, prescale_factor=a, postscale_factor=b,
                name="sc.g." + name), dtype, vals, pre, post)
            rows = torch.tensor(vals * hvd.size(), dtype=torch.float64).reshape(hvd.size(), -1)
            for op in ("Sum", "Average"):
                rec.call("reducescatter.%s.%s" % (op, name), lambda: hvd.reducescatter(
                    spread(hvd, rows.reshape(-1).tolist(), dtype).reshape(rows.shape),
                    op=getattr(hvd, op), prescale_factor=pre, postscale_factor=post,
                    name="sc.rs.%s.%s" % (op, name)))
            rec.call("grouped_reducescatter.%s" % name, lambda: hvd.grouped_reducescatter(
                [spread(hvd, rows.reshape(-1).tolist(), dtype).reshape(rows.shape)],
                op=hvd.Sum, prescale_factor=pre, postscale_factor=post, name="sc.grs." + name))


@scenario()
def allgather_dtypes(hvd, rec):
    for dtype in DTYPES:
        rows = ranked(hvd, 2 * (hvd.rank() + 1), dtype).reshape(hvd.rank() + 1, 2)
        rec.call(dtype_name(dtype), lambda: hvd.allgather(rows, name="ag." + dtype_name(dtype)))
    rec.call("scalar", lambda: hvd.allgather(torch.tensor(1.0), name="ag.scalar"))
    rec.call("empty_rows", lambda: hvd.allgather(torch.zeros(hvd.rank() % 2, 3),
                                                 name="ag.empty"))
    rec.call("async", lambda: hvd.synchronize(hvd.allgather_async(
        ranked(hvd, 3, torch.int32), name="ag.async")))
    rec.call("grouped", lambda: hvd.grouped_allgather(
        [ranked(hvd, hvd.rank() + 1, torch.float32), ranked(hvd, 2, torch.int64)],
        name="ag.grouped"))
    rec.call("grouped_async", lambda: hvd.synchronize(hvd.grouped_allgather_async(
        [ranked(hvd, 2, torch.float64)], name="ag.gasync")))
    rec.call("shape_mismatch", lambda: hvd.allgather(torch.zeros(1, hvd.rank() + 1),
                                                     name="ag.shape"),
             words=("shape", "dimension"))


@scenario()
def broadcast_dtypes(hvd, rec):
    for dtype in DTYPES:
        for root in sorted({0, hvd.size() - 1}):
            rec.call("%s.root%d" % (dtype_name(dtype), root), lambda: hvd.broadcast(
                ranked(hvd, 4, dtype), root, name="bc.%s.%d" % (dtype_name(dtype), root)))
    buffer = ranked(hvd, 3, torch.float32)
    rec.call("in_place_returns_it", lambda: hvd.broadcast_(buffer, 0, name="bc.ip") is buffer)
    rec.value("in_place", buffer)
    buffer = ranked(hvd, 3, torch.int64)
    rec.call("async_in_place", lambda: hvd.synchronize(hvd.broadcast_async_(
        buffer, hvd.size() - 1, name="bc.aip")))
    rec.call("async", lambda: hvd.synchronize(hvd.broadcast_async(
        ranked(hvd, 3, torch.int64), 0, name="bc.async")))
    rec.call("scalar", lambda: hvd.broadcast(torch.tensor(float(hvd.rank())), 0,
                                             name="bc.scalar"))
    rec.call("bad_root", lambda: hvd.broadcast(torch.ones(2), hvd.size() + 2,
                                               name="bc.badroot"))
    rec.call("negative_root", lambda: hvd.broadcast(torch.ones(2), -1, name="bc.negroot"))


@scenario()
def alltoall_forms(hvd, rec):
    size, rank = hvd.size(), hvd.rank()
    splits = [(rank + d) % 3 for d in range(size)]
    rows = torch.arange(sum(splits) * 2, dtype=torch.float32).reshape(-1, 2) + 100 * rank
    rec.call("splits_list", lambda: hvd.alltoall(rows, splits=splits, name="a2a.list"))
    rec.call("splits_tensor", lambda: hvd.alltoall(rows, splits=torch.tensor(splits),
                                                   name="a2a.tensor"))
    rec.call("no_splits", lambda: hvd.alltoall(ranked(hvd, size * 2, torch.int32),
                                               name="a2a.even"))
    for dtype in DTYPES:
        rec.call(dtype_name(dtype), lambda: hvd.alltoall(ranked(hvd, size, dtype),
                                                         name="a2a." + dtype_name(dtype)))
    rec.call("async", lambda: hvd.synchronize(hvd.alltoall_async(
        ranked(hvd, size, torch.int64), name="a2a.async")))
    rec.call("bad_splits_sum", lambda: hvd.alltoall(torch.zeros(size + 1), splits=[1] * size,
                                                    name="a2a.bad"))
    rec.call("uneven_without_splits", lambda: hvd.alltoall(
        torch.zeros(size + 1) if size > 1 else torch.zeros(1, 0), name="a2a.uneven"))
    rec.call("negative_split", lambda: hvd.alltoall(torch.zeros(2), splits=[-1] + [0] * (
        size - 2) + [3] if size > 1 else [-1], name="a2a.neg"))
    rec.call("splits_count", lambda: hvd.alltoall(torch.zeros(4), splits=[1] * (size + 1),
                                                  name="a2a.count"))


@scenario()
def reducescatter_dtypes(hvd, rec):
    size = hvd.size()
    for dtype in DTYPES:
        for op in ("Sum", "Average", "Min", "Max"):
            rec.call("%s.%s" % (dtype_name(dtype), op), lambda: hvd.reducescatter(
                ranked(hvd, 2 * (2 * size + 1), dtype).reshape(2 * size + 1, 2),
                op=getattr(hvd, op), name="rs.%s.%s" % (dtype_name(dtype), op)))
    rec.call("default_op", lambda: hvd.reducescatter(ranked(hvd, 2 * size, torch.float32),
                                                     name="rs.default"))
    rec.call("fewer_rows_than_ranks", lambda: hvd.reducescatter(
        ranked(hvd, max(size - 1, 1), torch.float32), op=hvd.Sum, name="rs.few"))
    rec.call("scalar", lambda: hvd.reducescatter(torch.tensor(1.0), name="rs.scalar"))
    rec.call("async", lambda: hvd.synchronize(hvd.reducescatter_async(
        ranked(hvd, size * 3, torch.int32), op=hvd.Sum, name="rs.async")))
    rec.call("grouped", lambda: hvd.grouped_reducescatter(
        [ranked(hvd, size + 1, torch.float32), ranked(hvd, 2 * size, torch.int64)],
        op=hvd.Sum, name="rs.grouped"))
    rec.call("grouped_async", lambda: hvd.synchronize(hvd.grouped_reducescatter_async(
        [ranked(hvd, size, torch.float64)], op=hvd.Average, name="rs.gasync")))
    rec.call("product", lambda: hvd.reducescatter(ranked(hvd, size, torch.float32),
                                                  op=hvd.Product, name="rs.prod"))
    rec.call("adasum", lambda: hvd.reducescatter(ranked(hvd, size, torch.float32),
                                                 op=hvd.Adasum, name="rs.adasum"))


def _grad(rec, key, make, *inputs):
    """Records make(*inputs)'s output and the inputs' gradients for a rank-dependent upstream
    gradient."""
    def run():
        leaves = [i.clone().requires_grad_(True) for i in inputs]
        outputs = make(*leaves)
        single = isinstance(outputs, torch.Tensor)
        outputs = [outputs] if single else list(outputs)
        total = 0
        for index, out in enumerate(outputs):
            upstream = torch.arange(out.numel(), dtype=out.dtype).reshape(out.shape) + 1 + index
            total = total + (out * upstream).sum()
        total.backward()
        return [o.detach() for o in outputs], [leaf.grad for leaf in leaves], \
            [o.grad_fn is not None for o in outputs]
    rec.call(key, run)


@scenario()
def gradients(hvd, rec):
    size, rank = hvd.size(), hvd.rank()
    x = ranked(hvd, 4, torch.float32)
    for op in ("Sum", "Average"):
        _grad(rec, "allreduce." + op, lambda t: hvd.allreduce(t, op=getattr(hvd, op),
                                                              name="g.ar." + op), x)
        _grad(rec, "allreduce_scaled." + op, lambda t: hvd.allreduce(
            t, op=getattr(hvd, op), prescale_factor=0.5, postscale_factor=4.0,
            name="g.ars." + op), x)
        _grad(rec, "grouped_allreduce." + op, lambda a, b: hvd.grouped_allreduce(
            [a, b], op=getattr(hvd, op), name="g.gar." + op), x, x * 2)
        _grad(rec, "reducescatter." + op, lambda t: hvd.reducescatter(
            t, op=getattr(hvd, op), name="g.rs." + op), ranked(hvd, 2 * size, torch.float32))
        _grad(rec, "reducescatter_scaled." + op, lambda t: hvd.reducescatter(
            t, op=getattr(hvd, op), prescale_factor=0.5, postscale_factor=4.0,
            name="g.rss." + op), ranked(hvd, 2 * size, torch.float32))
        _grad(rec, "grouped_reducescatter." + op, lambda a, b: hvd.grouped_reducescatter(
            [a, b], op=getattr(hvd, op), name="g.grs." + op),
            ranked(hvd, size, torch.float32), ranked(hvd, 3 * size, torch.float32))
    for op in ("Min", "Max"):
        _grad(rec, "allreduce." + op, lambda t: hvd.allreduce(t, op=getattr(hvd, op),
                                                              name="g.ar." + op), x)
    rows = ranked(hvd, 2 * (rank + 1), torch.float32).reshape(rank + 1, 2)
    _grad(rec, "allgather", lambda t: hvd.allgather(t, name="g.ag"), rows)
    _grad(rec, "allgather_unnamed", lambda t: hvd.allgather(t), rows)
    _grad(rec, "grouped_allgather", lambda a, b: hvd.grouped_allgather([a, b], name="g.gag"),
          rows, x)
    for root in sorted({0, size - 1}):
        _grad(rec, "broadcast.root%d" % root, lambda t: hvd.broadcast(
            t, root, name="g.bc%d" % root), x)
    splits = [(rank + d) % 3 for d in range(size)]
    if size <= 3:  # at 4 ranks Horovod 0.28.1's Gloo alltoall never returned here (recorder)
        _grad(rec, "alltoall", lambda t: hvd.alltoall(t, splits=splits, name="g.a2a")[0],
              torch.arange(sum(splits) * 2, dtype=torch.float32).reshape(-1, 2) + 10 * rank)
    _grad(rec, "compression_fp16", lambda t: hvd.allreduce(
        t, op=hvd.Sum, compression=hvd.Compression.fp16, name="g.fp16"), x)
    hvd.barrier()

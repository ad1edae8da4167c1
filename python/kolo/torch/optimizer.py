"""DistributedOptimizer: Horovod's torch optimizer wrapper on kolo.

A hook on each parameter's gradient accumulator starts that gradient's allreduce as soon as the
backward pass produced it (every backward_passes_per_step-th pass; in between, autograd sums
the passes' gradients locally), so communication overlaps the rest of the backward pass.
step() (or synchronize()) waits for them and writes the averaged gradients back to p.grad
before the wrapped optimizer's step runs. Single-threaded, as torch optimizers are.
"""

import contextlib
import warnings

import torch

from kolo.torch import mpi_ops
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import Adasum, Average, Sum


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression, backward_passes_per_step=1,
                 op=Average, gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=None):
        super(self.__class__, self).__init__(params)
        mpi_ops._set_id(process_set)  # a set that was never added fails here
        self._process_set = process_set
        if op == Adasum:
            raise NotImplementedError("kolo does not support the Adasum reduction yet")
        if groups is not None:
            raise NotImplementedError("kolo.torch: DistributedOptimizer groups are not "
                                      "supported yet")
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.backward_passes_per_step = backward_passes_per_step

        all_params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [("allreduce.noname.%s" % i, p)
                                for i, p in enumerate(all_params)]
        if any(not isinstance(entry, tuple) for entry in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, "
                             "parameter), usually produced by model.named_parameters().")
        names = [name for name, _ in named_parameters]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError("Parameter names in named_parameters must be unique. Found "
                             "duplicates: %s" % ", ".join(duplicates))
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [p for p in all_params if id(p) not in named_ids]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model "
                             "parameters were not named. Python object ids: %s"
                             % ", ".join(str(id(p)) for p in unnamed))

        self._parameter_names = {p: name for name, p in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._allreduce_delay = {p: backward_passes_per_step for p in all_params}
        if self._reduces():
            self._register_hooks()

    def _reduces(self):
        """Whether gradients travel: this rank is in the process set, of more than one rank
        (as in Horovod, a rank outside the set steps on its own gradients)."""
        if self._process_set is None:
            return mpi_ops.size() > 1
        return bool(self._process_set.included()) and self._process_set.size() > 1

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The accumulator node is the first function of an identity view of p.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # Another rank may have a gradient for it (a dynamic graph): take part with zeros.
            p.grad = p.data.new_zeros(p.size())
        if p.grad.is_sparse:
            if not self._sparse_as_dense:
                return self._sparse_allreduce_async(p), None
            p.grad = p.grad.to_dense()
        compressed, ctx = self._compression.compress(p.grad)
        if self.op == Average:
            # kolo divides by the ranks after the postscale: the predivide factor splits the
            # average into a division before the sum and the rest after it.
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        handle = mpi_ops.allreduce_async_(compressed, name=self._parameter_names.get(p),
                                          op=self.op, prescale_factor=prescale,
                                          postscale_factor=postscale,
                                          process_set=self._process_set)
        return handle, ctx

    def _sparse_allreduce_async(self, p):
        """A sparse gradient, as Horovod reduces it: allgathers of its indices (transposed,
        so that they concatenate along the nonzeros) and values, summed by the sparse tensor
        they make (duplicates add up). Returns a callable that waits and returns it."""
        if self.op not in (Average, Sum):
            raise NotImplementedError("kolo.torch: sparse gradients with an op other than "
                                      "Average or Sum")
        grad = p.grad.coalesce()
        name = self._parameter_names.get(p)
        values = mpi_ops.allgather_async(grad._values(), name="%s.values" % name,
                                         process_set=self._process_set)
        indices = mpi_ops.allgather_async(grad._indices().t().contiguous(),
                                          name="%s.indices" % name,
                                          process_set=self._process_set)
        ranks = mpi_ops.size() if self._process_set is None else self._process_set.size()
        average = self.op == Average

        def wait():
            gathered_values = mpi_ops.synchronize(values)
            gathered_indices = mpi_ops.synchronize(indices)
            if average:
                gathered_values = gathered_values / ranks
            return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, grad.size(),
                                           check_invariants=True)
        return wait

    def _make_hook(self, p):
        def hook(*ignore):
            if p in self._handles and self._handles[p][0] is not None:
                if self._allreduce_delay[p] <= 0:
                    raise AssertionError(
                        "Gradients were computed more than backward_passes_per_step times "
                        "before call to step(). Increase backward_passes_per_step to "
                        "accumulate gradients locally.")
            assert not p.grad.requires_grad
            assert self._allreduce_delay[p] > 0
            handle, ctx = None, None
            self._allreduce_delay[p] -= 1
            if self._allreduce_delay[p] == 0:
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those whose hook did not run) and
        writes the results to p.grad."""
        if not self._reduces():
            self._synchronized = True
            return
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in self._handles.items():
            self._allreduce_delay[p] = self.backward_passes_per_step
            if callable(handle):  # a sparse gradient
                p.grad = handle()
                continue
            output = mpi_ops.synchronize(handle)
            result = self._compression.decompress(output, ctx)
            if result is not p.grad:
                p.grad.copy_(result)
        self._handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For step() after an explicit synchronize() (e.g. to clip gradients in between)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False, process_set=None):
    """Wraps `optimizer` (an instance) so that its step() uses the gradients averaged (op=Sum:
    summed) over every rank, or over the ranks of `process_set` (ranks outside it step on
    their own gradients). Horovod's arguments; sparse gradients are allgathered as Horovod
    does (or made dense first with sparse_as_dense). Adasum and groups/num_groups are not
    supported yet."""
    if num_groups != 0:
        raise NotImplementedError("kolo.torch: num_groups is not supported yet")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set)

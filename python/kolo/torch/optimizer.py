"""DistributedOptimizer: Horovod's torch optimizer wrapper on kolo.

A hook on each parameter's gradient accumulator starts that gradient's allreduce as soon as the
backward pass produced it (every backward_passes_per_step-th pass; in between, autograd sums
the passes' gradients locally), so communication overlaps the rest of the backward pass.
step() (or synchronize()) waits for them and writes the averaged gradients back to p.grad
before the wrapped optimizer's step runs. Single-threaded, as torch optimizers are.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any, Callable, Union, cast

import torch

from kolo.torch import _C, functions, mpi_ops
from kolo.torch.adasum_optimizer import _DistributedAdasumOptimizer
from kolo.torch.backward_passes import count_pass, refuse_zero_grad_in_flight
from kolo.torch.compression import Compression
from kolo.torch.mpi_ops import Adasum, Average
from kolo.torch.parameter_names import check_names

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from kolo.torch.compression import Compressor
    from kolo.torch.process_sets import ProcessSet

    # DistributedOptimizer's groups: a number of groups, or lists of parameters.
    Groups = Union[int, list[list[torch.Tensor]]]
    # A reduction in flight: its handle (a sparse one's waiting function; None before its
    # hook ran) and the compression context(s).
    InFlight = tuple[Any, Any]


def _check_groups(groups: Groups | None) -> None:
    """Horovod's checks of DistributedOptimizer's groups: a positive number of groups, or a
    list of lists of parameters, each parameter in one group at most."""
    if groups is None:
        return
    if not (isinstance(groups, list) or groups > 0):
        raise ValueError("groups should be a non-negative integer or a list of list of "
                         "torch.Tensor.")
    if isinstance(groups, list):
        seen = set()
        for group in groups:
            for p in group:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor.")
                if id(p) in seen:
                    raise ValueError("A parameter can only appear once in groups.")
                seen.add(id(p))


def _split(items: list[torch.Tensor], parts: int) -> list[list[torch.Tensor]]:
    """`items` in `parts` consecutive runs whose lengths differ by one at most, the longer
    first (empty runs left out)."""
    base, extra = divmod(len(items), parts)
    runs, start = [], 0
    for i in range(parts):
        end = start + base + (1 if i < extra else 0)
        if end > start:
            runs.append(items[start:end])
        start = end
    return runs


class _DistributedOptimizer(torch.optim.Optimizer):
    """The methods of DistributedOptimizer's class, a subclass of the wrapped optimizer's
    class (super(self.__class__, self) is that class)."""

    def __init__(self, params: Iterable[dict[str, Any]],
                 named_parameters: Iterable[tuple[str, torch.Tensor]] | None,
                 compression: type[Compressor], backward_passes_per_step: int = 1,
                 op: int = Average, gradient_predivide_factor: float = 1.0,
                 groups: Groups | None = None, sparse_as_dense: bool = False,
                 process_set: ProcessSet | None = None) -> None:
        super(self.__class__, self).__init__(params)  # type: ignore[call-arg]
        mpi_ops._set_id(process_set)  # a set that was never added fails here
        self._process_set = process_set
        if gradient_predivide_factor != 1.0 and op != Average:
            raise ValueError("gradient_predivide_factor not supported with op != Average")
        _check_groups(groups)
        self._groups = groups
        self._p_to_group: dict[torch.Tensor, tuple[torch.Tensor, ...]] = {}
        self._group_counts: dict[tuple[torch.Tensor, ...], int] = {}
        self._compression = compression
        self._sparse_as_dense = sparse_as_dense
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.backward_passes_per_step = backward_passes_per_step

        all_params = [p for group in self.param_groups for p in group["params"]]
        self._parameter_names = check_names(self.param_groups, named_parameters)
        self._handles: dict[Any, InFlight] = {}  # a parameter or a group -> its reduction
        self._grad_accs: list[Any] = []
        self._requires_update: set[torch.Tensor] = set()
        self._synchronized = False
        self._should_synchronize = True
        self._allreduce_delay = {p: backward_passes_per_step for p in all_params}
        if self._reduces():
            self._register_hooks()

    def _reduces(self) -> bool:
        """Whether gradients travel: this rank is in the process set, of more than one rank
        or of an elastic job, whose size may change (as in Horovod, a rank outside the set
        steps on its own gradients; an elastic job registers the hooks from the start, as
        Horovod's under HOROVOD_ELASTIC=1, so that a job that grows from one rank averages)."""
        elastic = _C.elastic_enabled()
        if self._process_set is None:
            return mpi_ops.size() > 1 or elastic
        # A registered set (checked at construction): size() is an int.
        return bool(self._process_set.included()) and \
            (cast(int, self._process_set.size()) > 1 or elastic)

    def set_backward_passes_per_step(self, passes: int) -> None:
        """Reduces every `passes`-th backward pass from now on (the passes between add up
        locally)."""
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def load_state_dict(self, *args: Any, **kwargs: Any) -> None:
        """The wrapped optimizer's load_state_dict; forgets reductions in flight."""
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        self.set_backward_passes_per_step(self.backward_passes_per_step)
        return super(self.__class__, self).load_state_dict(*args, **kwargs)

    def _form_groups(self) -> None:
        """groups: the parameters with gradients, in rank 0's order (broadcast, so that every
        rank forms the same groups), split into that many groups or into the given ones
        (a parameter in none of them is a group of its own)."""
        params = [p for group in self.param_groups for p in group["params"] if p.requires_grad]
        names = [self._parameter_names.get(p) for p in params]
        order = functions.broadcast_object(names, root_rank=0, process_set=self._process_set)
        params.sort(key=lambda p: order.index(self._parameter_names.get(p)))
        if isinstance(self._groups, list):
            ids = {id(p) for p in params}
            groups = [[p for p in group if id(p) in ids] for group in self._groups]
            grouped = {id(p) for group in groups for p in group}
            groups += [[p] for p in params if id(p) not in grouped]
        else:
            groups = _split(params, self._groups)  # type: ignore[arg-type]  # a number
        for members in groups:
            group = tuple(members)
            if not group:
                continue
            for p in group:
                self._p_to_group[p] = group
            self._group_counts[group] = 0

    def _register_hooks(self) -> None:
        if self._groups is not None:
            self._form_groups()
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    self._requires_update.add(p)
                    # The accumulator node is the first function of an identity view of p.
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p: torch.Tensor) -> InFlight:
        if p.grad is None:
            # Another rank may have a gradient for it (a dynamic graph): take part with zeros.
            p.grad = p.data.new_zeros(p.size())
        grad = p.grad
        if grad.is_sparse:
            if not self._sparse_as_dense:
                return self._sparse_allreduce_async(p), None
            # A dense copy travels; p.grad stays sparse for an optimizer that needs it so
            # (SparseAdam), and synchronize() writes the result back into it, as Horovod does.
            grad = grad.to_dense()
        compressed, ctx = self._compression.compress(grad)
        prescale, postscale = self._scale_factors()
        handle = mpi_ops.allreduce_async_(compressed, name=self._parameter_names.get(p),
                                          op=self.op, prescale_factor=prescale,
                                          postscale_factor=postscale,
                                          process_set=self._process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group: Sequence[torch.Tensor]) -> InFlight:
        """One grouped allreduce of the gradients of `group` (named after its first
        parameter); returns its handle and the compression contexts."""
        # Every member's hook ran: its p.grad is set.
        compressed, ctxs = zip(*[self._compression.compress(cast(torch.Tensor, p.grad))
                                 for p in group])
        prescale, postscale = self._scale_factors()
        handle = mpi_ops.grouped_allreduce_async_(list(compressed),
                                                  name=self._parameter_names.get(group[0]),
                                                  op=self.op, prescale_factor=prescale,
                                                  postscale_factor=postscale,
                                                  process_set=self._process_set)
        return handle, ctxs

    def _scale_factors(self) -> tuple[float, float]:
        if self.op == Average:
            # kolo divides by the ranks after the postscale: the predivide factor splits the
            # average into a division before the sum and the rest after it.
            return 1.0 / self.gradient_predivide_factor, self.gradient_predivide_factor
        return 1.0, 1.0

    def _sparse_allreduce_async(self, p: torch.Tensor) -> Callable[[], torch.Tensor]:
        return mpi_ops.sparse_allreduce_async(cast(torch.Tensor, p.grad),
                                              cast(str, self._parameter_names.get(p)), self.op,
                                              self._process_set)

    def _make_hook(self, p: torch.Tensor) -> Callable[..., None]:
        def hook(*ignore: Any) -> None:
            handle: Any = None
            ctx: Any = None
            if count_pass(self, p):
                if self._groups is not None:
                    # A group goes once its last gradient arrived; a member whose group
                    # is incomplete at synchronize() goes on its own, as in Horovod.
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        self._handles[group] = self._grouped_allreduce_grad_async(group)
                        for member in group:
                            self._handles.pop(member, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self) -> None:
        """Waits for every gradient's allreduce (starting those whose hook did not run) and
        writes the results to p.grad. Raises HorovodInternalError when a reduction failed."""
        if not self._reduces():
            self._synchronized = True
            return
        started: set[torch.Tensor] = set()
        for key in self._handles:
            started.update(key) if isinstance(key, tuple) else started.add(key)
        for p in self._requires_update - started:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        for key, (handle, ctx) in self._handles.items():
            if isinstance(key, tuple):  # a group
                outputs = mpi_ops.synchronize(handle)
                for p, output, p_ctx in zip(key, outputs, ctx):
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    self._write_grad(p, self._compression.decompress(output, p_ctx))
                continue
            p = key
            self._allreduce_delay[p] = self.backward_passes_per_step
            if callable(handle):  # a sparse gradient
                p.grad = handle()
                continue
            output = mpi_ops.synchronize(handle)
            self._write_grad(p, self._compression.decompress(output, ctx))
        for group in self._group_counts:
            self._group_counts[group] = 0
        self._handles.clear()
        self._synchronized = True

    @staticmethod
    def _write_grad(p: torch.Tensor, result: torch.Tensor) -> None:
        grad = cast(torch.Tensor, p.grad)
        if grad.is_sparse:
            # sparse_as_dense: the dense result goes back into the sparse gradient in place,
            # as Horovod does (zero_().add_(result.to_sparse()): a sparse tensor has no set_).
            grad.zero_().add_(result if result.is_sparse else result.to_sparse())
        elif result is not grad:
            grad.copy_(result)

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """For step() after an explicit synchronize() (e.g. to clip gradients in between)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """synchronize() (unless inside skip_synchronize()), then the wrapped optimizer's step;
        returns its result."""
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

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        """The wrapped optimizer's zero_grad; AssertionError while reductions are in flight
        (after backward, before step or synchronize)."""
        refuse_zero_grad_in_flight(self)
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer: torch.optim.Optimizer,
                         named_parameters: Iterable[tuple[str, torch.Tensor]] | None = None,
                         compression: type[Compressor] = Compression.none,
                         backward_passes_per_step: int = 1, op: int = Average,
                         gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                         groups: Groups | None = None, sparse_as_dense: bool = False,
                         process_set: ProcessSet | None = None) -> torch.optim.Optimizer:
    """Wraps `optimizer` (an instance) so that its step() uses the gradients averaged (op=Sum:
    summed) over every rank, or over the ranks of `process_set` (ranks outside it step on
    their own gradients). Horovod's arguments: `groups` (a number of groups, or lists of
    parameters) allreduces the gradients of a group together once all of them are ready
    (`num_groups` is its deprecated name); sparse gradients are allgathered as Horovod does
    (or made dense first with sparse_as_dense). op=Adasum on more than one rank steps each
    parameter locally and combines the steps' deltas with Adasum (adasum_optimizer.py)."""
    if num_groups != 0:
        warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be "
                      "removed in v0.23.0.", DeprecationWarning)
        if groups is None:
            groups = num_groups
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if op != Adasum or mpi_ops.size() == 1:
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step, op, gradient_predivide_factor, groups,
                   sparse_as_dense, process_set)
    if process_set is not None and mpi_ops._set_id(process_set) != 0:
        raise NotImplementedError("Adasum does not support non-global process sets yet.")
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step)

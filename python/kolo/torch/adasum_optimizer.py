"""DistributedOptimizer(op=Adasum): Horovod's delta optimizer.

Adasum combines what each rank's optimizer would do, not its gradients: when a parameter's
gradient is ready (every backward_passes_per_step-th pass), its hook runs the wrapped
optimizer's step on that parameter alone, turns the parameter into the step's delta (new value
minus the value before) and starts an in-place Adasum allreduce of the delta (mpi_ops, adasum.py).
step() waits for them and sets each parameter to its value before the step plus the combined
delta. synchronize() does nothing and skip_synchronize() is refused, as in Horovod.
Single-threaded, as torch optimizers are; DistributedOptimizer uses it on more than one rank,
on the global process set only.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable

import torch

from kolo.torch import mpi_ops
from kolo.torch.backward_passes import count_pass, refuse_zero_grad_in_flight
from kolo.torch.mpi_ops import Adasum
from kolo.torch.parameter_names import check_names

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from kolo.torch.compression import Compressor


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """The methods of DistributedOptimizer(op=Adasum)'s class, a subclass of the wrapped
    optimizer's class (super(self.__class__, self) is that class)."""

    def __init__(self, params: Iterable[dict[str, Any]],
                 named_parameters: Iterable[tuple[str, torch.Tensor]] | None,
                 compression: type[Compressor], backward_passes_per_step: int = 1) -> None:
        super(self.__class__, self).__init__(params)  # type: ignore[call-arg]
        self._compression = compression
        self._parameter_names = check_names(self.param_groups, named_parameters)
        self.backward_passes_per_step = backward_passes_per_step
        all_params = [p for group in self.param_groups for p in group["params"]]
        self._allreduce_delay = {p: backward_passes_per_step for p in all_params}
        self._handles: dict[torch.Tensor, tuple[int | None, Any]] = {}
        self._grad_accs: list[Any] = []
        self._requires_update: set[torch.Tensor] = set()
        # Each parameter's value before its local step.
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for p in all_params}
        self._register_hooks()

    def set_backward_passes_per_step(self, passes: int) -> None:
        """Reduces every `passes`-th backward pass from now on (the passes between add up
        locally)."""
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _register_hooks(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad:
                    p.grad = p.data.new_zeros(p.size())
                    self._requires_update.add(p)
                    grad_acc = p.expand_as(p).grad_fn.next_functions[0][0]
                    grad_acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(grad_acc)

    def _allreduce_grad_async(self, p: torch.Tensor) -> tuple[int, Any]:
        """Steps `p` alone with the wrapped optimizer, leaves the step's delta in p and
        starts its Adasum allreduce."""
        start = self._starting_models[p]
        stashed = []
        for group in self.param_groups:
            stashed.append(group["params"])
            group["params"] = [p] if any(p is q for q in group["params"]) else []
        try:
            start.data.copy_(p.data)
            super(self.__class__, self).step()
            p.data.sub_(start)
        finally:
            for params, group in zip(stashed, self.param_groups):
                group["params"] = params
        compressed, ctx = self._compression.compress(p.data)
        handle = mpi_ops.allreduce_async_(compressed, name=self._parameter_names.get(p),
                                          op=Adasum)
        return handle, ctx

    def _make_hook(self, p: torch.Tensor) -> Callable[..., None]:
        def hook(*ignore: Any) -> None:
            handle: int | None = None
            ctx: Any = None
            if count_pass(self, p):
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self) -> None:
        """Does nothing: with Adasum, step() combines the parameters' deltas."""

    @contextlib.contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """Refused with Adasum (AssertionError), as in Horovod."""
        raise AssertionError("Skipping synchronization is not supported when using Adasum "
                             "optimizer.")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Waits for every delta's Adasum allreduce (starting those whose hook did not run) and
        sets each parameter to its value before the step plus the combined delta. Returns
        closure()'s loss when given a closure."""
        loss = None
        if closure is not None:
            loss = closure()
        for p in self._requires_update - set(self._handles):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:  # step() before backward_passes_per_step passes
                handle, ctx = self._allreduce_grad_async(p)
                self._handles[p] = (handle, ctx)
            delta = self._compression.decompress(mpi_ops.synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        """The wrapped optimizer's zero_grad; AssertionError while reductions are in flight
        (after backward, before step or synchronize)."""
        refuse_zero_grad_in_flight(self)
        return super(self.__class__, self).zero_grad(*args, **kwargs)

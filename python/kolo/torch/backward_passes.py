"""The gradient hooks' bookkeeping rules, shared by both DistributedOptimizers (optimizer.py
and adasum_optimizer.py), as in Horovod: each parameter's gradient is reduced on its
backward_passes_per_step-th backward pass, one pass more before step() is an error, and so is
zero_grad() while reductions are in flight."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def count_pass(optimizer: Any, p: torch.Tensor) -> bool:
    """Counts one backward pass of `p` in `optimizer` (its _handles and _allreduce_delay);
    True when this pass makes p's gradient ready to reduce."""
    if p in optimizer._handles and optimizer._handles[p][0] is not None:
        if optimizer._allreduce_delay[p] <= 0:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step times "
                "before call to step(). Increase backward_passes_per_step to "
                "accumulate gradients locally.")
    assert not p.grad.requires_grad  # type: ignore[union-attr]  # autograd wrote p.grad
    assert optimizer._allreduce_delay[p] > 0
    optimizer._allreduce_delay[p] -= 1
    return optimizer._allreduce_delay[p] == 0


def refuse_zero_grad_in_flight(optimizer: Any) -> None:
    """Raises when `optimizer` has reductions in flight (its _handles): zeroing the gradients
    then would race with them."""
    if optimizer._handles:
        raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                             "before optimizer.step() or optimizer.synchronize(). This is "
                             "prohibited as it can cause a race condition.")

"""The gradient hook's pass counting, shared by both DistributedOptimizers (optimizer.py and
adasum_optimizer.py): each parameter's gradient is reduced on its backward_passes_per_step-th
backward pass, and one pass more before step() is an error, as in Horovod."""


def count_pass(optimizer, p):
    """Counts one backward pass of `p` in `optimizer` (its _handles and _allreduce_delay);
    True when this pass makes p's gradient ready to reduce."""
    if p in optimizer._handles and optimizer._handles[p][0] is not None:
        if optimizer._allreduce_delay[p] <= 0:
            raise AssertionError(
                "Gradients were computed more than backward_passes_per_step times "
                "before call to step(). Increase backward_passes_per_step to "
                "accumulate gradients locally.")
    assert not p.grad.requires_grad
    assert optimizer._allreduce_delay[p] > 0
    optimizer._allreduce_delay[p] -= 1
    return optimizer._allreduce_delay[p] == 0

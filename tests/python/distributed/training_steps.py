"""What test_training.py and test_mesh.py share: a few SGD steps on a model and its weights,
whole, to compare across backends."""
import torch


def train(module, steps):
    """`steps` (inputs, labels) of SGD with momentum and cross-entropy on `module`."""
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    for x, y in steps:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(module(x), y).backward()
        optimizer.step()
    return module


def full_state(module):
    """The weights, whole (a DTensor's full_tensor: an all-gather in its mesh), named without
    DDP's "module." prefix."""
    state = {}
    for name, value in module.state_dict().items():
        if hasattr(value, "full_tensor"):
            value = value.full_tensor()
        state[name.replace("module.", "")] = value.detach().clone()
    return state

"""Accelerate on kolo. On CPU, Accelerate picks gloo (or MPI) itself and refuses any other
backend named in InitProcessGroupKwargs, but it keeps a process group that is already
initialised: the one line a user adds is `dist.init_process_group("kolo")` before
`Accelerator()`. Then `prepare` wraps the model in DDP on kolo; common.check compares the
weights with the same training on gloo in the same job."""

import common

common.start("accelerate")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from accelerate import Accelerator  # noqa: E402

dist.init_process_group("kolo")
accelerator = Accelerator(cpu=True)
model = common.make_model()
optimizer = torch.optim.SGD(model.parameters(), lr=common.LR)
loader = torch.utils.data.DataLoader(common.dataset(), batch_size=common.BATCH, shuffle=False)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
assert isinstance(model, torch.nn.parallel.DistributedDataParallel), type(model)
for _ in range(common.EPOCHS):
    for x, y in loader:
        optimizer.zero_grad()
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
common.check(common.weights(accelerator.unwrap_model(model)), "Accelerate", common.train_on_gloo())
common.finish()

"""pip_install_test.sh's torch job, a Horovod training script with its import changed, run as
`<venv>/bin/kolorun -np 2 <venv>/bin/python train_torch.py` from a folder outside the source
tree, without PYTHONPATH: kolo must come from the venv pip installed it into. Each rank starts
from its own random weights and trains on its own data; the weights end identical (the
broadcast and the averaged gradients did their work), which every rank checks. Prints
"train_torch: rank R of N ok: weights W, kolo from P"."""

import sys

import torch
import torch.nn.functional as F

import kolo.torch as hvd  # with Horovod: import horovod.torch as hvd

hvd.init()
torch.manual_seed(1000 + hvd.rank())
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size(), momentum=0.9)
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)

data = torch.Generator().manual_seed(7 + hvd.rank())
for step in range(20):
    x = torch.randn(32, 8, generator=data)
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), x.sum(dim=1, keepdim=True))
    loss.backward()
    optimizer.step()

weights = sum(p.double().sum().item() for p in model.parameters())
everyone = hvd.allgather_object(weights)
if any(w != everyone[0] for w in everyone):
    sys.exit("train_torch: rank %d: the ranks' weights differ: %s" % (hvd.rank(), everyone))
print("train_torch: rank %d of %d ok: weights %.6f, kolo from %s"
      % (hvd.rank(), hvd.size(), weights, hvd.__file__), flush=True)
hvd.shutdown()

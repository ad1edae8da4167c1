"""pip_install_test.sh's torch.distributed job: a script that never imports kolo asks for the
"kolo" backend; torch finds it through the torch.distributed.backends entry point that the
installed wheel declares. Run under `<venv>/bin/kolorun -np 2` (kolorun exports torchrun's
variables, so env:// works). Prints "torch_backend: rank R of N ok: all_reduce gave V"."""

import sys

import torch
import torch.distributed as dist

if "kolo" in sys.modules:
    sys.exit("torch_backend: kolo was imported before init_process_group: the test proves nothing")
dist.init_process_group("kolo")
if "kolo.torch" not in sys.modules:
    sys.exit("torch_backend: init_process_group('kolo') ran without loading kolo.torch")
rank, size = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
expected = size * (size + 1) / 2
if value.item() != expected:
    sys.exit("torch_backend: rank %d: all_reduce gave %s, expected %s"
             % (rank, value.item(), expected))
print("torch_backend: rank %d of %d ok: all_reduce gave %g" % (rank, size, value.item()),
      flush=True)
dist.destroy_process_group()

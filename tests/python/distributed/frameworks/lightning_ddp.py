"""Lightning's DDP strategy with the process-group backend set, and nothing else
kolo-specific. `lightning_ddp.py gloo REFERENCE` trains on gloo and rank 0 saves the weights
to REFERENCE; `lightning_ddp.py kolo REFERENCE` trains on kolo and checks that every rank ends
with those weights. ctest runs the gloo job first (a fixture), then the kolo job under torchrun
and under kolorun, at 2 ranks: Lightning's own loop on gloo is the peer, run on the same
inputs."""

import os
import sys

import common

common.start("lightning")

import lightning as L  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from lightning.pytorch.strategies import DDPStrategy  # noqa: E402

backend, reference = sys.argv[1], sys.argv[2]


class Module(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = common.make_model()

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=common.LR)


module = Module()
trainer = L.Trainer(accelerator="cpu", devices=int(os.environ["WORLD_SIZE"]),
                    strategy=DDPStrategy(process_group_backend=backend),
                    max_epochs=common.EPOCHS, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False)
loader = torch.utils.data.DataLoader(common.dataset(), batch_size=common.BATCH, shuffle=False)
trainer.fit(module, loader)
trained = common.weights(module.net)
if backend == "gloo":
    common.check_same_everywhere(trained)
    if dist.get_rank() == 0:
        torch.save(trained, reference)
        print("rank 0: Lightning's weights on gloo saved to %s" % reference, flush=True)
else:
    common.check(trained, "Lightning's DDPStrategy", torch.load(reference))
common.finish()

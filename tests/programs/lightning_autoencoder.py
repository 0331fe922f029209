"""An autoencoder trained with Lightning's Trainer, in the manner of Lightning's README: a
`LightningModule` with an encoder and a decoder, `training_step` and `validation_step` logging
their losses with `self.log`, Adam from `configure_optimizers`, and `Trainer.fit` over a
training and a validation loader, with its progress bar on (the default). Lazily it runs on
the device with `XlaprofStrategy` (as PyTorch/XLA's users run it with Lightning's XLA strategy);
under torch.compile the module is compiled before `fit`, as Lightning's docs show.

    python lightning_autoencoder.py --mode lazy|inductor|xlaprof

An expert reading its profile: lazily, each optimizer step and each validation batch is a step
of its own (the strategy ends one after each, as `xm.mark_step()` does under Lightning's XLA
strategy), so 3 epochs of 6 training and 2 validation batches are 24 steps; under
torch.compile only the 18 optimizer steps are. The progress bar reads the logged loss after
the step has ended: a value already computed, not a sync. Lazily, the first training step
after an epoch's end also computes the epoch's logged mean (Lightning's `_ResultMetric`): a
second kind of step, compiled once and reused every epoch, beside Adam's first-step state.
Under torch.compile, Lightning keeps its logging out of the graph (`torch.compiler.disable`),
so `self.log` breaks each step's graph; the part of `log` Dynamo traces guards on grad mode
and on whether results were logged yet, and compiles each combination once in the first
epochs, which later epochs reuse: one-time costs, none lost at every step.
"""
# expect[lazy]: steps 24
# expect[inductor,xlaprof]: steps 18
# expect[lazy]: LazyState @fit
# expect[lazy]: Recompile @fit | one-time cost | _ResultMetric.compute
# expect[inductor,xlaprof]: GraphBreak @log_train | torch.compiler.disable
# expect[inductor,xlaprof]: GraphBreak @log_val | torch.compiler.disable
# expect[inductor,xlaprof]: Recompile @log_train | expected once | evaluation
# expect[inductor,xlaprof]: Recompile @log_train | one-time cost | epoch_loop._results
# expect[inductor,xlaprof]: Recompile @log_val | one-time cost | grad_mode
# expect[inductor,xlaprof]: Recompile @log_val | one-time cost | val_loop._results
import argparse

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode


class LitAutoEncoder(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 28 * 28))

    def training_step(self, batch, batch_idx):
        x, _ = batch
        x = x.view(x.size(0), -1)
        z = self.encoder(x)
        x_hat = self.decoder(z)
        loss = F.mse_loss(x_hat, x)
        self.log("train_loss", loss)  # log_train
        return loss

    def validation_step(self, batch, batch_idx):
        x, _ = batch
        x = x.view(x.size(0), -1)
        loss = F.mse_loss(self.decoder(self.encoder(x)), x)
        self.log("val_loss", loss)  # log_val

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


torch.manual_seed(0)
images, digits = torch.rand(128, 1, 28, 28), torch.randint(0, 10, (128,))
train_loader = DataLoader(TensorDataset(images[:96], digits[:96]), batch_size=16)
val_loader = DataLoader(TensorDataset(images[96:], digits[96:]), batch_size=16)

autoencoder = LitAutoEncoder()
if mode == "lazy":
    from xlaprof.torch.lightning import XlaprofStrategy

    device = {"strategy": XlaprofStrategy()}
else:
    autoencoder = torch.compile(autoencoder, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))
    device = {"accelerator": "cpu"}
trainer = L.Trainer(max_epochs=3, logger=False, enable_checkpointing=False, num_sanity_val_steps=0, **device)
trainer.fit(model=autoencoder, train_dataloaders=train_loader, val_dataloaders=val_loader)  # fit

"""Lightning's Trainer on the device (`xlaprof.torch.lightning`): a module trained and validated
with its own loops, its losses and parameters equal to the same Trainer's on the CPU, one step
per optimizer step and per validation batch, compiled once."""

import copy

import pytest

torch = pytest.importorskip("torch")
L = pytest.importorskip("lightning")

import xlaprof as xp  # noqa: E402
from xlaprof.torch.lightning import XlaprofStrategy  # noqa: E402


class Regressor(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(6, 24), torch.nn.Tanh(), torch.nn.LayerNorm(24),
                                       torch.nn.Linear(24, 1))
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def on_train_batch_end(self, outputs, batch, batch_idx):
        self.losses.append(outputs["loss"].item())  # computed by the step that just ended

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def loaders():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 6, generator=g)
    y = x[:, :1] * 2 - x[:, 1:2] + 0.1 * torch.randn(96, 1, generator=g)
    data = torch.utils.data.TensorDataset(x, y)
    return (torch.utils.data.DataLoader(data, batch_size=16), torch.utils.data.DataLoader(data, batch_size=32))


def fit(model, **device):
    trainer = L.Trainer(max_epochs=3, enable_progress_bar=False, logger=False, enable_checkpointing=False,
                        enable_model_summary=False, num_sanity_val_steps=0, **device)
    train, val = loaders()
    trainer.fit(model, train, val)
    return trainer


def test_a_lightning_trainer_on_the_device_trains_as_on_the_cpu():
    torch.manual_seed(0)
    cpu = Regressor()
    ours = copy.deepcopy(cpu)
    fit(cpu, accelerator="cpu")
    with xp.profile() as p:
        trainer = fit(ours, strategy=XlaprofStrategy())
    assert p.compiles > 0  # (Lightning moves the module back to the CPU once it is done)
    assert len(ours.losses) == len(cpu.losses) == 3 * 6
    assert ours.losses == pytest.approx(cpu.losses, rel=1e-5)
    for a, b in zip(ours.parameters(), cpu.parameters()):
        torch.testing.assert_close(a.detach().cpu(), b.detach(), rtol=1e-5, atol=1e-6)
    assert float(trainer.callback_metrics["val_loss"]) == pytest.approx(float(fit_val(cpu)), rel=1e-5)
    # A step per optimizer step and per validation batch (9 per epoch), compiled by the second
    # epoch (whose first step also takes the metric states the first epoch's end made); after
    # the last, Lightning reads the logged metrics to the CPU (a graph of its own).
    assert p.steps == 3 * (6 + 3), p.report()
    assert [step for step, *_ in p._data().compiles_after(2 * 9)] == [3 * 9 + 1], p.report()


def fit_val(model):
    trainer = L.Trainer(accelerator="cpu", enable_progress_bar=False, logger=False, enable_model_summary=False)
    return trainer.validate(model, loaders()[1], verbose=False)[0]["val_loss"]

"""A GAN trained in the manner of PyTorch's DCGAN example: a generator and a discriminator of
transposed and strided convolutions with batch norm, each with its own Adam; every iteration
updates the discriminator on a real batch and on the generator's fakes (`fake.detach()`), then
the generator through the discriminator's judgement of the same fakes, and logs both losses
every few iterations with `.item()`, as the example prints them.

    python dcgan_two_optimizers.py --mode lazy|inductor|xlaprof

An expert reading its profile: one iteration is one step, though it steps two optimizers (the
step count is the iterations, in every mode). Lazily, the log's `.item()` every fourth
iteration splits those iterations' graphs in two (a hidden sync, the one thing to change: log
tensors kept on the device and read after the loop, or read at the step's end); the Adams'
state is made by the first step (warm-up, once); the graphs the split and the first step make
are theirs, not recompiles of their own. Under torch.compile the discriminator is compiled a
second time, once, for `fake` (which requires grad) after `fake.detach()`: expected, each graph
reused after; nothing to change.
"""
# expect[all]: steps 12
# expect[lazy]: HiddenSync @log_losses
# expect[lazy]: LazyState @step_end
# expect[inductor,xlaprof]: Recompile @make_fake | expected once | @d_on_fake
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")

nz, ngf, ndf, batch_size, iterations, log_every = 16, 8, 8, 8, 12, 4


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False))

    def forward(self, x):
        return self.main(x).view(-1)


def weights_init(m):
    if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif isinstance(m, nn.BatchNorm2d):
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


torch.manual_seed(0)
netG, netD = Generator(), Discriminator()
netG.apply(weights_init)
netD.apply(weights_init)
netG, netD = netG.to(device), netD.to(device)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
if mode != "lazy":
    backend = {"backend": "xlaprof"} if mode == "xlaprof" else {}
    netG, netD = torch.compile(netG, **backend), torch.compile(netD, **backend)

real_images = torch.rand(iterations, batch_size, 3, 16, 16) * 2 - 1  # a dataset of 16x16 images
noise = torch.randn(iterations, batch_size, nz, 1, 1, generator=torch.Generator().manual_seed(1))

if __name__ == "__main__":
    for i in range(iterations):
        real = real_images[i].to(device)
        z = noise[i].to(device)
        # (1) the discriminator: real images towards 1, the generator's fakes towards 0
        optD.zero_grad()
        out_real = netD(real)
        errD_real = F.binary_cross_entropy_with_logits(out_real, torch.ones_like(out_real))
        errD_real.backward()
        fake = netG(z)  # make_fake
        out_fake = netD(fake.detach())
        errD_fake = F.binary_cross_entropy_with_logits(out_fake, torch.zeros_like(out_fake))
        errD_fake.backward()
        errD = errD_real + errD_fake
        optD.step()
        # (2) the generator: its fakes judged real
        optG.zero_grad()
        out = netD(fake)  # d_on_fake
        errG = F.binary_cross_entropy_with_logits(out, torch.ones_like(out))
        errG.backward()
        optG.step()
        if i % log_every == 0:
            print(f"[{i}/{iterations}] Loss_D {errD.item():.4f} Loss_G {errG.item():.4f}")  # log_losses
        if mode == "lazy":
            xt.step()  # step_end
    print(f"trained {iterations} iterations")

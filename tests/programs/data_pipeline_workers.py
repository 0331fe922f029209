"""A training loop fed by a `DataLoader` with worker processes, in the manner of the image
pipelines of torchvision's and timm's training scripts: each sample is decoded and augmented on
the CPU (here a deterministic stand-in that costs what decoding a small JPEG costs), two
workers prefetch batches, and the loop moves each batch to the device (lazily through
`xt.DeviceLoader`, PyTorch/XLA's `MpDeviceLoader`).

    python data_pipeline_workers.py --mode lazy|inductor|xlaprof

An expert reading its profile: the model's step is a few milliseconds, the pipeline's batch
far longer: once the batches prefetched while the first steps compiled are used up, the loop
waits for data at every step, in every mode. The fix is in the pipeline (more workers,
decoding once and caching, lighter augmentation), not in the model. Run lazily, SGD's momentum
is made by the first step (warm-up, once). Under
`backend="xlaprof"` the model was left on the CPU: each call copies its inputs to the device
and its results back (move the model to the device).
"""
# expect[all]: steps 24
# expect[all]: DataWait @batch_loop | num_workers
# expect[lazy]: LazyState @step_end
# expect[xlaprof]: HostRead @train_call | results back to the CPU | model.to
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

ap = argparse.ArgumentParser()
ap.add_argument("--mode", choices=["lazy", "inductor", "xlaprof"], default="lazy")
mode = ap.parse_args().mode

batch_size, steps, decode_seconds = 8, 24, 0.05

if mode == "lazy":
    import xlaprof.torch as xt

    device = xt.device()
else:
    device = torch.device("cpu")


class DecodedImages(Dataset):
    """Samples decoded and augmented on the CPU, each taking `decode_seconds`."""

    def __len__(self):
        return batch_size * steps

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        deadline = time.perf_counter() + decode_seconds
        image = torch.rand(3, 24, 24, generator=g)
        while time.perf_counter() < deadline:  # the decode and the augmentation
            image = (image * 0.999 + 0.001).clamp(0, 1)
        if i % 2:
            image = image.flip(-1)  # a random horizontal flip, seeded
        return (image - 0.5) / 0.25, i % 10


model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
                      nn.Linear(16 * 16, 10)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
train_model = model if mode == "lazy" else torch.compile(model, **({"backend": "xlaprof"} if mode == "xlaprof" else {}))

if __name__ == "__main__":
    loader = DataLoader(DecodedImages(), batch_size=batch_size, num_workers=2, shuffle=False,
                        persistent_workers=True, prefetch_factor=2)
    batches = xt.DeviceLoader(loader) if mode == "lazy" else loader
    for step, (images, targets) in enumerate(batches):  # batch_loop
        images, targets = images.to(device), targets.to(device)
        loss = F.cross_entropy(train_model(images), targets)  # train_call
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if mode == "lazy":
            xt.step()  # step_end
    print(f"trained {step + 1} steps, last loss {loss.item():.4f}")

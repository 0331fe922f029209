"""Writes profile-torch-compile.xlaprof, the golden torch.compile profile of the profiler's and
the viewers' tests: a model whose forward prints (a graph break), a batch that shrinks once (a
guard failure), four AdamW steps. Run from this folder:

    XLAPROF_PROFILE=profile-torch-compile.xlaprof python torch_compile.py
"""
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = self.a(x).relu()
        print("forward", tuple(h.shape))
        return self.b(h)


torch.manual_seed(0)
model = Net()
compiled = torch.compile(model, backend="aot_eager")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    x = torch.randn(8 if step < 3 else 4, 16)
    loss = compiled(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

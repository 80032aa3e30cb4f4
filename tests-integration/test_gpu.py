"""End to end on a CUDA device (skipped without one): inductor's Triton path and cudagraphs.

float32 tolerances: rtol=1e-4, atol=1e-5 (TF32 is off in these tests: torch's default for matmul).
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import ember

pytestmark = pytest.mark.gpu
TOL = dict(rtol=1e-4, atol=1e-5)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.norm(x))))


def simple_fn(x):
    for _ in range(20):
        y = torch.sin(x)
        x = x + y
    return x


@pytest.mark.parametrize("backend", ["inductor", "cudagraphs", "aot_eager"])
def test_training_steps_on_cuda(backend):
    torch.manual_seed(0)
    eager = Net().cuda()
    mine = copy.deepcopy(eager)
    compiled = ember.compile(mine, backend=backend)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_m = torch.optim.SGD(mine.parameters(), lr=0.1)
    for _ in range(4):  # cudagraphs captures at the third call: replay is checked too
        x, y = torch.randn(32, 64, device="cuda"), torch.randint(0, 10, (32,), device="cuda")
        for model, fn, opt in ((eager, eager, opt_e), (mine, compiled, opt_m)):
            opt.zero_grad()
            F.cross_entropy(fn(x), y).backward()
            opt.step()
    for p, q in zip(eager.parameters(), mine.parameters()):
        torch.testing.assert_close(q, p, **TOL)


def test_simple_fn_on_cuda_is_one_kernel_and_right():
    compiled = ember.compile(simple_fn)
    x = torch.randn(10_000, device="cuda")
    torch.testing.assert_close(compiled(x), simple_fn(x), **TOL)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune-no-cudagraphs"])
def test_modes_on_cuda(mode):
    torch.manual_seed(0)
    model = Net().cuda().eval()
    compiled = ember.compile(model, mode=mode)
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(8, 64, device="cuda")
            torch.testing.assert_close(compiled(x), model(x), **TOL)

"""Small models through the inductor's Triton path on CPU tensors: the generated Triton kernels
run under Triton's interpreter, so CI checks the GPU code path without a GPU (issue 6).

float32 tolerances: rtol=1e-4, atol=1e-5.
"""
import copy

import pytest
import torch
import torch.nn.functional as F

import ember

TOL = dict(rtol=1e-4, atol=1e-5)


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        return torch.log_softmax(self.fc2(F.gelu(self.fc1(self.norm(x)))), dim=-1)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x))).mean(dim=(2, 3))


@pytest.mark.parametrize("make,shape", [(Small, (8, 16)), (SmallCNN, (2, 3, 6, 6)), (SmallCNN, (2, 3, 48, 48))],
                         ids=["mlp", "cnn", "cnn-split-statistics"])
def test_training_step_through_triton_interpreter(make, shape):
    torch.manual_seed(0)
    eager = make()
    mine = copy.deepcopy(eager)
    compiled = ember.compile(mine, options={"backend": "triton"})
    for _ in range(2):
        x = torch.randn(shape)
        for model, fn in ((eager, eager), (mine, compiled)):
            model.zero_grad()
            fn(x).pow(2).sum().backward()
        for (name, p), q in zip(eager.named_parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, **TOL, msg=lambda m: f"grad of {name}: {m}")
    for b, c in zip(eager.buffers(), mine.buffers()):
        torch.testing.assert_close(c, b, **TOL)
    with torch.no_grad():
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), eager(x), **TOL)

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


class MaskedAttention(torch.nn.Module):
    """Self-attention with a boolean padding mask, as transformers builds it under a compiler."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads, self.qkv, self.out = heads, torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)

    def forward(self, x, keep):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = keep[:, None, None, :].expand(b, 1, s, s)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(a.transpose(1, 2).reshape(b, s, d))


def test_masked_attention_runs_the_efficient_kernel(tmp_path):
    """Note [attention kernel choice under fake tensors] (ember_prims/decomps/attention.py):
    the traced graph calls the memory-efficient kernel eager runs, not the math form, and its
    values and gradients are eager's."""
    torch.manual_seed(0)
    eager = MaskedAttention().cuda()
    mine = copy.deepcopy(eager)
    compiled = ember.compile(mine, options={"trace.enabled": True, "trace.dir": str(tmp_path)})
    for _ in range(2):
        x = torch.randn(4, 24, 64, device="cuda")
        keep = torch.rand(4, 24, device="cuda") > 0.2
        keep[:, 0] = True
        for model, fn in ((eager, eager), (mine, compiled)):
            model.zero_grad(set_to_none=True)
            out = fn(x, keep)
            out.square().mean().backward()
            if fn is compiled:
                got = out
        torch.testing.assert_close(got, eager(x, keep), **TOL)
        for p, q in zip(eager.parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, **TOL)
    graphs = "".join(p.read_text() for p in tmp_path.glob("**/graph.py"))
    assert "_scaled_dot_product_efficient_attention.default" in graphs
    assert "_scaled_dot_product_efficient_attention_backward" in graphs
    assert "bmm" not in graphs

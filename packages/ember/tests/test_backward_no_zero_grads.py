"""The compiled backward gets no zero gradients for the forward's non-differentiable outputs.

A module with batch norm in training returns its updated running statistics as extra outputs
of the forward graph (mutated buffers): autograd materialized a zero gradient for each of them
at every backward (resnet50: 159 `zeros` and fill kernels per step, ~1.5 ms of host time on the
H100; docs/performance.md, training profile of 2026-11-24). Gradients of differentiable outputs
that the loss does not use still reach the backward as zeros."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import ember


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Conv2d(4, 4, 3), torch.nn.BatchNorm2d(4))


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_batch_norm_backward_makes_no_zero_grads(backend):
    ref, mod = _net(), _net()
    fn = ember.compile(mod, backend=backend)
    for seed in (1, 2):
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
        ref.zero_grad(set_to_none=True)
        mod.zero_grad(set_to_none=True)
        ref(x).square().sum().backward()
        loss = fn(x).square().sum()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            loss.backward()
        zeros = [e.name for e in prof.events() if e.name in ("aten::zeros", "aten::zeros_like")]
        assert zeros == [], zeros
        for p, q in zip(mod.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4)
        for b, c in zip(mod.buffers(), ref.buffers()):
            torch.testing.assert_close(b, c)


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_unused_differentiable_output_gets_zero_grad(backend):
    def f(x, w):
        y = x @ w
        return y.sin(), y.cos() * 2

    fn = ember.compile(f, backend=backend)
    for seed in (1, 2):
        g = torch.Generator().manual_seed(seed)
        x, w = torch.randn(3, 4, generator=g), torch.randn(4, 5, generator=g, requires_grad=True)
        w2 = w.detach().clone().requires_grad_()
        a, _ = fn(x, w)
        a.sum().backward()  # the second output's gradient is None
        f(x, w2)[0].sum().backward()
        torch.testing.assert_close(w.grad, w2.grad)
        _, b = fn(x, w)
        w.grad = None
        b.sum().backward()  # and now the first one's
        w2.grad = None
        f(x, w2)[1].sum().backward()
        torch.testing.assert_close(w.grad, w2.grad)

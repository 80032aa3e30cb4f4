"""What a compiled training forward saves for its backward (Note [pointwise values recomputed
from saved ones], ember_autograd/partition.py): a pointwise chain after a matrix product saves
the product, not the chain's intermediates; the gradients stay eager's."""
import math

import torch

import ember


class GeluMLP(torch.nn.Module):
    """GPT-2's MLP: tanh GELU between two linear layers."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = torch.nn.Linear(16, 64), torch.nn.Linear(64, 16)

    def forward(self, x):
        h = self.up(x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return self.down(h)


def _saved_during(fn, *args):
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        out = fn(*args)
    return out, saved


def test_a_gelu_chain_saves_only_its_input():
    ref, mod = GeluMLP(), GeluMLP()
    fn = ember.compile(mod, backend="inductor")
    fn(torch.randn(8, 16, requires_grad=True))  # compiled outside the hooks (the trace saves fakes)
    for seed in (1, 2):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(seed), requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        out, saved = _saved_during(fn, x)
        want, eager_saved = _saved_during(ref, xe)
        # the product h (its 8x64 floats), x and the weights; not tanh, 1 + tanh, 0.5 h, ...
        activations = [t for t in saved if t.shape == (8, 64)]
        assert len(activations) == 1, [t.shape for t in saved]
        assert len([t for t in eager_saved if t.shape == (8, 64)]) > 1  # eager keeps the chain
        g = torch.randn_like(want)
        out.backward(g)
        want.backward(g)
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(x.grad, xe.grad, rtol=1e-5, atol=1e-5)
        for p, q in zip(mod.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
            p.grad = q.grad = None

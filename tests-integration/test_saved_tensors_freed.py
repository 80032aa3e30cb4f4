"""Note [saved tensors handed over] (ember_autograd/runtime.py) and Note [inputs freed early]
(ember_inductor/wrapper.py): the compiled backward frees each saved activation after its last
use, as eager's engine does, and `retain_graph=True` still keeps them for another backward.
Gradients against eager, float32: rtol=1e-4, atol=1e-5 (sums in another order)."""
import pytest
import torch

import ember

pytestmark = pytest.mark.usefixtures("no_fallback")
F32 = dict(rtol=1e-4, atol=1e-5)


def _mlp(device="cpu", width=64, depth=4):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Tanh())
                                 for _ in range(depth)]).to(device)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_retain_graph_keeps_the_saved_values_for_a_second_backward(backend):
    model = _mlp()
    compiled = ember.compile(model, backend=backend)
    for _ in range(2):
        x = torch.randn(16, 64)
        model.zero_grad(set_to_none=True)
        out = compiled(x)
        out.square().sum().backward(retain_graph=True)
        out.abs().sum().backward()  # the same saved values, a second time
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
        ref = model(x)
        ref.square().sum().backward(retain_graph=True)
        ref.abs().sum().backward()
        for g, e in zip(got, (p.grad for p in model.parameters())):
            torch.testing.assert_close(g, e, **F32)


def test_a_backward_after_the_saved_values_were_freed_raises_as_eager_does():
    model = _mlp()
    compiled = ember.compile(model)
    out = compiled(torch.randn(16, 64))
    loss = out.sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


@pytest.mark.gpu
def test_backward_peak_memory_is_eagers():
    """8 layers of Linear(1024) + tanh at batch 4096 save 16 MiB activations; the compiled
    backward used to hold all of them until it returned (BERT-base: 0.8 GB above eager's peak)."""
    model = _mlp("cuda", width=1024, depth=8)
    compiled = ember.compile(model)
    x = torch.randn(4096, 1024, device="cuda")
    loss = lambda fn: fn(x).square().mean()  # noqa: E731
    eager, ember_peak = _backward_peak(model, model, loss), _backward_peak(model, compiled, loss)
    assert ember_peak <= eager + 8, (ember_peak, eager)


def _backward_peak(model, fn, loss_of) -> float:
    """MiB allocated above the backward's start, at its peak, after two warm-up steps
    (compile, cuBLAS workspaces)."""
    for _ in range(2):
        model.zero_grad(set_to_none=True)
        loss_of(fn).backward()
    model.zero_grad(set_to_none=True)
    loss = loss_of(fn)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


class _TwoHeads(torch.nn.Module):
    """Returns (the value the loss uses, a second large output the loss never reaches), as a
    language model returns (loss, logits)."""

    def __init__(self, body, width):
        super().__init__()
        self.body = body
        self.head = torch.nn.Linear(width, 4 * width)

    def forward(self, x):
        h = self.body(x)
        return h, self.head(h)


@pytest.mark.gpu
def test_backward_peak_memory_is_eagers_with_an_unreached_output():
    """Note [unreached outputs]: the backward pruned for the unreached head takes no zero tangent
    for it (64 MiB here) and still frees each saved value after its last use."""
    model = _TwoHeads(_mlp("cuda", width=1024, depth=8), 1024).cuda()
    compiled = ember.compile(model)
    x = torch.randn(4096, 1024, device="cuda")
    loss = lambda fn: fn(x)[0].square().mean()  # noqa: E731
    eager, ember_peak = _backward_peak(model, model, loss), _backward_peak(model, compiled, loss)
    assert ember_peak <= eager + 8, (ember_peak, eager)
    model.zero_grad(set_to_none=True)
    compiled(x)[0].square().mean().backward()
    got = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model(x)[0].square().mean().backward()
    for g, p in zip(got, model.parameters()):
        if p.grad is None:
            assert g is None
        else:
            torch.testing.assert_close(g, p.grad, **F32)

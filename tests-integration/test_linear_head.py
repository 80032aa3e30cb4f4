"""A linear head whose bias add nothing else fuses with (a language model's logits): the bias goes
into the matrix product and the 3-D result is the product's storage (Note [bias in the matmul]
in ember_inductor/passes.py). Against eager: inference and a training step, through the C++
backend, the Triton path (interpreted on CPU tensors) and the eager backend, each called twice
with new inputs; the output stays an ordinary tensor that can be changed in place."""
import copy

import pytest
import torch

import ember

TOL = dict(rtol=1e-4, atol=1e-5)
VARIANTS = {
    "inductor": dict(),
    "inductor-triton": dict(options={"backend": "triton"}),
    "eager-backend": dict(backend="eager"),
}


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(16, 16)
        self.decoder = torch.nn.Linear(16, 40)

    def forward(self, x):  # (batch, seq, 16) -> (batch, seq, 40) logits
        return self.decoder(torch.tanh(self.body(x)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_linear_head_inference_and_training(variant):
    torch.manual_seed(0)
    eager = Head()
    mine = copy.deepcopy(eager)
    compiled = ember.compile(mine, **VARIANTS[variant])
    for batch in (2, 2):  # second call: new inputs, guards hold
        x = torch.randn(batch, 5, 16)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), eager(x), **TOL)
        for model, fn in ((eager, eager), (mine, compiled)):
            model.zero_grad()
            out = fn(x)
            out.mul_(2)  # an ordinary tensor: no "view modified in place" error
            out.pow(2).sum().backward()
        for (name, p), q in zip(eager.named_parameters(), mine.parameters()):
            torch.testing.assert_close(q.grad, p.grad, **TOL, msg=name)

"""In-place restriding of an intermediate (`as_strided_`) through ember.compile: ATen's
adaptive_avg_pool2d to 1x1 restrides its mean in place when the input is channels-last-like,
which Swin's pooler (adaptive_avg_pool1d of a transposed sequence) hits. The autograd trace
crashed on it and the default backend ran the graph eagerly (found by the Hugging Face zoo,
tests-integration/test_zoo_hf.py)."""
import pytest
import torch

import ember


def pooled(x):  # Swin's pooler
    return torch.flatten(torch.nn.functional.adaptive_avg_pool1d(x.transpose(1, 2), 1), 1).sin()


def restrided(x):
    y = x * 2
    y.as_strided_((2, 3, 1), (3, 1, 3))
    z = (x + 1).flatten()[3:]
    z.as_strided_((3,), (1,))  # a view with an offset into its base: the offset is kept
    return y.cos() + z.sum()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn,shape", [(pooled, (2, 5, 4)), (restrided, (2, 3))], ids=["pooled", "restrided"])
def test_inplace_restride_forward_and_backward(fn, shape, backend):
    compiled = ember.compile(fn, backend=backend, fullgraph=True)  # a failed compile raises
    for _ in range(2):  # the second call with fresh inputs reuses the graph
        x = torch.randn(shape, requires_grad=True)
        xc = x.detach().clone().requires_grad_()
        want, got = fn(x), compiled(xc)
        torch.testing.assert_close(got, want)
        want.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(xc.grad, x.grad)
    assert len(ember.compile_record(compiled).capture.graphs) == 1

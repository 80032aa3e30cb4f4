"""Note [attention kernel choice under fake tensors] (ember_prims/attention.py): a traced
scaled_dot_product_attention with a mask on CUDA calls the memory-efficient kernel eager picks
(a boolean mask as eager's additive bias), not the math form; elsewhere the function itself.
The CUDA graphs are traced from fake tensors (no GPU needed); values on the device:
tests-integration/test_gpu.py::test_masked_attention_runs_the_efficient_kernel."""
import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

import ember_prims


def _attention(q, k, v, m):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m)


def _ops(device, dtype=torch.float32, mask_dtype=torch.bool, head=64):
    gm = ember_prims.with_fused_attention(torch.fx.symbolic_trace(_attention))
    with FakeTensorMode():
        q = torch.empty(2, 3, 16, head, device=device, dtype=dtype)  # no autograd: a CPU build aborts on CUDA grads
        k, v = torch.empty_like(q), torch.empty_like(q)
        m = torch.empty(2, 1, 1, 16, dtype=dtype if mask_dtype == "same" else mask_dtype, device=device)
        traced = make_fx(gm)(q, k, v, m)  # the test's own reference tracer (tests may use make_fx)
    return {str(n.target) for n in traced.graph.nodes if n.op == "call_function"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mask_dtype", [torch.bool, "same"])
def test_cuda_attention_with_a_mask_is_the_efficient_kernel(dtype, mask_dtype):
    ops = _ops("cuda", dtype, mask_dtype)
    assert "aten._scaled_dot_product_efficient_attention.default" in ops
    assert "aten.bmm.default" not in ops


@pytest.mark.parametrize("case", [dict(device="cpu"), dict(device="cuda", head=6), dict(device="cuda", head=256)])
def test_what_the_efficient_kernel_does_not_take_is_the_function_itself(case):
    """CPU; a head size the kernel cannot align, or exceeds."""
    ops = _ops(**case)
    assert "aten._scaled_dot_product_efficient_attention.default" not in ops


def test_a_graph_without_attention_is_returned_as_it_is():
    gm = torch.fx.symbolic_trace(lambda x: x.relu())
    assert ember_prims.with_fused_attention(gm) is gm


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
def test_cpu_values_and_gradients_are_eagers(mask_dtype):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8, requires_grad=True) for _ in range(3))
    m = torch.rand(2, 1, 1, 16) > 0.3
    m = m if mask_dtype == torch.bool else torch.where(m, 0.0, -1e4)
    gm = ember_prims.with_fused_attention(torch.fx.symbolic_trace(_attention))
    got = gm(q, k, v, m)
    grads = torch.autograd.grad(got.sum(), (q, k, v))
    want = _attention(q, k, v, m)
    torch.testing.assert_close(got, want)
    for g, w in zip(grads, torch.autograd.grad(want.sum(), (q, k, v))):
        torch.testing.assert_close(g, w)

"""Note [attention kernel choice under fake tensors] (decomps/attention.py): on CUDA, a traced
scaled_dot_product_attention runs the memory-efficient kernel eager picks (a boolean mask as
eager's additive bias), not the math form; elsewhere the composite kernel. The CUDA graphs are
built from fake tensors (no GPU needed); the values are checked on the device by
tests-integration/test_gpu.py::test_bert_attention_runs_the_efficient_kernel."""
import pytest
import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

import ember_prims

aten = torch.ops.aten


def _decomposed(device, dtype=torch.float32, mask_dtype=torch.bool, head=64, causal=False, mask=True):
    with FakeTensorMode():
        q = torch.empty(2, 3, 16, head, device=device, dtype=dtype)
        k, v = torch.empty_like(q), torch.empty_like(q)
        m = torch.empty(2, 1, 1, 16, dtype=mask_dtype, device=device) if mask else None
    g = fx.Graph()
    args = []
    for name, val in zip("qkvm", (q, k, v, m)):
        if val is not None:
            p = g.placeholder(name)
            p.meta["val"] = val
            args.append(p)
    g.output(g.call_function(aten.scaled_dot_product_attention.default, (*args,), {"is_causal": causal}))
    gm = ember_prims.decompose(fx.GraphModule(torch.nn.Module(), g))
    return {str(n.target) for n in gm.graph.nodes if n.op == "call_function"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mask_dtype", [torch.bool, "same"])
def test_cuda_attention_with_a_mask_is_the_efficient_kernel(dtype, mask_dtype):
    ops = _decomposed("cuda", dtype, dtype if mask_dtype == "same" else mask_dtype)
    assert "aten._scaled_dot_product_efficient_attention.default" in ops
    assert "aten.bmm.default" not in ops and "ember_prims.amax.default" not in ops


def test_cuda_causal_attention_without_a_mask_is_the_efficient_kernel():
    ops = _decomposed("cuda", causal=True, mask=False)
    assert "aten._scaled_dot_product_efficient_attention.default" in ops


@pytest.mark.parametrize("case", [dict(device="cpu"), dict(device="cuda", head=6), dict(device="cuda", head=256)])
def test_what_the_efficient_kernel_does_not_take_is_the_composite(case):
    """CPU; a head size the kernel cannot align, or exceeds."""
    ops = _decomposed(**case)
    assert "aten._scaled_dot_product_efficient_attention.default" not in ops


def test_a_mask_together_with_is_causal_raises_eagers_error():
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        _decomposed("cuda", causal=True)


def test_cpu_attention_values_are_eagers():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8) for _ in range(3))
    m = torch.rand(2, 1, 1, 16) > 0.3
    g = fx.Graph()
    ph = [g.placeholder(n) for n in "qkvm"]
    for p, val in zip(ph, (q, k, v, m)):
        p.meta["val"] = val
    g.output(g.call_function(aten.scaled_dot_product_attention.default, (*ph,)))
    gm = ember_prims.decompose(fx.GraphModule(torch.nn.Module(), g))
    torch.testing.assert_close(gm(q, k, v, m), torch.nn.functional.scaled_dot_product_attention(q, k, v, m),
                               rtol=1e-5, atol=1e-5)

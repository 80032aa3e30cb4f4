"""Note [aligned attention bias]: CUDA's memory-efficient attention requires attn_bias strides
(but the last) to be multiples of 16 bytes; a mask the graph materializes densely at an odd
sequence length is not, and the call raised (the graph then ran eagerly)."""
import warnings

import pytest
import torch

from ember_inductor.wrapper import aligned_operand

aten = torch.ops.aten


def test_an_unaligned_operand_is_copied_into_padded_rows():
    bias = torch.randn(2, 1, 7, 7)
    out = aligned_operand(bias)
    assert all(st % 4 == 0 for st in out.stride()[:-1]) and out.stride(-1) == 1
    assert torch.equal(out, bias)
    half = torch.randn(3, 2, 5, 5, dtype=torch.float16)
    assert all(st % 8 == 0 for st in aligned_operand(half).stride()[:-1])


def test_aligned_and_broadcast_operands_pass_unchanged():
    aligned = torch.randn(2, 4, 8, 8)
    assert aligned_operand(aligned) is aligned
    expanded = torch.randn(2, 1, 1, 7).expand(2, 4, 7, 7)  # strides (7, 0, 0, 1): 7 is not aligned
    assert aligned_operand(torch.randn(2, 1, 1, 8).expand(2, 4, 8, 8)).stride() == (8, 0, 0, 1)
    assert torch.equal(aligned_operand(expanded), expanded)
    assert aligned_operand(None) is None


def test_the_wrapper_hands_attn_bias_over_aligned():
    from ember_inductor.wrapper import _aligned_operands

    assert _aligned_operands(aten._scaled_dot_product_efficient_attention.default) == {3, "attn_bias"}
    assert _aligned_operands(aten._scaled_dot_product_efficient_attention_backward.default) == {4, "attn_bias"}
    assert _aligned_operands(aten.mm.default) == set()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("seq", [7, 33, 64])
def test_masked_attention_at_odd_lengths_compiles_on_the_gpu(seq):
    import ember

    def attend(q, k, v, mask):
        bias = (1.0 - mask[:, None, None, :]) * -10000.0  # HF's extended mask, materialized
        bias = bias.expand(-1, q.shape[1], q.shape[2], -1) + 0.0
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    q, k, v = (torch.randn(2, 4, seq, 16, device="cuda", requires_grad=True) for _ in range(3))
    mask = torch.ones(2, seq, device="cuda")
    mask[1, seq // 2:] = 0
    compiled = ember.compile(attend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback to eager
        out = compiled(q, k, v, mask)
        out.sum().backward()
    grads = [t.grad.clone() for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    want = attend(q, k, v, mask)
    want.sum().backward()
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-4)
    for g, t in zip(grads, (q, k, v)):
        torch.testing.assert_close(g, t.grad, rtol=1e-4, atol=1e-4)

"""scaled_dot_product_attention on CUDA: the fused memory-efficient kernel, as eager picks it.

Note [attention kernel choice under fake tensors]
    `aten.scaled_dot_product_attention` is a composite op: eager asks `_fused_sdp_choice` which
    kernel to run and calls it. On CUDA tensors eager picks the memory-efficient kernel for
    float32, and for a boolean or float mask too. Under a FakeTensorMode the same query answers
    "math" (torch 2.11, checked on an H200 with BERT's shapes), so a traced graph ran the math
    form: two batched products and a softmax whose (batch, heads, L, S) probabilities were saved
    for the backward (BERT-base b8 s128: 24 x 6 MiB more held after the forward, 0.26 GB more at
    its peak, and 2 kernels more per layer than eager's one). transformers builds a boolean mask
    whenever it is being compiled, so every BERT-like model took that path.
    So on CUDA the decomposition below makes eager's choice itself from what the fake tensors
    tell (device, dtypes, ranks, sizes, strides, the user's `torch.backends.cuda` switch) and
    calls `_scaled_dot_product_efficient_attention`, an extern whose backward is ATen's own;
    a boolean mask becomes eager's additive bias (0 where kept, -inf where masked), expanded to
    (batch, heads, L, S) as eager expands it (Note [aligned attention bias] pads its rows where
    the kernel needs). Anything else (CPU, flash-only dtypes and shapes, GQA, a mask together
    with is_causal, symbolic head sizes) takes the composite kernel, as before.
"""
from __future__ import annotations

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import P, aten, broadcast_to, full

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _efficient_fits(q, k, v, mask, is_causal) -> bool:
    if q.device.type != "cuda" or not torch.backends.cuda.mem_efficient_sdp_enabled():
        return False
    if any(t.dim() != 4 or t.device != q.device or t.dtype != q.dtype for t in (k, v)) or q.dim() != 4:
        return False
    if q.dtype not in _FLOATS or (mask is not None and is_causal):
        return False
    sizes = [s for t in (q, k, v) for s in (*t.shape, t.stride(-1))]
    if not all(isinstance(s, int) for s in sizes):
        return False  # symbolic sizes: the composite kernel, which guards as eager decides
    if q.shape[:2] != k.shape[:2] or k.shape[:2] != v.shape[:2] or k.shape[2] != v.shape[2]:
        return False  # broadcast batch or GQA heads: not this kernel
    align = 16 // q.element_size()
    e, ev = q.shape[-1], v.shape[-1]
    if k.shape[-1] != e or e % align or ev % align or e > 128 or ev > 128:
        return False
    if min(q.shape[2], k.shape[2]) == 0 or any(t.stride(-1) != 1 for t in (q, k, v)):
        return False
    return mask is None or (mask.dtype in (torch.bool, q.dtype) and mask.device == q.device)


@register(aten.scaled_dot_product_attention.default)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    if not _efficient_fits(query, key, value, attn_mask, is_causal):
        return aten.scaled_dot_product_attention.default.decompose(
            query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    bias = None
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_mask = P.where(attn_mask, full(attn_mask.shape, 0.0, query.dtype, query.device),
                                full(attn_mask.shape, float("-inf"), query.dtype, query.device))
        bias = broadcast_to(attn_mask, [query.shape[0], query.shape[1], query.shape[2], key.shape[2]])
    lse = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    out = aten._scaled_dot_product_efficient_attention.default(
        query, key, value, bias, lse, dropout_p, is_causal, scale=scale)
    return out[0]

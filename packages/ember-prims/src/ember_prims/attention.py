"""scaled_dot_product_attention on CUDA: the fused kernel eager picks, not the math form.

Note [attention kernel choice under fake tensors]
    `aten.scaled_dot_product_attention` is a composite op: eager asks `_fused_sdp_choice` which
    kernel to run and calls it. On CUDA tensors eager picks the memory-efficient kernel for
    float32, and for a boolean or float mask too. Under a FakeTensorMode the same query answers
    "math" (torch 2.11, checked on an H200 with BERT's shapes), so a traced graph ran the math
    form: two batched products and a softmax whose (batch, heads, L, S) probabilities were saved
    for the backward (BERT-base b8 s128: 24 x 6 MiB more held after the forward, 0.26 GB more at
    its peak, and 2 kernels more per layer than eager's one). transformers builds a boolean mask
    whenever it is being compiled, so every BERT-like model took that path.
    The composite kernel asks through a C++ stub, not the dispatcher, so no decomposition can
    answer for it, and the tracer below autograd never sees the composite op. So the facade
    gives ember_autograd the torch-level graph with each call of the function replaced
    (`with_fused_attention`): with a mask on CUDA, eager's choice is made from what the fake
    tensors tell (device, dtypes, ranks, sizes, strides, the user's `torch.backends.cuda`
    switch) and `_scaled_dot_product_efficient_attention` is called as eager calls it (a
    boolean mask as its additive bias, expanded to (batch, heads, L, S); Note [aligned
    attention bias] pads rows where the kernel needs): an extern whose backward is ATen's own.
    Anything else (no mask, where the fake answer is already the fused kernel; CPU; head sizes
    the kernel cannot align or exceeds; GQA; symbolic sizes) calls the function as before.
"""
from __future__ import annotations

import torch
import torch.fx

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _efficient_fits(q, k, v, mask) -> bool:
    """Eager's memory-efficient kernel takes these (torch 2.11's checks, conservatively)."""
    if q.device.type != "cuda" or not torch.backends.cuda.mem_efficient_sdp_enabled():
        return False
    if any(t.dim() != 4 or t.device != q.device or t.dtype != q.dtype for t in (k, v)) or q.dim() != 4:
        return False
    if q.dtype not in _FLOATS:
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


_SDPA = torch._C._nn.scaled_dot_product_attention


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention, for a traced graph: with a mask on CUDA,
    the memory-efficient kernel eager picks, called directly (Note [attention kernel choice
    under fake tensors]); anything else, the function itself."""
    if attn_mask is None or is_causal or not _efficient_fits(query, key, value, attn_mask):
        return _SDPA(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
    if attn_mask.dtype == torch.bool:  # eager's additive form of a boolean mask
        attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(attn_mask.logical_not(),
                                                                                float("-inf"))
    bias = attn_mask.expand(query.shape[0], query.shape[1], query.shape[2], key.shape[2])
    lse = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value))
    return torch.ops.aten._scaled_dot_product_efficient_attention(query, key, value, bias, lse, dropout_p,
                                                                   False, scale=scale)[0]


def with_fused_attention(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with each call of scaled_dot_product_attention going through the function above (a
    new GraphModule; `gm` itself when it has none)."""
    if not any(n.op == "call_function" and n.target is _SDPA for n in gm.graph.nodes):
        return gm
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for n in graph.nodes:
        if n.op == "call_function" and n.target is _SDPA:
            n.target = scaled_dot_product_attention
    out = torch.fx.GraphModule(gm, graph)
    out.meta.update(gm.meta)
    return out

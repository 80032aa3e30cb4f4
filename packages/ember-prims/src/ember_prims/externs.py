"""ATen ops that the lower layers keep whole: vendor libraries (BLAS, cuDNN, FlashAttention) do them
best, and the inductor calls them through ATen. An entry in the decomposition table wins over
extern status, so a researcher can still lower, say, `aten.mm` by adding a table entry
(`extra_decompositions()` has some ready-made ones)."""
from __future__ import annotations

import torch

aten = torch.ops.aten

EXTERN_OPS: frozenset = frozenset({
    aten.mm.default,
    aten.bmm.default,
    aten.convolution.default,
    aten.convolution_backward.default,
    aten._scaled_dot_product_efficient_attention.default,
    aten._scaled_dot_product_efficient_attention_backward.default,
    aten._scaled_dot_product_flash_attention.default,
    aten._scaled_dot_product_flash_attention_backward.default,
    aten._scaled_dot_product_flash_attention_for_cpu.default,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default,
    aten.sort.default,
    aten.sort.stable,
    aten.topk.default,
    aten.cumsum.default,
    aten.cumprod.default,
})

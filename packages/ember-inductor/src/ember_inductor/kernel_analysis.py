"""What every code generator computes the same way about a kernel description.

Note [shared kernel analyses]
    Some questions about a `KernelSpec` have one answer whatever renders it, and two backends
    that answer them separately drift apart (they did: the C++ backend summed int32 in int64_t
    and Triton in int32, counted a column reduction by majority vote where Triton asked for every
    reduced load). They are answered here, once, and both backends render the answer:

    - `accumulator_dtype`: what a reduction accumulates in. Half types in float32 (as ATen does);
      integer and bool sums and products in int64 (ATen's integer accumulation: the count of a
      bool sum is taken before it is compared with zero); `any`/`all` in int32; an extreme
      (amax, argmin...) of an integer in its own type, of bool in int32.
    - `is_column_reduction`: the reduced dimension is strided and the last outer one contiguous
      (the bias gradient of a linear layer, batch norm's statistics over channels-last memory),
      so a kernel should walk rows and keep one accumulator per output column. A backend may
      still decline for its own reasons (the C++ backend's per-thread stack budget).
    - the stride of an index along a variable: `indexing.stride`.
"""
from __future__ import annotations

import torch

from ember_inductor.indexing import stride
from ember_inductor.kernel import KernelSpec

_HALF = (torch.float16, torch.bfloat16)


def accumulator_dtype(kind: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a reduction `kind` ("sum", "amax", "argmax", ...) of `dtype` values accumulates in."""
    if kind in ("any", "all"):
        return torch.int32
    if dtype in _HALF:
        return torch.float32
    if dtype.is_floating_point:
        return dtype
    if kind in ("sum", "prod"):
        return torch.int64
    return torch.int32 if dtype == torch.bool else dtype


def is_column_reduction(k: KernelSpec) -> bool:
    """A reduction whose loads are contiguous along the last outer variable and none along a
    reduction variable (sum over dim 0 of a row-major matrix, e.g. a bias gradient)."""
    xs, rs = k.range_vars, k.reduction_vars
    if not xs or not rs:
        return False
    saw = False
    for op in k.ops:
        if op.kind != "load" or op.index is None or not (op.index.free_symbols & set(rs)):
            continue
        steps = {v: stride(op.index, v) for v in xs + rs}
        if any(s is None for s in steps.values()):
            return False
        if any(steps[r] == 1 for r in rs):
            return False  # some load is contiguous along r: the row layout suits it
        saw = saw or steps[xs[-1]] == 1
    return saw

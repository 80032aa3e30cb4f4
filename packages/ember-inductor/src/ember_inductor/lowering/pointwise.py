"""Elementwise prims: each is one `pointwise` op of the kernel DAG, read at the same index."""
from __future__ import annotations

import torch

from ember_inductor.lowering.registry import lowering, pointwise

UNARY = ("abs neg exp exp2 expm1 log log1p log2 sqrt rsqrt sin cos tan asin acos atan sinh cosh tanh "
         "asinh acosh atanh erf erfc erfinv lgamma floor ceil round trunc sign reciprocal isnan isinf "
         "isfinite logical_not bitwise_not signbit").split()
BINARY = ("add sub mul div floor_divide remainder fmod pow maximum minimum atan2 hypot copysign eq ne "
          "lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor "
          "shift_left shift_right").split()


@lowering(*UNARY, *BINARY, "where")
def lower_elementwise(ctx, node, *inputs):
    prim = node.target._schema.name.split("::")[-1]
    dtype = node.meta["val"].dtype

    def fn(kb, index):
        return kb.pointwise(prim, [a.load(kb, index) for a in inputs], dtype)
    return pointwise(node, fn)


@lowering("convert_element_type")
def lower_convert(ctx, node, a, dtype):
    def fn(kb, index):
        return kb.convert(a.load(kb, index), dtype)
    return pointwise(node, fn)


@lowering("clone")
def lower_clone(ctx, node, a):
    return pointwise(node, lambda kb, index: a.load(kb, index))


def scalar_dtype_value(value, dtype: torch.dtype):
    """A fill value as the Python scalar type of `dtype`."""
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)

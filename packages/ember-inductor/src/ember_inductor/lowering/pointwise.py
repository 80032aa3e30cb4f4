"""Elementwise prims: each is one `pointwise` op of the kernel DAG, read at the same index."""
from __future__ import annotations

import torch

import ember_prims
from ember_inductor.lowering.registry import lowering, pointwise, prim_of, prims_in


@lowering(*prims_in(ember_prims.UNARY, ember_prims.BINARY, ember_prims.TERNARY))
def lower_elementwise(ctx, node, *inputs):
    prim = prim_of(node)
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

"""Reduction prims: realized into buffers; the scheduler fuses their producers and consumers."""
from __future__ import annotations

from ember_inductor.ir import Reduction
from ember_inductor.lowering.registry import lowering, pointwise


@lowering("sum", "prod", "amax", "amin", "any", "all")
def lower_reduction(ctx, node, a, dims):
    kind = node.target._schema.name.split("::")[-1]
    dims = tuple(sorted(int(d) for d in dims))
    if not dims:  # reduces nothing: a copy
        return pointwise(node, lambda kb, index: a.load(kb, index))
    val = node.meta["val"]
    return Reduction(tuple(val.shape), val.dtype, val.device, tuple(a.sizes), dims, kind,
                     lambda kb, index: a.load(kb, index), node.name)


@lowering("argmax", "argmin")
def lower_arg_reduction(ctx, node, a, dim):
    kind = node.target._schema.name.split("::")[-1]
    val = node.meta["val"]
    dim = int(dim)

    def fn(kb, index):
        return a.load(kb, index), kb.index_value(index[dim])
    return Reduction(tuple(val.shape), val.dtype, val.device, tuple(a.sizes), (dim,), kind, fn, node.name)

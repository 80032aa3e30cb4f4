"""Creation, random and gather-style indexing prims as index functions.

The others of these categories run eagerly: see RUNS_EAGERLY in registry.py.
"""
from __future__ import annotations

import sympy
import torch

from ember_inductor.kernel import value_symbol
from ember_inductor.ir import contiguous_strides
from ember_inductor.lowering.pointwise import scalar_dtype_value
from ember_inductor.lowering.registry import lowering, pointwise
from ember_inductor.sizes import as_size, as_sizes, is_static
from ember_symbolic import expr_of


@lowering("full")
def lower_full(ctx, node, shape, value, *, dtype, device=None):
    if not is_static(value):  # a size used as a value (x / x.shape[1]): its expression
        return _size_value(node, sympy.together(expr_of(value)), dtype)
    fill = scalar_dtype_value(value, dtype)
    return pointwise(node, lambda kb, index: kb.const(fill, dtype))


def _size_value(node, expr, dtype):
    """A value computed from sizes: an integer expression in the kernel's index arithmetic, a
    ratio of two (1 / s0, s0 / 2) as their quotient; anything else (a square root) is computed
    by the wrapper (the lowering declines: an extern call with the expression as its argument)."""
    num, den = sympy.fraction(expr)
    if not (num.is_polynomial() and den.is_polynomial() and num.is_integer and den.is_integer):
        return NotImplemented
    if den == 1:
        return pointwise(node, lambda kb, index: kb.convert(kb.index_value(num), dtype))
    if not dtype.is_floating_point:
        return NotImplemented

    def fn(kb, index):
        n, d = (kb.convert(kb.index_value(e), dtype) for e in (num, den))
        return kb.pointwise("div", (n, d), dtype)
    return pointwise(node, fn)


@lowering("iota")
def lower_iota(ctx, node, length, *, start, step, dtype, device=None):
    def fn(kb, index):
        return kb.convert(kb.index_value(index[0] * as_size(step) + as_size(start)), dtype)
    return pointwise(node, fn)


def _linear(index, sizes):
    return sum((i * s for i, s in zip(index, contiguous_strides(sizes))), sympy.Integer(0))


def _random(kind):
    def lower(ctx, node, shape, seed, offset, *, dtype, device=None):
        sizes = as_sizes(shape)

        def fn(kb, index):
            s = seed.load(kb, ())
            counter = kb.index_value(_linear(index, sizes) + as_size(offset))
            return kb.convert(kb.add("rand", kind, (s, counter), torch.float32), dtype)
        return pointwise(node, fn)
    return lower


lowering("uniform")(_random("uniform"))
lowering("normal")(_random("normal"))


@lowering("gather")
def lower_gather(ctx, node, a, dim, index_t):
    dim = int(dim)

    def fn(kb, index):
        i = index_t.load(kb, index)
        sub = list(index)
        sub[dim] = value_symbol(i)
        return a.load(kb, sub)
    return pointwise(node, fn)


@lowering("index")
def lower_index(ctx, node, a, indices):
    indices = list(indices) + [None] * (len(a.sizes) - len(indices))
    present = [k for k, i in enumerate(indices) if i is not None]
    irank = len(indices[present[0]].sizes)
    adjacent = present == list(range(present[0], present[-1] + 1))
    first = present[0] if adjacent else 0  # where the index dims sit in the output

    def fn(kb, out_index):
        idx_part = tuple(out_index[first:first + irank])
        rest = iter(list(out_index[:first]) + list(out_index[first + irank:]))
        sub = []
        for k in range(len(a.sizes)):
            if indices[k] is not None:
                sub.append(value_symbol(indices[k].load(kb, idx_part)))
            else:
                sub.append(next(rest))
        return a.load(kb, sub)
    return pointwise(node, fn)

"""View prims are index remappings, never copies.

A view of a `Buffer` that strides can express stays a `Buffer` (same storage, new sizes/strides/
offset), so its loads keep linear index expressions (dims merge, loops vectorize). Otherwise it
is a `View` whose `reindex` maps output indices to base indices.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from ember_inductor.indexing import FloorDiv, ModIndex
from ember_inductor.ir import Buffer, View, contiguous_strides, numel
from ember_inductor.lowering.pointwise import scalar_dtype_value
from ember_inductor.lowering.registry import lowering, pointwise
from ember_inductor.sizes import as_size, as_sizes, hint, is_static, known_equal


def strided(base: Buffer, sizes, strides, offset) -> Buffer:
    return dataclasses.replace(base, sizes=tuple(sizes), strides=tuple(strides), offset=offset, is_view=True)


def view(base, sizes, reindex, origin="") -> View:
    return View(base, tuple(sizes), reindex, origin)


@lowering("permute")
def lower_permute(ctx, node, a, dims):
    dims = [int(d) for d in dims]
    sizes = [a.sizes[d] for d in dims]
    if isinstance(a, Buffer):
        return strided(a, sizes, [a.strides[d] for d in dims], a.offset)
    inv = [dims.index(i) for i in range(len(dims))]
    return View(a, tuple(sizes), lambda idx: [idx[inv[i]] for i in range(len(inv))], node.name, tuple(dims))


@lowering("broadcast_in_dim")
def lower_broadcast_in_dim(ctx, node, a, shape, bdims):
    shape, bdims = list(as_sizes(shape)), [int(d) for d in bdims]
    keep = [not (a.sizes[j] == 1 and shape[bdims[j]] != 1) for j in range(len(bdims))]
    if isinstance(a, Buffer):
        strides = [0] * len(shape)
        for j, d in enumerate(bdims):
            strides[d] = a.strides[j] if keep[j] else 0
        return strided(a, shape, strides, a.offset)
    return view(a, shape, lambda idx: [idx[d] if keep[j] else 0 for j, d in enumerate(bdims)], node.name)


@lowering("squeeze")
def lower_squeeze(ctx, node, a, dims):
    dims = {int(d) % max(len(a.sizes), 1) for d in dims}
    kept = [i for i in range(len(a.sizes)) if i not in dims]
    sizes = [a.sizes[i] for i in kept]
    if isinstance(a, Buffer):
        return strided(a, sizes, [a.strides[i] for i in kept], a.offset)

    def reindex(idx):
        out, it = [], iter(idx)
        for i in range(len(a.sizes)):
            out.append(0 if i in dims else next(it))
        return out
    return view(a, sizes, reindex, node.name)


@lowering("slice")
def lower_slice(ctx, node, a, start, limit, step):
    start, step = list(as_sizes(start)), [int(s) for s in step]
    sizes = list(as_sizes(node.meta["val"].shape))
    if isinstance(a, Buffer):
        offset = a.offset + sum(s * st for s, st in zip(start, a.strides))
        return strided(a, sizes, [st * k for st, k in zip(a.strides, step)], offset)
    return view(a, sizes, lambda idx: [s + k * i for s, k, i in zip(start, step, idx)], node.name)


@lowering("rev")
def lower_rev(ctx, node, a, dims):
    dims = {int(d) for d in dims}
    if isinstance(a, Buffer):
        offset = a.offset + sum((a.sizes[d] - 1) * a.strides[d] for d in dims if not is_static(a.sizes[d])
                                or a.sizes[d] > 0)
        strides = [-s if i in dims else s for i, s in enumerate(a.strides)]
        return strided(a, a.sizes, strides, offset)
    return view(a, a.sizes, lambda idx: [a.sizes[i] - 1 - x if i in dims else x for i, x in enumerate(idx)],
                node.name)


def _is_contiguous(a: Buffer) -> bool:
    return all(known_equal(st, c) for st, c, s in zip(a.strides, contiguous_strides(a.sizes), a.sizes) if s != 1)


def unflatten(flat, sizes):
    """Row-major multi-index of `flat` in `sizes` (FloorDiv/ModIndex; the outermost needs no mod)."""
    out, strides = [], contiguous_strides(sizes)
    for i, (s, st) in enumerate(zip(sizes, strides)):
        q = FloorDiv(flat, st) if st != 1 else flat
        out.append(q if i == 0 else (ModIndex(q, s) if s != 1 else sympy.Integer(0)))
    return out


def _reshape_groups(src, dst, hints: dict | None = None):
    """Split both shapes into runs with equal products: [(src dims, dst dims), ...]. With
    symbolic sizes a run ends where the products are equal for every value of the symbols (the
    hints only say which side to grow); if none is found, the rest is one run."""
    symbolic = not all(is_static(v) for v in (*src, *dst))
    groups = _runs(src, dst, hints or {}, symbolic)
    return groups if groups is not None else [(list(range(len(src))), list(range(len(dst))))]


def _runs(src, dst, hints: dict, symbolic: bool):
    groups, i, j = [], 0, 0
    while i < len(src) or j < len(dst):
        if i < len(src) and src[i] == 1:
            groups.append(([i], []))
            i += 1
        elif j < len(dst) and dst[j] == 1:
            groups.append(([], [j]))
            j += 1
        elif i >= len(src) or j >= len(dst):  # leftovers: only with zero sizes
            if symbolic:
                return None
            groups.append((list(range(i, len(src))), list(range(j, len(dst)))))
            break
        else:
            gi, gj, ps, pd = [i], [j], src[i], dst[j]
            i, j = i + 1, j + 1
            while not known_equal(ps, pd):
                smaller = hint(ps, hints) < hint(pd, hints) or (symbolic and hint(ps, hints) == hint(pd, hints))
                if smaller and i < len(src):
                    ps, i = ps * src[i], i + 1
                    gi.append(i - 1)
                elif (symbolic or not smaller) and j < len(dst):
                    pd, j = pd * dst[j], j + 1
                    gj.append(j - 1)
                elif symbolic and i < len(src):
                    ps, i = ps * src[i], i + 1
                    gi.append(i - 1)
                elif symbolic:
                    return None
                else:
                    break
            groups.append((gi, gj))
    return groups


def reshape_strides(a: Buffer, shape, hints: dict | None = None):
    """Strides viewing contiguous-enough `a` as `shape`, or None (then it is an index remap)."""
    if numel(shape) == 0:
        return contiguous_strides(shape)
    out = [0] * len(shape)
    for gi, gj in _reshape_groups(list(a.sizes), list(shape), hints):
        gi = [d for d in gi if a.sizes[d] != 1]
        for x, y in zip(gi, gi[1:]):  # the source run must be contiguous within itself
            if not known_equal(a.strides[x], a.strides[y] * a.sizes[y]):
                return None
        inner = a.strides[gi[-1]] if gi else 0
        for d in reversed(gj):
            out[d] = inner
            inner *= shape[d]
    return out


@lowering("reshape")
def lower_reshape(ctx, node, a, shape):
    shape = list(as_sizes(node.meta["val"].shape))
    if isinstance(a, Buffer):
        strides = reshape_strides(a, shape, ctx.hints)
        if strides is not None:
            return strided(a, shape, [as_size(st) for st in strides], a.offset)
    groups = _reshape_groups(list(a.sizes), shape, ctx.hints)

    def reindex(idx):
        out = [sympy.Integer(0)] * len(a.sizes)
        for gi, gj in groups:
            flat = sum((idx[d] * st for d, st in zip(gj, contiguous_strides([shape[d] for d in gj]))),
                       sympy.Integer(0))
            for d, v in zip(gi, unflatten(flat, [a.sizes[d] for d in gi])):
                out[d] = v
        return out
    return view(a, shape, reindex, node.name)


@lowering("as_strided")
def lower_as_strided(ctx, node, a, size, stride, offset=0):
    size, stride, offset = list(as_sizes(size)), list(as_sizes(stride)), as_size(offset)
    if isinstance(a, Buffer) and _is_contiguous(a):
        return strided(a, size, stride, a.offset + offset)

    def reindex(idx):
        flat = offset + sum((i * s for i, s in zip(idx, stride)), sympy.Integer(0))
        return unflatten(flat, a.sizes)
    return view(a, size, reindex, node.name)


def _in_range(kb, index_expr, lo, hi):
    """bool value: lo <= index_expr < hi."""
    i = kb.index_value(index_expr)
    conds = []
    if not is_static(lo) or lo > 0:
        conds.append(kb.pointwise("ge", (i, _bound(kb, lo)), torch.bool))
    conds.append(kb.pointwise("lt", (i, _bound(kb, hi)), torch.bool))
    return conds[0] if len(conds) == 1 else kb.pointwise("logical_and", conds, torch.bool)


def _bound(kb, v):
    """A range bound as a kernel value: a constant, or the expression over the size symbols."""
    return kb.const(int(v), torch.int64) if is_static(v) else kb.index_value(v)


@lowering("cat")
def lower_cat(ctx, node, xs, dim):
    dim = int(dim) % len(node.meta["val"].shape)
    xs = [x for x in xs if x.sizes[dim] != 0]
    dtype = node.meta["val"].dtype
    starts = [0]
    for x in xs:
        starts.append(starts[-1] + x.sizes[dim])

    def fn(kb, index):
        result = None
        for k in reversed(range(len(xs))):  # where(i < end_k, x_k, later pieces)
            sub = list(index)
            sub[dim] = index[dim] - starts[k]
            mask = _in_range(kb, index[dim], starts[k], starts[k + 1])
            with kb.masked(mask):
                v = xs[k].load(kb, sub)
            result = v if result is None else kb.pointwise("where", (mask, v, result), dtype)
        # every piece empty along `dim`: so is the result, and its value is never stored (a
        # value of None made the kernel's dead-code pass fail, fuzz seed 22)
        return kb.const(0, dtype) if result is None else result
    return pointwise(node, fn)


@lowering("pad")
def lower_pad(ctx, node, a, value, low, high):
    low = list(as_sizes(low))
    dtype = node.meta["val"].dtype
    fill = scalar_dtype_value(value, dtype)

    def fn(kb, index):
        conds = [_in_range(kb, index[d], low[d], low[d] + a.sizes[d]) for d in range(len(low))
                 if low[d] != 0 or not known_equal(as_size(node.meta["val"].shape[d]), a.sizes[d])]
        sub = [i - lo for i, lo in zip(index, low)]
        if not conds:
            return a.load(kb, sub)
        mask = conds[0]
        for c in conds[1:]:
            mask = kb.pointwise("logical_and", (mask, c), torch.bool)
        with kb.masked(mask):
            v = a.load(kb, sub)
        return kb.pointwise("where", (mask, v, kb.const(fill, dtype)), dtype)
    return pointwise(node, fn)

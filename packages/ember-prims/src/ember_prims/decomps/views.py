"""Shape and layout ATen ops: view/reshape, expand, permute/transpose, squeeze/unsqueeze, slice and
select (and their backward/scatter forms), split, cat/stack, flip, pad, repeat, tril/triu.

ATen views become prims with value semantics (see `_library`); decompositions never depend on
the input's strides, except `as_strided`, which is defined on storage and so needs a dense input.
"""
from __future__ import annotations

import torch

from ember_prims._library import same_shape, same_size
from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    P, aten, broadcast_to, canon_dim, canon_dims, convert, full, permute, reshape, result_type,
    size_max, size_min, slice_dim,
)


@register(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.view_copy.default)
def view(a, shape):
    return reshape(a, shape)


@register(aten.expand.default, aten.expand_copy.default)
def expand(a, shape, *, implicit=False):
    shape = list(shape)
    lead = len(shape) - a.dim()
    shape = [a.shape[i - lead] if s == -1 else s for i, s in enumerate(shape)]
    return broadcast_to(a, shape)


@register(aten.permute.default, aten.permute_copy.default)
def permute_(a, dims):
    return permute(a, dims)


@register(aten.t.default, aten.t_copy.default)
def t(a):
    return a if a.dim() < 2 else P.permute(a, [1, 0])


@register(aten.transpose.int, aten.transpose_copy.int)
def transpose(a, dim0, dim1):
    if a.dim() == 0:
        return a
    d0, d1 = canon_dim(dim0, a.dim()), canon_dim(dim1, a.dim())
    dims = list(range(a.dim()))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return permute(a, dims)


@register(aten.unsqueeze.default, aten.unsqueeze_copy.default)
def unsqueeze(a, dim):
    d = canon_dim(dim, a.dim() + 1)
    shape = list(a.shape)
    shape.insert(d, 1)
    return P.reshape(a, shape)


@register(aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze_copy.default,
          aten.squeeze_copy.dim, aten.squeeze_copy.dims)
def squeeze(a, dim=None):
    dims = canon_dims(dim, a.dim())
    dims = [d for d in dims if a.shape[d] == 1]
    return P.squeeze(a, dims) if dims else a


def _clamp_slice(size, start, end, step):
    start = 0 if start is None else start
    end = size if end is None else end
    start = start + size if start < 0 else start
    end = end + size if end < 0 else end
    start = size_min(size_max(start, 0), size)
    end = size_min(size_max(end, start), size)
    return start, end, step


@register(aten.slice.Tensor, aten.slice_copy.Tensor)
def slice_(a, dim=0, start=None, end=None, step=1):
    d = canon_dim(dim, a.dim())
    start, end, step = _clamp_slice(a.shape[d], start, end, step)
    return slice_dim(a, d, start, end, step)


@register(aten.select.int, aten.select_copy.int)
def select(a, dim, index):
    d = canon_dim(dim, a.dim())
    index = index + a.shape[d] if index < 0 else index
    return P.squeeze(slice_dim(a, d, index, index + 1), [d])


@register(aten.narrow.default, aten.narrow_copy.default)
def narrow(a, dim, start, length):
    d = canon_dim(dim, a.dim())
    start = start + a.shape[d] if start < 0 else start
    return slice_dim(a, d, start, start + length)


@register(aten.split.Tensor, aten.split_copy.Tensor, aten.unsafe_split.Tensor)
def split(a, split_size, dim=0):
    d = canon_dim(dim, a.dim())
    n = a.shape[d]
    sizes = [min(split_size, n - s) for s in range(0, n, split_size)] if split_size else [n]
    return split_with_sizes(a, sizes or [0], d)


@register(aten.split_with_sizes.default, aten.split_with_sizes_copy.default)
def split_with_sizes(a, split_sizes, dim=0):
    d = canon_dim(dim, a.dim())
    out, start = [], 0
    for s in split_sizes:
        out.append(slice_dim(a, d, start, start + s))
        start += s
    return out


@register(aten.unbind.int, aten.unbind_copy.int)
def unbind(a, dim=0):
    d = canon_dim(dim, a.dim())
    return [select(a, d, i) for i in range(a.shape[d])]


@register(aten.cat.default)
def cat(tensors, dim=0):
    # ATen's legacy rule: 1-d empty tensors are skipped whatever the other shapes.
    dtype = result_type(*tensors)
    kept = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]
    if not kept:
        return P.clone(convert(tensors[0], dtype))
    d = canon_dim(dim, kept[0].dim())
    kept = [convert(t, dtype) for t in kept]
    return P.cat(kept, d)


@register(aten.stack.default)
def stack(tensors, dim=0):
    d = canon_dim(dim, tensors[0].dim() + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


@register(aten.flip.default)
def flip(a, dims):
    dims = canon_dims(dims, a.dim())
    dims = [d for d in dims if a.shape[d] > 1]
    return P.rev(a, dims) if dims else P.clone(a)


@register(aten.as_strided.default, aten.as_strided_copy.default)
def as_strided(a, size, stride, storage_offset=None):
    offset = (storage_offset if storage_offset is not None else a.storage_offset()) - a.storage_offset()
    if not a.is_contiguous():
        # a dense permutation of a contiguous layout (channels_last, a transpose: fuzz seed 71583):
        # its storage is its elements in memory order
        order = _memory_order(a)
        if order is None:
            raise NotImplementedError("as_strided of a non-contiguous input: its storage is not a value")
        a = P.reshape(permute(a, order), [a.numel()])
    return P.as_strided(a, list(size), list(stride), offset)


def _memory_order(a):
    """The dims of `a`, outermost in memory first, where `a` is dense and does not overlap (a
    permutation of a contiguous tensor), with static sizes; else None."""
    if not all(isinstance(s, int) for s in (*a.shape, *a.stride())):
        return None
    order = sorted(range(a.dim()), key=lambda d: -a.stride(d))
    step = 1
    for d in reversed(order):
        if a.shape[d] != 1 and a.stride(d) != step:
            return None
        step *= a.shape[d]
    return order


@register(aten.constant_pad_nd.default)
def constant_pad_nd(a, pad, value=0):
    # pad = (low_last, high_last, low_second_last, ...); negative entries crop.
    n = len(pad) // 2
    low, high = [0] * a.dim(), [0] * a.dim()
    for i in range(n):
        d = a.dim() - 1 - i
        low[d], high[d] = pad[2 * i], pad[2 * i + 1]
    if any(p < 0 for p in low + high):
        starts = [max(-lo, 0) for lo in low]
        limits = [s - max(-hi, 0) for s, hi in zip(a.shape, high)]
        a = P.slice(a, starts, limits, [1] * a.dim())
    low, high = [max(p, 0) for p in low], [max(p, 0) for p in high]
    if not any(low + high):
        return P.clone(a)
    return P.pad(a, value, low, high)


@register(aten.repeat.default)
def repeat(a, repeats):
    repeats = list(repeats)
    shape = [1] * (len(repeats) - a.dim()) + list(a.shape)
    a = reshape(a, shape)
    big = [x for r, s in zip(repeats, shape) for x in (r, s)]
    out = P.broadcast_in_dim(a, big, list(range(1, 2 * len(shape), 2)))
    return P.reshape(out, [r * s for r, s in zip(repeats, shape)])


def _dim_iota(shape, dim, device, start=0, step=1):
    # int64 index of each element along `dim`, broadcast to `shape`.
    io = P.iota(shape[dim], start=start, step=step, dtype=torch.int64, device=device)
    return P.broadcast_in_dim(io, list(shape), [dim])


@register(aten.slice_scatter.default)
def slice_scatter(a, src, dim=0, start=None, end=None, step=1):
    d = canon_dim(dim, a.dim())
    start, end, step = _clamp_slice(a.shape[d], start, end, step)
    if same_size(src.numel(), 0):  # a shortcut: the scatter below also writes nothing
        return P.clone(a)
    if same_size(step, 1) and same_size(start, 0) and same_size(end, a.shape[d]):
        return P.clone(convert(src, a.dtype))
    index = _dim_iota(src.shape, d, a.device, start, step)
    return P.scatter(a, d, index, convert(src, a.dtype))


@register(aten.select_scatter.default)
def select_scatter(a, src, dim, index):
    # Note [selections, not scatters]: `a` with src at position `index` of `dim` is elementwise,
    # where(i == index, src, a): the inductor fuses it (a `select`'s backward, three of them
    # summed for a packed q/k/v projection); a scatter is an extern call.
    d = canon_dim(dim, a.dim())
    index = index + a.shape[d] if index < 0 else index
    hit = P.eq(_dim_iota(a.shape, d, a.device), full(list(a.shape), index, torch.int64, a.device))
    others = [k for k in range(a.dim()) if k != d]
    return P.where(hit, P.broadcast_in_dim(convert(src, a.dtype), list(a.shape), others), a)


@register(aten.as_strided_scatter.default)
def as_strided_scatter(a, src, size, stride, storage_offset=None):
    # ATen writes `src` into `a.clone().as_strided(...)`: positions count in a contiguous copy
    # of `a`, a flat index per element of `src`.
    if same_size(src.numel(), 0):  # a shortcut: the scatter below also writes nothing
        return P.clone(a)
    size = list(size)
    pos = full(size, storage_offset or 0, torch.int64, a.device)
    for d, st in enumerate(stride):
        pos = P.add(pos, _dim_iota(size, d, a.device, 0, st))
    flat = P.scatter(reshape(a, [a.numel()]), 0, reshape(pos, [src.numel()]),
                     reshape(convert(src, a.dtype), [src.numel()]))
    return reshape(flat, a.shape)


@register(aten.diagonal_scatter.default)
def diagonal_scatter(a, src, offset=0, dim1=0, dim2=1):
    # the diagonal's size and strides in a contiguous `a`, then as_strided_scatter
    d1, d2 = canon_dim(dim1, a.dim()), canon_dim(dim2, a.dim())
    strides = [1] * a.dim()
    for d in range(a.dim() - 2, -1, -1):
        strides[d] = strides[d + 1] * a.shape[d + 1]
    rest = [d for d in range(a.dim()) if d not in (d1, d2)]
    start = offset * strides[d2] if offset >= 0 else -offset * strides[d1]
    return as_strided_scatter(a, src, list(src.shape), [strides[d] for d in rest] + [strides[d1] + strides[d2]],
                              start)


@register(aten.slice_backward.default)
def slice_backward(grad, input_sizes, dim, start, end, step):
    zeros = full(input_sizes, 0, grad.dtype, grad.device)
    return slice_scatter(zeros, grad, dim, start, end, step)


@register(aten.select_backward.default)
def select_backward(grad, input_sizes, dim, index):
    zeros = full(input_sizes, 0, grad.dtype, grad.device)
    return select_scatter(zeros, grad, dim, index)


def _tri(a, diagonal, upper):
    rows, cols = a.shape[-2], a.shape[-1]
    r = P.broadcast_in_dim(P.iota(rows, start=0, step=1, dtype=torch.int64, device=a.device), [rows, cols], [0])
    c = P.broadcast_in_dim(P.iota(cols, start=-diagonal, step=1, dtype=torch.int64, device=a.device),
                           [rows, cols], [1])
    keep = P.ge(c, r) if upper else P.le(c, r)
    keep = broadcast_to(keep, a.shape)
    return P.where(keep, a, full(a.shape, 0, a.dtype, a.device))


@register(aten.tril.default)
def tril(a, diagonal=0):
    return _tri(a, diagonal, upper=False)


@register(aten.triu.default)
def triu(a, diagonal=0):
    return _tri(a, diagonal, upper=True)



@register(aten.diagonal.default, aten.diagonal_copy.default)
def diagonal(a, offset=0, dim1=0, dim2=1):
    d1, d2 = canon_dim(dim1, a.dim()), canon_dim(dim2, a.dim())
    rest = [d for d in range(a.dim()) if d not in (d1, d2)]
    x = permute(a, rest + [d1, d2])
    R, C = a.shape[d1], a.shape[d2]
    n = max(min(R, C - offset) if offset >= 0 else min(R + offset, C), 0)
    lead = [a.shape[d] for d in rest]
    flat = reshape(x, lead + [R * C])
    if n == 0:
        return full(lead + [0], 0, a.dtype, a.device)
    start = offset if offset >= 0 else -offset * C
    k = len(lead)
    return P.slice(flat, [0] * k + [start], lead + [start + (n - 1) * (C + 1) + 1], [1] * k + [C + 1])

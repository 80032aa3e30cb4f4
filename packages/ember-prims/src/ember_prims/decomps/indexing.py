"""Indexing ATen ops: gather/scatter, advanced indexing (index, index_put), index_select, embedding.

The prims take in-range int64 indices of one shape; here negative indices are wrapped, int32
converted and index tensors broadcast. Boolean masks have data-dependent shapes and are rejected,
except in `index_put` with a single mask (and full slices) and a one-element value (a `where`).
"""
from __future__ import annotations

import torch

from ember_prims._library import same_shape, same_size
from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    P, aten, broadcast_shapes, broadcast_to, canon_dim, convert, full, reshape,
)
from ember_prims.prims.indexing import index_shape


def _wrap(index: torch.Tensor, size: int) -> torch.Tensor:
    index = convert(index, torch.int64)
    neg = P.lt(index, full(index.shape, 0, torch.int64, index.device))
    return P.where(neg, P.add(index, full(index.shape, size, torch.int64, index.device)), index)


def _as_index(index):
    return convert(index, torch.int64)


@register(aten.gather.default)
def gather(a, dim, index, *, sparse_grad=False):
    if a.dim() == 0:
        return P.clone(a) if index.dim() == 0 else broadcast_to(a, index.shape)
    d = canon_dim(dim, a.dim())
    if index.dim() == 0:
        index = reshape(index, [1] * a.dim())
        return reshape(P.gather(a, d, _as_index(index)), [])
    return P.gather(a, d, _as_index(index))


def _scatter_src(src, index):
    if same_shape(src.shape, index.shape):
        return src
    return P.slice(src, [0] * src.dim(), list(index.shape), [1] * src.dim())


@register(aten.scatter.src, aten.scatter.value)
def scatter(a, dim, index, src):
    if index.numel() == 0:
        return P.clone(a)
    src = full(index.shape, src, a.dtype, a.device) if not isinstance(src, torch.Tensor) else \
        _scatter_src(convert(src, a.dtype), index)
    if a.dim() == 0:
        return P.clone(reshape(src, []))
    return P.scatter(a, canon_dim(dim, a.dim()), _as_index(index), src)


@register(aten.scatter_add.default)
def scatter_add(a, dim, index, src):
    if index.numel() == 0:
        return P.clone(a)
    src = _scatter_src(convert(src, a.dtype), index)
    if a.dim() == 0:
        return P.add(a, reshape(src, []))
    return P.scatter_add(a, canon_dim(dim, a.dim()), _as_index(index), src)


def _prep_indices(a, indices):
    if any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices):
        raise NotImplementedError("indexing with a boolean mask has a data-dependent shape")
    present = [i for i in indices if i is not None]
    shape = broadcast_shapes(*(i.shape for i in present))
    return [None if i is None else broadcast_to(_wrap(i, a.shape[k]), shape) for k, i in enumerate(indices)]


@register(aten.index.Tensor, aten._unsafe_index.Tensor)
def index(a, indices):
    indices = list(indices)
    while indices and indices[-1] is None:
        indices.pop()
    if not indices:
        return P.clone(a)
    return P.index(a, _prep_indices(a, indices))


@register(aten.index_put.default, aten._unsafe_index_put.default)
def index_put(a, indices, values, accumulate=False):
    indices = list(indices)
    masks = [k for k, i in enumerate(indices) if i is not None and i.dtype == torch.bool]
    present = [i for i in indices if i is not None]
    if len(masks) == 1 and len(present) == 1 and values.numel() == 1:
        # y[:, mask] = v: a `where` over the dims the mask covers (each None before it is one dim)
        k, mask = masks[0], indices[masks[0]]
        m = P.broadcast_in_dim(mask, list(a.shape), list(range(k, k + mask.dim())))
        v = broadcast_to(reshape(convert(values, a.dtype), []), a.shape)
        return P.where(m, P.add(a, v) if accumulate else v, a)
    while indices and indices[-1] is None:
        indices.pop()
    idx = _prep_indices(a, indices)
    shape = index_shape(a, idx)
    return P.index_put(a, idx, broadcast_to(convert(values, a.dtype), shape), accumulate)


@register(aten.index_select.default)
def index_select(a, dim, index):
    if a.dim() == 0:
        return P.clone(a)
    d = canon_dim(dim, a.dim())
    idx = reshape(index, [1]) if index.dim() == 0 else index
    return P.index(a, [None] * d + [_wrap(idx, a.shape[d])])


@register(aten.embedding.default)
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return P.index(weight, [_wrap(indices, weight.shape[0])])


@register(aten.embedding_dense_backward.default)
def embedding_dense_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    dtype = grad.dtype
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    d = grad.shape[-1]
    flat = reshape(convert(indices, torch.int64), [indices.numel()])
    g = reshape(convert(grad, acc), [indices.numel(), d])
    if padding_idx >= 0:
        keep = P.ne(flat, full(flat.shape, padding_idx, torch.int64, flat.device))
        g = P.where(P.broadcast_in_dim(keep, list(g.shape), [0]), g, full(g.shape, 0, acc, g.device))
    if scale_grad_by_freq:
        counts = P.index_put(full([num_weights], 0, acc, g.device), [flat], full(flat.shape, 1, acc, g.device),
                             True)
        g = P.div(g, P.broadcast_in_dim(P.index(counts, [flat]), list(g.shape), [0]))
    out = P.index_put(full([num_weights, d], 0, acc, g.device), [flat], g, True)
    return convert(out, dtype)



def _dim_index(a, dim, index):
    d = canon_dim(dim, a.dim()) if a.dim() else 0
    idx = reshape(index, [1]) if index.dim() == 0 else index
    return d, [None] * d + [_wrap(idx, a.shape[d] if a.dim() else 1)]


@register(aten.index_fill.int_Scalar, aten.index_fill.int_Tensor)
def index_fill(a, dim, index, value):
    if a.dim() == 0:
        if index.numel() == 0:
            return P.clone(a)
        if isinstance(value, torch.Tensor):
            return P.clone(convert(value, a.dtype))
        return full([], value, a.dtype, a.device)
    d, idx = _dim_index(a, dim, index)
    shape = index_shape(a, idx)
    v = broadcast_to(convert(value, a.dtype), shape) if isinstance(value, torch.Tensor) else \
        full(shape, value, a.dtype, a.device)
    return P.index_put(a, idx, v, False)


@register(aten.index_copy.default)
def index_copy(a, dim, index, source):
    if a.dim() == 0:
        return P.clone(reshape(convert(source, a.dtype), []))
    d, idx = _dim_index(a, dim, index)
    return P.index_put(a, idx, reshape(convert(source, a.dtype), index_shape(a, idx)), False)


@register(aten.index_add.default)
def index_add(a, dim, index, source, *, alpha=1):
    if a.dim() == 0:
        return P.add(a, reshape(convert(source, a.dtype), []))
    d, idx = _dim_index(a, dim, index)
    src = reshape(convert(source, a.dtype), index_shape(a, idx))
    if alpha != 1:
        src = P.mul(src, full(src.shape, alpha, a.dtype, a.device))
    return P.index_put(a, idx, src, True)

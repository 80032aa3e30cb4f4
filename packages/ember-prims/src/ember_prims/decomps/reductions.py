"""Reductions: sum, mean, prod, amax/amin, max/min (values and indices), argmax/argmin, any/all,
var/std/var_mean, logsumexp.

Accumulation follows ATen: float16/bfloat16 accumulate in float32, bool/integers sum to int64;
keepdim is a reshape after the prim; an empty dim list means "all dims".
"""
from __future__ import annotations

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    P, aten, broadcast_to, canon_dim, convert, full, group_mean, numel_of, opmath, reduction_dims, reshape,
    slice_dim, sum_dims, unsqueeze_dims,
)


def _is_int(dtype):
    return not (dtype.is_floating_point or dtype.is_complex)


@register(aten.sum.default)
def sum_(a, *, dtype=None):
    return sum_dims(a, list(range(a.dim())), False, dtype)


@register(aten.sum.dim_IntList)
def sum_dim(a, dim, keepdim=False, *, dtype=None):
    return sum_dims(a, reduction_dims(dim, a.dim()), keepdim, dtype)


@register(aten.mean.default)
def mean_(a, *, dtype=None):
    return mean(a, None, False, dtype=dtype)


@register(aten.mean.dim)
def mean(a, dim, keepdim=False, *, dtype=None):
    out_dtype = dtype or a.dtype
    if _is_int(out_dtype):
        raise TypeError(f"mean(): could not infer output dtype; input dtype {a.dtype} is not float")
    dims = reduction_dims(dim, a.dim())
    acc = opmath(out_dtype)
    total = sum_dims(convert(a, acc), dims, keepdim)
    n = numel_of(a.shape, dims)
    out = P.div(total, full(total.shape, n, acc, a.device))
    return convert(out, out_dtype)


def _prod(a, dims, keepdim, dtype):
    out_dtype = dtype or (torch.int64 if _is_int(a.dtype) else a.dtype)
    acc = opmath(out_dtype)
    out = convert(P.prod(convert(a, acc), dims), out_dtype)
    return unsqueeze_dims(out, dims) if keepdim else out


@register(aten.prod.default)
def prod_(a, *, dtype=None):
    return _prod(a, list(range(a.dim())), False, dtype)


@register(aten.prod.dim_int)
def prod(a, dim, keepdim=False, *, dtype=None):
    return _prod(a, [canon_dim(dim, a.dim())] if a.dim() else [], keepdim, dtype)


def _extreme(prim, a, dims, keepdim):
    if a.dtype == torch.bool:  # amax on bool is any, amin is all
        prim = P.any if prim is P.amax else P.all
    out = prim(a, dims)
    return unsqueeze_dims(out, dims) if keepdim else out


@register(aten.amax.default)
def amax(a, dim=(), keepdim=False):
    return _extreme(P.amax, a, reduction_dims(dim, a.dim()), keepdim)


@register(aten.amin.default)
def amin(a, dim=(), keepdim=False):
    return _extreme(P.amin, a, reduction_dims(dim, a.dim()), keepdim)


@register(aten.max.default)
def max_(a):
    return _extreme(P.amax, a, list(range(a.dim())), False)


@register(aten.min.default)
def min_(a):
    return _extreme(P.amin, a, list(range(a.dim())), False)


def _arg(prim, a, dim, keepdim):
    if a.dtype == torch.bool:
        a = convert(a, torch.uint8)
    if dim is None:
        out = prim(reshape(a, [a.numel()]), 0)
        return reshape(out, [1] * a.dim()) if keepdim else out
    if a.dim() == 0:
        return full([], 0, torch.int64, a.device)
    d = canon_dim(dim, a.dim())
    out = prim(convert(a, torch.uint8) if a.dtype == torch.bool else a, d)
    return unsqueeze_dims(out, [d]) if keepdim else out


@register(aten.argmax.default)
def argmax(a, dim=None, keepdim=False):
    return _arg(P.argmax, a, dim, keepdim)


@register(aten.argmin.default)
def argmin(a, dim=None, keepdim=False):
    return _arg(P.argmin, a, dim, keepdim)


@register(aten.max.dim)
def max_dim(a, dim, keepdim=False):
    d = [canon_dim(dim, a.dim())] if a.dim() else []
    return _extreme(P.amax, a, d, keepdim), _arg(P.argmax, a, dim, keepdim)


@register(aten.min.dim)
def min_dim(a, dim, keepdim=False):
    d = [canon_dim(dim, a.dim())] if a.dim() else []
    return _extreme(P.amin, a, d, keepdim), _arg(P.argmin, a, dim, keepdim)


def _bool_reduce(prim, a, dims, keepdim):
    out = prim(convert(a, torch.bool), dims)
    out = unsqueeze_dims(out, dims) if keepdim else out
    return out if a.dtype != torch.uint8 else convert(out, torch.uint8)


@register(aten.any.default)
def any_(a):
    return _bool_reduce(P.any, a, list(range(a.dim())), False)


@register(aten.any.dim, aten.any.dims)
def any_dim(a, dim=None, keepdim=False):
    return _bool_reduce(P.any, a, reduction_dims(dim, a.dim()), keepdim)


@register(aten.all.default)
def all_(a):
    return _bool_reduce(P.all, a, list(range(a.dim())), False)


@register(aten.all.dim, aten.all.dims)
def all_dim(a, dim=None, keepdim=False):
    return _bool_reduce(P.all, a, reduction_dims(dim, a.dim()), keepdim)


def _var(a, dim, correction, keepdim):
    dims = reduction_dims(dim, a.dim())
    acc = opmath(a.dtype)
    x = convert(a, acc)
    n = numel_of(a.shape, dims)
    m = group_mean(x, dims)  # Note [exact mean of a constant group]: a variance of 0 there
    d = P.sub(x, broadcast_to(m, x.shape))
    ss = sum_dims(P.mul(d, d), dims, keepdim)
    c = 1 if correction is None else correction
    var = P.div(ss, full(ss.shape, max(n - c, 0), acc, a.device))
    mean = m if keepdim else reshape(m, ss.shape)
    return var, mean


@register(aten.var.correction)
def var(a, dim=None, *, correction=None, keepdim=False):
    v, _ = _var(a, dim, correction, keepdim)
    return convert(v, a.dtype)


@register(aten.var_mean.correction)
def var_mean(a, dim=None, *, correction=None, keepdim=False):
    v, m = _var(a, dim, correction, keepdim)
    if a.dtype.is_floating_point and a.numel():
        m = _welford_infinities(a, m, dim, keepdim)
    return convert(v, a.dtype), convert(m, a.dtype)


def _welford_infinities(a, m, dim, keepdim):
    # ATen's var_mean computes the mean by Welford's update, mean += (x - mean) / k, in the
    # group's order: an infinity followed by any element gives inf - inf = NaN, one in the last
    # place gives the infinity (fuzz seeds 3142, 4350: ember's sum / n gave the infinity). So
    # the mean is NaN where a group holds an infinity before its last element.
    dims = reduction_dims(dim, a.dim())
    if not dims:
        return m
    inf = convert(P.isinf(a), torch.int64)
    last = inf
    for d in dims:
        last = slice_dim(last, d, a.shape[d] - 1, a.shape[d])
    before_last = P.sub(sum_dims(inf, dims, keepdim=True), last)
    bad = P.gt(before_last, full(before_last.shape, 0, torch.int64, a.device))
    bad = bad if keepdim else reshape(bad, m.shape)
    return P.where(bad, full(m.shape, float("nan"), m.dtype, a.device), m)


@register(aten.std.correction)
def std(a, dim=None, *, correction=None, keepdim=False):
    v, _ = _var(a, dim, correction, keepdim)
    return convert(P.sqrt(v), a.dtype)


@register(aten.logsumexp.default)
def logsumexp(a, dim, keepdim=False):
    dims = reduction_dims(dim, a.dim())
    dtype = a.dtype if a.dtype.is_floating_point else torch.get_default_dtype()
    acc = opmath(dtype)
    x = convert(a, acc)
    if not dims:  # a 0-d input: the log of the exp of one element
        return convert(x, dtype) if x is not a else P.clone(x)
    if x.numel() == 0:
        return convert(P.log(sum_dims(P.exp(x), dims, keepdim)), dtype)
    m = P.amax(x, dims)
    m = P.where(P.isinf(m), full(m.shape, 0, acc, a.device), m)  # all -inf (or inf) rows
    mk = broadcast_to(unsqueeze_dims(m, dims), x.shape)
    s = P.log(P.sum(P.exp(P.sub(x, mk)), dims))
    out = P.add(s, m)
    return convert(unsqueeze_dims(out, dims) if keepdim else out, dtype)


@register(aten.linalg_vector_norm.default)
def linalg_vector_norm(a, ord=2, dim=None, keepdim=False, *, dtype=None):
    if a.dtype.is_complex:
        raise NotImplementedError("linalg_vector_norm of a complex tensor")
    out_dtype = dtype or a.dtype
    dims = reduction_dims(dim, a.dim())
    acc = opmath(out_dtype)
    x = P.abs(convert(a, acc))
    if ord == float("inf"):
        out = P.amax(x, dims) if a.numel() else P.sum(x, dims)
    elif ord == float("-inf"):
        out = P.amin(x, dims)
    elif ord == 0:
        out = P.sum(convert(P.ne(x, full(x.shape, 0, acc, x.device)), acc), dims)
    elif ord == 1:
        out = P.sum(x, dims)
    elif ord == 2:
        out = P.sqrt(P.sum(P.mul(x, x), dims))
    else:
        p = full(x.shape, ord, acc, x.device)
        s = P.sum(P.pow(x, p), dims)
        out = P.pow(s, full(s.shape, 1 / ord, acc, x.device))
    out = convert(out, out_dtype)
    return unsqueeze_dims(out, dims) if keepdim else out

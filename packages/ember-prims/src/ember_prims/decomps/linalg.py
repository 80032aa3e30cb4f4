"""Matrix products. mm/bmm stay whole (EXTERN_OPS); the ops around them decompose into them:
addmm = mm + bias, baddbmm = bmm + bias, mv/dot/addmv via mul and sum.

`extra_decompositions()` lowers the externs themselves (mm, bmm as broadcast-multiply-sum; the
efficient-attention forward as math), for a backend without a vendor library, or for tests.
"""
from __future__ import annotations

import math

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    P, aten, broadcast_to, convert, full, opmath, reshape, result_type,
)


def _scale(t, s):
    if s == 1:
        return t
    return P.mul(t, full(t.shape, s, t.dtype, t.device))


def _add_bias(prod, bias, beta, alpha):
    # beta * bias + alpha * prod, in float32 for low-precision dtypes
    dtype = prod.dtype
    acc = opmath(dtype)
    p = _scale(convert(prod, acc), alpha)
    if beta == 0:
        return convert(p, dtype)
    b = _scale(broadcast_to(convert(bias, acc), prod.shape), beta)
    return convert(P.add(b, p), dtype)


@register(aten.addmm.default)
def addmm(bias, m1, m2, *, beta=1, alpha=1):
    return _add_bias(aten.mm.default(m1, m2), bias, beta, alpha)


@register(aten.baddbmm.default)
def baddbmm(bias, b1, b2, *, beta=1, alpha=1):
    return _add_bias(aten.bmm.default(b1, b2), bias, beta, alpha)


@register(aten.mv.default)
def mv(m, v):
    acc = opmath(m.dtype)
    prod = P.mul(convert(m, acc), P.broadcast_in_dim(convert(v, acc), list(m.shape), [1]))
    return convert(P.sum(prod, [1]), m.dtype)


@register(aten.dot.default)
def dot(a, b):
    acc = opmath(a.dtype)
    return convert(P.sum(P.mul(convert(a, acc), convert(b, acc)), [0]), a.dtype)


@register(aten.addmv.default)
def addmv(bias, m, v, *, beta=1, alpha=1):
    return _add_bias(mv(m, v), bias, beta, alpha)


@register(aten.addr.default)
def addr(bias, v1, v2, *, beta=1, alpha=1):
    # ATen's kernel: self * beta + v1 * v2 * alpha, each step rounded in the result dtype
    # (no float32 opmath for bfloat16 here); for bool, `or` and `and`
    n, m = v1.shape[0], v2.shape[0]
    dtype = result_type(bias, v1, v2)
    c = lambda v: full([n, m], v, dtype, v1.device)  # noqa: E731
    outer = P.mul(P.broadcast_in_dim(convert(v1, dtype), [n, m], [0]),
                  P.broadcast_in_dim(convert(v2, dtype), [n, m], [1]))
    b = broadcast_to(convert(bias, dtype), [n, m])
    if dtype == torch.bool:
        return P.logical_or(P.logical_and(b, c(bool(beta))), P.logical_and(outer, c(bool(alpha))))
    prod = outer if alpha == 1 else P.mul(outer, c(alpha))
    if beta == 0:
        return prod
    return P.add(b if beta == 1 else P.mul(b, c(beta)), prod)


# decompositions of the externs (not in the default table) ---------------------------------------
def _mm(a, b):
    M, K = a.shape
    N = b.shape[1]
    acc = opmath(a.dtype)
    x = P.broadcast_in_dim(convert(a, acc), [M, K, N], [0, 1])
    y = P.broadcast_in_dim(convert(b, acc), [M, K, N], [1, 2])
    return convert(P.sum(P.mul(x, y), [1]), a.dtype)


def _bmm(a, b):
    B, M, K = a.shape
    N = b.shape[2]
    acc = opmath(a.dtype)
    x = P.broadcast_in_dim(convert(a, acc), [B, M, K, N], [0, 1, 2])
    y = P.broadcast_in_dim(convert(b, acc), [B, M, K, N], [0, 2, 3])
    return convert(P.sum(P.mul(x, y), [2]), a.dtype)


def _matmul_last2(a, b):
    lead = list(a.shape[:-2])
    B = math.prod(lead)
    x = reshape(a, [B] + list(a.shape[-2:]))
    y = reshape(b, [B] + list(b.shape[-2:]))
    out = aten.bmm.default(x, y)
    return reshape(out, lead + [a.shape[-2], b.shape[-1]])


def _efficient_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0,
                         is_causal=False, *, scale=None):
    """Math form of _scaled_dot_product_efficient_attention (no dropout): (out, lse, seed, offset)."""
    if dropout_p:
        raise NotImplementedError("efficient attention with dropout has no math decomposition here")
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = 1 / math.sqrt(E) if scale is None else scale
    acc = opmath(query.dtype)
    q = _scale(convert(query, acc), scale)
    kt = P.permute(convert(key, acc), list(range(key.dim() - 2)) + [key.dim() - 1, key.dim() - 2])
    s = _matmul_last2(q, kt)
    if attn_bias is not None:
        s = P.add(s, broadcast_to(convert(attn_bias, acc), s.shape))
    if is_causal:
        r = P.broadcast_in_dim(P.iota(L, start=0, step=1, dtype=torch.int64, device=q.device), [L, S], [0])
        c = P.broadcast_in_dim(P.iota(S, start=0, step=1, dtype=torch.int64, device=q.device), [L, S], [1])
        s = P.where(broadcast_to(P.le(c, r), s.shape), s, full(s.shape, float("-inf"), acc, q.device))
    d = s.dim() - 1
    m = P.amax(s, [d])
    m = P.where(P.isinf(m), full(m.shape, 0, acc, q.device), m)
    e = P.exp(P.sub(s, P.broadcast_in_dim(m, list(s.shape), list(range(d)))))
    z = P.sum(e, [d])
    p = P.div(e, P.broadcast_in_dim(z, list(s.shape), list(range(d))))
    out = convert(_matmul_last2(p, convert(value, acc)), query.dtype)
    lse = P.add(P.log(z), m) if compute_log_sumexp else full(list(query.shape[:-2]) + [0], 0, acc, q.device)
    zero = full([], 0, torch.int64, q.device)
    return out, lse, zero, zero


def extra_decompositions() -> dict:
    """Decompositions of some EXTERN_OPS, to merge into a table: `t = table(); t.update(extra_decompositions())`."""
    return {
        aten.mm.default: _mm,
        aten.bmm.default: _bmm,
        aten._scaled_dot_product_efficient_attention.default: _efficient_attention,
    }


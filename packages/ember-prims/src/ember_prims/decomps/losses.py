"""Losses: nll_loss (1-d and 2-d forms) forward and backward, mse_loss (+backward),
binary_cross_entropy (+backward). Cross entropy reaches us as _log_softmax + nll_loss.

Reductions: 0 = none, 1 = mean (divided by the total weight), 2 = sum.
"""
from __future__ import annotations

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    P, aten, broadcast_to, convert, full, in_opmath, opmath, reshape, sum_dims, unsqueeze_dims,
)

NONE, MEAN, SUM = 0, 1, 2


def _nll_parts(a, target, weight, ignore_index):
    """Per-element weights w (0 where ignored) and class index t (0 where ignored), target-shaped."""
    cdim = 0 if a.dim() == 1 else 1
    t = convert(target, torch.int64)
    ignored = P.eq(t, full(t.shape, ignore_index, torch.int64, t.device))
    safe = P.where(ignored, full(t.shape, 0, torch.int64, t.device), t)
    acc = opmath(a.dtype)
    if weight is not None:
        w = P.index(convert(weight, acc), [reshape(safe, [safe.numel()])])
        w = reshape(w, list(t.shape))
    else:
        w = full(t.shape, 1, acc, a.device)
    w = P.where(ignored, full(t.shape, 0, acc, a.device), w)
    return cdim, safe, w


@register(aten.nll_loss_forward.default, aten.nll_loss2d_forward.default)
def nll_loss_forward(a, target, weight, reduction, ignore_index):
    cdim, safe, w = _nll_parts(a, target, weight, ignore_index)
    acc = w.dtype
    picked = P.gather(convert(a, acc), cdim, unsqueeze_dims(safe, [cdim])) if a.dim() > 1 else \
        reshape(P.gather(convert(a, acc), 0, reshape(safe, [1])), [])
    picked = reshape(picked, list(safe.shape)) if a.dim() > 1 else picked
    loss = P.neg(P.mul(picked, w))
    total = sum_dims(w, list(range(w.dim())))
    if reduction == NONE:  # ATen reports the weight only for a single (1-d) sample
        return convert(loss, a.dtype), convert(total, a.dtype) if a.dim() == 1 else full([], 0, a.dtype, a.device)
    s = sum_dims(loss, list(range(loss.dim())))
    if reduction == MEAN:
        s = P.div(s, total)
    return convert(s, a.dtype), convert(total, a.dtype)


@register(aten.nll_loss_backward.default, aten.nll_loss2d_backward.default)
def nll_loss_backward(grad, a, target, weight, reduction, ignore_index, total_weight):
    cdim, safe, w = _nll_parts(a, target, weight, ignore_index)
    acc = w.dtype
    g = convert(grad, acc)
    if reduction == MEAN:
        g = P.div(g, convert(total_weight, acc))
    g = broadcast_to(g, w.shape) if g.dim() == 0 else g
    contrib = P.neg(P.mul(g, w))
    # Note [selections, not scatters] (decomps/views.py): the gradient is -g*w at each row's
    # target class and 0 elsewhere, where(class == target, ...): elementwise, so it fuses with
    # the log_softmax backward instead of a zero fill, a scatter and a re-read of the result.
    shape = list(a.shape)
    others = [k for k in range(a.dim()) if k != cdim]
    classes = P.broadcast_in_dim(P.iota(shape[cdim], start=0, step=1, dtype=torch.int64, device=a.device),
                                 shape, [cdim])
    hit = P.eq(classes, P.broadcast_in_dim(safe, shape, others))
    out = P.where(hit, P.broadcast_in_dim(contrib, shape, others), full(shape, 0, acc, a.device))
    return convert(out, a.dtype)


def _reduce(loss, reduction):
    if reduction == NONE:
        return loss
    acc = opmath(loss.dtype)
    s = sum_dims(convert(loss, acc), list(range(loss.dim())))
    if reduction == MEAN:
        s = P.div(s, full([], max(loss.numel(), 1), acc, loss.device)) if loss.numel() else \
            full([], float("nan"), acc, loss.device)
    return convert(s, loss.dtype)


@register(aten.mse_loss.default)
def mse_loss(a, target, reduction=MEAN):
    return _reduce(in_opmath(lambda x, y: (x - y) * (x - y), a, target), reduction)


@register(aten.mse_loss_backward.default)
def mse_loss_backward(grad, a, target, reduction):
    n = a.numel() if reduction == MEAN else 1
    g = broadcast_to(grad, a.shape)
    return in_opmath(lambda g, x, y: g * (x - y) * (2 / n), g, a, target)


@register(aten.binary_cross_entropy.default)
def binary_cross_entropy(a, target, weight=None, reduction=MEAN):
    def f(x, y):
        # ATen clamps the logs at -100
        lx = _max(x.log(), -100)
        l1x = _max((1 - x).log(), -100)
        return (y - 1) * l1x - y * lx
    loss = in_opmath(f, a, target)
    if weight is not None:
        loss = P.mul(loss, broadcast_to(convert(weight, loss.dtype), loss.shape))
    return _reduce(loss, reduction)


def _max(x, v):
    return type(x)(P.maximum(x.t, x._o(v)))


@register(aten.binary_cross_entropy_backward.default)
def binary_cross_entropy_backward(grad, a, target, weight=None, reduction=MEAN):
    eps = 1e-12
    n = a.numel() if reduction == MEAN else 1
    g = broadcast_to(grad, a.shape)

    def f(g, x, y):
        return g * (x - y) / _max((1 - x) * x, eps) / n
    out = in_opmath(f, g, a, target)
    if weight is not None:
        out = P.mul(out, broadcast_to(convert(weight, out.dtype), out.shape))
    return out

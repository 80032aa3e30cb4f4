"""Activations and their backward ops: relu/threshold, gelu, silu, sigmoid, tanh, hardtanh,
leaky_relu, elu, softplus, hardsigmoid, hardswish, mish; softmax and log_softmax (+ backward).

Formulas follow ATen's CPU kernels, computed in float32 for float16/bfloat16 inputs.
"""
from __future__ import annotations

import math

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    Ex, P, aten, broadcast_to, canon_dim, convert, ex_where, full, in_opmath, opmath, unsqueeze_dims,
)

_SQRT1_2 = 1 / math.sqrt(2)
_SQRT_2_PI = math.sqrt(2 / math.pi)  # kBeta of the tanh approximation
_KAPPA = 0.044715
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


@register(aten.threshold.default)
def threshold(a, threshold, value):
    return P.where(P.le(a, full(a.shape, threshold, a.dtype, a.device)), full(a.shape, value, a.dtype, a.device), a)


@register(aten.threshold_backward.default)
def threshold_backward(grad, a, threshold):
    mask = P.le(convert(a, grad.dtype), full(a.shape, threshold, grad.dtype, a.device))
    return P.where(mask, full(grad.shape, 0, grad.dtype, grad.device), grad)


@register(aten.gelu.default)
def gelu(a, *, approximate="none"):
    if approximate == "tanh":
        return in_opmath(lambda x: 0.5 * x * (1 + (_SQRT_2_PI * (x + _KAPPA * x * x * x)).tanh()), a)
    return in_opmath(lambda x: x * 0.5 * (1 + (x * _SQRT1_2).erf()), a)


@register(aten.gelu_backward.default)
def gelu_backward(grad, a, *, approximate="none"):
    if approximate == "tanh":
        def f(g, x):
            inner = _SQRT_2_PI * (x + _KAPPA * x * x * x)
            t = inner.tanh()
            left, right = 0.5 * x, 1 + t
            return g * (0.5 * right + left * (1 - t * t) * (_SQRT_2_PI * (1 + 3 * _KAPPA * x * x)))
        return in_opmath(f, grad, a)

    def f(g, x):
        cdf = 0.5 * (1 + (x * _SQRT1_2).erf())
        pdf = (-0.5 * x * x).exp() * _INV_SQRT_2PI
        return g * (cdf + x * pdf)
    return in_opmath(f, grad, a)


def _sigmoid(x):
    return 1 / (1 + (-x).exp())


@register(aten.silu.default)
def silu(a):
    return in_opmath(lambda x: x * _sigmoid(x), a)


@register(aten.silu_backward.default)
def silu_backward(grad, a):
    def f(g, x):
        s = _sigmoid(x)
        return g * s * (1 + x * (1 - s))
    return in_opmath(f, grad, a)


@register(aten.sigmoid_backward.default)
def sigmoid_backward(grad, y):
    return in_opmath(lambda g, y: g * (1 - y) * y, grad, y)


@register(aten.tanh_backward.default)
def tanh_backward(grad, y):
    return in_opmath(lambda g, y: g * (1 - y * y), grad, y)


@register(aten.hardtanh.default)
def hardtanh(a, min_val=-1, max_val=1):
    return P.minimum(P.maximum(a, full(a.shape, min_val, a.dtype, a.device)), full(a.shape, max_val, a.dtype, a.device))


@register(aten.hardtanh_backward.default)
def hardtanh_backward(grad, a, min_val, max_val):
    return in_opmath(lambda g, x: ex_where(_or(x <= min_val, x >= max_val), 0, g), grad, a)


def _or(a, b):
    return Ex(P.logical_or(a.t, b.t))


@register(aten.leaky_relu.default)
def leaky_relu(a, negative_slope=0.01):
    return in_opmath(lambda x: ex_where(x > 0, x, x * negative_slope), a)


@register(aten.leaky_relu_backward.default)
def leaky_relu_backward(grad, a, negative_slope, self_is_result):
    return in_opmath(lambda g, x: ex_where(x > 0, g, g * negative_slope), grad, a)


@register(aten.elu.default)
def elu(a, alpha=1, scale=1, input_scale=1):
    return in_opmath(lambda x: ex_where(x > 0, x * scale, ((x * input_scale).expm1()) * (alpha * scale)), a)


@register(aten.softplus.default)
def softplus(a, beta=1, threshold=20):
    return in_opmath(lambda x: ex_where(x * beta > threshold, x, (x * beta).exp().log1p() / beta), a)


@register(aten.softplus_backward.default)
def softplus_backward(grad, a, beta, threshold):
    def f(g, x):
        z = (x * beta).exp()
        return ex_where(x * beta > threshold, g, g * z / (z + 1))
    return in_opmath(f, grad, a)


def _relu6(x):
    return Ex(P.minimum(P.maximum(x.t, x._o(0)), x._o(6)))


@register(aten.hardsigmoid.default)
def hardsigmoid(a):
    return in_opmath(lambda x: _relu6(x + 3) / 6, a)


@register(aten.hardswish.default)
def hardswish(a):
    return in_opmath(lambda x: x * _relu6(x + 3) / 6, a)


@register(aten.mish.default)
def mish(a):
    return in_opmath(lambda x: x * (ex_where(x > 20, x, x.exp().log1p())).tanh(), a)


# softmax ---------------------------------------------------------------------------------------
def _softmax_parts(a, dim, out_dtype):
    d = canon_dim(dim, a.dim())
    acc = opmath(out_dtype if out_dtype.is_floating_point else torch.get_default_dtype())
    x = convert(a, acc)
    if a.dim() == 0 or a.numel() == 0:  # nothing to normalise (amax would reject an empty dim)
        return x, None, d, acc
    m = P.amax(x, [d])
    # Rows of -inf stay finite (their exps are 0, 0/0 is NaN as in eager). Only -inf: a row
    # holding +inf is NaN throughout in eager (inf - inf), not a one-hot.
    neg_inf = P.eq(m, full(m.shape, float("-inf"), acc, a.device))
    m = P.where(neg_inf, full(m.shape, 0, acc, a.device), m)
    shifted = P.sub(x, broadcast_to(unsqueeze_dims(m, [d]), x.shape))
    return shifted, m, d, acc


@register(aten._softmax.default)
def _softmax(a, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else a.dtype
    shifted, m, d, acc = _softmax_parts(a, dim, out_dtype)
    if m is None:  # a 0-d input (softmax over one element is 1) or an empty one
        return full(list(a.shape), 1, out_dtype, a.device)
    e = P.exp(shifted)
    s = broadcast_to(unsqueeze_dims(P.sum(e, [d]), [d]), e.shape)
    return convert(P.div(e, s), out_dtype)


@register(aten._log_softmax.default)
def _log_softmax(a, dim, half_to_float):
    out_dtype = torch.float32 if half_to_float else a.dtype
    shifted, m, d, acc = _softmax_parts(a, dim, out_dtype)
    if m is None:
        return full(list(a.shape), 0, out_dtype, a.device)
    lse = P.log(P.sum(P.exp(shifted), [d]))
    return convert(P.sub(shifted, broadcast_to(unsqueeze_dims(lse, [d]), shifted.shape)), out_dtype)


@register(aten.softmax.int)
def softmax(a, dim, dtype=None):
    return _softmax(convert(a, dtype) if dtype else a, dim, False)


@register(aten.log_softmax.int)
def log_softmax(a, dim, dtype=None):
    return _log_softmax(convert(a, dtype) if dtype else a, dim, False)


@register(aten._safe_softmax.default)
def _safe_softmax(a, dim, dtype=None):
    # softmax, except that a row that is entirely -inf gives zeros instead of NaN
    x = convert(a, dtype) if dtype else a
    out = _softmax(x, dim, False)
    if x.dim() == 0:
        return out
    d = canon_dim(dim, x.dim())
    neg_inf = P.eq(x, full(x.shape, float("-inf"), x.dtype, x.device))
    all_masked = broadcast_to(unsqueeze_dims(P.all(neg_inf, [d]), [d]), x.shape)
    return P.where(all_masked, full(out.shape, 0, out.dtype, out.device), out)


@register(aten._softmax_backward_data.default)
def _softmax_backward_data(grad, y, dim, input_dtype):
    d = canon_dim(dim, y.dim())

    def f(g, y):
        gy = g * y
        s = P.sum(gy.t, [d]) if y.t.dim() else gy.t
        s = broadcast_to(unsqueeze_dims(s, [d]), y.t.shape) if y.t.dim() else s
        return gy - y * Ex(s)
    return in_opmath(f, grad, y, out_dtype=input_dtype)


@register(aten._log_softmax_backward_data.default)
def _log_softmax_backward_data(grad, y, dim, input_dtype):
    d = canon_dim(dim, y.dim())

    def f(g, y):
        s = P.sum(g.t, [d]) if y.t.dim() else g.t
        s = broadcast_to(unsqueeze_dims(s, [d]), y.t.shape) if y.t.dim() else s
        return g - y.exp() * Ex(s)
    return in_opmath(f, grad, y, out_dtype=input_dtype)


# more backward ops -------------------------------------------------------------------------------
@register(aten.elu_backward.default)
def elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result):
    neg, pos, ipt = alpha * scale, scale, input_scale
    if is_result:
        return in_opmath(lambda g, y: ex_where(y <= 0, g * ipt * (y + neg), g * pos), grad, self_or_result)
    return in_opmath(lambda g, x: ex_where(x <= 0, g * ipt * neg * (x * ipt).exp(), g * pos), grad, self_or_result)


@register(aten.hardsigmoid_backward.default)
def hardsigmoid_backward(grad, a):
    return in_opmath(lambda g, x: ex_where(_and(x > -3, x < 3), g / 6, 0), grad, a)


@register(aten.hardswish_backward.default)
def hardswish_backward(grad, a):
    # ATen's: 0 at -3 and below, the formula below 3, the gradient from 3 on (and at NaN, as
    # its scalar and CUDA kernels give; its CPU vector lanes give NaN)
    return in_opmath(lambda g, x: ex_where(x <= -3, 0, ex_where(x < 3, g * (x / 3 + 0.5), g)), grad, a)


@register(aten.mish_backward.default)
def mish_backward(grad, a):
    def f(g, x):
        sp = ex_where(x > 20, x, x.exp().log1p())
        t = sp.tanh()
        return g * (t + x * _sigmoid(x) * (1 - t * t))
    return in_opmath(f, grad, a)


def _and(a, b):
    return Ex(P.logical_and(a.t, b.t))


@register(aten.log_sigmoid_forward.default)
def log_sigmoid_forward(a):
    # (log(sigmoid(x)), buffer = exp(-|x|)): ATen's CPU kernel hands the buffer to the backward
    def out(x):
        z = (-x.abs()).exp()
        return Ex(P.minimum(x.t, x._o(0))) - z.log1p()
    return in_opmath(out, a), in_opmath(lambda x: (-x.abs()).exp(), a)


@register(aten.log_sigmoid_backward.default)
def log_sigmoid_backward(grad, a, buffer):
    def f(g, x):
        z = (-x.abs()).exp()  # recomputed: the buffer is empty on CUDA
        return g * ex_where(x < 0, 1 / (1 + z), z / (1 + z))
    return in_opmath(f, grad, a)

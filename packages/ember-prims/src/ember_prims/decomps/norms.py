"""Normalisation: native_layer_norm, native_group_norm, the batch-norm family (training, eval,
functional forms) and their backward ops.

Statistics are computed in float32 for float16/bfloat16. On CPU, ATen returns layer norm's mean
and rstd in the input dtype (on CUDA in float32); we follow the device. The batch-norm ops that
update running statistics in place are decomposed functionally: their outputs are exact, the
in-place update is dropped (graphs reaching us are functional and use
`_native_batch_norm_legit_functional`, which returns the new running statistics).
"""
from __future__ import annotations

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    P, aten, broadcast_to, convert, full, group_mean, numel_of, opmath, reshape, slice_dim, sum_dims,
)


def _stat_dtype(x):
    return x.dtype if x.device.type == "cpu" else opmath(x.dtype)


def _mean_rstd(x, dims, eps):
    # x in opmath; biased variance, as normalisation layers use
    n = numel_of(x.shape, dims)
    mean = group_mean(x, dims)  # Note [exact mean of a constant group]
    d = P.sub(x, broadcast_to(mean, x.shape))
    var = P.div(sum_dims(P.mul(d, d), dims, True), full(mean.shape, n, x.dtype, x.device))
    rstd = P.rsqrt(P.add(var, full(var.shape, eps, x.dtype, x.device)))
    return mean, var, rstd, d


def _affine(y, weight, bias, shape_dims):
    # weight/bias live on `shape_dims` of y (trailing dims for layer norm, dim 1 for batch norm)
    if weight is not None:
        y = P.mul(y, P.broadcast_in_dim(convert(weight, y.dtype), list(y.shape), shape_dims))
    if bias is not None:
        y = P.add(y, P.broadcast_in_dim(convert(bias, y.dtype), list(y.shape), shape_dims))
    return y


@register(aten.native_layer_norm.default)
def native_layer_norm(a, normalized_shape, weight, bias, eps):
    axis = a.dim() - len(normalized_shape)
    dims = list(range(axis, a.dim()))
    x = convert(a, opmath(a.dtype))
    mean, _, rstd, d = _mean_rstd(x, dims, eps)
    y = _affine(P.mul(d, broadcast_to(rstd, x.shape)), weight, bias, dims)
    sd = _stat_dtype(a)
    return convert(y, a.dtype), convert(mean, sd), convert(rstd, sd)


@register(aten.native_layer_norm_backward.default)
def native_layer_norm_backward(grad, a, normalized_shape, mean, rstd, weight, bias, output_mask):
    axis = a.dim() - len(normalized_shape)
    inner = list(range(axis, a.dim()))
    outer = list(range(axis))
    acc = opmath(a.dtype)
    x, g = convert(a, acc), convert(grad, acc)
    mean, rstd = broadcast_to(convert(mean, acc), x.shape), broadcast_to(convert(rstd, acc), x.shape)
    x_hat = P.mul(P.sub(x, mean), rstd)
    n = numel_of(a.shape, inner)
    gi = gw = gb = None
    if output_mask[0]:
        gx = _affine(g, weight, None, inner)
        s1 = broadcast_to(sum_dims(gx, inner, True), x.shape)
        s2 = broadcast_to(sum_dims(P.mul(gx, x_hat), inner, True), x.shape)
        t = P.sub(P.sub(P.mul(gx, full(x.shape, n, acc, x.device)), s1), P.mul(x_hat, s2))
        gi = convert(P.mul(t, P.div(rstd, full(x.shape, n, acc, x.device))), a.dtype)
        if n == 0:
            gi = full(a.shape, 0, a.dtype, a.device)
    if output_mask[1] and weight is not None:
        gw = convert(sum_dims(P.mul(g, x_hat), outer), weight.dtype)
    if output_mask[2] and bias is not None:
        gb = convert(sum_dims(g, outer), bias.dtype)
    return gi, gw, gb


# batch norm ----------------------------------------------------------------------------------
def _bn_dims(a):
    return [0] + list(range(2, a.dim()))


def _channel(v, like):
    return P.broadcast_in_dim(convert(v, like.dtype), list(like.shape), [1])


def _shifted_mean_rstd(x, dims, eps):
    """Note [batch-norm statistics in one pass]
    Batch norm's mean and variance reduce over every dim but the channel: long rows, split in
    two kernels on the GPU. Computed as mean then variance of (x - mean), the variance's
    reduction waits for the mean's, so four reduction kernels run per batch norm. With a shift
    K per channel (its first element), var = E[(x-K)^2] - E[x-K]^2 holds exactly and both sums
    are independent, so they share one pass; K lies within the data, so the subtraction loses
    about as little as the two-pass form (the naive E[x^2] - E[x]^2, K = 0, loses everything
    when |mean| >> std). Rounding cannot make the variance negative: clamped at 0."""
    n = numel_of(x.shape, dims)
    k = x
    for d in dims:
        k = slice_dim(k, d, 0, 1)
    d = P.sub(x, broadcast_to(k, x.shape))
    inv_n = full(k.shape, 1 / n, x.dtype, x.device)
    m1 = P.mul(sum_dims(d, dims, True), inv_n)
    m2 = P.mul(sum_dims(P.mul(d, d), dims, True), inv_n)
    var = P.maximum(P.sub(m2, P.mul(m1, m1)), full(k.shape, 0, x.dtype, x.device))
    mean = P.add(k, m1)
    rstd = P.rsqrt(P.add(var, full(var.shape, eps, x.dtype, x.device)))
    return mean, var, rstd, P.sub(x, broadcast_to(mean, x.shape))


def _bn_acc(a):
    """Note [batch-norm sums in double on the CPU]: ATen's CPU batch norm accumulates a float32
    input's statistics and its backward's sums in double (acc_type on the CPU), and a model
    whose batch norms see few values per channel (shufflenet, mobilenet at small images: 8
    values in the last stage) amplifies float32 sums' rounding to 100x eager's distance from a
    float64 run. Here as there: double on the CPU, the accumulation type on the GPU (ATen's
    CUDA kernels accumulate float32 in float32)."""
    if a.device.type == "cpu" and a.dtype == torch.float32:
        return torch.float64
    return opmath(a.dtype)


def _bn_train(a, weight, bias, eps):
    dims = _bn_dims(a)
    x = convert(a, _bn_acc(a))
    stats = _shifted_mean_rstd if all(a.shape[d] > 0 for d in dims) else _mean_rstd
    mean, var, rstd, d = stats(x, dims, eps)
    y = _affine(P.mul(d, broadcast_to(rstd, x.shape)), weight, bias, [1])
    squeeze = lambda t: reshape(t, [a.shape[1]])  # noqa: E731
    return convert(y, a.dtype), squeeze(mean), squeeze(var), squeeze(rstd)


def _bn_eval(a, weight, bias, running_mean, running_var, eps):
    x = convert(a, opmath(a.dtype))
    rm, rv = convert(running_mean, x.dtype), convert(running_var, x.dtype)
    invstd = P.rsqrt(P.add(rv, full(rv.shape, eps, x.dtype, x.device)))
    y = P.mul(P.sub(x, _channel(rm, x)), _channel(invstd, x))
    return convert(_affine(y, weight, bias, [1]), a.dtype)


def _new_running(running, stat, momentum):
    r = convert(running, stat.dtype)
    m = full(r.shape, momentum, r.dtype, r.device)
    one_m = full(r.shape, 1 - momentum, r.dtype, r.device)
    return convert(P.add(P.mul(r, one_m), P.mul(stat, m)), running.dtype)


def _bn_stat_dtype(a, *params):
    # ATen on CPU: float32 statistics when a low-precision input meets float32 parameters ("mixed
    # type"), else the input dtype; on CUDA always the accumulation dtype.
    if a.device.type != "cpu" or any(p is not None and p.dtype != a.dtype for p in params):
        return opmath(a.dtype)
    return a.dtype


def _bn(a, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, save_mean, save_invstd, new_running_mean, new_running_var)"""
    sd = _bn_stat_dtype(a, weight, bias, running_mean, running_var)
    if not training:
        out = _bn_eval(a, weight, bias, running_mean, running_var, eps)
        empty = full([0], 0, sd, a.device)
        return out, empty, empty, running_mean, running_var
    out, mean, var, rstd = _bn_train(a, weight, bias, eps)
    n = a.numel() // a.shape[1]
    new_rm = new_rv = None
    if running_mean is not None:
        new_rm = _new_running(running_mean, mean, momentum)
    if running_var is not None:
        unbiased = P.mul(var, full(var.shape, n / max(n - 1, 1), var.dtype, var.device))
        new_rv = _new_running(running_var, unbiased, momentum)
    return out, convert(mean, sd), convert(rstd, sd), new_rm, new_rv


def _bn_updating_running_stats(a, weight, bias, running_mean, running_var, training, momentum, eps):
    # native_batch_norm and _native_batch_norm_legit update running_mean/var in place when
    # training: the decomposition must too (copy_, which the autograd tracer functionalizes and
    # replays onto the real buffers), or the buffers would silently stay as they were.
    out, mean, rstd, rm, rv = _bn(a, weight, bias, running_mean, running_var, training, momentum, eps)
    if training:
        if running_mean is not None:
            running_mean.copy_(rm)
        if running_var is not None:
            running_var.copy_(rv)
    return out, mean, rstd


@register(aten.native_batch_norm.default)
def native_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    return _bn_updating_running_stats(a, weight, bias, running_mean, running_var, training, momentum, eps)


@register(aten._native_batch_norm_legit_functional.default)
def _native_batch_norm_legit_functional(a, weight, bias, running_mean, running_var, training, momentum, eps):
    out, mean, rstd, rm, rv = _bn(a, weight, bias, running_mean, running_var, training, momentum, eps)
    return out, mean, rstd, P.clone(rm), P.clone(rv)


@register(aten._native_batch_norm_legit.default)
def _native_batch_norm_legit(a, weight, bias, running_mean, running_var, training, momentum, eps):
    return _bn_updating_running_stats(a, weight, bias, running_mean, running_var, training, momentum, eps)


@register(aten._native_batch_norm_legit.no_stats)
def _native_batch_norm_legit_no_stats(a, weight, bias, training, momentum, eps):
    return _bn(a, weight, bias, None, None, True, momentum, eps)[:3]


@register(aten._native_batch_norm_legit_no_training.default)
def _native_batch_norm_legit_no_training(a, weight, bias, running_mean, running_var, momentum, eps):
    return _bn(a, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


@register(aten.native_batch_norm_backward.default)
def native_batch_norm_backward(grad, a, weight, running_mean, running_var, save_mean, save_invstd, train, eps,
                               output_mask):
    acc = _bn_acc(a)  # Note [batch-norm sums in double on the CPU]
    x, g = convert(a, acc), convert(grad, acc)
    dims = _bn_dims(a)
    if train:
        mean, invstd = convert(save_mean, acc), convert(save_invstd, acc)
    else:
        mean = convert(running_mean, acc)
        invstd = P.rsqrt(P.add(convert(running_var, acc), full(running_var.shape, eps, acc, a.device)))
    x_hat = P.mul(P.sub(x, _channel(mean, x)), _channel(invstd, x))
    sum_g = sum_dims(g, dims)
    sum_gx = sum_dims(P.mul(g, x_hat), dims)
    w = convert(weight, acc) if weight is not None else full([a.shape[1]], 1, acc, a.device)
    gi = gw = gb = None
    if output_mask[0]:
        if train:
            n = a.numel() // a.shape[1]
            inv_n = full(x.shape, 1 / n, acc, x.device)
            t = P.sub(P.sub(g, P.mul(_channel(sum_g, x), inv_n)), P.mul(x_hat, P.mul(_channel(sum_gx, x), inv_n)))
            gi = P.mul(t, _channel(P.mul(invstd, w), x))
        else:
            gi = P.mul(g, _channel(P.mul(invstd, w), x))
        gi = convert(gi, a.dtype)
    if output_mask[1]:
        gw = convert(sum_gx, weight.dtype if weight is not None else a.dtype)
    if output_mask[2]:
        gb = convert(sum_g, weight.dtype if weight is not None else a.dtype)
    return gi, gw, gb


# Note [vendor batch norm]
#     On CUDA, `F.batch_norm` reaches the tracer as `cudnn_batch_norm` (ROCm: `miopen_batch_norm`):
#     `batch_norm` is a composite op that picks the vendor kernel by device, below autograd, so
#     the backward is `cudnn_batch_norm_backward`. Both forms are the same function as
#     native_batch_norm (cuDNN's `save_var` is the inverse standard deviation, like
#     native_batch_norm's `save_invstd`) and decompose through it, so the statistics and the
#     normalization fuse with the pointwise work around them like any other kernel. Routing the
#     forward through `aten.native_batch_norm` keeps its running-statistics update (a mutation
#     its schema does not declare) on the path the tracer functionalizes. The reserve space is
#     cuDNN's scratch memory for its own backward: empty here.
def _vendor_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    out, mean, invstd = aten.native_batch_norm.default(a, weight, bias, running_mean, running_var,
                                                       training, momentum, eps)
    if not training:  # cuDNN returns no statistics in evaluation
        empty = full([0], 0, weight.dtype if weight is not None else a.dtype, a.device)
        mean, invstd = empty, P.clone(empty)
    return out, mean, invstd


@register(aten.cudnn_batch_norm.default)
def cudnn_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    reserve = full([0], 0, torch.uint8, a.device)
    return (*_vendor_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps), reserve)


@register(aten.miopen_batch_norm.default)
def miopen_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps):
    return _vendor_batch_norm(a, weight, bias, running_mean, running_var, training, momentum, eps)


def _vendor_batch_norm_backward(a, grad, weight, running_mean, running_var, save_mean, save_var, eps):
    # called only for training-mode forwards (autograd uses native_batch_norm_backward in eval)
    return native_batch_norm_backward(grad, a, weight, running_mean, running_var, save_mean, save_var,
                                      True, eps, [True, True, True])


@register(aten.cudnn_batch_norm_backward.default)
def cudnn_batch_norm_backward(a, grad, weight, running_mean, running_var, save_mean, save_var, eps, reserve):
    return _vendor_batch_norm_backward(a, grad, weight, running_mean, running_var, save_mean, save_var, eps)


@register(aten.miopen_batch_norm_backward.default)
def miopen_batch_norm_backward(a, grad, weight, running_mean, running_var, save_mean, save_var, eps):
    return _vendor_batch_norm_backward(a, grad, weight, running_mean, running_var, save_mean, save_var, eps)


# group norm ----------------------------------------------------------------------------------
@register(aten.native_group_norm.default)
def native_group_norm(a, weight, bias, N, C, HxW, group, eps):
    acc = opmath(a.dtype)
    x = reshape(convert(a, acc), [N, group, (C // group) * HxW])
    mean, _, rstd, d = _mean_rstd(x, [2], eps)
    y = reshape(P.mul(d, broadcast_to(rstd, x.shape)), list(a.shape))
    y = _affine(y, weight, bias, [1])
    sd = _stat_dtype(a)
    return convert(y, a.dtype), convert(reshape(mean, [N, group]), sd), convert(reshape(rstd, [N, group]), sd)


@register(aten.native_group_norm_backward.default)
def native_group_norm_backward(grad, a, mean, rstd, weight, N, C, HxW, group, output_mask):
    acc = opmath(a.dtype)
    cg = C // group
    shape = [N, group, cg, HxW]
    x, g = reshape(convert(a, acc), shape), reshape(convert(grad, acc), shape)
    m = P.broadcast_in_dim(convert(mean, acc), shape, [0, 1])
    r = P.broadcast_in_dim(convert(rstd, acc), shape, [0, 1])
    x_hat = P.mul(P.sub(x, m), r)
    gi = gw = gb = None
    if output_mask[0]:
        gx = g if weight is None else P.mul(g, P.broadcast_in_dim(reshape(convert(weight, acc), [group, cg]),
                                                                   shape, [1, 2]))
        n = cg * HxW
        s1 = P.broadcast_in_dim(sum_dims(gx, [2, 3]), shape, [0, 1])
        s2 = P.broadcast_in_dim(sum_dims(P.mul(gx, x_hat), [2, 3]), shape, [0, 1])
        t = P.sub(P.sub(P.mul(gx, full(shape, n, acc, a.device)), s1), P.mul(x_hat, s2))
        gi = convert(reshape(P.mul(t, P.div(r, full(shape, n, acc, a.device))), list(a.shape)), a.dtype)
    if output_mask[1] and weight is not None:
        gw = convert(reshape(sum_dims(P.mul(g, x_hat), [0, 3]), [C]), weight.dtype)
    if output_mask[2]:
        gb = convert(reshape(sum_dims(g, [0, 3]), [C]), weight.dtype if weight is not None else a.dtype)
    return gi, gw, gb

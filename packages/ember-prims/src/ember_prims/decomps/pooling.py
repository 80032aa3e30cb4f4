"""Pooling and resampling: max_pool2d_with_indices (+backward), avg_pool2d (+backward),
_adaptive_avg_pool2d (+backward), upsample_nearest2d, upsample_bilinear2d.

Windows are enumerated statically: a pooling op becomes, for each kernel offset (kh, kw), one
strided `slice` of the padded input, combined with elementwise prims (max with index tracking,
or a sum). Backward ops scatter-add into the flattened input plane, using the forward's indices
(max pool) or window positions built from `iota` (avg pool). max_pool2d is decomposed, not extern.
"""
from __future__ import annotations

import math

import torch

from ember_prims.decomps._registry import register
from ember_prims._library import same_size
from ember_prims.decomps._util import P, aten, broadcast_to, convert, full, opmath, reshape, size_max


def _pair(v, default=None):
    if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
        return default
    if isinstance(v, int):
        return (v, v)
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _out_size(n, k, s, p, d, ceil_mode):
    eff = d * (k - 1) + 1
    out = (n + 2 * p - eff + ((s - 1) if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return max(out, 0)


def _as_4d(a):
    return (a, False) if a.dim() == 4 else (reshape(a, [1] + list(a.shape)), True)


def _window(xp, oh, ow, sh, sw, offh, offw):
    # the (offh, offw) element of every window: a strided slice of the padded input
    n, c = xp.shape[0], xp.shape[1]
    return P.slice(xp, [0, 0, offh, offw], [n, c, offh + (oh - 1) * sh + 1, offw + (ow - 1) * sw + 1],
                   [1, 1, sh, sw])


def _pad_for(x, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, value):
    H, W = x.shape[2], x.shape[3]
    high_h = size_max((oh - 1) * sh + dh * (kh - 1) + 1 - H - ph, 0)
    high_w = size_max((ow - 1) * sw + dw * (kw - 1) + 1 - W - pw, 0)
    if all(same_size(p, 0) for p in (ph, pw, high_h, high_w)):
        return x
    return P.pad(x, value, [0, 0, ph, pw], [0, 0, high_h, high_w])


def _positions(n, start, step, like, dim, shape):
    io = P.iota(n, start=start, step=step, dtype=torch.int64, device=like.device)
    return P.broadcast_in_dim(io, list(shape), [dim])


@register(aten.max_pool2d_with_indices.default)
def max_pool2d_with_indices(a, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    x, squeezed = _as_4d(a)
    N, C, H, W = x.shape
    oh, ow = _out_size(H, kh, sh, ph, dh, ceil_mode), _out_size(W, kw, sw, pw, dw, ceil_mode)
    floating = a.dtype.is_floating_point
    lowest = float("-inf") if floating else torch.iinfo(a.dtype).min
    xp = _pad_for(x, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, lowest)
    shape = [N, C, oh, ow]
    best = full(shape, lowest, a.dtype, a.device)
    # ATen starts from the first in-bounds element of each window (index only matters if all -inf)
    hs = _positions(oh, -ph, sh, a, 2, shape)
    ws = _positions(ow, -pw, sw, a, 3, shape)
    zero = full(shape, 0, torch.int64, a.device)

    def first_in_bounds(start, d):
        steps = P.floor_divide(P.add(P.neg(start), full(shape, d - 1, torch.int64, a.device)),
                               full(shape, d, torch.int64, a.device))
        return P.where(P.lt(start, zero), P.add(start, P.mul(steps, full(shape, d, torch.int64, a.device))), start)

    w_full = full(shape, W, torch.int64, a.device)
    best_idx = P.add(P.mul(first_in_bounds(hs, dh), w_full), first_in_bounds(ws, dw))
    for i in range(kh):
        for j in range(kw):
            v = _window(xp, oh, ow, sh, sw, i * dh, j * dw)
            take = P.gt(v, best)
            if floating:
                take = P.logical_or(take, P.isnan(v))
            h = P.add(hs, full(shape, i * dh, torch.int64, a.device))
            w = P.add(ws, full(shape, j * dw, torch.int64, a.device))
            best = P.where(take, v, best)
            best_idx = P.where(take, P.add(P.mul(h, w_full), w), best_idx)
    if squeezed:
        return reshape(best, [C, oh, ow]), reshape(best_idx, [C, oh, ow])
    return best, best_idx


@register(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_with_indices_backward(grad, a, kernel_size, stride, padding, dilation, ceil_mode, indices):
    lead = list(a.shape[:-2])
    plane = a.shape[-2] * a.shape[-1]
    acc = opmath(a.dtype)
    g = reshape(convert(grad, acc), lead + [grad.shape[-2] * grad.shape[-1]])
    idx = reshape(indices, lead + [grad.shape[-2] * grad.shape[-1]])
    out = P.scatter_add(full(lead + [plane], 0, acc, a.device), len(lead), idx, g)
    return convert(reshape(out, list(a.shape)), a.dtype)


def _avg_divisor(H, W, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override, dtype, device):
    """The per-output divisor of avg_pool2d, [oh, ow], built from iotas like ATen's loop bounds."""
    if divisor_override:
        return full([oh, ow], divisor_override, dtype, device)

    def extent(o, n, k, s, p):
        start = P.iota(o, start=-p, step=s, dtype=torch.int64, device=device)
        end = P.minimum(P.add(start, full([o], k, torch.int64, device)), full([o], n + p, torch.int64, device))
        if count_include_pad:
            return P.sub(end, start)
        start = P.maximum(start, full([o], 0, torch.int64, device))
        end = P.minimum(end, full([o], n, torch.int64, device))
        return P.sub(end, start)

    eh, ew = extent(oh, H, kh, sh, ph), extent(ow, W, kw, sw, pw)
    size = P.mul(P.broadcast_in_dim(eh, [oh, ow], [0]), P.broadcast_in_dim(ew, [oh, ow], [1]))
    return convert(size, dtype)


def _avg_params(a, kernel_size, stride, padding, ceil_mode):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    H, W = a.shape[-2], a.shape[-1]
    return kh, kw, sh, sw, ph, pw, H, W, _out_size(H, kh, sh, ph, 1, ceil_mode), _out_size(W, kw, sw, pw, 1, ceil_mode)


@register(aten.avg_pool2d.default)
def avg_pool2d(a, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    kh, kw, sh, sw, ph, pw, H, W, oh, ow = _avg_params(a, kernel_size, stride, padding, ceil_mode)
    x, squeezed = _as_4d(a)
    acc = opmath(a.dtype)
    xp = _pad_for(convert(x, acc), oh, ow, kh, kw, sh, sw, ph, pw, 1, 1, 0)
    total = None
    for i in range(kh):
        for j in range(kw):
            v = _window(xp, oh, ow, sh, sw, i, j)
            total = v if total is None else P.add(total, v)
    div = _avg_divisor(H, W, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override, acc, a.device)
    out = convert(P.div(total, broadcast_to(div, total.shape)), a.dtype)
    return reshape(out, list(a.shape[:-2]) + [oh, ow]) if squeezed else out


@register(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(grad, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    kh, kw, sh, sw, ph, pw, H, W, oh, ow = _avg_params(a, kernel_size, stride, padding, ceil_mode)
    lead = list(a.shape[:-2])
    acc = opmath(a.dtype)
    div = _avg_divisor(H, W, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad, divisor_override, acc, a.device)
    g = P.div(convert(grad, acc), broadcast_to(div, grad.shape))
    g = reshape(g, lead + [oh * ow])
    Hp = max(H + 2 * ph, (oh - 1) * sh + kh)
    Wp = max(W + 2 * pw, (ow - 1) * sw + kw)
    out = full(lead + [Hp * Wp], 0, acc, a.device)
    rows = P.broadcast_in_dim(P.iota(oh, start=0, step=sh, dtype=torch.int64, device=a.device), [oh, ow], [0])
    cols = P.broadcast_in_dim(P.iota(ow, start=0, step=sw, dtype=torch.int64, device=a.device), [oh, ow], [1])
    base = P.add(P.mul(rows, full([oh, ow], Wp, torch.int64, a.device)), cols)
    for i in range(kh):
        for j in range(kw):
            idx = P.add(base, full([oh, ow], i * Wp + j, torch.int64, a.device))
            idx = P.broadcast_in_dim(reshape(idx, [oh * ow]), lead + [oh * ow], [len(lead)])
            out = P.scatter_add(out, len(lead), idx, g)
    out = reshape(out, lead + [Hp, Wp])
    nd = len(lead)
    out = P.slice(out, [0] * nd + [ph, pw], lead + [ph + H, pw + W], [1] * (nd + 2))
    return convert(out, a.dtype)


# adaptive average pooling, one spatial dim at a time -------------------------------------------
def _adaptive_windows(n, o, device):
    """start and length of each of the o windows over n, and the widest window K."""
    starts = [(i * n) // o for i in range(o)]
    ends = [-((-(i + 1) * n) // o) for i in range(o)]
    K = max(e - s for s, e in zip(starts, ends)) if o else 0
    io = P.iota(o, start=0, step=1, dtype=torch.int64, device=device)
    start = P.floor_divide(P.mul(io, full([o], n, torch.int64, device)), full([o], o, torch.int64, device))
    end_num = P.add(P.mul(P.add(io, full([o], 1, torch.int64, device)), full([o], n, torch.int64, device)),
                    full([o], o - 1, torch.int64, device))
    end = P.floor_divide(end_num, full([o], o, torch.int64, device))
    k = P.broadcast_in_dim(P.iota(K, start=0, step=1, dtype=torch.int64, device=device), [o, K], [1])
    pos = P.add(P.broadcast_in_dim(start, [o, K], [0]), k)
    valid = P.lt(pos, P.broadcast_in_dim(end, [o, K], [0]))
    pos = P.minimum(pos, full([o, K], n - 1, torch.int64, device))
    count = P.sub(end, start)
    return pos, valid, count, K


def _adaptive_1d(x, dim, o):
    n = x.shape[dim]
    if n % o == 0:  # equal windows: a reshape and a sum
        k = n // o
        shape = list(x.shape[:dim]) + [o, k] + list(x.shape[dim + 1:])
        s = P.sum(reshape(x, shape), [dim + 1])
        return P.div(s, full(s.shape, k, x.dtype, x.device))
    pos, valid, count, K = _adaptive_windows(n, o, x.device)
    g = P.index(x, [None] * dim + [pos])  # x.shape[:dim] + [o, K] + rest
    shape = list(g.shape)
    g = P.where(P.broadcast_in_dim(valid, shape, [dim, dim + 1]), g, full(shape, 0, x.dtype, x.device))
    s = P.sum(g, [dim + 1])
    return P.div(s, P.broadcast_in_dim(convert(count, x.dtype), list(s.shape), [dim]))


def _adaptive_1d_backward(g, dim, n):
    o = g.shape[dim]
    if n % o == 0:
        k = n // o
        g = P.div(g, full(g.shape, k, g.dtype, g.device))
        shape = list(g.shape[:dim]) + [o, k] + list(g.shape[dim + 1:])
        bd = list(range(dim + 1)) + list(range(dim + 2, len(shape)))
        return reshape(P.broadcast_in_dim(g, shape, bd), list(g.shape[:dim]) + [n] + list(g.shape[dim + 1:]))
    pos, valid, count, K = _adaptive_windows(n, o, g.device)
    g = P.div(g, P.broadcast_in_dim(convert(count, g.dtype), list(g.shape), [dim]))
    shape = list(g.shape[:dim]) + [o, K] + list(g.shape[dim + 1:])
    bd = list(range(dim + 1)) + list(range(dim + 2, len(shape)))
    vals = P.broadcast_in_dim(g, shape, bd)
    vals = P.where(P.broadcast_in_dim(valid, shape, [dim, dim + 1]), vals, full(shape, 0, g.dtype, g.device))
    out_shape = list(g.shape[:dim]) + [n] + list(g.shape[dim + 1:])
    return P.index_put(full(out_shape, 0, g.dtype, g.device), [None] * dim + [pos], vals, True)


@register(aten._adaptive_avg_pool2d.default, aten.adaptive_avg_pool2d.default)
def _adaptive_avg_pool2d(a, output_size):
    oh, ow = _pair(output_size)
    acc = opmath(a.dtype)
    x = convert(a, acc)
    x = _adaptive_1d(x, a.dim() - 2, oh)
    x = _adaptive_1d(x, a.dim() - 1, ow)
    return convert(x, a.dtype)


@register(aten._adaptive_avg_pool2d_backward.default)
def _adaptive_avg_pool2d_backward(grad, a):
    acc = opmath(a.dtype)
    g = convert(grad, acc)
    g = _adaptive_1d_backward(g, a.dim() - 1, a.shape[-1])
    g = _adaptive_1d_backward(g, a.dim() - 2, a.shape[-2])
    return convert(g, a.dtype)


# upsampling ----------------------------------------------------------------------------------
def _scale(in_size, out_size, scale, align_corners=False):
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else in_size / out_size


def _nearest_index(n_in, n_out, scale, device):
    io = P.iota(n_out, start=0, step=1, dtype=torch.int64, device=device)
    if same_size(n_in, n_out):  # a shortcut: the general formula gives the same indices
        return io
    s = _scale(n_in, n_out, scale)
    f = P.mul(convert(io, torch.float32), full([n_out], s, torch.float32, device))  # float32, as ATen
    return P.minimum(convert(P.floor(f), torch.int64), full([n_out], n_in - 1, torch.int64, device))


def _nearest_indices(a, output_size, scales):
    """One int64 index tensor per spatial dim, each broadcast to the output's spatial shape."""
    k = len(output_size)
    spatial = list(output_size)
    idx = []
    for i in range(k):
        n_in = a.shape[a.dim() - k + i]
        io = _nearest_index(n_in, spatial[i], scales[i] if scales else None, a.device)
        idx.append(P.broadcast_in_dim(io, spatial, [i]))
    return [None] * (a.dim() - k) + idx


def _upsample_nearest(a, output_size, scales):
    return P.index(a, _nearest_indices(a, list(output_size), scales))


def _upsample_nearest_backward(grad, output_size, input_size, scales):
    acc = opmath(grad.dtype)
    shape_only = _ShapeOnly(input_size, grad.device)
    idx = _nearest_indices(shape_only, list(output_size), scales)
    out = P.index_put(full(input_size, 0, acc, grad.device), idx, convert(grad, acc), True)
    return convert(out, grad.dtype)


class _ShapeOnly:
    # what _nearest_indices reads of its input: shape, dim(), device
    def __init__(self, shape, device):
        self.shape, self.device = list(shape), device

    def dim(self):
        return len(self.shape)


@register(aten.upsample_nearest1d.default)
def upsample_nearest1d(a, output_size, scales=None):
    return _upsample_nearest(a, output_size, [scales])


@register(aten.upsample_nearest2d.default)
def upsample_nearest2d(a, output_size, scales_h=None, scales_w=None):
    return _upsample_nearest(a, output_size, [scales_h, scales_w])


@register(aten.upsample_nearest3d.default)
def upsample_nearest3d(a, output_size, scales_d=None, scales_h=None, scales_w=None):
    return _upsample_nearest(a, output_size, [scales_d, scales_h, scales_w])


@register(aten.upsample_nearest1d_backward.default)
def upsample_nearest1d_backward(grad, output_size, input_size, scales=None):
    return _upsample_nearest_backward(grad, output_size, input_size, [scales])


@register(aten.upsample_nearest2d_backward.default)
def upsample_nearest2d_backward(grad, output_size, input_size, scales_h=None, scales_w=None):
    return _upsample_nearest_backward(grad, output_size, input_size, [scales_h, scales_w])


def _vec_sizes(a, output_size, scale_factors, k=2):
    if output_size is not None:
        return list(output_size), [None] * k
    sizes = [math.floor(a.shape[-k + i] * scale_factors[i]) for i in range(k)]  # SymInt: no int()
    return sizes, list(scale_factors)


@register(aten.upsample_nearest2d.vec)
def upsample_nearest2d_vec(a, output_size, scale_factors):
    sizes, scales = _vec_sizes(a, output_size, scale_factors)
    return _upsample_nearest(a, sizes, scales)


def _linear_weights(n_in, n_out, align_corners, scale, dtype, device):
    s = _scale(n_in, n_out, scale, align_corners)
    io = convert(P.iota(n_out, start=0, step=1, dtype=torch.int64, device=device), dtype)
    if align_corners:
        src = P.mul(io, full([n_out], s, dtype, device))
    else:
        src = P.sub(P.mul(P.add(io, full([n_out], 0.5, dtype, device)), full([n_out], s, dtype, device)),
                    full([n_out], 0.5, dtype, device))
        src = P.maximum(src, full([n_out], 0, dtype, device))
    i0 = P.minimum(convert(src, torch.int64), full([n_out], n_in - 1, torch.int64, device))
    i1 = P.minimum(P.add(i0, full([n_out], 1, torch.int64, device)), full([n_out], n_in - 1, torch.int64, device))
    l1 = P.sub(src, convert(i0, dtype))
    l0 = P.sub(full([n_out], 1, dtype, device), l1)
    return i0, i1, l0, l1


def _bilinear_terms(lead, H, W, oh, ow, align_corners, scales_h, scales_w, acc, device):
    """The four (index, weight) terms of bilinear interpolation, weights broadcast to [oh, ow]."""
    h0, h1, lh0, lh1 = _linear_weights(H, oh, align_corners, scales_h, acc, device)
    w0, w1, lw0, lw1 = _linear_weights(W, ow, align_corners, scales_w, acc, device)
    bh = lambda t: P.broadcast_in_dim(t, [oh, ow], [0])  # noqa: E731
    bw = lambda t: P.broadcast_in_dim(t, [oh, ow], [1])  # noqa: E731
    terms = []
    for hi, lh in ((h0, lh0), (h1, lh1)):
        for wi, lw in ((w0, lw0), (w1, lw1)):
            terms.append(([None] * lead + [bh(hi), bw(wi)], P.mul(bh(lh), bw(lw))))
    return terms


@register(aten.upsample_bilinear2d.default)
def upsample_bilinear2d(a, output_size, align_corners, scales_h=None, scales_w=None):
    oh, ow = output_size
    acc = opmath(a.dtype)
    x = convert(a, acc)
    shape = list(a.shape[:-2]) + [oh, ow]
    out = None
    for idx, w in _bilinear_terms(a.dim() - 2, a.shape[-2], a.shape[-1], oh, ow, align_corners, scales_h,
                                  scales_w, acc, a.device):
        term = P.mul(P.index(x, idx), broadcast_to(w, shape))
        out = term if out is None else P.add(out, term)
    return convert(out, a.dtype)


@register(aten.upsample_bilinear2d_backward.default)
def upsample_bilinear2d_backward(grad, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    oh, ow = output_size
    acc = opmath(grad.dtype)
    g = convert(grad, acc)
    out = full(input_size, 0, acc, grad.device)
    for idx, w in _bilinear_terms(len(input_size) - 2, input_size[-2], input_size[-1], oh, ow, align_corners,
                                  scales_h, scales_w, acc, grad.device):
        out = P.index_put(out, idx, P.mul(g, broadcast_to(w, g.shape)), True)
    return convert(out, grad.dtype)


@register(aten.upsample_bilinear2d.vec)
def upsample_bilinear2d_vec(a, output_size, align_corners, scale_factors):
    sizes, scales = _vec_sizes(a, output_size, scale_factors)
    return upsample_bilinear2d(a, sizes, align_corners, *scales)

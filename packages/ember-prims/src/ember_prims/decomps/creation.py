"""Factory ATen ops (full/zeros/ones/empty/arange/scalar_tensor and the *_like/new_* forms) and the
random ones (rand/randn/bernoulli/dropout), which draw a fresh seed with `random_seed` and use the
counter-based `uniform`/`normal` prims from offset 0.
"""
from __future__ import annotations

import math

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import P, aten, broadcast_to, convert, full, scalar_dtype


def _device(device, like=None):
    if device is not None:
        return torch.device(device)
    return like.device if like is not None else torch.device("cpu")


def _fill_dtype(value, dtype):
    if dtype is not None:
        return dtype
    return scalar_dtype(value) if not isinstance(value, torch.Tensor) else value.dtype


@register(aten.full.default)
def full_(size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full(size, fill_value, _fill_dtype(fill_value, dtype), _device(device))


@register(aten.zeros.default)
def zeros(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full(size, 0, dtype or torch.get_default_dtype(), _device(device))


@register(aten.ones.default)
def ones(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full(size, 1, dtype or torch.get_default_dtype(), _device(device))


@register(aten.empty.memory_format)
def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full(size, 0, dtype or torch.get_default_dtype(), _device(device))  # zeros: deterministic


@register(aten.empty_strided.default)
def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return P.empty_strided(list(size), list(stride), dtype=dtype or torch.get_default_dtype(),
                           device=_device(device))


@register(aten.scalar_tensor.default)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full([], s, dtype or torch.get_default_dtype(), _device(device))


@register(aten.full_like.default)
def full_like(a, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full(a.shape, fill_value, dtype or a.dtype, _device(device, a))


@register(aten.zeros_like.default, aten.empty_like.default)
def zeros_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full(a.shape, 0, dtype or a.dtype, _device(device, a))


@register(aten.ones_like.default)
def ones_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return full(a.shape, 1, dtype or a.dtype, _device(device, a))


@register(aten.new_full.default)
def new_full(a, size, fill_value, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full(size, fill_value, dtype or a.dtype, _device(device, a))


@register(aten.new_zeros.default, aten.new_empty.default)
def new_zeros(a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full(size, 0, dtype or a.dtype, _device(device, a))


@register(aten.new_ones.default)
def new_ones(a, size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return full(size, 1, dtype or a.dtype, _device(device, a))


@register(aten.new_empty_strided.default)
def new_empty_strided(a, size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return P.empty_strided(list(size), list(stride), dtype=dtype or a.dtype, device=_device(device, a))


@register(aten.zero.default)
def zero(a):
    return full(a.shape, 0, a.dtype, a.device)


@register(aten.fill.Scalar, aten.fill.Tensor)
def fill(a, value):
    if isinstance(value, torch.Tensor):
        return broadcast_to(convert(value, a.dtype), a.shape) if a.dim() else P.clone(convert(value, a.dtype))
    return full(a.shape, value, a.dtype, a.device)


@register(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    if end is None:
        start, end = 0, start
    is_float = any(isinstance(v, (float, torch.SymFloat)) for v in (start, end, step))
    dtype = dtype or (torch.get_default_dtype() if is_float else torch.int64)
    device = _device(device)
    n = max(math.ceil((end - start) / step), 0)
    if not is_float and all(isinstance(v, (int, torch.SymInt)) for v in (start, step)) and not dtype.is_floating_point:
        return P.iota(n, start=start, step=step, dtype=dtype, device=device)
    # ATen computes start + i * step in double, then casts.
    i = P.iota(n, start=0, step=1, dtype=torch.float64, device=device)
    v = P.add(P.mul(i, full([n], step, torch.float64, device)), full([n], start, torch.float64, device))
    return convert(v, dtype)


# random ---------------------------------------------------------------------------------------
# The ATen ops whose decompositions draw from ember's counter-based Philox instead of torch's
# generator: a consumer that wants eager's random numbers (torch.compile's `fallback_random`)
# leaves these out of the table, so they stay ATen ops and run eagerly, in program order.
RANDOM_OPS: frozenset = frozenset({
    aten.rand.default, aten.randn.default, aten.rand_like.default, aten.randn_like.default,
    aten.bernoulli.p, aten.bernoulli.default, aten.native_dropout.default,
})


def _uniform(shape, dtype, device):
    seed = P.random_seed(device)
    return P.uniform(list(shape), seed, 0, dtype=dtype, device=device)


@register(aten.rand.default)
def rand(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _uniform(size, dtype or torch.get_default_dtype(), _device(device))


@register(aten.randn.default)
def randn(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    device = _device(device)
    return P.normal(list(size), P.random_seed(device), 0, dtype=dtype or torch.get_default_dtype(),
                    device=device)


@register(aten.rand_like.default)
def rand_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    return _uniform(a.shape, dtype or a.dtype, _device(device, a))


@register(aten.randn_like.default)
def randn_like(a, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    device = _device(device, a)
    return P.normal(list(a.shape), P.random_seed(device), 0, dtype=dtype or a.dtype, device=device)


@register(aten.bernoulli.p)
def bernoulli_p(a, p=0.5, *, generator=None):
    u = _uniform(a.shape, torch.float32, a.device)
    return convert(P.lt(u, full(a.shape, p, torch.float32, a.device)), a.dtype)


@register(aten.bernoulli.default)
def bernoulli(a, *, generator=None):
    u = _uniform(a.shape, torch.float32, a.device)
    return convert(P.lt(u, convert(a, torch.float32)), a.dtype)


@register(aten.native_dropout.default)
def native_dropout(a, p, train):
    if not train or p == 0:
        return P.clone(a), full(a.shape, True, torch.bool, a.device)
    if p >= 1:
        return full(a.shape, 0, a.dtype, a.device), full(a.shape, False, torch.bool, a.device)
    keep = P.lt(_uniform(a.shape, torch.float32, a.device), full(a.shape, 1 - p, torch.float32, a.device))
    return native_dropout_backward(a, keep, 1 / (1 - p)), keep


@register(aten.native_dropout_backward.default)
def native_dropout_backward(grad, mask, scale):
    dtype = grad.dtype
    acc = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    g = convert(grad, acc)
    out = P.mul(P.mul(g, convert(mask, acc)), full(g.shape, scale, acc, g.device))
    return convert(out, dtype)

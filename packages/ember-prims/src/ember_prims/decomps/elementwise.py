"""Elementwise ATen ops: math, comparisons, logical and bitwise ops, where, clamp, casts.

Every op goes through `elementwise()`: ATen type promotion (tensors over 0-d tensors over Python
scalars), explicit broadcasting, and float32 "opmath" for float16/bfloat16.
"""
from __future__ import annotations

import math
import struct

import torch

from ember_prims.decomps._registry import register
from ember_prims.decomps._util import (
    Kind, P, aten, broadcast_shapes, broadcast_to, convert, elementwise, first_device, full,
    result_type,
)

# unary ----------------------------------------------------------------------------------------
_INT_TO_FLOAT_UNARY = [
    "exp", "exp2", "expm1", "log", "log1p", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
    "lgamma", "reciprocal",
]
_DEFAULT_UNARY = ["neg", "sign", "bitwise_not"]
_ROUNDING = ["floor", "ceil", "round", "trunc"]  # the identity on integers


def _unary(aten_name, prim, kind):
    @register(getattr(aten, aten_name).default)
    def decomp(a):
        return elementwise(prim, a, kind=kind)

    decomp.__name__ = aten_name
    return decomp


for _n in _INT_TO_FLOAT_UNARY:
    _unary(_n, getattr(P, _n), Kind.INT_TO_FLOAT)
for _n in _DEFAULT_UNARY:
    _unary(_n, getattr(P, _n), Kind.DEFAULT)
_unary("abs", P.abs, Kind.COMPLEX_TO_FLOAT)  # |a + bi| is real


def _rounding(name):
    prim = getattr(P, name)

    @register(getattr(aten, name).default)
    def decomp(a):
        if not a.dtype.is_floating_point:
            return P.clone(a)
        return elementwise(prim, a)

    return decomp


for _n in _ROUNDING:
    _rounding(_n)


@register(aten.log10.default)
def log10(a):
    return elementwise(lambda x: P.mul(P.log(x), full(x.shape, 1 / math.log(10), x.dtype, x.device)), a,
                       kind=Kind.INT_TO_FLOAT)


@register(aten.sigmoid.default)
def sigmoid(a):
    def f(x):
        one = full(x.shape, 1, x.dtype, x.device)
        return P.div(one, P.add(one, P.exp(P.neg(x))))
    return elementwise(f, a, kind=Kind.INT_TO_FLOAT)


@register(aten.relu.default)
def relu(a):
    if a.dtype == torch.bool:
        return P.clone(a)
    return P.maximum(a, full(a.shape, 0, a.dtype, a.device))  # maximum propagates NaN, as relu does


def _predicate(name, float_only_value):
    prim = getattr(P, name)

    @register(getattr(aten, name).default)
    def decomp(a):
        if not (a.dtype.is_floating_point or a.dtype.is_complex):
            return full(a.shape, float_only_value, torch.bool, a.device)
        return prim(a)

    return decomp


_predicate("isnan", False)
_predicate("isinf", False)
_predicate("isfinite", True)


@register(aten.signbit.default)
def signbit(a):
    if a.dtype == torch.bool:
        return full(a.shape, False, torch.bool, a.device)
    return P.signbit(a)


@register(aten.logical_not.default)
def logical_not(a):
    return P.logical_not(convert(a, torch.bool))


@register(aten.square.default)
def square(a):
    return pow_tensor_scalar(a, 2)


# binary ---------------------------------------------------------------------------------------
def _with_alpha(prim, alpha):
    """`prim(x, alpha * y)` on operands already promoted: ATen
    converts alpha to the computation's dtype and scales there, so `b * alpha` as an op of its
    own would promote b with alpha (a bool or int32 b times 2 is int64: torch.add(int32, bool,
    alpha=2) was int64, fuzz seed 50473 with --train) and round a half b * alpha to half first."""
    if alpha is None or (not isinstance(alpha, torch.Tensor) and alpha == 1):
        return prim

    def scaled(x, y):
        if y.dtype == torch.bool:  # alpha converted to bool: alpha and y
            y = y if alpha else full(y.shape, False, torch.bool, y.device)
        else:
            y = P.mul(y, full(y.shape, alpha, y.dtype, y.device))
        return prim(x, y)
    return scaled


@register(aten.add.Tensor, aten.add.Scalar)
def add(a, b, alpha=1):
    # ATen computes a + alpha * b in the result dtype, alpha converted to it: for bools that is
    # a or (alpha and b)
    return elementwise(_with_alpha(P.add, alpha), a, b)


@register(aten.sub.Tensor, aten.sub.Scalar)
def sub(a, b, alpha=1):
    return elementwise(_with_alpha(P.sub, alpha), a, b)


@register(aten.rsub.Tensor, aten.rsub.Scalar)
def rsub(a, b, alpha=1):
    # b - alpha * a
    sub_scaled = _with_alpha(P.sub, alpha)
    return elementwise(lambda x, y: sub_scaled(y, x), a, b)


@register(aten.mul.Tensor, aten.mul.Scalar)
def mul(a, b):
    if result_type(a, b) == torch.bool:
        return elementwise(P.logical_and, a, b)
    return elementwise(P.mul, a, b, exact=(1,))


@register(aten.div.Tensor, aten.div.Scalar)
def div(a, b):
    return elementwise(P.div, a, b, kind=Kind.INT_TO_FLOAT, exact=(1,))


@register(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a, b, *, rounding_mode=None):
    if rounding_mode is None:
        return div(a, b)
    dtype = result_type(a, b)
    if rounding_mode == "floor":
        return elementwise(P.floor_divide, a, b, exact=(1,))
    if dtype.is_floating_point:
        # ATen rounds the quotient to the result dtype before truncating (it matters for bfloat16)
        return P.trunc(elementwise(P.div, a, b))
    return elementwise(P.div, a, b)


@register(aten.floor_divide.default, aten.floor_divide.Scalar)
def floor_divide(a, b):
    return elementwise(P.floor_divide, a, b, exact=(1,))


def _binary(aten_ops, prim, kind=Kind.DEFAULT):
    @register(*aten_ops)
    def decomp(a, b):
        return elementwise(prim, a, b, kind=kind)
    return decomp


_binary([aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor], P.remainder)
_binary([aten.fmod.Tensor, aten.fmod.Scalar], P.fmod)
_binary([aten.maximum.default], P.maximum)
_binary([aten.minimum.default], P.minimum)
_binary([aten.atan2.default], P.atan2, Kind.INT_TO_FLOAT)
_binary([aten.hypot.default], P.hypot)
_binary([aten.copysign.Tensor, aten.copysign.Scalar], P.copysign, Kind.INT_TO_FLOAT)
_binary([aten.bitwise_and.Tensor, aten.bitwise_and.Scalar], P.bitwise_and)
_binary([aten.bitwise_or.Tensor, aten.bitwise_or.Scalar], P.bitwise_or)
_binary([aten.bitwise_xor.Tensor, aten.bitwise_xor.Scalar], P.bitwise_xor)
_binary([aten.bitwise_left_shift.Tensor, aten.bitwise_left_shift.Tensor_Scalar], P.shift_left)
_binary([aten.bitwise_right_shift.Tensor, aten.bitwise_right_shift.Tensor_Scalar], P.shift_right)
for _n in ["eq", "ne", "lt", "le", "gt", "ge"]:
    _binary([getattr(aten, _n).Tensor, getattr(aten, _n).Scalar], getattr(P, _n), Kind.ALWAYS_BOOL)


def _logical(name):
    prim = getattr(P, name)

    @register(getattr(aten, name).default)
    def decomp(a, b):
        shape = broadcast_shapes(a.shape, b.shape)
        return prim(broadcast_to(convert(a, torch.bool), shape), broadcast_to(convert(b, torch.bool), shape))
    return decomp


for _n in ["logical_and", "logical_or", "logical_xor"]:
    _logical(_n)


def _pow_special(x, e):
    # ATen's pow_tensor_scalar fast paths, which the inductor also wants as plain arithmetic.
    one = lambda: full(x.shape, 1, x.dtype, x.device)  # noqa: E731
    return {
        1: lambda: P.clone(x),
        2: lambda: P.mul(x, x),
        3: lambda: P.mul(P.mul(x, x), x),
        0.5: lambda: P.sqrt(x),
        -0.5: lambda: P.rsqrt(x),
        -1: lambda: P.div(one(), x),
        -2: lambda: P.div(one(), P.mul(x, x)),
    }.get(e)


@register(aten.pow.Tensor_Scalar)
def pow_tensor_scalar(a, e):
    dtype = result_type(a, e)
    if isinstance(e, (int, float)) and not isinstance(e, bool):
        if e == 0:
            return full(a.shape, 1, dtype, a.device)
        if dtype.is_floating_point and e in (1, 2, 3, 0.5, -0.5, -1, -2):
            # an integer tensor to a float power: the result's float dtype, converted before
            # the fast path (sqrt of an int32 computed in int32 was NaN cast to int, fuzz seed 3500)
            return elementwise(lambda x: _pow_special(x, e)(), convert(a, dtype), result_dtype=dtype)
    return elementwise(P.pow, a, e)


@register(aten.pow.Tensor_Tensor, aten.pow.Scalar)
def pow_(a, b):
    return elementwise(P.pow, a, b)


# where, clamp, masked_fill, lerp, addcmul ------------------------------------------------------
@register(aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther, aten.where.Scalar)
def where(cond, a, b):
    dtype = result_type(a, b)
    tensors = [t for t in (cond, a, b) if isinstance(t, torch.Tensor)]
    shape = broadcast_shapes(*(t.shape for t in tensors))
    device = first_device(*tensors)

    def op(x):
        if isinstance(x, torch.Tensor):
            return broadcast_to(convert(x, dtype), shape)
        return full(shape, x, dtype, device)

    return P.where(broadcast_to(convert(cond, torch.bool), shape), op(a), op(b))


def _clamp_one(x, bound, prim):
    if bound is None:
        return x
    return elementwise(prim, x, bound)


@register(aten.clamp.default, aten.clamp.Tensor)
def clamp(a, min=None, max=None):
    # minimum(maximum(a, min), max): NaN propagates, and max wins when min > max, as in ATen.
    dtype = result_type(*(v for v in (a, min, max) if v is not None))
    out = convert(a, dtype)
    out = _clamp_one(out, min, P.maximum)
    out = _clamp_one(out, max, P.minimum)
    return convert(out, dtype)


@register(aten.clamp_min.default, aten.clamp_min.Tensor)
def clamp_min(a, min):
    return elementwise(P.maximum, a, min)


@register(aten.clamp_max.default, aten.clamp_max.Tensor)
def clamp_max(a, max):
    return elementwise(P.minimum, a, max)


@register(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(a, mask, value):
    shape = broadcast_shapes(a.shape, mask.shape)
    v = convert(value, a.dtype) if isinstance(value, torch.Tensor) else value
    v = broadcast_to(v, shape) if isinstance(v, torch.Tensor) else full(shape, v, a.dtype, a.device)
    return P.where(broadcast_to(mask, shape), v, broadcast_to(a, shape))


@register(aten.lerp.Scalar, aten.lerp.Tensor)
def lerp(a, b, w):
    # ATen: w < 0.5 ? a + w * (b - a) : b - (b - a) * (1 - w)
    def f(x, y, wt):
        d = P.sub(y, x)
        half = full(x.shape, 0.5, x.dtype, x.device)
        one = full(x.shape, 1, x.dtype, x.device)
        return P.where(P.lt(P.abs(wt), half), P.add(x, P.mul(wt, d)), P.sub(y, P.mul(d, P.sub(one, wt))))
    dtype = result_type(a, b)
    return elementwise(f, a, b, w if isinstance(w, torch.Tensor) else float(w), result_dtype=dtype, exact=(2,))


@register(aten.addcmul.default)
def addcmul(a, t1, t2, *, value=1):
    return elementwise(lambda x, y, z: P.add(x, P.mul(P.mul(y, z), full(x.shape, value, x.dtype, x.device))),
                       a, t1, t2)


@register(aten.addcdiv.default)
def addcdiv(a, t1, t2, *, value=1):
    return elementwise(lambda x, y, z: P.add(x, P.mul(P.div(y, z), full(x.shape, value, x.dtype, x.device))),
                       a, t1, t2)


@register(aten.nan_to_num.default)
def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    if not a.dtype.is_floating_point:
        return P.clone(a)
    info = torch.finfo(a.dtype)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = P.where(P.isnan(a), full(a.shape, nan, a.dtype, a.device), a)
    pos = P.logical_and(P.isinf(a), P.logical_not(P.signbit(a)))
    neg = P.logical_and(P.isinf(a), P.signbit(a))
    out = P.where(pos, full(a.shape, posinf, a.dtype, a.device), out)
    return P.where(neg, full(a.shape, neginf, a.dtype, a.device), out)


# casts and copies -----------------------------------------------------------------------------
@register(aten._to_copy.default)
def _to_copy(a, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    out = convert(a, dtype) if dtype is not None else a
    if device is not None and torch.device(device) != a.device:
        return P.device_put(out, torch.device(device))
    return P.clone(out) if out is a else out


@register(aten.clone.default, aten.lift_fresh_copy.default)
def clone(a, *, memory_format=None):
    return P.clone(a)


@register(aten.copy.default)
def copy(a, src, non_blocking=False):
    out = broadcast_to(convert(src, a.dtype), a.shape)
    return P.clone(out) if out is src else out


@register(aten.alias.default, aten.detach.default, aten.lift_fresh.default)
def alias(a):
    return a



# more math -----------------------------------------------------------------------------------------
@register(aten.sgn.default)
def sgn(a):
    if a.dtype.is_complex:
        raise NotImplementedError("sgn of a complex tensor")
    return elementwise(P.sign, a) if a.dtype != torch.bool else P.clone(a)


@register(aten.deg2rad.default)
def deg2rad(a):
    return elementwise(lambda x: P.mul(x, full(x.shape, math.pi / 180, x.dtype, x.device)), a, kind=Kind.INT_TO_FLOAT)


@register(aten.rad2deg.default)
def rad2deg(a):
    return elementwise(lambda x: P.mul(x, full(x.shape, 180 / math.pi, x.dtype, x.device)), a, kind=Kind.INT_TO_FLOAT)


def _round_to(v: float, dtype: torch.dtype) -> float:
    """The Python float `v` rounded to nearest-even in `dtype` (no tensor: this runs while tracing)."""
    if dtype == torch.float16:
        return struct.unpack("e", struct.pack("e", v))[0]
    if dtype not in (torch.float32, torch.bfloat16):
        return v
    v = struct.unpack("f", struct.pack("f", v))[0]
    if dtype == torch.bfloat16:
        bits = struct.unpack("I", struct.pack("f", v))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        v = struct.unpack("f", struct.pack("I", bits))[0]
    return v


@register(aten.logit.default)
def logit(a, eps=None):
    if eps is not None:
        # ATen clamps to lo = eps and hi = 1 - lo computed in the input's dtype: in bfloat16
        # 1 - 1e-3 is 1.0, so logit(1.0, eps=1e-3) is inf there, not log(999)
        dtype = a.dtype if a.dtype.is_floating_point else torch.get_default_dtype()
        lo_v = _round_to(eps, dtype)
        hi_v = _round_to(1 - lo_v, dtype)

    def f(x):
        if eps is not None:
            lo, hi = full(x.shape, lo_v, x.dtype, x.device), full(x.shape, hi_v, x.dtype, x.device)
            x = P.minimum(P.maximum(x, lo), hi)
        return P.log(P.div(x, P.sub(full(x.shape, 1, x.dtype, x.device), x)))
    return elementwise(f, a, kind=Kind.INT_TO_FLOAT)


@register(aten.xlogy.Tensor, aten.xlogy.Scalar_Other, aten.xlogy.Scalar_Self)
def xlogy(a, b):
    # NaN in b wins; else 0 where a == 0; else a * log(b)
    def f(x, y):
        zero = full(x.shape, 0, x.dtype, x.device)
        out = P.where(P.eq(x, zero), zero, P.mul(x, P.log(y)))
        return P.where(P.isnan(y), y, out)
    return elementwise(f, a, b, kind=Kind.INT_TO_FLOAT, exact=(0, 1))


def _fmaxmin(prim):
    def f(x, y):  # the non-NaN operand wins
        return P.where(P.isnan(x), y, P.where(P.isnan(y), x, prim(x, y)))
    return f


@register(aten.fmax.default)
def fmax(a, b):
    return elementwise(_fmaxmin(P.maximum) if result_type(a, b).is_floating_point else P.maximum, a, b)


@register(aten.fmin.default)
def fmin(a, b):
    return elementwise(_fmaxmin(P.minimum) if result_type(a, b).is_floating_point else P.minimum, a, b)


@register(aten.logaddexp.default)
def logaddexp(a, b):
    def f(x, y):
        m = P.maximum(x, y)
        m = P.where(P.isinf(m), P.where(P.isnan(m), m, x), m)  # both -inf: result -inf, no NaN
        d = P.neg(P.abs(P.sub(x, y)))
        d = P.where(P.isnan(d), full(d.shape, float("-inf"), d.dtype, d.device), d)
        out = P.add(m, P.log1p(P.exp(d)))
        return P.where(P.logical_or(P.isnan(x), P.isnan(y)), P.add(x, y), out)
    return elementwise(f, a, b, kind=Kind.INT_TO_FLOAT)

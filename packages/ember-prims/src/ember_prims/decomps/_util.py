"""Helpers shared by the decomposition families: type promotion, broadcasting, constants, dims.

Everything here works on real and fake tensors alike (see the decomposition contract in
`_registry`): it reads only shapes, dtypes and devices.

Note [symbolic sizes in decompositions]: a size may be a SymInt (ember_symbolic; Note [symbolic
decomposition] in decompose.py). Decompositions compute with sizes as numbers (`a.shape[0] * 2`
stays an expression) and never call `int()` on one. A comparison used in an `if` (`n == 1`) is a
decision: the SymInt answers it from its hint and records a guard, unless every value of the
symbols gives the same answer (sizes are >= 2), in which case it records nothing. `size_min` and
`size_max` clamp without a guard where the answer is known for every value, and treat ATen's
"to the end" sentinels (INT64_MAX) as larger than any size.
"""
from __future__ import annotations

import enum
import math
import struct
from typing import Sequence

import torch

from ember_prims._library import known_le, same_shape, same_size, size_le  # noqa: F401

P = torch.ops.ember_prims
aten = torch.ops.aten
Number = (bool, int, float, complex, torch.SymInt, torch.SymFloat, torch.SymBool)


# dims ---------------------------------------------------------------------------------------
def canon_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"dim {dim} out of range for a {ndim}-d tensor")
    return dim % n


def canon_dims(dims, ndim: int) -> list[int]:
    if dims is None:
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    if ndim == 0:
        return []
    return sorted({canon_dim(d, ndim) for d in dims})


def reduction_dims(dims, ndim: int) -> list[int]:
    """ATen convention: None or [] means every dim."""
    if dims is None or (not isinstance(dims, int) and len(dims) == 0):
        return list(range(ndim))
    return canon_dims(dims, ndim)


# sizes (Note [symbolic sizes in decompositions]) --------------------------------------------
def size_min(a, b):
    """min(a, b) for sizes: no guard when the answer holds for every value of the symbols."""
    return a if size_le(a, b, ties=False) else b


def size_max(a, b):
    """max(a, b) for sizes, as `size_min`."""
    return b if size_le(a, b, ties=False) else a


# type promotion -----------------------------------------------------------------------------
class Kind(enum.Enum):
    DEFAULT = "default"  # result is the promoted dtype
    INT_TO_FLOAT = "int_to_float"  # bool/int promote to the default float dtype
    ALWAYS_BOOL = "always_bool"  # compute in the promoted dtype, return bool
    NO_OPMATH = "no_opmath"  # do not upcast float16/bfloat16 for the computation
    COMPLEX_TO_FLOAT = "complex_to_float"  # as DEFAULT, but a complex result is real (abs)


def _is_float(dt):
    return dt is not None and dt.is_floating_point


def _is_complex(dt):
    return dt is not None and dt.is_complex


_SIGNED = [torch.int8, torch.int16, torch.int32, torch.int64]
_FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def promote_types(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """torch.promote_types in plain Python: under a dispatch mode the torch function is an op."""
    if a == b:
        return a
    if a.is_complex or b.is_complex:
        bits = max(_complex_bits(a), _complex_bits(b))
        return torch.complex128 if bits > 32 else torch.complex64
    if a.is_floating_point and b.is_floating_point:
        if {a, b} == {torch.float16, torch.bfloat16}:
            return torch.float32
        return max(a, b, key=lambda d: (d.itemsize, _FLOATS.index(d) if d in _FLOATS else 0))
    if a.is_floating_point or b.is_floating_point:
        return a if a.is_floating_point else b
    if a == torch.bool or b == torch.bool:
        return b if a == torch.bool else a
    if torch.uint8 in (a, b):
        other = b if a == torch.uint8 else a
        return torch.int16 if other == torch.int8 else other
    if a in _SIGNED and b in _SIGNED:
        return max(a, b, key=_SIGNED.index)
    return max(a, b, key=lambda d: d.itemsize)


def _complex_bits(d):
    if d.is_complex:
        return 64 if d == torch.complex128 else 32
    return 64 if d == torch.float64 else 32


def _promote(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return promote_types(a, b)


def _combine(higher, lower):
    # ATen's combine_categories: a lower-priority group only raises the *category*.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if _is_complex(higher):
        return higher
    if _is_complex(lower):
        if _is_float(higher):
            return {torch.float64: torch.complex128}.get(higher, torch.complex64)
        return lower
    if _is_float(higher):
        return higher
    if higher == torch.bool or _is_float(lower):
        return _promote(higher, lower)
    return higher


def scalar_dtype(x) -> torch.dtype:
    if isinstance(x, (bool, torch.SymBool)):
        return torch.bool
    if isinstance(x, (int, torch.SymInt)):
        return torch.int64
    if isinstance(x, (float, torch.SymFloat)):
        return torch.get_default_dtype()
    if isinstance(x, complex):
        return torch.complex128 if torch.get_default_dtype() == torch.float64 else torch.complex64
    raise TypeError(f"not a scalar: {x!r}")


def result_type(*args) -> torch.dtype:
    """torch.result_type for any mix of tensors and Python scalars (dim > zero-dim > scalar)."""
    dim_r = zero_r = wrapped_r = None
    for a in args:
        if isinstance(a, torch.Tensor):
            if a.dim() == 0:
                zero_r = _promote(zero_r, a.dtype)
            else:
                dim_r = _promote(dim_r, a.dtype)
        elif isinstance(a, Number):
            wrapped_r = _promote(wrapped_r, scalar_dtype(a))
        elif a is not None:
            raise TypeError(f"result_type: unexpected {type(a).__name__}")
    return _combine(dim_r, _combine(zero_r, wrapped_r))


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype ATen computes in: float32 for float16/bfloat16 (and their complex cousin)."""
    return {torch.float16: torch.float32, torch.bfloat16: torch.float32,
            torch.complex32: torch.complex64}.get(dtype, dtype)


def is_low_precision(dtype):
    return dtype in (torch.float16, torch.bfloat16)


# shapes and constants -----------------------------------------------------------------------
def broadcast_shapes(*shapes) -> list[int]:
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if same_size(out[j], n):  # equal sizes broadcast alike, 1 or not: no decision
                continue
            if out[j] == 1:
                out[j] = n
            elif n != 1 and n != out[j]:
                raise RuntimeError(f"shapes {[tuple(x) for x in shapes]} do not broadcast")
    return out


def broadcast_to(t: torch.Tensor, shape) -> torch.Tensor:
    shape = list(shape)
    if same_shape(t.shape, shape):
        return t
    return P.broadcast_in_dim(t, shape, list(range(len(shape) - t.dim(), len(shape))))


def convert(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t if t.dtype == dtype else P.convert_element_type(t, dtype)


def full(shape, value, dtype, device) -> torch.Tensor:
    return P.full(list(shape), value, dtype=dtype, device=device)


def scalar_like(value, t: torch.Tensor, dtype=None) -> torch.Tensor:
    """A tensor of t's shape filled with value (a Python number or a 0-d tensor)."""
    dtype = dtype or t.dtype
    if isinstance(value, torch.Tensor):
        return broadcast_to(to_device(convert(value, dtype), t.device), t.shape)
    return full(t.shape, value, dtype, t.device)


def to_device(t: torch.Tensor, device) -> torch.Tensor:
    """`t` on `device`: a 0-d CPU operand next to tensors of another device is moved there
    (Note [0-d CPU operands] in prims/elementwise.py)."""
    if t.device == device:
        return t
    if t.dim() != 0 or t.device.type != "cpu":
        raise NotImplementedError(f"an operand on {t.device} with tensors on {device}")
    return P.device_put(t, device)


def first_device(*args):
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    for t in tensors:  # a 0-d CPU tensor may meet CUDA tensors, as in ATen
        if t.dim() > 0 or t.device.type != "cpu":
            return t.device
    return tensors[0].device


def operand(x, dtype, shape, device, common=None) -> torch.Tensor:
    """`x` as a `dtype` tensor of `shape`; `common`, given: the promoted dtype that `x` is
    rounded to first (Note [operands rounded to the common dtype])."""
    if isinstance(x, torch.Tensor):
        if common is not None and common != dtype and x.dtype != common:
            x = convert(x, common)
        return broadcast_to(to_device(convert(x, dtype), device), shape)
    if common is not None and common != dtype and is_low_precision(common) and isinstance(x, (int, float)):
        x = round_to_low_precision(float(x), common)
    return full(shape, x, dtype, device)


def round_to_low_precision(value: float, dtype: torch.dtype) -> float:
    """`value` rounded to float16 or bfloat16 (nearest, ties to even), in plain Python (under a
    dispatch mode a torch conversion would be an op)."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        if dtype == torch.float16:
            return struct.unpack("<e", struct.pack("<e", value))[0]
        bits = struct.unpack("<I", struct.pack("<f", value))[0]  # via float32, as c10::BFloat16(float)
    except OverflowError:
        return math.copysign(math.inf, value)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000) & 0xFFFFFFFF
    return struct.unpack("<f", struct.pack("<I", bits))[0]


# Note [operands rounded to the common dtype]: ATen's TensorIterator converts every operand to
# the promoted dtype before the kernel computes in opmath (float32 for float16/bfloat16): in
# `bf16_tensor % torch.tensor(5.0745)` (result bfloat16: a zero-dim operand does not promote a
# dimensioned one) the modulus is 5.0625, and a value 5.0625 gives 0 where 5.0745 gives 5.0625.
# Converting each operand straight to float32 skipped that rounding (fuzz seed 9016). The
# exceptions are eager's own: its CPU mul, div and floor_divide kernels read a scalar second
# operand (a Python number or a zero-dim tensor) at its original precision, as lerp does its
# scalar weight, so `elementwise(..., exact=(k,))` leaves a scalar at position k unrounded.
def elementwise(prim, *args, kind: Kind = Kind.DEFAULT, result_dtype=None, exact: tuple[int, ...] = ()):
    """Promote, broadcast and convert `args` (tensors and Python scalars), then apply `prim`.

    Low-precision floats are computed in float32 and rounded once at the end, as ATen does;
    operands are rounded to the promoted dtype first (Note [operands rounded to the common dtype]).
    """
    dtype = result_type(*args)
    if kind is Kind.INT_TO_FLOAT and not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    compute = dtype if kind in (Kind.NO_OPMATH, Kind.ALWAYS_BOOL) else opmath(dtype)
    shape = broadcast_shapes(*(a.shape for a in args if isinstance(a, torch.Tensor)))
    device = first_device(*args)

    def common(k, a):
        scalar = isinstance(a, Number) or a.dim() == 0
        return None if k in exact and scalar else dtype
    out = prim(*(operand(a, compute, shape, device, common(k, a)) for k, a in enumerate(args)))
    if kind is Kind.ALWAYS_BOOL:
        return out
    if kind is Kind.COMPLEX_TO_FLOAT and dtype.is_complex:
        dtype = dtype.to_real()
    return convert(out, result_dtype or dtype)


# layout helpers -----------------------------------------------------------------------------
def reshape(t: torch.Tensor, shape) -> torch.Tensor:
    shape = list(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape[shape.index(-1)] = t.numel() // known if known else 0
    return t if same_shape(t.shape, shape) else P.reshape(t, shape)


def unsqueeze_dims(t: torch.Tensor, dims: Sequence[int]) -> torch.Tensor:
    """Insert size-1 dims at the given positions of the result (keepdim after a reduction)."""
    shape = list(t.shape)
    for d in sorted(dims):
        shape.insert(d, 1)
    return reshape(t, shape)


def permute(t: torch.Tensor, dims) -> torch.Tensor:
    dims = [canon_dim(d, t.dim()) for d in dims]
    return t if dims == list(range(t.dim())) else P.permute(t, dims)


def slice_dim(t: torch.Tensor, dim: int, start: int, stop: int, step: int = 1) -> torch.Tensor:
    starts, limits, steps = [0] * t.dim(), list(t.shape), [1] * t.dim()
    starts[dim], limits[dim], steps[dim] = start, size_max(stop, start), step
    if same_shape(starts, [0] * t.dim()) and same_shape(limits, t.shape) and same_shape(steps, [1] * t.dim()):
        return t
    return P.slice(t, starts, limits, steps)


def sum_dims(t: torch.Tensor, dims, keepdim=False, dtype=None) -> torch.Tensor:
    """Sum over dims in the accumulation dtype ATen uses, then convert to `dtype` (or t's)."""
    dims = canon_dims(dims, t.dim())
    out_dtype = dtype or (torch.int64 if not (t.dtype.is_floating_point or t.dtype.is_complex) else t.dtype)
    acc = opmath(out_dtype)
    out = P.sum(convert(t, acc), dims)
    out = convert(out, out_dtype)
    return unsqueeze_dims(out, dims) if keepdim else out


def numel_of(shape, dims) -> int:
    return math.prod(shape[d] for d in dims)


def group_mean(x: torch.Tensor, dims) -> torch.Tensor:
    """The mean of `x` over `dims` (kept), exact where a group holds one value repeated.

    Note [exact mean of a constant group]: sum / n rounds (three float32 -7.7 sum to a value
    whose third is not -7.7), so x - mean is not 0 and a normalization scales that residue by
    rsqrt(eps) (layer norm of a constant row: 1.5e-4 where eager gives 0, fuzz seed 6909).
    ATen's Welford moments give the exact value there and a variance of 0. Shifting by the
    group's first element K, mean = K + sum(x - K) / n, has x - K == 0 for such a group; the
    shift lies within the data, so other groups lose nothing. Infinities and NaN still give NaN
    as ATen's do."""
    dims = canon_dims(dims, x.dim())
    n = numel_of(x.shape, dims)
    if not all(x.shape[d] > 0 for d in dims):
        total = sum_dims(x, dims, True)
        return P.div(total, full(total.shape, n, x.dtype, x.device))
    k = x
    for d in dims:
        k = slice_dim(k, d, 0, 1)
    shifted = sum_dims(P.sub(x, broadcast_to(k, x.shape)), dims, True)
    return P.add(k, P.div(shifted, full(k.shape, n, x.dtype, x.device)))


# formulas -------------------------------------------------------------------------------------
class Ex:
    """Arithmetic on prims for readable formulas: `0.5 * x * (1 + (x * c).erf())`.

    Operands are tensors of one shape and dtype (broadcast and convert first) or Python numbers,
    which become `full` constants; `x.erf()` etc. call the unary prim of that name.
    """

    __slots__ = ("t",)

    def __init__(self, t: torch.Tensor):
        self.t = t

    def _o(self, x):
        return x.t if isinstance(x, Ex) else full(self.t.shape, x, self.t.dtype, self.t.device)

    def __add__(self, o): return Ex(P.add(self.t, self._o(o)))  # noqa: E704
    def __radd__(self, o): return Ex(P.add(self._o(o), self.t))  # noqa: E704
    def __sub__(self, o): return Ex(P.sub(self.t, self._o(o)))  # noqa: E704
    def __rsub__(self, o): return Ex(P.sub(self._o(o), self.t))  # noqa: E704
    def __mul__(self, o): return Ex(P.mul(self.t, self._o(o)))  # noqa: E704
    def __rmul__(self, o): return Ex(P.mul(self._o(o), self.t))  # noqa: E704
    def __truediv__(self, o): return Ex(P.div(self.t, self._o(o)))  # noqa: E704
    def __rtruediv__(self, o): return Ex(P.div(self._o(o), self.t))  # noqa: E704
    def __neg__(self): return Ex(P.neg(self.t))  # noqa: E704
    def __gt__(self, o): return Ex(P.gt(self.t, self._o(o)))  # noqa: E704
    def __ge__(self, o): return Ex(P.ge(self.t, self._o(o)))  # noqa: E704
    def __lt__(self, o): return Ex(P.lt(self.t, self._o(o)))  # noqa: E704
    def __le__(self, o): return Ex(P.le(self.t, self._o(o)))  # noqa: E704

    def __getattr__(self, name):
        prim = getattr(P, name)
        return lambda: Ex(prim(self.t))


def ex_where(cond: Ex, a, b) -> Ex:
    like = a if isinstance(a, Ex) else b
    return Ex(P.where(cond.t, like._o(a), like._o(b)))


def in_opmath(fn, *tensors, out_dtype=None):
    """Apply `fn` (on `Ex` operands) to tensors converted to the opmath of the first one's dtype."""
    dtype = tensors[0].dtype
    acc = opmath(dtype)
    out = fn(*(Ex(convert(t, acc)) for t in tensors))
    return convert(out.t, out_dtype or dtype)

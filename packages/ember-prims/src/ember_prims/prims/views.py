"""Shape and layout primitives. They have value semantics (see the Note in `_library`).

All arguments are explicit and fully specified: no -1 in `reshape`, one entry per dim in `slice`,
`broadcast_in_dim` as in JAX (operand dim i goes to output dim broadcast_dimensions[i], which are
strictly increasing; its size there is 1 or equal).
"""
from __future__ import annotations

import math

import torch

from ember_prims._library import VIEW, defprim, empty, fresh, same_size, size_le


def _fail(name, msg):
    raise ValueError(f"ember_prims.{name}: {msg}")


# reshape ------------------------------------------------------------------------------------
def _reshape_check(a, shape):
    if any(s < 0 for s in shape) or math.prod(shape) != a.numel():
        _fail("reshape", f"cannot reshape {tuple(a.shape)} to {tuple(shape)}")


def _reshape_ref(a, shape):
    _reshape_check(a, shape)
    return fresh(a.reshape(shape), a)


def _reshape_fake(a, shape):
    _reshape_check(a, shape)
    return empty(a, shape)


defprim("reshape(Tensor a, SymInt[] shape) -> Tensor", VIEW, _reshape_ref, _reshape_fake,
        doc="row-major reshape; shape fully specified (no -1)")


# permute ------------------------------------------------------------------------------------
def _permute_check(a, dims):
    if sorted(dims) != list(range(a.dim())):
        _fail("permute", f"{list(dims)} is not a permutation of {a.dim()} dims")


def _permute_ref(a, dims):
    _permute_check(a, dims)
    return fresh(a.permute(dims), a)


def _permute_fake(a, dims):
    _permute_check(a, dims)
    return empty(a, [a.shape[d] for d in dims])


defprim("permute(Tensor a, int[] dims) -> Tensor", VIEW, _permute_ref, _permute_fake,
        doc="output dim i is input dim dims[i]")


# broadcast_in_dim ---------------------------------------------------------------------------
def _bid_check(a, shape, bdims):
    ok = len(bdims) == a.dim() and all(0 <= d < len(shape) for d in bdims) and \
        all(x < y for x, y in zip(bdims, bdims[1:])) and \
        all(same_size(a.shape[i], shape[d]) or a.shape[i] == 1 for i, d in enumerate(bdims))
    if not ok:
        _fail("broadcast_in_dim", f"cannot broadcast {tuple(a.shape)} to {tuple(shape)} "
              f"with broadcast_dimensions={list(bdims)}")


def _bid_ref(a, shape, bdims):
    _bid_check(a, shape, bdims)
    view = [1] * len(shape)
    for i, d in enumerate(bdims):
        view[d] = a.shape[i]
    return fresh(a.reshape(view).expand(shape), a)


def _bid_fake(a, shape, bdims):
    _bid_check(a, shape, bdims)
    return empty(a, shape)


defprim("broadcast_in_dim(Tensor a, SymInt[] shape, int[] broadcast_dimensions) -> Tensor", VIEW,
        _bid_ref, _bid_fake, doc="JAX semantics; also serves unsqueeze and expand")


# slice --------------------------------------------------------------------------------------
def _slice_shape(a, start, limit, step):
    n = a.dim()
    if not (len(start) == len(limit) == len(step) == n) or any(
            not (size_le(0, s) and size_le(s, l) and size_le(l, a.shape[i])) or st < 1
            for i, (s, l, st) in enumerate(zip(start, limit, step))):
        _fail("slice", f"bad start/limit/step {list(start)}/{list(limit)}/{list(step)} "
              f"for shape {tuple(a.shape)}")
    return [(l - s + st - 1) // st for s, l, st in zip(start, limit, step)]


def _slice_ref(a, start, limit, step):
    _slice_shape(a, start, limit, step)
    idx = tuple(slice(s, l, st) for s, l, st in zip(start, limit, step))
    return fresh(a[idx], a)


def _slice_fake(a, start, limit, step):
    return empty(a, _slice_shape(a, start, limit, step))


defprim("slice(Tensor a, SymInt[] start, SymInt[] limit, SymInt[] step) -> Tensor", VIEW, _slice_ref,
        _slice_fake, doc="one (start, limit, step) per dim; 0 <= start <= limit <= size, step >= 1")


# squeeze ------------------------------------------------------------------------------------
def _squeeze_shape(a, dims):
    if any(d < 0 or d >= a.dim() or a.shape[d] != 1 for d in dims) or len(set(dims)) != len(dims):
        _fail("squeeze", f"dims {list(dims)} must be distinct size-1 dims of {tuple(a.shape)}")
    return [s for i, s in enumerate(a.shape) if i not in dims]


defprim("squeeze(Tensor a, int[] dims) -> Tensor", VIEW,
        lambda a, dims: fresh(a.reshape(_squeeze_shape(a, dims)), a),
        lambda a, dims: empty(a, _squeeze_shape(a, dims)), doc="removes the listed size-1 dims")


# as_strided ---------------------------------------------------------------------------------
def _as_strided_check(a, size, stride, offset):
    if len(size) != len(stride) or offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
        _fail("as_strided", f"bad size/stride/offset {list(size)}/{list(stride)}/{offset}")
    if all(size) and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= max(a.numel(), 1):
        _fail("as_strided", f"size/stride/offset {list(size)}/{list(stride)}/{offset} reads past "
              f"the {a.numel()} elements of the input")


def _as_strided_ref(a, size, stride, offset):
    _as_strided_check(a, size, stride, offset)
    return fresh(a.contiguous().as_strided(size, stride, offset), a)


def _as_strided_fake(a, size, stride, offset):
    _as_strided_check(a, size, stride, offset)
    return empty(a, size)


defprim("as_strided(Tensor a, SymInt[] size, SymInt[] stride, SymInt offset) -> Tensor", VIEW, _as_strided_ref,
        _as_strided_fake,
        doc="out[i] = a.flatten()[offset + sum(i_k * stride_k)]: strides index the row-major "
            "order of the input's values, not a storage")


# rev ----------------------------------------------------------------------------------------
def _rev_check(a, dims):
    if any(d < 0 or d >= a.dim() for d in dims) or len(set(dims)) != len(dims):
        _fail("rev", f"bad dims {list(dims)} for {a.dim()}-d input")


def _rev_ref(a, dims):
    _rev_check(a, dims)
    return fresh(torch.flip(a, dims), a)


def _rev_fake(a, dims):
    _rev_check(a, dims)
    return empty(a, a.shape)


defprim("rev(Tensor a, int[] dims) -> Tensor", VIEW, _rev_ref, _rev_fake, doc="reverses the listed dims (flip)")


# cat ----------------------------------------------------------------------------------------
def _cat_shape(xs, dim):
    if not xs:
        _fail("cat", "needs at least one tensor")
    a = xs[0]
    if not 0 <= dim < a.dim():
        _fail("cat", f"dim {dim} out of range")
    for x in xs[1:]:
        if x.dtype != a.dtype or x.dim() != a.dim() or any(
                x.shape[i] != a.shape[i] for i in range(a.dim()) if i != dim):
            _fail("cat", f"operands differ: {tuple(a.shape)}/{a.dtype} vs {tuple(x.shape)}/{x.dtype}")
    shape = list(a.shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    return shape


def _cat_ref(xs, dim):
    _cat_shape(xs, dim)
    return fresh(torch.cat(xs, dim), *xs)


def _cat_fake(xs, dim):
    return empty(xs[0], _cat_shape(xs, dim))


defprim("cat(Tensor[] xs, int dim) -> Tensor", VIEW, _cat_ref, _cat_fake,
        doc="same dtype and rank; sizes equal except along dim")


# pad ----------------------------------------------------------------------------------------
def _pad_shape(a, low, high):
    if len(low) != a.dim() or len(high) != a.dim() or any(p < 0 for p in list(low) + list(high)):
        _fail("pad", f"low/high {list(low)}/{list(high)} must be non-negative, one per dim")
    return [s + lo + hi for s, lo, hi in zip(a.shape, low, high)]


def _pad_ref(a, value, low, high):
    shape = _pad_shape(a, low, high)
    out = torch.full(shape, value, dtype=a.dtype, device=a.device)
    out[tuple(slice(lo, lo + s) for lo, s in zip(low, a.shape))] = a
    return out


def _pad_fake(a, value, low, high):
    return empty(a, _pad_shape(a, low, high))


defprim("pad(Tensor a, Scalar value, SymInt[] low, SymInt[] high) -> Tensor", VIEW, _pad_ref, _pad_fake,
        doc="constant padding; low/high per dim, non-negative (negative padding is a slice)")

"""Creation primitives: constants, ranges, uninitialised buffers. Device and dtype are explicit."""
from __future__ import annotations

import torch

from ember_prims._library import CREATION, defprim


def _full_ref(shape, value, *, dtype, device):
    return torch.full(list(shape), value, dtype=dtype, device=device)


def _full_fake(shape, value, *, dtype, device):
    return torch.empty(list(shape), dtype=dtype, device=device)


defprim("full(SymInt[] shape, Scalar value, *, ScalarType dtype, Device device) -> Tensor", CREATION,
        _full_ref, _full_fake, doc="a tensor of shape filled with value (converted to dtype)")


def _iota_ref(length, *, start, step, dtype, device):
    return (torch.arange(length, dtype=torch.int64, device=device) * step + start).to(dtype)


def _iota_fake(length, *, start, step, dtype, device):
    if length < 0:
        raise ValueError(f"ember_prims.iota: negative length {length}")
    return torch.empty([length], dtype=dtype, device=device)


defprim("iota(SymInt length, *, SymInt start, SymInt step, ScalarType dtype, Device device) -> Tensor", CREATION,
        _iota_ref, _iota_fake, doc="[start + i * step for i in range(length)], computed in int64, then cast")


def _empty_strided_ref(shape, stride, *, dtype, device):
    return torch.empty_strided(list(shape), list(stride), dtype=dtype, device=device)


defprim("empty_strided(SymInt[] shape, SymInt[] stride, *, ScalarType dtype, Device device) -> Tensor", CREATION,
        _empty_strided_ref, _empty_strided_ref,
        doc="uninitialised; the one prim whose output strides are not row-major")

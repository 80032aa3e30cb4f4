"""Elementwise primitives: unary and binary math, comparisons, bitwise, where, casts.

Binary prims take two tensors of the same shape and dtype: broadcasting (`broadcast_in_dim`) and
type promotion (`convert_element_type`) are the decompositions' job, never the prim's. Low
precision floats are computed by the decompositions in float32 ("opmath"), as ATen does on CPU.
"""
from __future__ import annotations

import torch

from ember_prims._library import BINARY, CAST, TERNARY, UNARY, defprim, empty, fresh


def _check_same(name, *ts):
    a = ts[0]
    for b in ts[1:]:
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(
                f"ember_prims.{name}: operands must have equal shape and dtype (explicit broadcasting "
                f"and promotion), got {tuple(a.shape)}/{a.dtype} and {tuple(b.shape)}/{b.dtype}")


def _unary(name, fn, result_dtype="same", doc=""):
    def reference(a):
        return fresh(fn(a), a)

    def fake(a):
        if result_dtype == "bool":
            return empty(a, a.shape, torch.bool)
        if name in _COMPLEX_TO_REAL and a.dtype.is_complex:  # torch.abs(complex64) is float32
            return empty(a, a.shape, a.dtype.to_real())
        return empty(a, a.shape, a.dtype)

    defprim(f"{name}(Tensor a) -> Tensor", UNARY, reference, fake, result_dtype=result_dtype,
            doc=doc or f"as torch.{fn.__name__}")


def _binary(name, fn, result_dtype="same", doc=""):
    def reference(a, b):
        _check_same(name, a, b)
        return fresh(fn(a, b), a, b)

    def fake(a, b):
        _check_same(name, a, b)
        return empty(a, a.shape, torch.bool if result_dtype == "bool" else a.dtype)

    defprim(f"{name}(Tensor a, Tensor b) -> Tensor", BINARY, reference, fake, result_dtype=result_dtype,
            doc=doc or f"as torch.{fn.__name__}")


_COMPLEX_TO_REAL = {"abs"}  # unary math whose result is real for a complex operand, as in torch

UNARY_MATH = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
    "log": torch.log, "log1p": torch.log1p, "log2": torch.log2, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
    "erfinv": torch.erfinv, "lgamma": torch.lgamma, "floor": torch.floor, "ceil": torch.ceil,
    "round": torch.round, "trunc": torch.trunc, "sign": torch.sign, "reciprocal": torch.reciprocal,
    "bitwise_not": torch.bitwise_not,
}
UNARY_PREDICATES = {
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite,
    "logical_not": torch.logical_not, "signbit": torch.signbit,
}

for _name, _fn in UNARY_MATH.items():
    _unary(_name, _fn)
for _name, _fn in UNARY_PREDICATES.items():
    _unary(_name, _fn, result_dtype="bool")
defprim("clone(Tensor a) -> Tensor", CAST, lambda a: fresh(torch.clone(a), a), lambda a: empty(a, a.shape),
        doc="a copy: materialises a value (a graph output that is an input, a view op's result that "
            "would be its input)")


def _div(a, b):
    if a.dtype.is_floating_point or a.dtype.is_complex:
        return torch.div(a, b)
    return torch.div(a, b, rounding_mode="trunc")


BINARY_MATH = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": _div,
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
    "hypot": torch.hypot, "copysign": torch.copysign, "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "shift_left": torch.bitwise_left_shift, "shift_right": torch.bitwise_right_shift,
}
BINARY_PREDICATES = {
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
}
BINARY_DOCS = {
    "div": "true division for floats, truncation toward zero for integers",
    "floor_divide": "floor(a / b), also for floats",
    "remainder": "Python-style: the sign of b",
    "fmod": "C-style: the sign of a",
    "maximum": "propagates NaN", "minimum": "propagates NaN",
    "shift_right": "arithmetic for signed integers",
}

for _name, _fn in BINARY_MATH.items():
    _binary(_name, _fn, doc=BINARY_DOCS.get(_name, ""))
for _name, _fn in BINARY_PREDICATES.items():
    _binary(_name, _fn, result_dtype="bool")


def _where_ref(pred, a, b):
    _check_same("where", a, b)
    assert pred.dtype == torch.bool and pred.shape == a.shape, "where: pred must be bool, same shape"
    return fresh(torch.where(pred, a, b), pred, a, b)


def _where_fake(pred, a, b):
    _check_same("where", a, b)
    if pred.dtype != torch.bool or pred.shape != a.shape:
        raise ValueError(f"ember_prims.where: pred must be bool of shape {tuple(a.shape)}")
    return empty(a, a.shape)


defprim("where(Tensor pred, Tensor a, Tensor b) -> Tensor", TERNARY, _where_ref, _where_fake,
        doc="pred ? a : b; pred bool, all three the same shape")

def _device_put_fake(a, device):
    return torch.empty(list(a.shape), dtype=a.dtype, device=device)


# Note [0-d CPU operands]: ATen lets a 0-d CPU tensor meet tensors of another device (it is
# read as a scalar: an optimizer's step count, a learning rate held in a tensor). Prims take
# operands of one device: the decompositions move such a scalar with device_put first (after
# converting it to the computation's dtype), and leave the 0-d CPU tensor itself, and whatever
# is computed from it alone, on the CPU, where eager keeps it.
def _device_put(a, device):
    # to an accelerator: asynchronous (a host source is staged before the call returns); to
    # the host: synchronous, so that the values are there when it returns
    return fresh(a.to(device, non_blocking=a.device.type == "cpu"), a)


defprim("device_put(Tensor a, Device device) -> Tensor", CAST, _device_put, _device_put_fake,
        doc="a copy of `a` on `device`")

defprim("convert_element_type(Tensor a, ScalarType dtype) -> Tensor", CAST,
        lambda a, dtype: fresh(a.to(dtype), a), lambda a, dtype: empty(a, a.shape, dtype),
        doc="a cast; float to int truncates toward zero, anything to bool is `!= 0`")

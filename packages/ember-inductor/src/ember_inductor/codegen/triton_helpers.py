"""Triton device functions that generated kernels call, pasted into each kernel file as needed.

Each `eh_*` function here is written as plain Python over `tl`; the renderer copies the source of
the ones a kernel mentions into that kernel's file under `@jit`, so a kernel file is
self-contained and the same text runs compiled (GPU) and interpreted (CPU, CI).
See Note [Triton float semantics] in triton_prims.py for why each exists.
"""
from __future__ import annotations

import inspect
import re

import triton.language as tl

libdevice = None  # bound in the kernel file's namespace by the loader (see triton_runtime)


def eh_floordiv_float(a, b):
    # ATen div_floor_floating: exact where floor(a / b) is not.
    mod = libdevice.fmod(a, b)
    div = (a - mod) / b
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    q = a / b
    res = tl.where(div != 0, fl, libdevice.copysign(tl.zeros_like(q), q))
    return tl.where(b == 0, q, res)


def eh_floordiv_int(a, b):
    q = a // b
    return tl.where(((a % b) != 0) & ((a < 0) != (b < 0)), q - 1, q)


def eh_remainder_float(a, b):
    mod = libdevice.fmod(a, b)
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


def eh_remainder_int(a, b):
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


def eh_pow_int(a, b):
    # Integer power by squaring over a fixed number of bits; negative exponents follow ATen
    # (1 ** -n == 1, (-1) ** -n == +-1, otherwise 0).
    result = tl.full(a.shape, 1, a.dtype) if len(a.shape) > 0 else a * 0 + 1
    base = a
    e = b
    for _ in tl.static_range(63):
        result = tl.where((e & 1) != 0, result * base, result)
        base = base * base
        e = e >> 1
    neg = tl.where(a == 1, 1, tl.where(a == -1, tl.where((b & 1) != 0, -1, 1), 0)).to(a.dtype)
    return tl.where(b < 0, neg, result)


def eh_max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


def eh_min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


def eh_mul(a, b):
    return a * b


def eh_or(a, b):
    return a | b


def eh_argmax_combine(a, ia, b, ib):
    # First index of the largest value; NaN counts as the largest (torch.argmax).
    a_nan = a != a
    b_nan = b != b
    gt = (a > b) | (a_nan & (b_nan == 0))
    eq = (a == b) | (a_nan & b_nan)
    pick_a = gt | (eq & (ia < ib))
    return tl.where(pick_a, a, b), tl.where(pick_a, ia, ib)


def eh_argmin_combine(a, ia, b, ib):
    a_nan = a != a
    b_nan = b != b
    lt = (a < b) | (a_nan & (b_nan == 0))
    eq = (a == b) | (a_nan & b_nan)
    pick_a = lt | (eq & (ia < ib))
    return tl.where(pick_a, a, b), tl.where(pick_a, ia, ib)


HELPERS = {name: fn for name, fn in globals().items() if name.startswith("eh_") and callable(fn)}
_CALL = re.compile(r"\beh_\w+")


def helper_sources(kernel_body: str) -> str:
    """The `@jit` source of every helper that `kernel_body` mentions (and those they call)."""
    needed: list[str] = []
    todo = _CALL.findall(kernel_body)
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        if name not in HELPERS:
            raise KeyError(f"generated kernel calls unknown helper {name!r}")
        needed.append(name)
        todo.extend(n for n in _CALL.findall(inspect.getsource(HELPERS[name])) if n != name)
    return "\n\n".join("@jit\n" + inspect.getsource(HELPERS[n]) for n in sorted(needed))

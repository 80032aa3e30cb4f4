"""What every code generator computes the same way about a kernel description.

Note [shared kernel analyses]
    Some questions about a `KernelSpec` have one answer whatever renders it, and two backends
    that answer them separately drift apart (they did: the C++ backend summed int32 in int64_t
    and Triton in int32, counted a column reduction by majority vote where Triton asked for every
    reduced load). They are answered here, once, and both backends render the answer:

    - `accumulator_dtype`: what a reduction accumulates in. Half types in float32 (as ATen does);
      integer and bool sums and products in int64 (ATen's integer accumulation: the count of a
      bool sum is taken before it is compared with zero); `any`/`all` in int32; an extreme
      (amax, argmin...) of an integer in its own type, of bool in int32.
    - `is_column_reduction`: the reduced dimension is strided and the last outer one contiguous
      (the bias gradient of a linear layer, batch norm's statistics over channels-last memory),
      so a kernel should walk rows and keep one accumulator per output column. A backend may
      still decline for its own reasons (the C++ backend's per-thread stack budget).
    - the stride of an index along a variable: `indexing.stride`.
"""
from __future__ import annotations

import dataclasses

import sympy
import torch

from ember_inductor.indexing import stride
from ember_inductor.kernel import KernelSpec
from ember_inductor.sizes import hint

INT32_MAX = 2**31 - 1

_HALF = (torch.float16, torch.bfloat16)


def accumulator_dtype(kind: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a reduction `kind` ("sum", "amax", "argmax", ...) of `dtype` values accumulates in."""
    if kind in ("any", "all"):
        return torch.int32
    if dtype in _HALF:
        return torch.float32
    if dtype.is_floating_point:
        return dtype
    if kind in ("sum", "prod"):
        return torch.int64
    return torch.int32 if dtype == torch.bool else dtype


def is_column_reduction(k: KernelSpec) -> bool:
    """A reduction whose loads are contiguous along the last outer variable and none along a
    reduction variable (sum over dim 0 of a row-major matrix, e.g. a bias gradient)."""
    xs, rs = k.range_vars, k.reduction_vars
    if not xs or not rs:
        return False
    saw = False
    for op in k.ops:
        if op.kind != "load" or op.index is None or not (op.index.free_symbols & set(rs)):
            continue
        steps = {v: stride(op.index, v) for v in xs + rs}
        if any(s is None for s in steps.values()):
            return False
        if any(steps[r] == 1 for r in rs):
            return False  # some load is contiguous along r: the row layout suits it
        saw = saw or steps[xs[-1]] == 1
    return saw


def index_extents(k: KernelSpec) -> list | None:
    """Bounds, as expressions over the size symbols, of every index the kernel computes (the
    iteration space's size, and each access's |index| bounded over the loop ranges); None
    when an index is not affine in the loop variables (gathers, unflattened views)."""
    sizes = dict(zip(k.range_vars + k.reduction_vars, list(k.ranges) + list(k.reduction_ranges)))
    out = [sympy.Mul(*k.ranges, *k.reduction_ranges)]
    for op in k.ops:
        if op.index is None:
            continue
        if any(s.name.startswith("tmp") for s in op.index.free_symbols):
            return None
        bound = sympy.Integer(0)
        for term in sympy.Add.make_args(sympy.expand(op.index)):
            loop = term.free_symbols & set(sizes)
            if not loop:
                bound += sympy.Abs(term)
                continue
            if len(loop) != 1:
                return None
            v = loop.pop()
            coeff, rest = term.as_independent(v, as_Add=False)
            if rest != v:
                return None
            bound += sympy.Abs(coeff) * sizes[v]  # a little above the largest: no constant term
        out.append(bound)
    return out


def narrow_indices(specs: list, env) -> list:
    """Note [32-bit indices of symbolic kernels]
    A static kernel indexes in 32 bits when every index fits (the Triton backend checks the
    numbers). A symbolic kernel would need 64 bits for some values of its symbols, and 64-bit
    index arithmetic is slower on a GPU. So when its bounds (`index_extents`) fit 32 bits with
    room under the hints (at most half the range), they are recorded as guards through the
    sizes' environment and the kernel indexes in 32 bits: a call past a bound fails the guard
    and recompiles. Only the bounds no other bound dominates (coefficient by coefficient) are
    recorded, with integer right-hand sides (`s0*s1 <= 2796202` for 768*s0*s1): a compile adds
    a few cheap guards, not one per access. Returns `specs` with `int32_indices` set where so."""
    if env is None:
        return specs
    chosen, bounds = [], []
    for k in specs:
        extents = index_extents(k) if k.sizevars else None
        if extents is None or any(hint(e, k.hints) > INT32_MAX // 2 for e in extents):
            chosen.append(False)  # 64 bits: correct for every value, no guard
            continue
        chosen.append(True)
        bounds += [e for e in (sympy.expand(x) for x in extents) if e.free_symbols]
    for relation in _undominated_limits(bounds):
        env.record(relation, True)
    return [dataclasses.replace(k, int32_indices=True) if c else k for k, c in zip(specs, chosen)]


def _undominated_limits(bounds: list) -> list:
    """`bound <= INT32_MAX` for each bound that no other bound is at least as large as for
    every value of the symbols (decided on the coefficients of their difference, each symbol
    written 1 + t with t >= 0); `c*m + d <= M` is written `m <= (M - d) // c`."""
    bounds = list(dict.fromkeys(bounds))
    shifted = [b.xreplace({s: s + 1 for s in b.free_symbols}) for b in bounds]

    def at_least(j, i) -> bool:
        coeffs = sympy.expand(shifted[j] - shifted[i]).as_coefficients_dict().values()
        return all(c.is_number and c >= 0 for c in coeffs)
    out = []
    for i, b in enumerate(bounds):
        if any(j != i and at_least(j, i) and (j < i or not at_least(i, j)) for j in range(len(bounds))):
            continue
        terms = dict(b.as_coefficients_dict())
        d = terms.pop(sympy.Integer(1), 0)
        if len(terms) == 1 and next(iter(terms.values())).is_Integer and sympy.sympify(d).is_Integer:
            (m, c), = terms.items()  # c*m + d <= M  <=>  m <= (M - d) // c
            out.append(sympy.Le(m, (INT32_MAX - int(d)) // int(c)))
        else:
            out.append(sympy.Le(b, INT32_MAX))
    return out

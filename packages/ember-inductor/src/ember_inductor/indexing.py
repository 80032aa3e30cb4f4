"""Index arithmetic: the integer functions index expressions are built of (lowering writes them,
finalize simplifies them, backends print them), and the analyses of an index that every
backend asks the same question of (Note [shared kernel analyses] in kernel_analysis.py).
"""
from __future__ import annotations

import sympy


class FloorDiv(sympy.Function):
    """a // b for non-negative integer index arithmetic."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1:
            return a
        if a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) // int(b))


class ModIndex(sympy.Function):
    """a % b for non-negative integer index arithmetic."""
    is_integer = True

    @classmethod
    def eval(cls, a, b):
        if b == 1 or a == 0:
            return sympy.Integer(0)
        if a.is_Integer and b.is_Integer:
            return sympy.Integer(int(a) % int(b))


def stride(index, var) -> int | None:
    """The constant step of `index` when `var` grows by one (0 when `index` does not use it);
    None when `index` is not affine in `var`."""
    if var not in index.free_symbols:
        return 0
    d = index.diff(var)
    return int(d) if d.is_Integer else None

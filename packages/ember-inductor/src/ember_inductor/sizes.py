"""Sizes as the inductor holds them: a Python int for a static dimension, a sympy expression over
size symbols (``s0``, ``s1``, ...: ember_symbolic's) for a dynamic one.

Note [symbolic sizes in the inductor]
    A graph whose ``meta["val"]`` tensors carry ``torch.SymInt`` sizes (issue #18) is lowered
    with those sizes as sympy expressions (``expr_of``): buffer sizes and strides, offsets,
    iteration ranges and index expressions mention ``s0``... where the static path has numbers.
    Static dimensions stay plain ints, so a graph without symbols lowers exactly as before.
    Rules every pass follows:
      * a decision that correctness depends on is made only when it holds for EVERY value of
        the symbols (``known_equal``: sympy proves ``a - b == 0``); otherwise the general path
        is taken (a reshape becomes an index remap, fusion does not happen, a C++ row cache
        lives on the heap, a Triton reduction loops instead of holding a whole row). No
        compile-time choice needs a guard but 32-bit indexing in Triton kernels, which records
        its bounds through the env (Note [32-bit indices of symbolic kernels]).
      * heuristics (block sizes, whether to parallelize) use the hints: the symbols' values in
        the call being compiled (``hint``).
      * kernels take the symbols their ranges and indices mention as scalar arguments
        (``KernelSpec.sizevars``); the wrapper reads each symbol from the inputs once per call
        (``bind_symbols``) and computes buffer sizes from them.
"""
from __future__ import annotations

import re
from typing import Iterable, Sequence

import sympy
import torch
from ember_symbolic import SizePrinter, expr_of

_SIZE_NAME = re.compile(r"s\d+$")

# Note [size arithmetic nodes]: the graph nodes that compute ints from sizes (x.shape[0] * 4):
# queries of a tensor's metadata, then Python arithmetic on their results. The inductor
# evaluates them to expressions at compile time (lowering/__init__.py), never runs them.
SIZE_QUERY_OPS = (torch.ops.aten.sym_size.int, torch.ops.aten.sym_stride.int, torch.ops.aten.sym_numel.default,
                  torch.ops.aten.sym_storage_offset.default)
SIZE_FUNCTIONS = (torch.sym_max, torch.sym_min, torch.sym_float, torch.sym_int, torch.sym_not, torch.sym_sqrt,
                  torch.sym_ite)


def is_size_target(target) -> bool:
    """A call target that computes a size: a metadata query, a torch.sym_* function, or a
    function of the `operator`/`math` modules (other than getitem)."""
    if target in SIZE_QUERY_OPS or target in SIZE_FUNCTIONS:
        return True
    return getattr(target, "__module__", None) in ("_operator", "operator", "math") and target.__name__ != "getitem"


def is_size_symbol(s) -> bool:
    """A size symbol (``s0``), as opposed to a loop variable (``x0``, ``r0``) or a value (``tmp3``)."""
    return isinstance(s, sympy.Symbol) and bool(_SIZE_NAME.match(s.name))


def as_size(v):
    """An int for a static size (int, SymInt of a constant, sympy Integer), else its sympy
    expression. Accepts ints, torch.SymInt and sympy values."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    e = expr_of(v) if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) else sympy.sympify(v)
    if not e.free_symbols:
        return int(e)
    return e


def as_sizes(values: Iterable) -> tuple:
    return tuple(as_size(v) for v in values)


def has_symbolic_layout(t: torch.Tensor) -> bool:
    """Whether a (fake) tensor's sizes or strides mention size symbols."""
    return not all(is_static(v) for v in (*t.shape, *t.stride()))


def is_static(v) -> bool:
    if isinstance(v, (int, float)):
        return True
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return not expr_of(v).free_symbols
    return not sympy.sympify(v).free_symbols


def all_static(values: Iterable) -> bool:
    return all(is_static(v) for v in values)


def known_equal(a, b) -> bool:
    """``a == b`` for every value of the symbols (a structural or an algebraic proof)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if a == b:
        return True
    return sympy.expand(sympy.sympify(a) - sympy.sympify(b)) == 0


def same_sizes(a, b) -> bool:
    """Two shapes (ints, SymInts or expressions) equal for every value of the symbols; unlike
    `==` on SymInts, this decides nothing from the hints (records no guard)."""
    return len(a) == len(b) and all(known_equal(as_size(x), as_size(y)) for x, y in zip(a, b))


def size_symbols(exprs: Iterable) -> tuple[sympy.Symbol, ...]:
    """The size symbols the expressions mention, in symbol order (s0, s1, ..., s10)."""
    found = set()
    for e in exprs:
        if e is not None and not isinstance(e, int):
            found |= {s for s in sympy.sympify(e).free_symbols if is_size_symbol(s)}
    return tuple(sorted(found, key=lambda s: int(s.name[1:])))


def hint(v, hints: dict) -> int:
    """``v``'s value in the call being compiled (heuristics only, never correctness)."""
    if isinstance(v, int):
        return v
    e = sympy.sympify(v)
    if not e.free_symbols:
        return int(e)
    return int(e.xreplace(hints))


def product(values: Sequence):
    """The product of sizes: an int when all are static."""
    out = 1
    for v in values:
        out = out * v
    return as_size(out) if not isinstance(out, int) else out


_PRINTER = SizePrinter()


def py_size(v) -> str:
    """A size as Python source over the symbols' names (the wrapper binds ``s0 = ...``)."""
    if isinstance(v, int):
        return repr(v)
    return _PRINTER.doprint(sympy.sympify(v))


def py_sizes(values: Sequence) -> str:
    """A tuple of sizes as Python source: ``(s0, 16)``."""
    items = [py_size(v) for v in values]
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"

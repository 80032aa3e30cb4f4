"""The `ember_prims` torch.library namespace and the registry that describes each primitive.

Every primitive is defined once, by `defprim`, next to its reference and fake kernels: the schema
goes to the dispatcher, the kernels to `CompositeExplicitAutograd` (eager, any device) and
`register_fake` (FakeTensor and meta), and a `PrimInfo` row to `PRIMS`, the table that the lower
layers dispatch on.

Note: value semantics. A primitive never aliases or mutates its inputs, and (except
`empty_strided`, whose strides are its argument) returns a dense row-major ("contiguous") tensor.
Views (reshape, permute, slice, ...) are therefore values too: the inductor decides what is
materialised. Fake and reference kernels agree on shape, dtype and strides; a test checks it.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import sympy
import torch
from ember_symbolic import env_of, expr_of, is_symbolic

NAMESPACE = "ember_prims"
LIB = torch.library.Library(NAMESPACE, "DEF")

# Categories, as the lower layers dispatch on them.
UNARY = "elementwise_unary"
BINARY = "elementwise_binary"
TERNARY = "elementwise_ternary"  # where
CAST = "elementwise_cast"  # convert_element_type, clone
REDUCTION = "reduction"
VIEW = "view"  # shape/layout; value semantics (see the Note above)
INDEXING = "indexing"
CREATION = "creation"
RANDOM = "random"
EXTERN = "extern"  # ATen ops kept whole; listed in EXTERN_OPS, not in PRIMS

CATEGORIES = (UNARY, BINARY, TERNARY, CAST, REDUCTION, VIEW, INDEXING, CREATION, RANDOM)


@dataclasses.dataclass(frozen=True)
class PrimInfo:
    """One primitive: what the dispatcher knows plus what a lowering needs to know."""

    name: str  # "add"
    schema: str  # "add(Tensor a, Tensor b) -> Tensor"
    category: str  # one of CATEGORIES
    op: torch._ops.OpOverload  # torch.ops.ember_prims.add.default
    reference: Callable  # eager kernel (may call ATen)
    fake: Callable  # shape/dtype/stride kernel
    result_dtype: str = "same"  # elementwise: "same" as the input(s), or "bool"
    doc: str = ""


PRIMS: dict[str, PrimInfo] = {}


def defprim(schema: str, category: str, reference: Callable, fake: Callable, *,
            result_dtype: str = "same", doc: str = "") -> PrimInfo:
    """Define `ember_prims::<name>` from a schema, register both kernels, and record it."""
    assert category in CATEGORIES, category
    name = schema.split("(", 1)[0]
    assert name not in PRIMS, f"prim {name} defined twice"
    LIB.define(schema)
    LIB.impl(name, reference, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=LIB)
    op = getattr(getattr(torch.ops, NAMESPACE), name).default
    info = PrimInfo(name, schema, category, op, reference, fake, result_dtype, doc)
    PRIMS[name] = info
    return info


def is_prim(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and target.namespace == NAMESPACE


def same_size(a, b) -> bool:
    """Whether two sizes (ints or SymInts) are the same number or the same expression: decides
    nothing, records no guard (Note [symbolic sizes in decompositions] in decomps/_util.py)."""
    if is_symbolic(a) or is_symbolic(b):
        return expr_of(a) == expr_of(b)
    return a == b


_BEYOND_ANY_SIZE = 2 ** 62  # slice ends at or past this mean "to the end"


def known_le(a, b) -> bool | None:
    """Whether a <= b for every value of the symbols (None: it depends on them), recording nothing."""
    if not (is_symbolic(a) or is_symbolic(b)):
        return a <= b
    for big, other, answer in ((b, a, True), (a, b, False)):
        if isinstance(big, int) and big >= _BEYOND_ANY_SIZE and not isinstance(other, int):
            return answer
    env = env_of([a, b])
    known = env.static_truth(sympy.Le(expr_of(a), expr_of(b)))
    if known is None:  # a - b <= (a bound without floor/ceiling) <= 0
        bound = _upper_bound(expr_of(a) - expr_of(b))
        if bound is not None and env.static_truth(sympy.Le(bound, 0)) is True:
            return True
    return known


def _upper_bound(expr):
    """An upper bound of a size expression without floor/ceiling (floor(x) <= x, floor(x) > x - 1,
    ceiling(x) < x + 1, ceiling(x) >= x; every other factor is a positive size), or None."""
    out = sympy.Integer(0)
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, factors = term.as_coeff_mul()
        rounded = [f for f in factors if isinstance(f, (sympy.floor, sympy.ceiling))]
        if len(rounded) > 1 or any(f.free_symbols and not (f.is_positive or f in rounded) for f in factors):
            return None
        up = coeff > 0
        bounds = {sympy.floor: (lambda x: x) if up else (lambda x: x - 1),
                  sympy.ceiling: (lambda x: x + 1) if up else (lambda x: x)}
        out += coeff * sympy.Mul(*(bounds[type(f)](f.args[0]) if f in rounded else f for f in factors))
    return out


def size_le(a, b, ties: bool = True) -> bool:
    """a <= b for sizes: decided without a guard where it holds (or fails) for every value of the
    symbols, else answered from the hints and recorded as a guard. `ties=False`: the caller only
    picks one of a and b (min/max), so where b <= a always, a <= b only where they are equal and
    False is as good an answer, with no guard."""
    le = known_le(a, b)
    if le is None and not ties and known_le(b, a) is True:
        le = False
    if le is None:
        le = bool(a <= b)  # a decision on the symbols: a guard
    return le


def same_shape(a, b) -> bool:
    """`same_size` for every dim (and the same rank): for skipping a no-op reshape, broadcast or
    slice, a choice that is correct either way, so it never records a guard."""
    return len(a) == len(b) and all(same_size(x, y) for x, y in zip(a, b))


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for s in reversed(list(shape)):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def fresh(out: torch.Tensor, *inputs) -> torch.Tensor:
    """Value semantics for reference kernels: contiguous, sharing no storage with an input."""
    out = out.contiguous()
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.numel() and out.numel() and \
                out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            return out.clone()
    return out


def empty(like: torch.Tensor, shape, dtype=None) -> torch.Tensor:
    """Fake-kernel helper: a contiguous tensor of `shape` on `like`'s device."""
    return torch.empty(list(shape), dtype=dtype or like.dtype, device=like.device)

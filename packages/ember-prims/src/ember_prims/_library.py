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

import torch
from ember_symbolic import expr_of, is_symbolic

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

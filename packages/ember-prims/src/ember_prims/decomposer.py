"""`Decomposer`: how the decomposition table applies to one ATen call, the one implementation
that every consumer of the table uses (`decompose` here, ember-autograd's tracer through the
facade).

Note [applying the table]: a consumer that meets an ATen call `op` asks the decomposer for
`op`'s decomposition and, given one, runs it with itself still on the dispatch stack, so the ops
the decomposition calls come back to it one by one (the table applies recursively); given none,
it emits `op` as is (a prim, an extern, or, for a permissive consumer, any other ATen op).
The rules, in order:

1. An `ember_prims` op is never decomposed: it is what decompositions are written in; nor is a
   TorchScript `prim` op (`prim::device`: a metadata query).
2. A table entry wins, except inside that entry's own run: a decomposition that calls its own op
   ("lower small matmuls, leave the big ones to BLAS") gets that call emitted as is, not
   decomposed again without end.
3. An op with no entry but a CompositeImplicitAutograd kernel is broken into the ops that
   kernel calls (what eager runs), which come back in turn.
4. Otherwise none: the consumer emits the op.

Consumers add their own rules in front (ember-autograd functionalizes a view or an in-place op
before any decomposition, Note [functionalize before decompose]), never a second lookup.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

from ember_prims.decomps import table as _default_table


def has_composite_kernel(op: torch._ops.OpOverload) -> bool:
    """Whether `op` has a CompositeImplicitAutograd kernel (eager breaks it into other ops)."""
    try:
        return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")
    except RuntimeError:  # an op the dispatcher does not know: TorchScript's aten::size(Tensor) -> int[]
        return False


class Decomposer:
    """The table and the rules that apply it (Note [applying the table]): called with an ATen
    overload, returns the function that computes it from other ops, or None to emit it as is.

        >>> import torch, ember_prims
        >>> d = ember_prims.Decomposer()
        >>> d(torch.ops.aten.gelu.default) is not None, d(torch.ops.ember_prims.add.default)
        (True, None)
    """

    def __init__(self, table: dict[torch._ops.OpOverload, Callable] | None = None):
        self.table = _default_table() if table is None else table
        self._running: set = set()  # ops whose own entry is running (rule 2)

    def __call__(self, op: torch._ops.OpOverload) -> Callable | None:
        if op.namespace in ("ember_prims", "prim"):
            return None
        entry = self.table.get(op)
        if entry is not None:
            return None if op in self._running else functools.partial(self._run, op, entry)
        if has_composite_kernel(op):
            return op.decompose
        return None

    def _run(self, op, entry, *args, **kwargs):
        self._running.add(op)
        try:
            return entry(*args, **kwargs)
        finally:
            self._running.discard(op)

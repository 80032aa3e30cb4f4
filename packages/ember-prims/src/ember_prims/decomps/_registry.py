"""The decomposition table: ATen overload -> Python function, filled by `@register`.

Note: decomposition contract. A decomposition takes exactly the ATen op's arguments and returns
what the ATen op returns (same shapes and dtypes; strides are not promised). It is written in
`torch.ops.ember_prims.*` and in other ATen ops that are themselves in the table (a consumer
applies the table recursively). It must run unchanged on real tensors and on FakeTensors under a
TorchDispatchMode that records it op by op, so it never reads tensor data (.item(), .tolist(),
Python control flow on values): only shapes, dtypes and devices.
"""
from __future__ import annotations

from typing import Callable

import torch

_TABLE: dict[torch._ops.OpOverload, Callable] = {}


def register(*ops: torch._ops.OpOverload):
    """Decorator: make the function the decomposition of each listed ATen overload."""
    for op in ops:
        if not isinstance(op, torch._ops.OpOverload):
            raise TypeError(f"register() takes overloads (aten.add.Tensor), not {op!r}")

    def wrap(fn):
        for op in ops:
            if op in _TABLE:
                raise ValueError(f"{op} already has a decomposition ({_TABLE[op].__qualname__})")
            _TABLE[op] = _never_returns_an_input(fn) if _is_view_op(op) else fn
        return fn

    return wrap


def _is_view_op(op) -> bool:
    return any(r.alias_info is not None for r in op._schema.returns)


def _never_returns_an_input(fn):
    # Note: a view op's decomposition must not hand back its input object (detach, a reshape to the
    # same shape, ...): the dispatcher's view check rejects "a view that is its own base" when the
    # decomposition runs under a dispatch mode. Such results become a `clone` prim instead.
    def decomp(*args, **kwargs):
        out = fn(*args, **kwargs)
        inputs = {id(a) for a in args if isinstance(a, torch.Tensor)}
        fix = lambda t: torch.ops.ember_prims.clone(t) if id(t) in inputs else t  # noqa: E731
        if isinstance(out, torch.Tensor):
            return fix(out)
        return type(out)(fix(t) for t in out)

    decomp.__name__ = decomp.__qualname__ = fn.__name__
    decomp.__wrapped__ = fn
    return decomp

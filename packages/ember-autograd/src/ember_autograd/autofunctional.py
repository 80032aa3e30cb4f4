"""Auto-functionalization: a functional op for an op that writes its arguments and has none.

Note [auto-functionalization]: functionalization (functionalize.py) records a call that writes
its arguments as the call of its functional counterpart (`add_` -> `add`, `_foreach_mul_` ->
`_foreach_mul`). A custom op declared with `mutates_args` (torch.library), or one of the few
ATen ops without such a twin (`normal_`, `rrelu_with_noise_`, out= factories), has none; for
such an op `auto_functional(op)` defines one, once per process, as a real dispatcher op in the
`ember_autograd` namespace:

    ember_autograd::<ns>__<name>[__<overload>](<op's arguments, no alias annotations>) -> Tensor[]

Its kernel clones every written argument (a tensor, or each tensor of a list), runs `op` on the
clones, and returns one flat list: `op`'s fresh (non-aliased) tensor returns, then the clones
(the written arguments' new values) in schema order, each list argument's tensors in order.
The same function is its fake kernel (on fake tensors it runs `op`'s fake kernel on fake
clones). The functionalizer then writes each new value into its argument (`Functionalizer.write`:
a view's base gets it through the view's inverse, a graph input is copied back by the runtime),
so the graph stays functional and the lower layers see one ordinary multi-output op: the prims
layer has no entry for it, and the inductor calls it from the wrapper as an extern, as it does
any ATen op without a lowering. One flat list (rather than a tensor or a list per written
argument) keeps every result an item of the call's output, which is all externs return.

The op's eager semantics are kept only when its arguments do not overlap: a kernel that reads an
argument after writing another that shares its memory would see the write in eager, and not on
the clones. The functionalizer refuses such calls (Note [overlapping writes] in
functionalize.py), so they run eagerly. A generated op exists only in the process that
defined it: a graph that calls one does not load in another process (the facade's warm-start
cache discards such an entry; a captured graph with a custom op is not cached at all).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from ember_autograd.errors import AotTraceError
from ember_autograd.schema import is_write, normalize_args, split_call

NAMESPACE = "ember_autograd"
_LIB = torch.library.Library(NAMESPACE, "FRAGMENT")

# What a written argument may be: the kernel clones it (a None optional is left alone).
_WRITABLE_TYPES = frozenset({"Tensor", "List[Tensor]", "Optional[Tensor]", "List[Optional[Tensor]]"})
_ALIAS_ANNOTATION = re.compile(r"Tensor\([^)]*\)")
_COPIED_TAGS = (torch.Tag.nondeterministic_seeded,)
_DEFINED: dict[str, torch._ops.OpOverload] = {}  # generated name -> its source op


@dataclass(frozen=True)
class AutoFunctional:
    """The functional op made for `source`: `op` takes `source`'s arguments (same names, kinds
    and defaults) and returns the flat list of Note [auto-functionalization]."""

    source: torch._ops.OpOverload
    op: torch._ops.OpOverload
    n_fresh: int  # how many of `source`'s returns are fresh tensors (the list's first items)
    written: tuple[str, ...]  # the written arguments' names, in schema order

    def split(self, flat: list, values: dict) -> tuple[list, list]:
        """`flat` (the op's result) as (fresh returns, new value of each written argument):
        a tensor for a tensor, a list for a list (None for a None item)."""
        items = iter(flat[self.n_fresh:])
        news = []
        for name in self.written:
            old = values[name]
            if isinstance(old, (list, tuple)):
                news.append([None if t is None else next(items) for t in old])
            else:
                news.append(None if old is None else next(items))
        return list(flat[:self.n_fresh]), news


@functools.cache
def auto_functional(op: torch._ops.OpOverload) -> AutoFunctional:
    """The generated functional op for `op` (defined on first use; Note [auto-functionalization]).
    Raises AotTraceError (no_functional_variant) for what it cannot express: an op that writes
    something other than tensors, or returns something other than tensors or its written
    arguments."""
    schema = op._schema
    written = tuple(a.name for a in schema.arguments if is_write(a))
    bad_args = [a.name for a in schema.arguments if is_write(a) and str(a.type) not in _WRITABLE_TYPES]
    bad_returns = [str(r.type) for r in schema.returns if r.alias_info is None and str(r.type) != "Tensor"]
    if bad_args or bad_returns:
        what = f"writes non-tensor arguments {bad_args}" if bad_args else f"returns {bad_returns}"
        raise AotTraceError("no_functional_variant", f"in-place op without a functional counterpart that "
                            f"{what}: it cannot be auto-functionalized", op=op)
    base = f"{op.namespace}__{op._opname}" + ("" if op._overloadname == "default" else f"__{op._overloadname}")
    name, n = base, 1
    while name in _DEFINED:  # `ns::a__b` and `ns::a.b` would share a name
        n += 1
        name = f"{base}_{n}"
    _define(name, op, written)
    _DEFINED[name] = op
    generated = getattr(getattr(torch.ops, NAMESPACE), name).default
    n_fresh = sum(1 for r in schema.returns if r.alias_info is None)
    return AutoFunctional(op, generated, n_fresh, written)


def _define(name: str, op: torch._ops.OpOverload, written: tuple[str, ...]) -> None:
    text = str(op._schema)
    arguments = _ALIAS_ANNOTATION.sub("Tensor", text[text.index("(") + 1:text.rindex(") -> ")])
    tags = tuple(t for t in _COPIED_TAGS if t in op.tags)
    _LIB.define(f"{name}({arguments}) -> Tensor[]", tags=tags)
    kernel = functools.partial(_run_on_clones, op, written)
    _LIB.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", kernel, lib=_LIB)


def _run_on_clones(op: torch._ops.OpOverload, written: tuple[str, ...], *args, **kwargs) -> list:
    # The generated op's kernel, real and fake: `op` on clones of its written arguments.
    schema = op._schema
    # the dispatcher leaves out arguments at their defaults; the generated op has op's defaults
    values = dict(zip((a.name for a in schema.arguments), normalize_args(op, args, kwargs)))
    for name in written:
        values[name] = _clone(values[name])
    call_args, call_kwargs = split_call(op, values)
    result = op(*call_args, **call_kwargs)
    results = (result,) if len(schema.returns) == 1 else tuple(result or ())
    fresh = [r for r, ret in zip(results, schema.returns) if ret.alias_info is None]
    news = [t for name in written for t in _tensors(values[name])]
    return [*fresh, *news]


def _clone(value):
    if isinstance(value, (list, tuple)):
        return [None if t is None else t.clone() for t in value]
    return None if value is None else value.clone()


def _tensors(value) -> list:
    if isinstance(value, (list, tuple)):
        return [t for t in value if t is not None]
    return [] if value is None else [value]

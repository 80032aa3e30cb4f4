"""The functional foreach ops (`_foreach_add.List`, `_foreach_sqrt`, ...): one call of the
per-tensor op for each item of the lists, which is what ATen's own slow path runs. Hand-written
optimizers call them (in place: ember-autograd records `_foreach_mul_` as `_foreach_mul` first);
left whole, each is a library call that allocates every result, and a momentum SGD step compiled
that way took three times eager's time. Decomposed, the inductor fuses each parameter's update
into one kernel.

Note [foreach decompositions]: the per-tensor op is the op named after the foreach op (`add` for
`_foreach_add`; `_RENAMED` lists the others), called with the i-th item of every list argument
and every other argument as it is, resolved by name like a Python call (`aten.add(t, 2.0)` picks
`add.Tensor` or `add.Scalar`). An overload is registered only if that resolution succeeds on
sample arguments made from its schema (checked once, at import, on meta tensors):
`_foreach_maximum.Scalar` has no per-tensor `maximum(Tensor, Scalar)` and stays a library call,
as does `_foreach_addcmul.Tensor` (its per-item scalars are tensor data).
"""
from __future__ import annotations

import functools

import torch

from ember_prims.decomps._registry import register

aten = torch.ops.aten

_NAMES = (
    "abs", "acos", "add", "addcdiv", "addcmul", "asin", "atan", "ceil", "clamp_max", "clamp_min",
    "clone", "copy", "cos", "cosh", "div", "erf", "erfc", "exp", "expm1", "floor", "frac", "lerp",
    "lgamma", "log", "log10", "log1p", "log2", "max", "maximum", "minimum", "mul", "neg", "norm", "pow",
    "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "sub", "tan", "tanh",
    "trunc", "zero",
)

# foreach name -> (per-tensor op name, {foreach argument: per-tensor keyword}); arguments not
# named here go positionally (keyword-only ones by their own name)
_RENAMED = {
    "addcmul": ("addcmul", {"value": "value", "scalars": "value"}),
    "addcdiv": ("addcdiv", {"value": "value", "scalars": "value"}),
    "norm": ("linalg_vector_norm", {"dtype": "dtype"}),
}
_SKIPPED = {"addcmul.Tensor", "addcdiv.Tensor"}  # per-item scalars held in a tensor

_LIST_TYPES = ("List[Tensor]", "List[number]")


def _each(name: str, op: torch._ops.OpOverload, *args, **kwargs) -> list:
    per_tensor_name, keywords = _RENAMED.get(name, (name, {}))
    per_tensor = getattr(aten, per_tensor_name)
    values = _bind(op, args, kwargs)
    lists = [v for a, v in zip(op._schema.arguments, values) if str(a.type) in _LIST_TYPES]
    out = []
    for i in range(len(lists[0])):
        call_args, call_kwargs = [], {}
        for a, v in zip(op._schema.arguments, values):
            item = v[i] if str(a.type) in _LIST_TYPES else v
            if a.name in keywords or a.kwarg_only:
                call_kwargs[keywords.get(a.name, a.name)] = item
            else:
                call_args.append(item)
        out.append(per_tensor(*call_args, **call_kwargs))
    return out


def _bind(op, args, kwargs) -> list:
    values = []
    for i, a in enumerate(op._schema.arguments):
        if i < len(args) and not a.kwarg_only:
            values.append(args[i])
        else:
            values.append(kwargs.get(a.name, a.default_value))
    return values


_SAMPLES = {"List[Tensor]": lambda: [torch.ones(2, device="meta")], "List[number]": lambda: [2.0],
            "Tensor": lambda: torch.ones((), device="meta"), "number": lambda: 2.0}


def _resolves(name: str, op: torch._ops.OpOverload) -> bool:
    """Whether the per-tensor call resolves for `op` (Note [foreach decompositions])."""
    args = []
    for a in op._schema.arguments:
        if a.kwarg_only or a.has_default_value():
            break
        make = _SAMPLES.get(str(a.type))
        if make is None:
            return False
        args.append(make())
    try:
        _each(name, op, *args)
    except (RuntimeError, TypeError):
        return False
    return True


def _register_all() -> None:
    for name in _NAMES:
        packet = getattr(aten, f"_foreach_{name}", None)
        if packet is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if overload.endswith("out") or op._schema.is_mutable or f"{name}.{overload}" in _SKIPPED:
                continue
            if _resolves(name, op):
                register(op)(_decomposition(name, op))


def _decomposition(name: str, op: torch._ops.OpOverload):
    fn = functools.partial(_each, name, op)
    fn.__name__ = fn.__qualname__ = f"foreach_{name}"  # what the table's messages print
    return fn


_register_all()

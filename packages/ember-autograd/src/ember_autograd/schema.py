"""Small helpers over an op's schema, shared by functionalization and auto-functionalization."""
from __future__ import annotations

from ember_autograd.errors import AotTraceError


def is_write(arg) -> bool:
    """Whether the schema argument `arg` is written by the op (`Tensor(a!)`)."""
    return arg.alias_info is not None and arg.alias_info.is_write


def split_call(op, values: dict) -> tuple[list, dict]:
    """`op`'s arguments, given by name in `values`, as (positional, keyword-only)."""
    args, kwargs = [], {}
    for arg in op._schema.arguments:
        (kwargs.__setitem__(arg.name, values[arg.name]) if arg.kwarg_only
         else args.append(values[arg.name]))
    return args, kwargs


def normalize_args(op, args, kwargs) -> list:
    """All of `op`'s schema arguments in order, defaults filled in."""
    out = []
    for i, arg in enumerate(op._schema.arguments):
        if i < len(args) and not arg.kwarg_only:
            out.append(args[i])
        elif arg.name in kwargs:
            out.append(kwargs[arg.name])
        elif arg.has_default_value():
            out.append(arg.default_value)
        else:
            raise AotTraceError("bad-call", f"missing argument {arg.name!r}", op=op)
    return out

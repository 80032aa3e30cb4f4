"""Opcode handlers: calls and function creation."""
from __future__ import annotations

from . import calls
from . import semantics as S
from .config import Unsupported
from .frame import op, until
from .variables import NULL, CellVar, DictVar, FunctionVar


@op("KW_NAMES", versions=until((3, 12)))
def _kw_names(fr, inst):
    fr.kw_names = fr.code.co_consts[inst.arg]


@op("CALL", versions=until((3, 12)))
def _call(fr, inst):
    fn, args, kwargs = pop_call_args(fr, inst.arg)
    fr.push(calls.call(fr, fn, args, kwargs))


def pop_call_args(fr, argc):
    """Pop what CALL(argc) consumes: (NULL, callable | callable, self), args, KW_NAMES."""
    args = fr.popn(argc)
    first, second = fr.popn(2)
    if first is NULL:
        fn = second
    else:
        fn, args = first, [second] + args
    kw_names = fr.kw_names
    fr.kw_names = ()
    kwargs = {}
    if kw_names:
        kwargs = dict(zip(kw_names, args[len(args) - len(kw_names):]))
        args = args[:len(args) - len(kw_names)]
    return fn, args, kwargs


@op("CALL_FUNCTION_EX", versions=until((3, 12)))
def _call_function_ex(fr, inst):
    fn, args, kwargs = pop_call_ex_args(fr, inst.arg)
    fr.push(calls.call(fr, fn, args, kwargs))


def pop_call_ex_args(fr, flags):
    kwargs_var = fr.pop() if flags & 1 else DictVar({})
    args_var = fr.pop()
    fn = fr.pop()
    null = fr.pop()
    return call_ex_args(fr, fn, null, args_var, kwargs_var)


def call_ex_args(fr, fn, null, args_var, kwargs_var):
    """(callable, args, kwargs) of CALL_FUNCTION_EX's popped values."""
    if null is not NULL:
        raise Unsupported("internal", "CALL_FUNCTION_EX without NULL")
    if not isinstance(kwargs_var, DictVar):
        raise Unsupported("unsupported_call", f"**{S.describe(kwargs_var)}")
    return fn, S.unpack(fr, args_var), dict(kwargs_var.items)


@op("MAKE_FUNCTION", versions=until((3, 12)))
def _make_function(fr, inst):
    code = S.const_value(fr.pop())
    flags = inst.arg
    closure = tuple(S.unpack(fr, fr.pop())) if flags & 0x08 else None
    if flags & 0x04:
        fr.pop()  # annotations
    kwdefaults = dict(fr.pop().items) if flags & 0x02 else {}
    defaults = tuple(S.unpack(fr, fr.pop())) if flags & 0x01 else ()
    if closure is not None and not all(isinstance(c, CellVar) for c in closure):
        raise Unsupported("internal", "closure of non-cells")
    fr.push(FunctionVar(code, fr.globals, code.co_name, defaults, kwdefaults, closure))



"""Opcode handlers that CPython 3.13 changed or added.

What 3.13 changed, against 3.12 (``dis`` documentation, "Changed in version 3.13"):

- Calls: the callable sits *below* ``self_or_null`` (``LOAD_GLOBAL`` pushes ``f, NULL``;
  ``LOAD_ATTR`` with the method bit pushes ``meth, self`` or ``attr, NULL``); ``KW_NAMES`` is
  gone and ``CALL_KW`` takes the keyword names from the top of the stack;
  ``CALL_FUNCTION_EX`` finds ``func, NULL`` under its arguments.
- ``MAKE_FUNCTION`` takes only the code object; ``SET_FUNCTION_ATTRIBUTE`` adds defaults,
  keyword defaults, annotations and the closure one at a time.
- ``FORMAT_VALUE`` became ``CONVERT_VALUE`` (``!s``/``!r``/``!a``), ``FORMAT_SIMPLE`` and
  ``FORMAT_WITH_SPEC``.
- ``TO_BOOL`` converts before a conditional jump, which then sees an exact ``bool``;
  ``COMPARE_OP``'s argument is ``op << 5``, with bit 16 asking for a ``bool`` result.
- Superinstructions: ``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_STORE_FAST``,
  ``STORE_FAST_LOAD_FAST`` (two local indices packed in one argument, 4 bits each).
- ``END_FOR`` pops one value (a ``POP_TOP`` follows it); see ``ops_flow._exhausted_312``.

The tracer's stack mirrors CPython's, ``NULL``s included, because a graph break rebuilds the
real stack from it and the bytecode after the break reads it (Note [Resume functions]).
"""
from __future__ import annotations

import dis

from . import calls
from . import semantics as S
from .config import Unsupported
from .frame import op
from .ops_basic import _load_fast, _store_fast, load_global, super_attr
from .ops_build import COMPARE_OPS, format_value
from .ops_call import call_ex_args
from .variables import NULL, CellVar, ConstVar, DictVar, FunctionVar

V313 = ((3, 13),)
CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


class _Named:
    """Stands for an instruction whose ``argval`` is one local name (for the LOAD_FAST and
    STORE_FAST handlers, which read only ``argval``)."""

    def __init__(self, name):
        self.argval = name


@op("LOAD_FAST", versions=V313)
def _load_fast_313(fr, inst):
    # 3.13 compiles LOAD_CLOSURE (a cell for a closure being built) to LOAD_FAST of the cell's
    # slot; the cell's value is read with LOAD_DEREF, so LOAD_FAST of a cell name is the cell.
    name = inst.argval
    if name in fr.cells and name not in fr.locals:
        fr.push(fr.cells[name])
    else:
        _load_fast(fr, inst)


def _pair(fr, inst):
    names = fr.code.co_varnames
    return _Named(names[inst.arg >> 4]), _Named(names[inst.arg & 15])


def _superinstruction(first_op, second_op):
    """A handler running two local-variable handlers on the two names packed in the argument."""
    def handler(fr, inst):
        first, second = _pair(fr, inst)
        first_op(fr, first)
        second_op(fr, second)
    return handler


for _name, _ops in {"LOAD_FAST_LOAD_FAST": (_load_fast_313, _load_fast_313),
                    "STORE_FAST_STORE_FAST": (_store_fast, _store_fast),
                    "STORE_FAST_LOAD_FAST": (_store_fast, _load_fast_313)}.items():
    op(_name, versions=V313)(_superinstruction(*_ops))


@op("LOAD_GLOBAL", versions=V313)
def _load_global(fr, inst):
    fr.push(load_global(fr, inst.argval))
    if inst.arg & 1:
        fr.push(NULL)


@op("LOAD_ATTR", versions=V313)
def _load_attr(fr, inst):
    fr.push(S.getattr_var(fr, fr.pop(), inst.argval))
    if inst.arg & 1:
        fr.push(NULL)  # a bound method and NULL: CALL treats it as a plain callable


@op("LOAD_SUPER_ATTR", versions=V313)
def _load_super_attr(fr, inst):
    fr.push(super_attr(fr, inst))
    if inst.arg & 1:
        fr.push(NULL)


def pop_call_args(fr, argc, kw_names=()):
    """Pop what CALL(argc) / CALL_KW(argc) consume: callable, self_or_null, args."""
    args = fr.popn(argc)
    fn, self_or_null = fr.popn(2)
    if self_or_null is not NULL:
        args = [self_or_null] + args
    kwargs = {}
    if kw_names:
        n = len(kw_names)
        kwargs = dict(zip(kw_names, args[len(args) - n:]))
        args = args[:len(args) - n]
    return fn, args, kwargs


@op("CALL", versions=V313)
def _call(fr, inst):
    fn, args, kwargs = pop_call_args(fr, inst.arg)
    fr.push(calls.call(fr, fn, args, kwargs))


@op("CALL_KW", versions=V313)
def _call_kw(fr, inst):
    kw_names = S.const_value(fr.pop())
    fn, args, kwargs = pop_call_args(fr, inst.arg, kw_names)
    fr.push(calls.call(fr, fn, args, kwargs))


@op("CALL_FUNCTION_EX", versions=V313)
def _call_function_ex(fr, inst):
    kwargs_var = fr.pop() if inst.arg & 1 else DictVar({})
    args_var = fr.pop()
    null = fr.pop()
    fn = fr.pop()
    fr.push(calls.call(fr, *call_ex_args(fr, fn, null, args_var, kwargs_var)))


@op("MAKE_FUNCTION", versions=V313)
def _make_function(fr, inst):
    code = S.const_value(fr.pop())
    fr.push(FunctionVar(code, fr.globals, code.co_name, (), {}, None))


@op("SET_FUNCTION_ATTRIBUTE", versions=V313)
def _set_function_attribute(fr, inst):
    func = fr.pop()
    value = fr.pop()
    if not isinstance(func, FunctionVar):
        raise Unsupported("internal", "SET_FUNCTION_ATTRIBUTE on a function not made while tracing")
    if inst.arg == 0x08:
        closure = tuple(S.unpack(fr, value))
        if not all(isinstance(c, CellVar) for c in closure):
            raise Unsupported("internal", "closure of non-cells")
        func.closure = closure
    elif inst.arg == 0x02:
        func.kwdefaults = dict(value.items)
    elif inst.arg == 0x01:
        func.defaults = tuple(S.unpack(fr, value))
    # 0x04: annotations are not kept (as for MAKE_FUNCTION before 3.13)
    fr.push(func)


@op("CONVERT_VALUE", versions=V313)
def _convert_value(fr, inst):
    value = S.concrete_value(fr.pop(), "formatting a value")
    fr.push(ConstVar(CONVERSIONS[inst.arg](value)))


@op("FORMAT_SIMPLE", versions=V313)
def _format_simple(fr, inst):
    fr.push(format_value(fr, fr.pop(), ConstVar("")))


@op("FORMAT_WITH_SPEC", versions=V313)
def _format_with_spec(fr, inst):
    spec = fr.pop()
    fr.push(format_value(fr, fr.pop(), spec))


@op("TO_BOOL", versions=V313)
def _to_bool(fr, inst):
    fr.push(ConstVar(S.truthy(fr, fr.pop())))


def compare_op_313(arg: int):
    """(operator, whether the result is converted to bool) of COMPARE_OP's argument."""
    return COMPARE_OPS[dis.cmp_op[arg >> 5]], bool(arg & 16)


@op("COMPARE_OP", versions=V313)
def _compare_op(fr, inst):
    b = fr.pop()
    a = fr.pop()
    fn, to_bool = compare_op_313(inst.arg)
    result = S.binary(fr, fn, a, b)
    fr.push(ConstVar(S.truthy(fr, result)) if to_bool else result)


@op("END_FOR", versions=V313)
def _end_for(fr, inst):
    fr.pop()  # the NULL of an exhausted FOR_ITER; the POP_TOP that follows pops the iterator

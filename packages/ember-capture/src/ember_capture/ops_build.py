"""Opcode handlers: operators, subscripts, and building/unpacking containers."""
from __future__ import annotations

import operator

from . import semantics as S
from .config import Unsupported
from .frame import op, since, until
from .variables import ConstVar, DictVar, ListVar, SetVar, TupleVar

# BINARY_OP's argument -> operator function (the same numbering in 3.11 and 3.12).
BINARY_OPS = [
    operator.add, operator.and_, operator.floordiv, operator.lshift, operator.matmul, operator.mul,
    operator.mod, operator.or_, operator.pow, operator.rshift, operator.sub, operator.truediv,
    operator.xor, operator.iadd, operator.iand, operator.ifloordiv, operator.ilshift,
    operator.imatmul, operator.imul, operator.imod, operator.ior, operator.ipow, operator.irshift,
    operator.isub, operator.itruediv, operator.ixor,
]
COMPARE_OPS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
               ">": operator.gt, ">=": operator.ge}


@op("BINARY_OP")
def _binary_op(fr, inst):
    b = fr.pop()
    a = fr.pop()
    fr.push(S.binary(fr, BINARY_OPS[inst.arg], a, b))


@op("COMPARE_OP", versions=until((3, 12)))
def _compare_op(fr, inst):
    b = fr.pop()
    a = fr.pop()
    fr.push(S.binary(fr, COMPARE_OPS[inst.argval], a, b))


@op("IS_OP")
def _is_op(fr, inst):
    b = fr.pop()
    a = fr.pop()
    fr.push(ConstVar(S.is_same(a, b) != bool(inst.arg)))


@op("CONTAINS_OP")
def _contains_op(fr, inst):
    container = fr.pop()
    item = fr.pop()
    fr.push(ConstVar(S.contains(fr, container, item) != bool(inst.arg)))


@op("UNARY_NEGATIVE")
def _neg(fr, inst):
    fr.push(S.unary(fr, operator.neg, fr.pop()))


@op("UNARY_POSITIVE")
def _pos(fr, inst):
    fr.push(S.unary(fr, operator.pos, fr.pop()))


@op("UNARY_INVERT")
def _invert(fr, inst):
    fr.push(S.unary(fr, operator.invert, fr.pop()))


@op("UNARY_NOT")
def _not(fr, inst):
    fr.push(ConstVar(not S.truthy(fr, fr.pop())))


@op("BINARY_SUBSCR")
def _subscr(fr, inst):
    key = fr.pop()
    obj = fr.pop()
    fr.push(S.getitem(fr, obj, key))


@op("BINARY_SLICE", versions=since((3, 12)))
def _binary_slice(fr, inst):
    stop = fr.pop()
    start = fr.pop()
    obj = fr.pop()
    fr.push(S.getitem(fr, obj, S.make_slice([start, stop])))


@op("STORE_SUBSCR")
def _store_subscr(fr, inst):
    key = fr.pop()
    obj = fr.pop()
    value = fr.pop()
    S.setitem(fr, obj, key, value)


@op("STORE_SLICE", versions=since((3, 12)))
def _store_slice(fr, inst):
    stop = fr.pop()
    start = fr.pop()
    obj = fr.pop()
    value = fr.pop()
    S.setitem(fr, obj, S.make_slice([start, stop]), value)


@op("DELETE_SUBSCR")
def _delete_subscr(fr, inst):
    key = fr.pop()
    obj = fr.pop()
    S.delitem(fr, obj, key)


@op("BUILD_SLICE")
def _build_slice(fr, inst):
    fr.push(S.make_slice(fr.popn(inst.arg)))


@op("BUILD_TUPLE")
def _build_tuple(fr, inst):
    fr.push(TupleVar(fr.popn(inst.arg)))


@op("BUILD_LIST")
def _build_list(fr, inst):
    fr.push(ListVar(fr.popn(inst.arg)))


@op("BUILD_SET")
def _build_set(fr, inst):
    fr.push(SetVar(S.dedupe(fr.popn(inst.arg))))


@op("BUILD_MAP")
def _build_map(fr, inst):
    vals = fr.popn(2 * inst.arg)
    fr.push(DictVar({S.const_key(vals[i]): vals[i + 1] for i in range(0, len(vals), 2)}))


@op("BUILD_CONST_KEY_MAP")
def _build_const_key_map(fr, inst):
    keys = fr.pop()
    vals = fr.popn(inst.arg)
    fr.push(DictVar(dict(zip(S.const_value(keys), vals))))


@op("BUILD_STRING")
def _build_string(fr, inst):
    parts = fr.popn(inst.arg)
    fr.push(ConstVar("".join(S.concrete_value(p) for p in parts)))


@op("FORMAT_VALUE", versions=until((3, 12)))
def _format_value(fr, inst):
    spec = fr.pop() if inst.arg & 0x04 else ConstVar("")
    value = fr.pop()
    conv = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
    if conv is not None:
        value = ConstVar(conv(S.concrete_value(value, "formatting a value")))
    fr.push(format_value(fr, value, spec))


def format_value(fr, value, spec):
    """``format(value, spec)`` of an f-string field."""
    return ConstVar(format(S.concrete_value(value, "formatting a value"), S.const_value(spec)))


@op("LIST_APPEND")
def _list_append(fr, inst):
    v = fr.pop()
    S.mutable_items(fr, fr.stack[-inst.arg]).append(v)


@op("SET_ADD")
def _set_add(fr, inst):
    v = fr.pop()
    target = _own_set(fr.stack[-inst.arg])
    target.items = S.dedupe(target.items + [v])


@op("MAP_ADD")
def _map_add(fr, inst):
    v = fr.pop()
    k = fr.pop()
    S.mutable_dict(fr, fr.stack[-inst.arg]).items[S.const_key(k)] = v


@op("LIST_EXTEND")
def _list_extend(fr, inst):
    v = fr.pop()
    S.mutable_items(fr, fr.stack[-inst.arg]).extend(S.unpack(fr, v))


@op("SET_UPDATE")
def _set_update(fr, inst):
    v = fr.pop()
    target = _own_set(fr.stack[-inst.arg])
    target.items = S.dedupe(target.items + S.unpack(fr, v))


def _own_set(target):
    """The set a comprehension or display builds. After a break it is an input of the resume
    function: a real set, whose changes capture does not write back (as set methods refuse)."""
    if target.source is not None:
        raise Unsupported("side_effect", "adding to a set built before a graph break")
    return target


@op("DICT_UPDATE", "DICT_MERGE")
def _dict_update(fr, inst):
    v = fr.pop()
    target = fr.stack[-inst.arg]
    if not isinstance(v, DictVar):
        raise Unsupported("unsupported_container", f"dict update from {type(v).__name__}")
    if inst.opname == "DICT_MERGE":  # f(**a, **b): a key in both is the caller's TypeError
        repeated = next((k for k in v.items if k in target.items), None)
        if repeated is not None:
            raise Unsupported("trace_error", f"keyword argument {repeated!r} given twice (CPython raises "
                              "the TypeError naming the function)")
    S.mutable_dict(fr, target).items.update(v.items)


@op("LIST_TO_TUPLE", versions=((3, 11),))
def _list_to_tuple(fr, inst):
    fr.push(TupleVar(S.unpack(fr, fr.pop())))


@op("CALL_INTRINSIC_1", versions=since((3, 12)))
def _call_intrinsic_1(fr, inst):
    name = inst.argrepr
    if name == "INTRINSIC_LIST_TO_TUPLE":
        fr.push(TupleVar(S.unpack(fr, fr.pop())))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        fr.push(S.unary(fr, operator.pos, fr.pop()))
    else:
        raise Unsupported("unsupported_opcode", f"CALL_INTRINSIC_1 {name}")


@op("UNPACK_SEQUENCE")
def _unpack_sequence(fr, inst):
    items = S.unpack(fr, fr.pop())
    if len(items) != inst.arg:
        raise Unsupported("trace_error", f"cannot unpack {len(items)} values into {inst.arg}")
    for v in reversed(items):
        fr.push(v)


@op("UNPACK_EX")
def _unpack_ex(fr, inst):
    items = S.unpack(fr, fr.pop())
    before, after = inst.arg & 0xFF, inst.arg >> 8
    if len(items) < before + after:
        raise Unsupported("trace_error", "not enough values to unpack")
    middle = ListVar(items[before:len(items) - after])
    vals = items[:before] + [middle] + items[len(items) - after:]
    for v in reversed(vals):
        fr.push(v)

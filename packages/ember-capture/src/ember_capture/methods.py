"""Methods of builtin kinds on symbolic receivers (``x.view(...)``, ``lst.append(v)``,
``d.items()``): the value protocol's METHOD table (Note [Value protocol]), and for each builtin
container a table keyed by method name.

A list or a dict from the inputs changed by a trace is written back after the graph (Note
[Mutated input lists], Note [Mutated input dicts]); a set's changing methods on one are a
graph break.
"""
from __future__ import annotations

import collections
import types

import torch

from .attributes import CONTAINER_TYPES, class_lookup
from .config import Unsupported
from .frame import TracedRaise
from .graph import SliceParts
from .lazy import LazyVar
from .protocol import CALL, METHOD, call, call_method, getitem
from .semantics import concrete, concrete_value, const_key, const_value, copy_dict, dedupe, dict_pairs, from_python, \
    getattr_var, item_equals, mutable_dict, mutable_items, unpack
from .tables import registrar
from .tensor_state import STATE_METHODS, tensor_state
from .variables import (
    AutocastVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExitVar, FunctionVar, GradModeVar, IterVar,
    ListVar, MethodVar, NewObjVar, NoOpContextVar, NullVar, ObjVar, PartialVar, SetVar, SuperVar, TensorVar, TupleVar,
)

CALL.rule(MethodVar)(lambda fr, fn, args, kwargs: call_method(fr, fn.receiver, fn.name, args, kwargs))
METHOD.refuse(NullVar, DictViewVar, IterVar, CellVar, FunctionVar, BoundVar, MethodVar, PartialVar, GradModeVar,
              AutocastVar, NoOpContextVar, ExitVar, SuperVar, NewObjVar, SliceParts, LazyVar)


@METHOD.rule(TensorVar)
def tensor_method(fr, t, name, args, kwargs):
    if name == "requires_grad_":
        return _requires_grad_(t, args, kwargs)
    if name in STATE_METHODS and not args and not kwargs:  # Note [Tensor state outside the guards]
        return tensor_state(fr, t, name)
    return fr.tr.graph.call("call_method", name, [t] + list(args), dict(kwargs))


def _requires_grad_(t: TensorVar, args, kwargs):
    """``t.requires_grad_(flag)``: a no-op where ``t`` already is so; else it makes ``t`` an autograd
    leaf (or stops it being one), which a functional graph cannot say (an AOT backend decides
    which outputs need grad from the graph's inputs): a graph break, as ``t.requires_grad = flag``
    is, so that the rest of the code sees the leaf as an input."""
    flag = args[0] if args else kwargs.get("requires_grad", ConstVar(True))
    if bool(const_value(flag, "requires_grad_()")) == t.fake.requires_grad:
        return t
    raise Unsupported("side_effect", "requires_grad_() changes whether a tensor is an autograd leaf")


@METHOD.rule(ObjVar)
def _obj_method(fr, o, name, args, kwargs):
    return call(fr, getattr_var(fr, o, name), args, kwargs)


@METHOD.rule(ConstVar)
def _const_method(fr, c, name, args, kwargs):
    if isinstance(c.value, torch.Size) and name in ("numel", "count", "index", "__len__", "__getitem__"):
        method = getattr(c.value, name)  # torch.Size's own: symbolic sizes stay symbolic
        return from_python(method(*[const_value(a, f"{name}()") for a in args]))
    # Other methods (str.format, int.bit_length) need numbers (Note [Dynamic shapes in capture])
    method = getattr(concrete(c.value), name)
    return from_python(method(*[concrete_value(a, f"{name}()") for a in args],
                              **{k: concrete_value(v, f"{name}()") for k, v in kwargs.items()}))


def _by_name(kind: str, reads: dict, writes: dict, before_write):
    """The METHOD rule of a builtin container: ``reads[name]`` (a rule that returns
    NotImplemented passes), else ``before_write`` (which may refuse a change) and
    ``writes[name]``; a rule returns None for Python's None. Rules take ``(fr, c, args, kwargs)``
    with ``c`` the container, or for writes what ``before_write`` returned."""
    def method(fr, c, name, args, kwargs):
        read = reads.get(name)
        if read is not None:
            result = read(fr, c, args, kwargs)
            if result is not NotImplemented:
                return result
        target = before_write(fr, c, name)
        write = writes.get(name)
        if write is None:
            raise Unsupported("unsupported_call", f"{kind}.{name}")
        result = write(fr, target, args, kwargs)
        return ConstVar(None) if result is None else result
    return method


def _const_query(name, container):
    """A query (``index``, ``count``, ``union``...) computed on the constant items."""
    return lambda fr, c, args, kwargs: from_python(getattr(container(const_value(i) for i in c.items), name)(
        *[const_value(a) for a in args]))


def _refuse_input(kind):
    def before_write(fr, c, name):
        if c.source is not None:
            raise Unsupported("side_effect", f"{kind}.{name} on an input {kind}")
        return c
    return before_write


def _equality_query(name, container):
    """``index`` and ``count`` of a list or tuple: each item matched as ``in`` matches it
    (``item_equals``: a user ``__eq__`` is not decided by identity); an index not found is
    Python's own error, from the constant items."""
    def query(fr, c, args, kwargs):
        if kwargs or not args:
            return _const_query(name, container)(fr, c, args, kwargs)
        bounds = [const_value(a) for a in args[1:]] + [None, None]
        positions = range(len(c.items))[slice(bounds[0], bounds[1])]
        hits = [i for i in positions if item_equals(fr, c.items[i], args[0])]
        if name == "count":
            return ConstVar(len(hits))
        return ConstVar(hits[0]) if hits else _const_query(name, container)(fr, c, args, kwargs)
    return query


# -- list: a list from the inputs is changed and written back (Note [Mutated input lists]) --
LIST_READS = {"index": _equality_query("index", list), "count": _equality_query("count", list)}
LIST_WRITES = {}  # rules take the list's items
_list_read, _list_write = registrar(LIST_READS), registrar(LIST_WRITES)
METHOD.rule(ListVar)(_by_name("list", LIST_READS, LIST_WRITES, lambda fr, lst, name: mutable_items(fr, lst)))
_list_read("copy")(lambda fr, lst, args, kwargs: ListVar(lst.items))
_list_read("__len__")(lambda fr, lst, args, kwargs: ConstVar(len(lst.items)))
_list_read("__getitem__")(lambda fr, lst, args, kwargs: getitem(fr, lst, args[0]))
_list_write("append")(lambda fr, items, args, kwargs: items.append(args[0]))
_list_write("extend")(lambda fr, items, args, kwargs: items.extend(unpack(fr, args[0])))
_list_write("insert")(lambda fr, items, args, kwargs: items.insert(const_value(args[0]), args[1]))
@_list_write("pop")
def _list_pop(fr, items, args, kwargs):
    try:
        return items.pop(*[const_value(a) for a in args])
    except IndexError as exc:  # the user's error, raised in the traced code (Note [Traced exceptions])
        raise TracedRaise(IndexError(*exc.args)) from None



_list_write("clear")(lambda fr, items, args, kwargs: items.clear())
_list_write("reverse")(lambda fr, items, args, kwargs: items.reverse())


# -- tuple -------------------------------------------------------------------------------
TUPLE_READS = {"index": _equality_query("index", tuple), "count": _equality_query("count", tuple)}
METHOD.rule(TupleVar)(_by_name("tuple", TUPLE_READS, {}, lambda fr, tup, name: tup))


@registrar(TUPLE_READS)("_asdict")
def _asdict(fr, tup, args, kwargs):  # a namedtuple's
    return DictVar({f: tup.items[i] for f, i in tup.fields.items()}) if tup.fields else NotImplemented


# -- set ---------------------------------------------------------------------------------
SET_READS = {name: _const_query(name, set) for name in (
    "copy", "union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint",
    "__len__", "__contains__")}
SET_WRITES = {}
METHOD.rule(SetVar)(_by_name("set", SET_READS, SET_WRITES, _refuse_input("set")))


@registrar(SET_WRITES)("add")
def _set_add(fr, s, args, kwargs):
    s.items = dedupe(s.items + [args[0]])


# -- dict: a dict from the inputs is changed and written back (Note [Mutated input dicts]) --
DICT_READS, DICT_WRITES = {}, {}
_dict_read, _dict_write = registrar(DICT_READS), registrar(DICT_WRITES)
_dict_by_name = _by_name("dict", DICT_READS, DICT_WRITES, lambda fr, d, name: mutable_dict(fr, d))


@METHOD.rule(DictVar)
def _dict_method(fr, d, name, args, kwargs):
    if d.cls not in CONTAINER_TYPES and name not in DICT_READS and name not in DICT_WRITES:
        raw = class_lookup(fr.tr, d.cls, name)  # a user subclass's own method (guarded)
        if isinstance(raw, types.FunctionType):
            return call(fr, BoundVar(ObjVar(raw), d), args, kwargs)
    return _dict_by_name(fr, d, name, args, kwargs)



def _view(kind):
    return lambda fr, d, args, kwargs: NotImplemented if args or kwargs else DictViewVar(d, kind)


for _kind in ("items", "keys", "values"):
    DICT_READS[_kind] = _view(_kind)
_dict_read("get")(lambda fr, d, args, kwargs: d.items.get(const_value(args[0]),
                                                           args[1] if len(args) > 1 else ConstVar(None)))
_dict_read("copy")(lambda fr, d, args, kwargs: copy_dict(d))
@_dict_write("pop")
def _dict_pop(fr, d, args, kwargs):
    key = const_value(args[0])
    if key not in d.items and len(args) < 2:  # keys are guarded
        raise TracedRaise(KeyError(key))
    return d.items.pop(key, *args[1:])



_dict_write("setdefault")(lambda fr, d, args, kwargs: d.items.setdefault(
    const_value(args[0]), args[1] if len(args) > 1 else ConstVar(None)))


@_dict_write("update")
def _update(fr, d, args, kwargs):
    if args:
        d.items.update(dict_pairs(fr, args[0]))
    d.items.update(kwargs)


def _flag(args, kwargs, name, position, default):
    if len(args) > position:
        return const_value(args[position])
    return const_value(kwargs[name]) if name in kwargs else default


@_dict_write("move_to_end")
def _move_to_end(fr, d, args, kwargs):
    if not issubclass(d.cls, collections.OrderedDict):
        raise Unsupported("unsupported_call", f"{d.cls.__name__}.move_to_end")
    key = const_key(args[0])
    if key not in d.items:
        raise TracedRaise(KeyError(key))
    value = d.items.pop(key)
    if _flag(args, kwargs, "last", 1, True):
        d.items[key] = value
    else:
        d.items = {key: value, **d.items}


@_dict_write("popitem")
def _popitem(fr, d, args, kwargs):
    if not d.items:
        raise Unsupported("raise", f"popitem(): {d.cls.__name__} is empty")
    last = _flag(args, kwargs, "last", 0, True) if issubclass(d.cls, collections.OrderedDict) else True
    key = next(reversed(d.items)) if last else next(iter(d.items))
    return TupleVar([ConstVar(key), d.items.pop(key)])


@_dict_write("clear")
def _clear(fr, d, args, kwargs):
    d.items.clear()

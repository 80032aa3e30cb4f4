"""Iteration, ``in`` and items (``obj[k]``, ``obj[k] = v``, ``del obj[k]``) on each kind of
symbolic value: the rules of the value protocol's UNPACK, CONTAINS, GETITEM, SETITEM and DELITEM
tables (Note [Value protocol])."""
from __future__ import annotations

import collections.abc
import operator

import torch

from .builder import wrap
from .config import Unsupported
from .frame import TracedRaise
from .graph import SliceParts
from .lazy import LazyVar
from .protocol import CONTAINS, DELITEM, GETITEM, SETITEM, UNPACK, contains, describe, getitem, setitem, unpack
from .tables import TypeTable
from .semantics import (
    NO_DUNDER, call_dunder, const_key, const_value, getattr_var, is_same, item_equals, module_entry, mutable_dict,
    iterate, mutable_items, truthy, user_iter,
)
from .variables import (
    AutocastVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExitVar, FunctionVar, GradModeVar, IterVar,
    ListVar, MethodVar, NewObjVar, NoOpContextVar, NullVar, ObjVar, PartialVar, SetVar, SuperVar, TensorVar, TupleVar,
)

# Kinds of value that hold no items and model no protocol of their own.
_ITEMLESS = (NullVar, CellVar, FunctionVar, BoundVar, MethodVar, PartialVar, GradModeVar, AutocastVar, NoOpContextVar,
             ExitVar, SuperVar, SliceParts, LazyVar)


def _user_protocol(fr, obj, name, args):
    result = call_dunder(fr, obj, name, args)
    if result is NO_DUNDER:
        raise Unsupported("unsupported_call", f"{name} of {describe(obj)}")
    return result


# -- iteration ---------------------------------------------------------------------------
UNPACK.rule(ListVar, TupleVar, SetVar)(lambda fr, v: list(v.items))
UNPACK.rule(DictVar)(lambda fr, v: [ConstVar(k) for k in v.items])
UNPACK.rule(DictViewVar)(lambda fr, v: v.view_items())
UNPACK.rule(IterVar)(lambda fr, v: v.drain())
UNPACK.refuse(*_ITEMLESS)
_ITERABLE_CONSTANTS = (tuple, list, range, str, torch.Size, dict, set, frozenset)


@UNPACK.rule(ConstVar)
def _unpack_const(fr, v: ConstVar):
    if isinstance(v.value, _ITERABLE_CONSTANTS):
        return [ConstVar(i) for i in v.value]
    return UNPACK.refusal(fr, v)


@UNPACK.rule(TensorVar)
def _unpack_tensor(fr, v: TensorVar):
    if v.fake.dim() == 0:
        raise Unsupported("trace_error", "iteration over a 0-d tensor")
    return [getitem(fr, v, ConstVar(i)) for i in range(v.fake.shape[0])]


@UNPACK.rule(ObjVar)
def _unpack_obj(fr, v: ObjVar):
    if isinstance(v.value, torch.nn.Module):
        return module_children(fr, v)
    return _unpack_user(fr, v)


@UNPACK.rule(NewObjVar)
def _unpack_user(fr, v):  # a user class's __iter__ (a Sequence's, from collections.abc)
    it = user_iter(fr, v)
    if it is not NO_DUNDER:
        return it.drain()
    return UNPACK.refusal(fr, v)


def module_children(fr, v: ObjVar) -> list:
    rule = MODULE_CHILDREN.find(type(v.value))
    if rule is None:
        raise Unsupported("unsupported_iter", f"iterating over module {type(v.value).__name__}")
    return rule(fr, v)


def guard_module_keys(fr, v: ObjVar) -> list:
    """Note [Container module contents]: the names of a container module's children, guarded.
    The module is guarded by identity, each child read by its own source; but the loop over a
    ModuleList, `layers[-1]` and `len(layers)` depend on which children there are, which
    `append`, `del` or `insert` change on the same object after the compile."""
    keys = list(v.value._modules)
    if v.source is not None:
        fr.tr.guards.add(f"{v.source}._modules", f"list(X) == {keys!r}", f"{v.source} has the children {keys}")
    return keys


def guard_len(fr, v: ObjVar) -> int:
    """`len(v)` of a module (a ParameterList's parameters, a ModuleList's children), guarded."""
    n = len(v.value)
    if v.source is not None:
        fr.tr.guards.add(v.source, f"len(X) == {n}", f"len({v.source}) == {n}")
    return n


# Iteration and items of the container modules, by module class.
MODULE_CHILDREN, MODULE_ITEMS = TypeTable(), TypeTable()
MODULE_CHILDREN.register(torch.nn.Sequential, torch.nn.ModuleList)(
    lambda fr, v: [module_entry(fr, v, k) for k in guard_module_keys(fr, v)])
MODULE_CHILDREN.register(torch.nn.ModuleDict)(lambda fr, v: [ConstVar(k) for k in guard_module_keys(fr, v)])
MODULE_CHILDREN.register(torch.nn.ParameterList)(
    lambda fr, v: [getattr_var(fr, v, str(i)) for i in range(guard_len(fr, v))])


# -- membership --------------------------------------------------------------------------
@CONTAINS.rule(ListVar, TupleVar, SetVar, IterVar, TensorVar)
def _contains_by_iteration(fr, container, item) -> bool:
    if isinstance(item, TensorVar):
        if any(isinstance(i, TensorVar) and i.node is item.node for i in unpack(fr, container)):
            return True
        raise Unsupported("data_dependent", "`in` on tensors compares their values")
    it = iterate(fr, container)  # as Python does: stop at the first match (a generator's or a
    while it.more():             # user iterator's later items are never made: Note [lazy iterators])
        if item_equals(fr, it.take(), item):
            return True
    return False


CONTAINS.refuse(*_ITEMLESS)


@CONTAINS.rule(ConstVar)
def _const_contains(fr, container: ConstVar, item) -> bool:
    if isinstance(item, ConstVar):
        return operator.contains(container.value, item.value)  # Python's own `in`: substrings, ranges
    return _contains_by_iteration(fr, container, item)


@CONTAINS.rule(DictVar)
def _dict_contains(fr, d: DictVar, item) -> bool:
    return const_key(item) in d.items


@CONTAINS.rule(DictViewVar)
def _view_contains(fr, view: DictViewVar, item) -> bool:
    if view.kind == "keys":
        return const_key(item) in view.dict.items
    if view.kind == "items":
        pair = unpack(fr, item) if isinstance(item, (TupleVar, ListVar, ConstVar)) else None
        if pair is None or len(pair) != 2 or const_key(pair[0]) not in view.dict.items:
            return False
        return contains(fr, TupleVar([view.dict.items[const_key(pair[0])]]), pair[1])
    return _contains_by_iteration(fr, view, item)


@CONTAINS.rule(ObjVar)
def _obj_contains(fr, container: ObjVar, item) -> bool:
    if _registry(container, item):
        return _registry_contains(fr, container, item)
    if isinstance(container.value, torch.nn.ModuleDict):
        return const_key(item) in container.value._modules
    return _newobj_contains(fr, container, item)


@CONTAINS.rule(NewObjVar)
def _newobj_contains(fr, container, item) -> bool:
    """A user class's ``__contains__``, traced; without one, Python iterates (``__iter__``)."""
    result = call_dunder(fr, container, "__contains__", [item])
    if result is NO_DUNDER:
        return _contains_by_iteration(fr, container, item)
    return truthy(fr, result)


def _registry(v: ObjVar, key) -> bool:
    """A Mapping object (not a dict: those are DictVars) read from a source, with a constant
    key: a registry of functions such as a model library's attention implementations."""
    return (v.source is not None and isinstance(key, ConstVar)
            and isinstance(v.value, collections.abc.Mapping) and not isinstance(v.value, torch.nn.Module))


def _registry_contains(fr, m: ObjVar, key: ConstVar) -> bool:
    """Note [registry lookups]: a Mapping's own code (often in the standard library, which is
    not inlined) is run natively at trace time, and a guard re-asks the same question on each
    call (`key in X`, `X[key] is value`), so a registry changed later recompiles."""
    k = key.value
    hash(k)
    fr.tr.check_native(m.value, f"`in` on a {type(m.value).__name__}")  # Note [Mutated input dicts]
    result = k in m.value
    fr.tr.guards.add(m.source, f"({fr.tr.ns.ref(k)} in X) is {result}", f"({k!r} in {m.source}) is {result}")
    return result


def _registry_getitem(fr, m: ObjVar, key: ConstVar):
    if not _registry_contains(fr, m, key):  # guarded: raised on every call this entry serves
        raise TracedRaise(KeyError(key.value))
    value = m.value[key.value]
    ns = fr.tr.ns
    fr.tr.guards.add(m.source, f"X[{ns.ref(key.value)}] is {ns.ref(value)}",
                     f"{m.source}[{key.value!r}] is <{type(value).__name__} at {id(value):#x}>")
    return wrap(fr.tr, value, None)


# -- reading items -----------------------------------------------------------------------
GETITEM.refuse(*_ITEMLESS, SetVar, DictViewVar, IterVar)


@GETITEM.rule(TensorVar)
def _tensor_getitem(fr, obj: TensorVar, key):
    return fr.tr.graph.call("call_function", operator.getitem, [obj, key], {})


def _sequence_getitem(make, kind: str):
    def rule(fr, obj, key):
        k = const_value(key, "indexing a list")
        if isinstance(k, slice):
            return make(obj.items[k])
        # lengths are guarded; a symbolic index is compared as itself (a guard on its range)
        if isinstance(k, (int, torch.SymInt)) and not -len(obj.items) <= k < len(obj.items):
            raise TracedRaise(IndexError(f"{kind} index out of range"))
        return obj.items[k]
    return rule


GETITEM.rule(ListVar)(_sequence_getitem(ListVar, "list"))
GETITEM.rule(TupleVar)(_sequence_getitem(TupleVar, "tuple"))


@GETITEM.rule(DictVar)
def _dict_getitem(fr, obj: DictVar, key):
    k = const_key(key)
    if k not in obj.items:  # keys are guarded
        factory = getattr(obj, "default_factory", None)  # a defaultdict made in the trace
        if factory is None or is_same(factory, ConstVar(None)):
            raise TracedRaise(KeyError(k))
        setitem(fr, obj, key, fr.tr.call(fr, factory, [], {}))
    return obj.items[k]


@GETITEM.rule(ConstVar)
def _const_getitem(fr, obj: ConstVar, key):
    try:
        return ConstVar(obj.value[const_value(key)])
    except (LookupError, TypeError) as exc:  # `(1, "a")[5]`: the user's error, the same on every call
        raise TracedRaise(exc) from None


@GETITEM.rule(ObjVar)
def _obj_getitem(fr, obj: ObjVar, key):
    if isinstance(obj.value, torch.nn.Module):
        return _module_getitem(fr, obj, key)
    result = call_dunder(fr, obj, "__getitem__", [key])  # a Python __getitem__
    if result is not NO_DUNDER:
        return result
    if _registry(obj, key):
        return _registry_getitem(fr, obj, key)
    return GETITEM.refusal(fr, obj, key)


@GETITEM.rule(NewObjVar)
def _newobj_getitem(fr, obj: NewObjVar, key):
    result = call_dunder(fr, obj, "__getitem__", [key])  # a Python __getitem__ (ModelOutput's)
    if result is not NO_DUNDER:
        return result
    return GETITEM.refusal(fr, obj, key)


def _module_getitem(fr, obj: ObjVar, key):
    return MODULE_ITEMS.find(type(obj.value), _any_module_item)(fr, obj, const_value(key))


def _any_module_item(fr, obj: ObjVar, k):
    return wrap(fr.tr, obj.value[k], None)


MODULE_ITEMS.register(torch.nn.ModuleDict)(lambda fr, obj, k: module_entry(fr, obj, k))


@MODULE_ITEMS.register(torch.nn.ModuleList, torch.nn.Sequential)
def _module_list_item(fr, obj: ObjVar, k):
    if not isinstance(k, int):
        return _any_module_item(fr, obj, k)
    return module_entry(fr, obj, guard_module_keys(fr, obj)[k])


@MODULE_ITEMS.register(torch.nn.ParameterList)
def _parameter_list_item(fr, obj: ObjVar, k):
    if not isinstance(k, int):
        return _any_module_item(fr, obj, k)
    return getattr_var(fr, obj, str(k % guard_len(fr, obj)))


# -- writing items -----------------------------------------------------------------------
SETITEM.refuse(*_ITEMLESS, ConstVar, ObjVar, TupleVar, SetVar, DictViewVar, IterVar)
DELITEM.refuse(*_ITEMLESS, ConstVar, ObjVar, TupleVar, SetVar, DictViewVar, IterVar, TensorVar)


@SETITEM.rule(TensorVar)
def _tensor_setitem(fr, obj: TensorVar, key, value):
    fr.tr.graph.call("call_function", operator.setitem, [obj, key, value], {})


@SETITEM.rule(ListVar)
def _list_setitem(fr, obj: ListVar, key, value):
    items = mutable_items(fr, obj)
    k = const_value(key)
    if isinstance(k, slice):
        try:
            items[k] = unpack(fr, value)
        except ValueError as exc:  # an extended slice given another length: the user's error
            raise TracedRaise(exc) from None
    else:
        items[k] = value


@SETITEM.rule(DictVar)
def _dict_setitem(fr, obj: DictVar, key, value):
    mutable_dict(fr, obj).items[const_key(key)] = value


SETITEM.rule(NewObjVar)(lambda fr, obj, key, value: _user_protocol(fr, obj, "__setitem__", [key, value]))


@DELITEM.rule(ListVar)
def _list_delitem(fr, obj: ListVar, key):
    del mutable_items(fr, obj)[const_value(key)]


@DELITEM.rule(DictVar)
def _dict_delitem(fr, obj: DictVar, key):
    k = const_key(key)
    if k not in obj.items:  # keys are guarded
        raise TracedRaise(KeyError(k))
    del mutable_dict(fr, obj).items[k]


DELITEM.rule(NewObjVar)(lambda fr, obj, key: _user_protocol(fr, obj, "__delitem__", [key]))

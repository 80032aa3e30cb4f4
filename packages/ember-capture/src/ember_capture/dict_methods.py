"""Order-changing methods of dicts built in the trace: ``OrderedDict.move_to_end``,
``popitem`` and ``clear`` (a table keyed by method name, consulted by ``calls._dict_method``
for a dict that the trace owns; a dict from the inputs is never changed by a trace)."""
from __future__ import annotations

import collections

from .config import Unsupported
from .semantics import const_key, const_value
from .tables import registrar
from .variables import ConstVar, TupleVar

DICT_METHODS = {}
dict_method = registrar(DICT_METHODS)


def _flag(args, kwargs, name, position, default):
    if len(args) > position:
        return const_value(args[position])
    return const_value(kwargs[name]) if name in kwargs else default


@dict_method("move_to_end")
def _move_to_end(fr, d, args, kwargs):
    if not issubclass(d.cls, collections.OrderedDict):
        raise Unsupported("unsupported_call", f"{d.cls.__name__}.move_to_end")
    key = const_key(args[0])
    value = d.items.pop(key)  # KeyError as in Python: the trace stops at the call
    if _flag(args, kwargs, "last", 1, True):
        d.items[key] = value
    else:
        d.items = {key: value, **d.items}
    return ConstVar(None)


@dict_method("popitem")
def _popitem(fr, d, args, kwargs):
    if not d.items:
        raise Unsupported("raise", f"popitem(): {d.cls.__name__} is empty")
    last = _flag(args, kwargs, "last", 0, True) if issubclass(d.cls, collections.OrderedDict) else True
    key = next(reversed(d.items)) if last else next(iter(d.items))
    return TupleVar([ConstVar(key), d.items.pop(key)])


@dict_method("clear")
def _clear(fr, d, args, kwargs):
    d.items.clear()
    return ConstVar(None)

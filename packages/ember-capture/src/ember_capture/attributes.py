"""Python's attribute protocol on real objects, and the guards that keep its answer.

Note [Attribute lookup]: `obj.name` on a real object resolves as CPython's
`object.__getattribute__` does: (1) a data descriptor found on `type(obj)`'s MRO (a property,
a `__slots__` member, a user descriptor with `__set__`), (2) the instance `__dict__`, (3) a
non-data descriptor or plain class attribute from the MRO (methods, staticmethods, constants),
(4) `type(obj).__getattr__`: nn.Module's reaches `_parameters`, `_buffers` and `_modules`, so
a base-class method named like a submodule wins over the submodule, as in eager. A
user-defined `__getattribute__` (a Hugging Face config's, which maps attribute aliases) is run
natively at trace time and its answer guarded by re-reading `obj.name` on each call (or traced
as Python where the object has no source to re-read); a user-defined `__getattr__` is traced
as Python.

The answer depends on the dicts of the classes on the MRO and on the instance dict, and both
can change after compiling (a method replaced on the class, `m.forward = ...` on an instance).
The trace guards them: each class dict it looked in gets one check per name (`name not in
C.__dict__`, or `C.__dict__.get(name) is raw`), shared by every instance of the class; an
instance gets `name not in X.__dict__` where a class attribute answered. Builtin and C types,
whose dicts cannot change, are not guarded. nn.Module's own `__setattr__` keeps a name out of
the instance dict while it is a parameter, buffer or submodule, so a name found there is not
checked against the instance dict.
"""
from __future__ import annotations

import collections
import functools
import types

import torch

from .builder import instance_dict, wrap  # noqa: F401  (instance_dict: used through this module)
from .config import Unsupported
from .variables import BoundVar, ConstVar, DictVar, NewObjVar, ObjVar

# Builtin container classes whose C methods are modelled (Note [Builtin methods on subclasses]).
CONTAINER_TYPES = frozenset({dict, collections.OrderedDict, collections.defaultdict, list, tuple, set, frozenset})


def is_container_method(value) -> bool:
    """A method descriptor of a builtin container class (``dict.get``, ``OrderedDict.__setitem__``)."""
    return (isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType))
            and getattr(value, "__objclass__", None) in CONTAINER_TYPES)


_ABSENT = object()
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: builtin and C types
# What `type(m).__call__` is for a module whose class does not override it.
MODULE_CALLS = frozenset({torch.nn.Module.__call__, torch.nn.Module._call_impl})
_MODULE_STORES = ("_parameters", "_buffers", "_modules")


def mro_lookup(tr, mro, name):
    """The first raw `name` in the class dicts of `mro` (what CPython's _PyType_Lookup finds),
    or _ABSENT; guarded per class dict, as Note [Attribute lookup] says."""
    for klass in mro:
        raw = klass.__dict__.get(name, _ABSENT)
        if not klass.__flags__ & _IMMUTABLE_TYPE:
            source = f"{tr.ns.ref(klass)}.__dict__"
            if raw is _ABSENT:
                tr.guards.add(source, f"{name!r} not in X", f"{klass.__qualname__} defines no {name!r}")
            else:
                tr.guards.add(source, f"X.get({name!r}) is {tr.ns.ref(raw)}",
                              f"{klass.__qualname__}.{name} is <{type(raw).__name__} at {id(raw):#x}>")
        if raw is not _ABSENT:
            return raw
    return _ABSENT


def guard_mro(tr, cls) -> None:
    """Guard that a user class's __mro__ is the one the trace read: assigning `__bases__`
    recomputes it (a new tuple), and every lookup and isinstance answer made along the old one
    would be stale; the per-dict guards of Note [Attribute lookup] see only the old classes."""
    if not cls.__flags__ & _IMMUTABLE_TYPE:
        tr.guards.add(f"{tr.ns.ref(cls)}.__mro__", f"X is {tr.ns.ref(cls.__mro__)}",
                      f"{cls.__qualname__}'s bases are unchanged")


def class_lookup(tr, cls, name):
    guard_mro(tr, cls)
    return mro_lookup(tr, cls.__mro__, name)


def _not_in_instance(tr, source, name):
    tr.guards.add(source, f"{name!r} not in X.__dict__", f"{source} has no instance attribute {name!r}")


def _is_data_descriptor(raw) -> bool:
    t = type(raw)
    return hasattr(t, "__set__") or hasattr(t, "__delete__")


def attr_source(source, name):
    return None if source is None else f"{source}.{name}"


def load_attr(fr, o: ObjVar, name: str):
    """`o.name` for a real object (not a class or a Python module): Note [Attribute lookup]."""
    tr = fr.tr
    value = o.value
    cls = type(value)
    getattribute = class_lookup(tr, cls, "__getattribute__")
    if getattribute is not object.__getattribute__:
        if o.source is None and isinstance(getattribute, types.FunctionType):
            return tr.inline(fr, ObjVar(getattribute), [o, ConstVar(name)], {})
        return _pure_native(fr, o, name)  # re-read through the same __getattribute__ by the guard
    return generic_getattr(fr, o, name)


def _pure_native(fr, o: ObjVar, name):
    """Note [Side effects of a user __getattribute__]: a read through a user's
    ``__getattribute__`` is run natively once at trace time and its answer guarded by reading it
    again on each call, which is right only while the read changes nothing. One that writes the
    object's own ``__dict__`` (a read counter, a cache it fills) would be run by the guards, not
    by the compiled code, a different number of times than in eager: that read is undone (the
    instance dict restored) and is a graph break, so the instruction runs natively, once per
    call, as eager runs it."""
    d = instance_dict(o.value)
    before = None if d is None else list(d.items())
    value = _native(fr, o, name)
    if d is not None and (len(d) != len(before) or any(
            k2 is not k or d.get(k2, _ABSENT) is not v for (k, v), k2 in zip(before, d))):
        d.clear()
        d.update(before)
        raise Unsupported("side_effect", f"{type(o.value).__qualname__}.__getattribute__ changed the object "
                                         f"while reading {name!r}")
    return value


def generic_getattr(fr, o: ObjVar, name: str):
    """object.__getattribute__ followed by type(obj).__getattr__: Note [Attribute lookup]."""
    tr = fr.tr
    value = o.value
    cls = type(value)
    raw = class_lookup(tr, cls, name)
    if raw is not _ABSENT and _is_data_descriptor(raw):
        return bind_class_attr(fr, o, raw, name)
    d = instance_dict(value)
    if d is not None:  # `vars(obj)[name] = v` earlier in the trace: not written yet
        tr.check_native(d, f"reading attribute {name!r}", refers=False)
    if d is not None and name in d:
        return wrap(tr, d[name], attr_source(o.source, name), name)
    if raw is not _ABSENT:
        if d is not None:
            _not_in_instance(tr, o.source, name)
        return bind_class_attr(fr, o, raw, name)
    fallback = class_lookup(tr, cls, "__getattr__")
    if fallback is torch.nn.Module.__getattr__:
        return module_store_attr(fr, o, name)
    if d is not None:
        _not_in_instance(tr, o.source, name)
    if isinstance(fallback, types.FunctionType):
        return tr.inline(fr, ObjVar(fallback), [o, ConstVar(name)], {})
    raise Unsupported("unsupported_attr", f"{cls.__name__} object has no attribute {name!r}")


def _native(fr, o: ObjVar, name):
    """Read natively; the guard re-reads it through `o`'s source (an object held by reference
    without a source is read once, as its other attributes are)."""
    if name != "__dict__":  # the instance dict itself is the same object, modelled (Note [Mutated input dicts])
        fr.tr.check_native(o.value, f"reading attribute {name!r}")
    try:
        value = getattr(o.value, name)
    except AttributeError:
        raise Unsupported("unsupported_attr", f"{type(o.value).__name__} object has no attribute {name!r}") from None
    source = attr_source(o.source, name)
    if isinstance(value, types.MethodType) and value.__self__ is o.value:  # a new bound method per read
        return BoundVar(wrap(fr.tr, value.__func__, attr_source(source, "__func__")), o)
    if isinstance(value, types.BuiltinMethodType) and value.__self__ is o.value:
        # a C method bound to it (`d.get` on a dict read through dict's own __getattribute__ slot,
        # `output.keys` on an OrderedDict subclass): the class's method descriptor, bound as
        # Python binds it, so the call is modelled (Note [Builtin methods on subclasses])
        raw = class_lookup(fr.tr, type(o.value), name)
        if isinstance(raw, (types.MethodDescriptorType, types.WrapperDescriptorType)):
            return BoundVar(ObjVar(raw), o)
    return wrap(fr.tr, value, source, name)


def newobj_getattr(fr, o: NewObjVar, name: str) -> Var:
    """``o.name`` on an instance made in the trace: the class's own ``__getattribute__`` (a
    Hugging Face config's, which maps aliases) is traced; otherwise object's protocol."""
    raw = class_lookup(fr.tr, o.cls, "__getattribute__")
    if isinstance(raw, types.FunctionType):
        return fr.tr.inline(fr, ObjVar(raw), [o, ConstVar(name)], {})
    return newobj_generic_getattr(fr, o, name)


def newobj_generic_getattr(fr, o: NewObjVar, name: str) -> Var:
    """``object.__getattribute__`` then ``__getattr__`` (Note [Attribute lookup]) on a NewObjVar."""
    if name == "__dict__":  # the instance dict itself: writes through it are the object's
        d = DictVar({})
        d.items = o.attrs
        return d
    if name == "__class__":
        return ObjVar(o.cls)
    raw = class_lookup(fr.tr, o.cls, name)
    if raw is not _ABSENT and _is_data_descriptor(raw):
        return bind_class_attr(fr, o, raw, name)
    if name in o.attrs:
        return o.attrs[name]
    if raw is not _ABSENT:
        return bind_class_attr(fr, o, raw, name)
    fallback = class_lookup(fr.tr, o.cls, "__getattr__")
    if isinstance(fallback, types.FunctionType):
        return fr.tr.inline(fr, ObjVar(fallback), [o, ConstVar(name)], {})
    raise Unsupported("unsupported_attr", f"{o.cls.__name__} object has no attribute {name!r}")


def module_store_attr(fr, o: ObjVar, name: str):
    """nn.Module.__getattr__: a parameter, buffer or submodule, in that order."""
    m = o.value
    for store in _MODULE_STORES:
        d = m.__dict__.get(store)
        if d is not None:  # Note [Mutated input dicts]
            fr.tr.check_native(d, f"reading module attribute {name!r}", refers=False)
        if d is not None and name in d:
            return wrap(fr.tr, d[name], None if o.source is None else f"{o.source}.{store}[{name!r}]", name)
    raise Unsupported("unsupported_attr", f"{type(m).__name__} object has no attribute {name!r}")


def bind_class_attr(fr, obj, raw, name):
    """A class attribute `raw` read through the instance `obj` (an ObjVar or NewObjVar): bound
    as Python binds it (a C descriptor of a real object is read natively, guarded by value)."""
    tr = fr.tr
    if isinstance(raw, types.FunctionType):
        return BoundVar(ObjVar(raw), obj)
    if isinstance(raw, property) and isinstance(raw.fget, types.FunctionType):
        return _python_getter(fr, obj, raw.fget, [obj], name)
    if isinstance(raw, staticmethod):
        return wrap(tr, raw.__func__, None)
    owner = obj.cls if isinstance(obj, NewObjVar) else type(obj.value)
    if isinstance(raw, classmethod):
        return BoundVar(ObjVar(raw.__func__), ObjVar(owner))
    if isinstance(raw, functools._lru_cache_wrapper):  # binds as the function it wraps: Note [lru_cache]
        return BoundVar(ObjVar(raw), obj)
    get = getattr(type(raw), "__get__", None)
    if get is None:  # not a descriptor: the class attribute itself (pinned by its class-dict guard)
        return wrap(tr, raw, None, name)
    if isinstance(get, types.FunctionType):  # a user descriptor
        return _python_getter(fr, obj, get, [wrap(tr, raw, None), obj, ObjVar(owner)], name)
    if isinstance(obj, ObjVar) and not callable(raw):  # a slot, a C getset
        return _native(fr, obj, name)
    if callable(raw) and (_modelled(tr, raw) or is_container_method(raw)):
        # a C method the tracer models (object.__getattribute__, dict.get: Note [Builtin methods on subclasses])
        return BoundVar(ObjVar(raw), obj)
    raise Unsupported("unsupported_attr", f"attribute {name!r} ({type(raw).__name__}) of {owner.__name__}")


def module_call_target(tr, module, source, forward):
    """What `module(...)` runs, for the root frame of a captured module: None when it is
    `forward` through Module.__call__; else the callable that stands for the call (the class's
    own `__call__` bound to the module, or the forward set on the instance). Guarded."""
    call = class_lookup(tr, type(module), "__call__")
    if call not in MODULE_CALLS:
        return types.MethodType(call, module) if isinstance(call, types.FunctionType) else _Eager(module)
    d = module.__dict__
    if "forward" in d:
        tr.guards.add(source, f"X.__dict__.get('forward') is {tr.ns.ref(d['forward'])}",
                      f"{source}.forward is set on the instance")
        return d["forward"]
    _not_in_instance(tr, source, "forward")
    raw = class_lookup(tr, type(module), "forward")
    if raw is forward:
        return None
    return types.MethodType(raw, module) if isinstance(raw, types.FunctionType) else _Eager(module)


def _python_getter(fr, obj, fn, args, name):
    """A property's or descriptor's Python getter: traced when it is user code; library code
    (an Enum member's `value`) is read natively on a real object, guarded by re-reading."""
    if fr.tr.inlinable(fn) or not isinstance(obj, ObjVar):
        return fr.tr.inline(fr, ObjVar(fn), args, {})
    return _native(fr, obj, name)


def _modelled(tr, raw) -> bool:
    try:
        return raw in tr.builtins
    except TypeError:
        return False


class _Eager:
    """A module called through its own (not Python) `__call__`: run as it is."""

    def __init__(self, module):
        self.module = module

    def __call__(self, *args, **kwargs):
        return self.module(*args, **kwargs)

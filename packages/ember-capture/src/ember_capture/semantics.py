"""What Python operations mean on symbolic values: constant values, attributes, truth,
operators, identity and ``iter``, as rules of the value protocol's tables (Note [Value protocol]
in ``protocol.py``), and the helpers the other rule modules share.
"""
from __future__ import annotations

import collections
import collections.abc
import inspect
import operator
import types

import torch

from .attributes import attr_source, bind_class_attr, class_lookup, instance_dict, is_container_method, load_attr, mro_lookup, newobj_getattr, _ABSENT
from .builder import is_stable_module, wrap
from .config import Unsupported
from .frame import TracedRaise
from .library import inlinable_file
from .graph import SliceParts
from .lazy import LazyVar
from .protocol import (  # noqa: F401  (the dispatchers, used through this module)
    BINARY, CONST_VALUE, GETATTR, IDENTITY, ITER, RBINARY, SETATTR, TRUTH, UNARY, contains, delitem, describe,
    getitem, setitem, unpack,
)
from .sizes import SYM_TYPES, concrete, note_float
from .tables import TypeTable, registrar
from .tensor_state import STATE_ATTRS, tensor_state_attr
from .variables import (
    AutocastVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExitVar, FunctionVar, GradModeVar, IterVar,
    ListVar, MethodVar, NewObjVar, NoOpContextVar, NullVar, ObjVar, PartialVar, SetVar, SuperVar, TensorVar, TupleVar,
    Var,
)

# Tensor attributes that are metadata (constants under static shapes).
TENSOR_META_ATTRS = frozenset({
    "shape", "dtype", "device", "ndim", "requires_grad", "is_cuda", "is_sparse", "layout",
    "is_quantized", "is_meta", "is_complex", "itemsize", "names", "is_nested", "is_mkldnn", "is_mps", "is_xpu",
})
TENSOR_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "real", "imag", "data"})


def constant_like(value) -> Var:
    return ObjVar(value) if callable(value) or isinstance(value, types.ModuleType) else ConstVar(value)


def const_value(v: Var, what="this operation"):
    """The Python value of ``v``, for an operation (``what``) that needs one."""
    return CONST_VALUE.lookup(type(v))(v, what)


@CONST_VALUE.rule(ConstVar)
def _const_const(v: ConstVar, what):
    return v.value


@CONST_VALUE.rule(TupleVar)
def _tuple_const(v: TupleVar, what):
    if v.cls is not tuple:  # a namedtuple is rebuilt, not computed with
        return CONST_VALUE.refusal(v, what)
    return tuple(const_value(i, what) for i in v.items)


@CONST_VALUE.rule(ListVar)
def _list_const(v: ListVar, what):
    return [const_value(i, what) for i in v.items]


@CONST_VALUE.rule(SetVar)
def _set_const(v: SetVar, what):
    return {const_value(i, what) for i in v.items}


@CONST_VALUE.rule(DictViewVar)
def _view_const(v: DictViewVar, what):  # a real view of an equal dict: set operations, comparisons
    if v.kind == "keys":
        return dict.fromkeys(v.dict.items).keys()
    return getattr({k: const_value(i, what) for k, i in v.dict.items.items()}, v.kind)()


@CONST_VALUE.rule(ObjVar)
def _obj_const(v: ObjVar, what):
    if is_data_object(v.value):
        raise Unsupported("unsupported_value", f"{what} needs the contents of a {type(v.value).__name__}, "
                          "which can change between calls")
    pin_identity(v)
    return v.value


def pin_identity(v: Var) -> None:
    """Guard that ``v``'s source is the object the trace saw (Note [Identity of real objects])."""
    if isinstance(v, ObjVar) and v.pin is not None:
        v.pin()


@CONST_VALUE.rule(TensorVar)
def _tensor_const(v: TensorVar, what):
    raise Unsupported("data_dependent", f"{what} needs the value of a tensor")


CONST_VALUE.refuse(NullVar, DictVar, IterVar, CellVar, FunctionVar, BoundVar, MethodVar, PartialVar, GradModeVar,
                   AutocastVar, NoOpContextVar, ExitVar, SuperVar, NewObjVar, SliceParts, LazyVar)


_MUTABLE_DATA = (list, dict, set, bytearray, collections.deque, collections.abc.MutableSequence,
                 collections.abc.MutableMapping, collections.abc.MutableSet, collections.abc.MappingView)


def is_data_object(value) -> bool:
    """Note [data objects]: an object whose contents are data that may change between calls
    (a mutable container, a numpy array). Computing with it at trace time would bake the
    contents of the first call into the entry, with no guard to notice a change; an operation
    that needs its value is a graph break instead (it runs natively, on the current contents)."""
    if isinstance(value, (type, torch.nn.Module)):
        return False
    if isinstance(value, _MUTABLE_DATA):
        return True
    return type(value).__module__ == "numpy" and type(value).__name__ in ("ndarray", "matrix", "memmap")


def from_python(value) -> Var:
    """A trace-time Python result as a symbolic value: mutable containers become symbolic ones
    (so that each call builds its own), immutable values constants."""
    if type(value) is list:
        return ListVar([from_python(v) for v in value])
    if type(value) is dict:
        return DictVar({k: from_python(v) for k, v in value.items()})
    if type(value) is set:
        return SetVar([ConstVar(v) for v in value])
    return ConstVar(value)


def concrete_value(v: Var, what="this operation"):
    """``const_value``, with symbolic sizes replaced by their values (each a guard): for uses that
    need a number (a dict key, formatting; Note [Dynamic shapes in capture])."""
    return concrete(const_value(v, what))


def const_key(v: Var):
    key = concrete_value(v, "a dict key")
    user = user_dunder(key, ("__hash__", "__eq__"))
    if user is not None:
        raise Unsupported("unsupported_operator", f"a {type(key).__name__} as a dict key runs its {user} "
                          "(Note [User operators])")
    hash(key)
    return key


# Note [User operators]: an operator on a real object computes on its constant value at trace
# time. For an instance of a user class whose `__eq__`, `__hash__`, `__lt__`, `__add__`... is
# Python code, that code reads the object's attributes unguarded (`k1 == k2` was baked in, and
# stayed True after `k2.v` changed), so the operation is a graph break, run natively on each
# call. A frozen dataclass compares fields that cannot change; library classes (enum) are pure.
def user_dunder(value, names) -> str | None:
    cls = type(value)
    params = getattr(cls, "__dataclass_params__", None)
    if params is not None and params.frozen:
        return None
    for name in names:
        for klass in cls.__mro__:
            if name in klass.__dict__:
                raw = klass.__dict__[name]
                if isinstance(raw, types.FunctionType) and inlinable_file(raw.__code__.co_filename):
                    return name
                break
    return None


_SWAPPED = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}


def _operator_dunders(fn) -> tuple:
    """The special methods Python may call for the operator function `fn` (operator.add: __add__,
    __radd__; operator.iadd: __iadd__ too; operator.lt: __lt__ and the reflected __gt__)."""
    name = fn.__name__.rstrip("_")
    if name in ("eq", "ne"):
        return ("__eq__", "__ne__")
    if name in _SWAPPED:
        return (f"__{name}__", f"__{_SWAPPED[name]}__")
    in_place = name.startswith("i") and (hasattr(operator, name[1:]) or hasattr(operator, name[1:] + "_"))
    base = name[1:] if in_place else name
    return (f"__{name}__", f"__{base}__", f"__r{base}__")


def dedupe(items):
    out, seen = [], set()
    for i in items:
        k = const_key(i)
        if k not in seen:
            seen.add(k)
            out.append(i)
    return out


def mutable_dict(fr, d: DictVar) -> DictVar:
    """``d``, about to be changed: a dict from the inputs is written back after the graph
    (Note [Mutated input dicts])."""
    if d.source is not None:
        fr.tr.mark_dict_mutated(d)
    return d


def copy_dict(d: DictVar) -> DictVar:
    """``d.copy()``: of its own class for an OrderedDict or a defaultdict (with its factory), a
    plain dict for a subclass of dict (as ``dict.copy`` makes)."""
    out = DictVar(d.items, cls=d.cls if d.cls in (collections.OrderedDict, collections.defaultdict) else dict)
    if d.cls is collections.defaultdict:
        out.default_factory = d.default_factory
    return out


def dict_pairs(fr, src: Var) -> list:
    """The (key, value) pairs of ``dict(src)`` / ``d.update(src)``: a dict's items, or the
    pairs an iterable yields."""
    if isinstance(src, DictVar):
        return list(src.items.items())
    return [(const_key(k), v) for k, v in (unpack(fr, p) for p in unpack(fr, src))]


def mutable_items(fr, v: Var) -> list:
    if isinstance(v, ListVar):
        if v.source is not None:
            fr.tr.mark_mutated(v)
        return v.items
    raise Unsupported("unsupported_container", f"appending to {describe(v)}")


# -- attributes --------------------------------------------------------------------------
def getattr_var(fr, obj: Var, name: str) -> Var:
    return GETATTR.lookup(type(obj))(fr, obj, name)


_getattr_for = GETATTR.rule
GETATTR.refuse(NullVar, IterVar, CellVar, FunctionVar, BoundVar, MethodVar, PartialVar, AutocastVar,
               NoOpContextVar, ExitVar, SliceParts, LazyVar)


@_getattr_for(TensorVar)
def _tensor_attr(fr, t: TensorVar, name):
    if name in TENSOR_META_ATTRS:
        return ConstVar(getattr(t.fake, name))
    if name in STATE_ATTRS:  # Note [Tensor state outside the guards]
        return tensor_state_attr(fr, t, name)
    if name in TENSOR_VIEW_ATTRS:
        return fr.tr.graph.call("call_function", getattr, [t, ConstVar(name)], {})
    if name == "grad" and t.source is not None:
        real = fr.tr.eval_source(t.source)
        written = fr.tr.attr_writes.get((id(real), "grad"))  # optimizer.zero_grad() earlier in the trace
        if written is not None:
            return written
        return wrap(fr.tr, real.grad, f"{t.source}.grad", "grad")
    if callable(getattr(torch.Tensor, name, None)):
        return MethodVar(t, name)
    if tensor_instance_attr(fr, t, name):
        return wrap(fr.tr, fr.tr.eval_source(t.source).__dict__[name], f"{t.source}.{name}", name)
    raise Unsupported("unsupported_attr", f"Tensor attribute {name!r}")


def tensor_instance_attr(fr, t: TensorVar, name: str) -> bool:
    """Whether an input tensor has a Python attribute `name` of its own (`x.tag = 1`), guarded
    either way: a tensor of the next call may carry it, or not (a fake tensor has none)."""
    if t.source is None or hasattr(torch.Tensor, name):
        return False
    present = name in fr.tr.eval_source(t.source).__dict__
    fr.tr.guards.add(t.source, f"({name!r} in X.__dict__) is {present}",
                     f"{t.source} {'has' if present else 'has no'} attribute {name!r}")
    return present


@_getattr_for(ConstVar)
def _const_attr(fr, c: ConstVar, name):
    try:
        value = getattr(concrete(c.value) if isinstance(c.value, SYM_TYPES) else c.value, name)
    except AttributeError as exc:  # `None.attr`: the user's error, the same on every call
        raise TracedRaise(exc) from None
    if callable(value) and not isinstance(value, type):
        return MethodVar(c, name)
    return ConstVar(value)


@_getattr_for(TupleVar)
def _tuple_attr(fr, t: TupleVar, name):
    if t.fields and name in t.fields:
        return t.items[t.fields[name]]
    return MethodVar(t, name)


@_getattr_for(ListVar, DictVar, SetVar, DictViewVar)
def _container_attr(fr, c, name):
    return MethodVar(c, name)


@_getattr_for(NewObjVar)
def _newobj_attr(fr, o: NewObjVar, name):
    return newobj_getattr(fr, o, name)


@_getattr_for(SuperVar)
def _super_attr(fr, s: SuperVar, name):
    bound = None if isinstance(s.obj, NewObjVar) else _self_value(s.obj)
    of_class = isinstance(bound, type) and issubclass(bound, s.cls)  # super() in a classmethod
    mro = s.obj.cls.__mro__ if bound is None else bound.__mro__ if of_class else type(bound).__mro__
    start = mro.index(s.cls) + 1
    raw = mro_lookup(fr.tr, mro[start:], name)
    if raw is _ABSENT:
        raise Unsupported("unsupported_attr", f"super().{name}")
    if of_class:  # bound to the class: a classmethod gets it, a function or staticmethod is plain
        if isinstance(raw, classmethod):
            return BoundVar(ObjVar(raw.__func__), s.obj)
        if isinstance(raw, staticmethod):
            return wrap(fr.tr, raw.__func__, None)
        if isinstance(raw, types.FunctionType) or getattr(type(raw), "__get__", None) is None:
            return wrap(fr.tr, raw, None, name)
        raise Unsupported("unsupported_attr", f"super().{name} ({type(raw).__name__}) in a classmethod")
    return bind_class_attr(fr, s.obj, raw, name)


def _self_value(v):
    return v.value if isinstance(v, ObjVar) else None


@_getattr_for(GradModeVar)
def _gradmode_attr(fr, g, name):
    raise Unsupported("unsupported_attr", f"attribute {name!r} of a grad-mode context")


@_getattr_for(ObjVar)
def _obj_attr(fr, o: ObjVar, name):
    overlay = fr.tr.attr_writes.get((id(o.value), name))
    if overlay is not None:
        return overlay
    if name == "__dict__" and any(key[0] == id(o.value) for key in fr.tr.attr_writes):
        # the real dict lacks the attribute writes not replayed yet (Note [Plain attribute writes])
        raise Unsupported("side_effect", "reading __dict__ of an object whose attributes the traced code set")
    return REAL_ATTRS.find(type(o.value), load_attr)(fr, o, name)


# Attributes of real objects by the object's Python type; other objects: ``load_attr``
# (Note [Attribute lookup]).
REAL_ATTRS = TypeTable()


@REAL_ATTRS.register(types.ModuleType)
def _module_attr(fr, o: ObjVar, name):
    tr, value = fr.tr, o.value
    if name != "__dict__":  # `mod.__dict__[k] = v` earlier in the trace (Note [Mutated input dicts])
        tr.check_native(value.__dict__, f"reading attribute {name!r} of a module", refers=False)
    attr = getattr(value, name)
    if is_stable_module(value):
        if isinstance(attr, (bool, int, float, str)):  # a flag (torch.backends.cudnn.deterministic): guarded
            return wrap(tr, attr, f"{o.source if o.source is not None else tr.ns.ref(value)}.{name}", name)
        return wrap(tr, attr, None, name) if isinstance(attr, torch.Tensor) else constant_like_attr(attr)
    return wrap(tr, attr, attr_source(o.source, name), name)


@REAL_ATTRS.register(type)
def _type_attr(fr, o: ObjVar, name):
    value = o.value
    # A class reached without a source (`type(self)`, a class made by a call) is still read by
    # reference: its attributes change (`type(self).count += 1`) and are guarded through it.
    source = o.source if o.source is not None else fr.tr.ns.ref(value)
    for klass in value.__mro__:
        if name in klass.__dict__:
            raw = klass.__dict__[name]
            if isinstance(raw, (staticmethod, classmethod)):
                # bound here, not read through a source: guard the class dicts that decided it
                # (`Ops.act = staticmethod(...)` between calls)
                class_lookup(fr.tr, value, name)
                return constant_like(getattr(value, name))
            break
    return wrap(fr.tr, getattr(value, name), attr_source(source, name), name)


@REAL_ATTRS.register(inspect.Signature, inspect.Parameter)
def _record_attr(fr, o: ObjVar, name):  # immutable records: their properties are library code, but constant
    return wrap(fr.tr, getattr(o.value, name), attr_source(o.source, name), name)


def constant_like_attr(attr):
    return constant_like(attr) if not isinstance(attr, (list, dict, set)) else ObjVar(attr)


def _class_attr(fr, obj: Var, cls, name):
    raw = mro_lookup(fr.tr, cls.__mro__, name)
    if raw is _ABSENT:
        raise Unsupported("unsupported_attr", f"attribute {name!r} of {cls.__name__}")
    return bind_class_attr(fr, obj, raw, name)


def setattr_var(fr, obj: Var, name: str, value: Var):
    """``obj.name = value``."""
    SETATTR.lookup(type(obj))(fr, obj, name, value)


@SETATTR.rule(NewObjVar)
def _newobj_setattr(fr, obj: NewObjVar, name, value):
    override = class_dunder(obj, "__setattr__")
    if isinstance(override, types.FunctionType):  # a class's own __setattr__ (ModelOutput's)
        fr.tr.inline(fr, ObjVar(override), [obj, ConstVar(name), value], {})
    else:
        object_setattr(fr, obj, name, value)


@SETATTR.rule(ObjVar)
def _obj_setattr(fr, obj: ObjVar, name, value):
    m = obj.value
    if obj.source is None or isinstance(m, (type, types.ModuleType)):
        return SETATTR.refusal(fr, obj, name, value)
    if isinstance(m, torch.nn.Module) and (name in m._parameters or name in m._modules or name in m._buffers):
        raise Unsupported("side_effect", f"assigning module parameter/buffer/submodule {name!r}")
    if isinstance(value, TensorVar) and isinstance(m, torch.nn.Module):
        raise Unsupported("side_effect", f"assigning a tensor to module attribute {name!r}")
    why = _not_a_plain_write(type(m), name)
    if why is not None:
        raise Unsupported("unsupported_attr", f"setting {name!r} on a {type(m).__name__}: {why}")
    d = instance_dict(m)
    if d is not None and id(d) in fr.tr.containers:
        # its __dict__ (`vars(obj)`) is modelled in this trace and would not see the write
        raise Unsupported("side_effect", f"setting {name!r} on an object whose __dict__ the traced code read")
    fr.tr.record_attr_write(obj, name, value)


# Note [Plain attribute writes]: a write to an existing object is recorded and replayed after the
# graph with `setattr`, and later reads in the trace see the value written. That is Python's
# answer only when the write lands in the instance dict (or a slot) unchanged: a class's own
# `__setattr__` or a data descriptor (a property with a setter, a validating descriptor) may
# store something else, or elsewhere, so such a write is a graph break, run natively.
_PLAIN_SETATTRS = (object.__setattr__, torch.nn.Module.__setattr__)
_SLOT_TYPES = (types.MemberDescriptorType,)  # `__slots__`


def _not_a_plain_write(cls, name):
    if not any(cls.__setattr__ is s for s in _PLAIN_SETATTRS):
        return f"its class defines __setattr__ ({cls.__setattr__.__qualname__})"
    for klass in cls.__mro__:
        raw = klass.__dict__.get(name, _ABSENT)
        if raw is _ABSENT:
            continue
        if hasattr(type(raw), "__set__") and not isinstance(raw, _SLOT_TYPES):
            return f"the class's {type(raw).__name__} {name!r} takes the write"
        return None
    return None


SETATTR.refuse(NullVar, ConstVar, TensorVar, ListVar, TupleVar, DictVar, DictViewVar, SetVar, IterVar, CellVar,
               FunctionVar, BoundVar, MethodVar, PartialVar, GradModeVar, AutocastVar, NoOpContextVar, ExitVar,
               SuperVar, SliceParts, LazyVar)


def object_setattr(fr, obj: NewObjVar, name: str, value: Var):
    """``object.__setattr__`` on an instance made during tracing: into its ``__dict__``, unless a
    data descriptor (a property with a setter, a slot) on the class takes the write."""
    for klass in obj.cls.__mro__:
        raw = klass.__dict__.get(name)
        if raw is not None and hasattr(type(raw), "__set__"):
            raise Unsupported("unsupported_attr", f"setting {name!r} through a {type(raw).__name__} of {obj.cls.__name__}")
    obj.attrs[name] = value


# -- Python's protocols on user-class instances ------------------------------------------
def class_dunder(obj: Var, name: str):
    """The class attribute ``name`` (a special method) of a user-class instance, or None."""
    user_class = _USER_CLASS.get(type(obj))
    cls = None if user_class is None else user_class(obj)
    if cls is None:
        return None
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


# The class of a user-class instance: one made in the trace, or a real one (not a class, a
# module or an nn.Module, whose protocols capture models itself).
_USER_CLASS = {
    NewObjVar: lambda v: v.cls,
    ObjVar: lambda v: None if isinstance(v.value, (type, types.ModuleType, torch.nn.Module)) else type(v.value),
}
NO_DUNDER = object()


def call_dunder(fr, obj: Var, name: str, args: list):
    """``obj[k]``, ``len(obj)``, ``k in obj``... on a user-class instance: the class's Python
    method is inlined; a builtin base's C method acts on the instance's builtin contents
    (Note [Builtin methods on subclasses]). ``NO_DUNDER`` when neither applies."""
    raw = class_dunder(obj, name)
    if isinstance(raw, types.FunctionType) and inlinable_file(raw.__code__.co_filename):
        return fr.tr.inline(fr, ObjVar(raw), [obj] + list(args), {})
    if isinstance(obj, NewObjVar) and obj.storage is not None and is_container_method(raw):
        return container_dunder(fr, obj.storage, name, args)
    return NO_DUNDER


_CONTAINER_DUNDERS = {}
_container_dunder = registrar(_CONTAINER_DUNDERS)


def container_dunder(fr, c: Var, name: str, args: list):
    """A builtin container's special method on a symbolic container; ``NO_DUNDER`` if not one."""
    fn = _CONTAINER_DUNDERS.get(name)
    return NO_DUNDER if fn is None else fn(fr, c, *args)


_container_dunder("__getitem__")(lambda fr, c, k: getitem(fr, c, k))
_container_dunder("__contains__")(lambda fr, c, k: ConstVar(contains(fr, c, k)))
_container_dunder("__len__")(lambda fr, c: ConstVar(len(c.items)))
_container_dunder("__iter__")(lambda fr, c: iterate(fr, c))


@_container_dunder("__setitem__")
def _c_setitem(fr, c, k, v):
    setitem(fr, c, k, v)
    return ConstVar(None)


@_container_dunder("__delitem__")
def _c_delitem(fr, c, k):
    delitem(fr, c, k)
    return ConstVar(None)


@_container_dunder("__init__")
def _c_init(fr, c, *args):
    init = _CONTAINER_INITS.get(type(c))
    if init is None:
        raise Unsupported("unsupported_call", f"__init__ of {describe(c)}")
    init(fr, c, *args[:1])
    return ConstVar(None)


def _dict_init(fr, c: DictVar, src=None):
    if src is not None:
        for k, v in dict_pairs(fr, src):
            c.items[k] = v


def _list_init(fr, c: ListVar, src=None):
    c.items[:] = unpack(fr, src) if src is not None else []


_CONTAINER_INITS = {DictVar: _dict_init, ListVar: _list_init}  # dict(...), list(...) on their contents


# -- operators ---------------------------------------------------------------------------
def binary(fr, fn, a: Var, b: Var) -> Var:
    """``fn(a, b)`` for a binary operator ``fn``: the left operand's rule, then the right one's
    (as Python tries ``__add__``, then ``__radd__``; a rule returns NotImplemented to pass),
    then on the operands' constant values."""
    result = BINARY.lookup(type(a))(fr, fn, a, b)
    if result is NotImplemented:
        result = RBINARY.lookup(type(b))(fr, fn, a, b)
        if result is NotImplemented:
            return _binary_values(fn, a, b)
    return result


def _binary_values(fn, a: Var, b: Var) -> Var:
    try:
        left, right = const_value(a), const_value(b)
        if isinstance(left, (str, bytes)):  # "%s" % (n, m): the sizes' values, as _const_binary formats them
            right = concrete(right)
        for value in (left, right):
            user = user_dunder(value, _operator_dunders(fn))
            if user is not None:
                raise Unsupported("unsupported_operator", f"{fn.__name__} on a {type(value).__name__} runs its "
                                  f"{user} (Note [User operators])")
        return from_python(fn(left, right))
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported("unsupported_operator", f"{fn.__name__} on {describe(a)} and {describe(b)}: {e}") from None


def _graph_op(fr, fn, a, b):
    return fr.tr.graph.call("call_function", fn, [a, b], {})


# Kinds without an operator of their own compute with their constant values; on the right,
# only a tensor has one.
BINARY.rule(Var)(lambda fr, fn, a, b: NotImplemented)
RBINARY.rule(Var)(lambda fr, fn, a, b: NotImplemented)
BINARY.rule(TensorVar)(_graph_op)
RBINARY.rule(TensorVar)(_graph_op)


@BINARY.rule(ConstVar)
def _const_binary(fr, fn, a, b):
    if not isinstance(b, ConstVar):
        return NotImplemented
    try:
        if isinstance(a.value, (str, bytes)) or isinstance(b.value, (str, bytes)):
            return ConstVar(fn(concrete(a.value), concrete(b.value)))  # "%d" % n: its value
        return ConstVar(note_float(fn, fn(a.value, b.value), (a.value, b.value)))
    except (ArithmeticError, ValueError, TypeError) as exc:
        # `1 / 0`, `2.0 ** 10000`, `1 << -1`, `"a" < 2` on guarded constants: the user's exception, raised
        # on every call the entry serves, so a traced `except` catches it (Note [Traced exceptions])
        raise TracedRaise(exc) from None


@BINARY.rule(ListVar)
def _list_binary(fr, fn, a, b):
    if fn is operator.iadd:  # lst += iterable: in place
        new = unpack(fr, b)
        mutable_items(fr, a).extend(new)
        return a
    if fn is operator.imul and type(b) is ConstVar and type(b.value) in (int, bool):  # lst *= n: in place
        items = mutable_items(fr, a)
        items[:] = items * b.value
        return a
    return _concat_or_repeat(fr, ListVar, fn, a, b)


_SET_INPLACE = {operator.ior: operator.or_, operator.iand: operator.and_, operator.isub: operator.sub,
                operator.ixor: operator.xor}


@BINARY.rule(SetVar)
def _set_binary(fr, fn, a, b):
    """``s |= t`` and the other in-place set operators change ``s`` itself, which other names
    may hold; a set from the inputs is not written back (as set methods refuse)."""
    pure = _SET_INPLACE.get(fn)
    if pure is None:
        return NotImplemented
    if a.source is not None:
        raise Unsupported("side_effect", f"{fn.__name__} on an input set")
    a.items = _binary_values(pure, a, b).items
    return a


BINARY.rule(TupleVar)(lambda fr, fn, a, b: _concat_or_repeat(fr, TupleVar, fn, a, b))


@BINARY.rule(DictVar)
def _dict_binary(fr, fn, a, b):
    """``a | b`` (a new dict) and ``a |= b`` (in place; b may be any iterable of pairs)."""
    if fn is operator.ior:
        mutable_dict(fr, a).items.update(dict_pairs(fr, b))
        return a
    if fn is operator.or_ and isinstance(b, DictVar):
        out = copy_dict(a)
        out.items.update(b.items)
        return out
    return NotImplemented


def _concat_or_repeat(fr, kind, fn, a, b):
    """``+`` of two lists or two tuples, ``*`` of one by an int: a new one (a tuple forgets a
    namedtuple class, as Python does)."""
    if fn in (operator.add, operator.iadd) and type(b) is kind:
        return kind(a.items + unpack(fr, b))
    if fn in (operator.mul, operator.imul) and type(b) is ConstVar and isinstance(b.value, int):
        return kind(a.items * b.value)
    return NotImplemented


@BINARY.rule(FunctionVar, ObjVar)
def _identity_binary(fr, fn, a, b):
    """``==`` and ``!=`` where both sides compare by identity (object.__eq__): decided here."""
    if fn in (operator.eq, operator.ne) and _identity_eq(a) and _identity_eq(b):
        same = is_same(a, b)
        return ConstVar(same if fn is operator.eq else not same)
    return NotImplemented


# Whether ``==`` on a value is identity (object.__eq__), so the trace can decide it.
_EQ_BY_IDENTITY = {
    FunctionVar: lambda v: True,
    ObjVar: lambda v: (type(v.value).__eq__ is object.__eq__
                       or isinstance(v.value, (types.FunctionType, types.ModuleType))),
}


def _identity_eq(v: Var) -> bool:
    rule = _EQ_BY_IDENTITY.get(type(v))
    return rule is not None and rule(v)


def unary(fr, fn, a: Var) -> Var:
    """``fn(a)`` for a unary operator ``fn`` (``-a``, ``~a``, ``not``-free ones)."""
    return UNARY.lookup(type(a))(fr, fn, a)


@UNARY.rule(Var)
def _unary_of_value(fr, fn, a: Var) -> Var:
    """Other kinds: on their constant value. A symbolic int has no ``~`` of its own (torch's
    SymInt defines the arithmetic, not the bitwise operators): ``~n`` is ``-n - 1``, exactly."""
    value = const_value(a)
    if fn is operator.invert and isinstance(value, torch.SymInt):
        return ConstVar(-value - 1)
    return ConstVar(note_float(fn, fn(value), (value,)))
UNARY.rule(TensorVar)(lambda fr, fn, a: fr.tr.graph.call("call_function", fn, [a], {}))


def is_same(a: Var, b: Var) -> bool:
    """``a is b`` on symbolic values. Two real objects of one type are told apart by their
    identity, which is then guarded (Note [Identity of real objects])."""
    if a is b:
        return True
    left, right = IDENTITY.lookup(type(a))(a), IDENTITY.lookup(type(b))(b)
    if type(left) is type(right) and not isinstance(left, Var):
        pin_identity(a)
        pin_identity(b)
    return left is right


def item_equals(fr, item: Var, value: Var) -> bool:
    """Whether a container's ``item`` matches ``value`` as ``in``, ``index`` and ``count`` ask:
    ``item is value or item == value``, the equality by the operator's own rules (a user class's
    ``__eq__`` is traced or a graph break: Note [User operators]), not by identity alone."""
    if is_same(item, value):
        return True
    if isinstance(item, ConstVar) and isinstance(value, ConstVar):
        return bool(item.value == value.value)
    return truthy(fr, binary(fr, operator.eq, item, value))


# The object that ``is`` compares: a real object's own, a tensor's identity (shared by the
# results of its in-place ops), or the symbolic value itself (a container built in the trace;
# values of different symbolic kinds are different objects).
IDENTITY.rule(ConstVar, ObjVar)(lambda v: v.value)
IDENTITY.rule(TensorVar)(lambda v: v.ident)
IDENTITY.rule(ListVar, TupleVar, DictVar, DictViewVar, SetVar, IterVar, CellVar, FunctionVar, BoundVar, MethodVar,
              PartialVar, GradModeVar, AutocastVar, NoOpContextVar, ExitVar, SuperVar, NewObjVar, SliceParts,
              LazyVar)(lambda v: v)


@IDENTITY.rule(NullVar)
def _null_identity(v):
    raise Unsupported("internal", "identity of NULL")


def truthy(fr, v: Var) -> bool:
    """``bool(v)``, as a branch needs it."""
    return TRUTH.lookup(type(v))(fr, v)


@TRUTH.rule(ConstVar)
def _const_truth(fr, v: ConstVar):
    return bool(concrete(v.value))


@TRUTH.rule(TensorVar)
def _tensor_truth(fr, v: TensorVar):
    raise Unsupported("data_dependent", "branch on a tensor's value (data-dependent control flow)")


@TRUTH.rule(ListVar, TupleVar, SetVar, DictVar)
def _container_truth(fr, v):
    return len(v.items) > 0


@TRUTH.rule(DictViewVar)
def _view_truth(fr, v: DictViewVar):
    return len(v.dict.items) > 0


@TRUTH.rule(ObjVar)
def _obj_truth(fr, v: ObjVar):
    value = v.value
    cls = type(value)
    if isinstance(value, torch.nn.Module):
        return len(value) > 0 if hasattr(cls, "__len__") else True
    if not hasattr(cls, "__bool__") and not hasattr(cls, "__len__"):
        return True
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)):
        return True
    return TRUTH.refusal(fr, v)


@TRUTH.rule(NewObjVar)
def _newobj_truth(fr, v: NewObjVar):  # Python's order: __bool__, then __len__, else true
    for name in ("__bool__", "__len__"):
        result = call_dunder(fr, v, name, [])
        if result is not NO_DUNDER:
            return truthy(fr, result)
    return True


TRUTH.rule(FunctionVar, BoundVar, MethodVar)(lambda fr, v: True)
TRUTH.refuse(NullVar, IterVar, CellVar, PartialVar, GradModeVar, AutocastVar, NoOpContextVar, ExitVar, SuperVar,
             SliceParts, LazyVar)


def make_slice(parts: list[Var]) -> Var:
    if all(isinstance(p, ConstVar) for p in parts):
        return ConstVar(slice(*(p.value for p in parts)))
    return SliceParts(parts)


def iterate(fr, v: Var) -> IterVar:
    """``iter(v)``."""
    return ITER.lookup(type(v))(fr, v)


ITER.rule(Var)(lambda fr, v: IterVar(unpack(fr, v)))  # other kinds: over their items (UNPACK refuses some)
ITER.rule(IterVar)(lambda fr, v: v)


@ITER.rule(ObjVar, NewObjVar)
def _user_iter(fr, v):
    result = user_iter(fr, v)
    if result is NO_DUNDER:  # a module, or no Python __iter__: over its items (UNPACK's rules)
        return IterVar(unpack(fr, v))
    return result


def user_iter(fr, v: Var, keep_object: bool = False):
    """Note [User iterators]: ``iter(v)`` of a user-class instance whose class defines
    ``__iter__`` in Python, or ``NO_DUNDER``. ``__iter__`` is traced; what it returns is an
    iterator of its own kind (a generator, ``iter(self.items)``) or a user object with a Python
    ``__next__`` (often ``self``), whose items are made by tracing ``__next__`` when asked for,
    one at a time, until it raises StopIteration: a loop over it interleaves ``__next__``'s side
    effects with the body's, and a ``break`` leaves the object where eager leaves it, as Python
    does. At a graph break inside its loop the iterator is the object itself, its state written
    back as every attribute write is, and the rest of the loop calls its ``__next__`` natively,
    once per item, as eager does (Note [Breaks in loops]). With ``keep_object`` (the builtin ``iter()``) such an object is returned as
    it is: ``iter(it) is it``, and a loop over it calls its ``__iter__`` again, as Python does."""
    result = call_dunder(fr, v, "__iter__", [])
    if result is NO_DUNDER or isinstance(result, IterVar):
        return result
    if isinstance(result, (ObjVar, NewObjVar)) and _USER_CLASS[type(result)](result) is not None:
        if not _python_method(class_dunder(result, "__next__")):
            raise Unsupported("unsupported_iter", f"{describe(v)}.__iter__ returned {describe(result)}, whose "
                              "__next__ is not Python")
        return result if keep_object else user_iterator(fr, result)
    return iterate(fr, result)


def user_iter_class(v: Var) -> bool:
    """Whether ``v`` is an instance of a user class with a Python ``__iter__``."""
    return _python_method(class_dunder(v, "__iter__"))


def _python_method(raw) -> bool:
    return isinstance(raw, types.FunctionType) and inlinable_file(raw.__code__.co_filename)


def user_iterator(fr, it: Var) -> IterVar:
    """The items of ``it``, a user object with a Python ``__next__``, traced lazily (Note [User
    iterators])."""
    def pull(out):
        try:
            out.items.append(call_dunder(fr, it, "__next__", []))
        except TracedRaise as e:
            if isinstance(e.exc, StopIteration):
                return False
            raise
        return True

    iv = IterVar([], live=True, pull=pull, py_type=_USER_CLASS[type(it)](it))
    iv.over_object = it  # rebuilt at a break as the object itself, in its state then (Note [Breaks in loops])
    return iv


@ITER.rule(DictVar, DictViewVar)
def _dict_iter(fr, v):
    """An iterator over a dict or a view of it: its items when made; like Python's, each next()
    raises RuntimeError once the dict changed size (a loop that adds keys to the dict it walks)."""
    d = v if isinstance(v, DictVar) else v.dict
    it = IterVar(unpack(fr, v), py_type=type(iter({})))
    size = len(d.items)

    def check():
        if len(d.items) != size:
            return TracedRaise(RuntimeError("dictionary changed size during iteration"))
        return None
    it.check = check
    it.over_dict = v  # rebuilt at a break as a real iterator over the real dict (or view)
    return it


@ITER.rule(ListVar)
def _list_iter(fr, v: ListVar):
    it = IterVar(v.items, live=True)  # a list iterator sees appends made in the loop
    it.over = v  # rebuilt over the same list at a break (Note [Breaks in loops])
    return it


def module_entry(fr, v: ObjVar, key: str) -> Var:
    """The submodule ``key`` of a container module (a ModuleList's, a ModuleDict's)."""
    sub = v.value._modules[key]
    src = None if v.source is None else f"{v.source}._modules[{key!r}]"
    return wrap(fr.tr, sub, src, key)

"""Wrapping real input values as symbolic values, with the guards that make it sound.

A table maps a Python type to its wrapper; lookup walks the type's MRO.
"""
from __future__ import annotations

import collections
import gc
import re
import types

import torch
from ember_symbolic import is_symbolic

from .config import Unsupported
from .guards import NO_MODULE_HOOKS
from .resume import STACK_PREFIX
from .tables import registrar
from .codegen import GradModeExit
from .variables import ConstVar, DictVar, DictViewVar, ExitVar, IterVar, ListVar, ObjVar, SetVar, TupleVar

_WRAPPERS = {}
wrapper = registrar(_WRAPPERS)
_CONST_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis), type(NotImplemented),
                torch.dtype, torch.device, torch.Size, range, slice, torch.layout, torch.memory_format,
                torch.finfo, torch.iinfo)
_CONTAINERS = (list, dict, set)  # mutable: wrapped once per object in a trace
# Attributes of these modules are treated as constants without guards: they do not change.
STABLE_MODULE_PREFIXES = ("torch", "math", "operator", "functools", "itertools", "collections",
                          "numbers", "typing", "dataclasses", "builtins", "warnings", "numpy", "scipy")


def wrap(tr, value, source, name="input"):
    """Symbolic value for ``value`` read from ``source``.

    With no source the value is held by reference (``_cN``), so that what the trace reads
    from it (attributes, items, closure cells) is still guarded.
    """
    if source is None and not isinstance(value, _CONST_TYPES):
        source = tr.ns.ref(value)
    if isinstance(value, _CONTAINERS):
        seen = tr.containers.get(id(value))
        if seen is not None and seen[0] is value:
            # One container read through two sources (`A is B`) is one symbolic value.
            if seen[1].source != source:
                tr.guards.add(source, f"X is {seen[1].source}", f"{source} is {seen[1].source}")
            return seen[1]
        var = _wrapper_for(type(value))(tr, value, source, name)
        tr.containers[id(value)] = (value, var)
        return var
    return _wrapper_for(type(value))(tr, value, source, name)


def _wrapper_for(cls):
    for t in cls.__mro__:
        fn = _WRAPPERS.get(t)
        if fn is not None:
            return fn
    return _wrap_object


@wrapper(torch.Tensor)
def _wrap_tensor(tr, value, source, name):
    seen = tr.graph.by_object.get(id(value))
    if seen is not None and seen.source != source:
        # One tensor read through two sources is one graph input (``ref() is weight`` holds).
        tr.guards.add(source, f"X is {seen.source}")
        return seen
    try:
        var = tr.graph.add_input(source, value, name)
    except Unsupported:
        tr.guards.tensor(source, value)  # the eager entry made next stands for this input only
        raise
    if any(is_symbolic(s) for s in var.fake.shape):  # Note [Dynamic shapes in capture]
        tr.guards.symbolic_tensor(source, value, var.fake)
    else:
        tr.guards.tensor(source, value)
    tr.graph.by_object[id(value)] = var
    return var


@wrapper(*_CONST_TYPES)
def _wrap_const(tr, value, source, name):
    shapes = tr.graph.shapes
    if source is not None and shapes is not None and shapes.int_is_symbolic(source, value):
        # Note [Dynamic shapes in capture]: an int argument that varies is a graph input
        tr.guards.add(source, "type(X) is int and X >= 2", f"{source}: an int >= 2 (symbolic)")
        return tr.graph.add_int_input(source, value, name)
    tr.guards.const(source, value)
    return ConstVar(value, source)


@wrapper(list)
def _wrap_list(tr, value, source, name):
    if type(value) is not list:
        return _wrap_object(tr, value, source, name)
    if source is not None:
        tr.guards.add(source, f"type(X) is list and len(X) == {len(value)}")
    items = [wrap(tr, v, _item(source, i), f"{name}_{i}") for i, v in enumerate(value)]
    return ListVar(items, source)


@wrapper(tuple)
def _wrap_tuple(tr, value, source, name):
    cls = type(value)
    fields = getattr(cls, "_fields", None)
    if cls is not tuple and fields is None:
        if not _is_structseq(cls):
            return _wrap_object(tr, value, source, name)
    if source is not None:
        tr.guards.add(source, f"type(X) is {tr.ns.ref(cls)} and len(X) == {len(value)}")
        tr.guards.pin(source, value)  # its items are pinned by their own guards
    items = [wrap(tr, v, _item(source, i), f"{name}_{i}") for i, v in enumerate(value)]
    field_map = {f: i for i, f in enumerate(fields)} if fields else None
    return TupleVar(items, source, cls=cls, fields=field_map)


# Note [Mutated input dicts]: what a user subclass of dict must not define for its instances
# to be modelled as dicts (their changes written back through the inherited C methods): dict's
# methods, but not how an instance is made or printed, which the model does not use.
_DICT_PROTOCOL = ((frozenset(dict.__dict__) | {"__missing__", "__getattr__", "__setattr__", "__bool__", "__slots__"})
                  - {"__doc__", "__init__", "__new__", "__repr__", "__sizeof__", "__class_getitem__"})
_DICT_CLASSES = (dict, collections.OrderedDict, collections.defaultdict)


@wrapper(dict)
def _wrap_dict(tr, value, source, name):
    """A dict, OrderedDict, defaultdict or a user subclass of dict that overrides none of its
    methods, with str or int keys: a DictVar, guarded by its class and its keys in order (its
    values by their own sources). Any other mapping is a real object."""
    cls = type(value)
    if not _modelled_dict_class(tr, cls, value) or not all(isinstance(k, (str, int)) for k in value):
        return _wrap_object(tr, value, source, name)
    if source is not None:
        kind = "dict" if cls is dict else tr.ns.ref(cls)
        tr.guards.add(source, f"type(X) is {kind} and list(X) == {list(value)!r}")
        if cls not in _DICT_CLASSES and instance_dict(value) is not None:
            tr.guards.add(source, "not X.__dict__", f"{source} has no instance attributes")
    items = {k: wrap(tr, v, _item(source, k), f"{name}_{k}") for k, v in value.items()}
    var = DictVar(items, source, cls=cls)
    if cls is collections.defaultdict:
        var.default_factory = wrap(tr, value.default_factory, f"{source}.default_factory", "default_factory")
    return var


def instance_dict(value):
    """``value``'s own ``__dict__``, or None: read without its class's ``__getattr__`` (a user's
    may raise anything, or answer for every name)."""
    try:
        d = object.__getattribute__(value, "__dict__")
    except AttributeError:
        return None
    return d if type(d) is dict else None


def _modelled_dict_class(tr, cls, value) -> bool:
    if cls in _DICT_CLASSES:
        return True
    mro = cls.__mro__
    if mro[-2:] != (dict, object) or type(cls) is not type:
        return False  # a subclass of OrderedDict or defaultdict, or with a metaclass: a real object
    own = mro[:-2]
    if any(not _DICT_PROTOCOL.isdisjoint(k.__dict__) for k in own) or instance_dict(value):
        return False
    for k in own:  # a method added to the class later recompiles
        tr.guards.add(f"{tr.ns.ref(k)}.__dict__", f"X.keys().isdisjoint({tr.ns.ref(_DICT_PROTOCOL)})",
                      f"{k.__qualname__} overrides no method of dict")
    return True


def viewed_mapping(view):
    """The dict that a view (``d.keys()``, ``od.items()``) reads."""
    return next(r for r in gc.get_referents(view) if isinstance(r, dict))


_VIEW_KINDS = {type(getattr(d, kind)()): kind for d in ({}, collections.OrderedDict())
               for kind in ("keys", "values", "items")}


@wrapper(*_VIEW_KINDS)
def _wrap_view(tr, value, source, name):
    """A view of a dict read from the inputs: a DictViewVar of the dict it reads (wrapped through
    ``viewed_mapping(view)``), so that it sees the trace's changes to that dict (Note [Mutated
    input dicts])."""
    if type(value) not in _VIEW_KINDS:
        return _wrap_object(tr, value, source, name)
    tr.guards.add(source, f"type(X) is {tr.ns.ref(type(value))}")
    d = wrap(tr, viewed_mapping(value), f"{tr.ns.ref(viewed_mapping)}({source})", f"{name}_mapping")
    if not isinstance(d, DictVar):
        return _wrap_object(tr, value, source, name)
    return DictViewVar(d, _VIEW_KINDS[type(value)])


@wrapper(set, frozenset)
def _wrap_set(tr, value, source, name):
    """A set of constants, guarded by its contents (equal to a frozen copy): a set changed
    after the trace read it (its length, a membership) recompiles. A frozenset is a constant."""
    if type(value) not in (set, frozenset) or not all(isinstance(v, _CONST_TYPES) for v in value):
        return _wrap_object(tr, value, source, name)
    frozen = frozenset(value)
    if source is not None:
        tr.guards.add(source, f"type(X) is {type(value).__name__} and X == {tr.ns.ref(frozen)}",
                      f"{source} == {set(value)!r}")
    if type(value) is frozenset:
        return ConstVar(value, source)
    return SetVar([ConstVar(v) for v in value], source)


@wrapper(torch.nn.Module)
def _wrap_module(tr, value, source, name):
    """A module is guarded by identity, except a stateless one (no parameters, buffers or
    submodules: a loss, an activation): by its class and hook-free, since everything the trace
    reads from it (reduction, ignore_index, ...) is guarded by its own source. Hugging Face
    models build `CrossEntropyLoss()` on every call: an identity guard missed every time and
    recompiled the frame until the recompile limit."""
    if source is not None:
        if stateless_module(value) and not _has_hooks(value):
            tr.guards.add(source, f"type(X) is {tr.ns.ref(type(value))}",
                          f"{source}: a stateless {type(value).__name__}")
            tr.guards.add(source, NO_MODULE_HOOKS, f"{source} has no module hooks")
            return _pinnable(tr, ObjVar(value, source))
        else:
            tr.guards.identity(source, value)
            tr.guards.type_is(source, value)  # `m.__class__ = Other` keeps the identity
    return ObjVar(value, source)


def _has_hooks(m: torch.nn.Module) -> bool:
    return bool(m._forward_hooks or m._forward_pre_hooks or m._backward_hooks or m._backward_pre_hooks)


def stateless_module(module: torch.nn.Module) -> bool:
    return (not module._modules and all(v is None for v in module._parameters.values())
            and all(v is None for v in module._buffers.values()))


@wrapper(types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type, types.MethodType,
         types.MethodDescriptorType, types.WrapperDescriptorType, types.MethodWrapperType,
         types.ClassMethodDescriptorType)
def _wrap_static(tr, value, source, name):
    if source is not None:
        owner = getattr(value, "__self__", None)
        method = getattr(value, "__name__", None)
        if (isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType)) and method
                and not isinstance(owner, types.ModuleType) and source.endswith("." + method)
                and _read_from(tr, source[:-len(method) - 1], owner)):
            # `d.values` read from an object: a new bound method on each read, so not guarded by
            # identity (that never holds again) but as the same builtin method of the same object.
            tr.guards.add(source, f"type(X) is {tr.ns.ref(type(value))} and X.__self__ is "
                          f"{source[:-len(method) - 1]} and X.__name__ == {method!r}")
        else:
            tr.guards.add(source, f"X is {tr.ns.ref(value)}")
    return ObjVar(value, source)


def _read_from(tr, source: str, owner) -> bool:
    """Whether `source` names the object a bound method belongs to (`d.values` read from `d`),
    not an object that merely holds a method of another (`random.random` is a method of the
    module's hidden `Random` instance)."""
    try:
        return tr.eval_source(source) is owner
    except Exception:  # noqa: BLE001 - a source that does not evaluate: guard by identity
        return False


# Note [Iterators from the inputs]: a list or tuple iterator that user code passes in (an
# argument, an attribute, a global) is modelled over its sequence, read through `__reduce__`
# (`(iter, (seq,), position)`) without advancing it, so a loop over it is traced, not run
# eagerly. Guards: the type, the position, and the sequence as any input list or tuple. The
# iterator is the same object after the graph, its position written back (`__setstate__`)
# before anything else sees it, as an input list's contents are (Note [Mutated input lists]).
# A loop's iterator on a resume function's stack stays opaque (Note [Breaks in loops]): modelled,
# the rest of the loop would be unrolled from each position, one compile per position, and a
# loop that breaks on every iteration would reach the recompile limit; opaque, its FOR_ITER runs
# natively and one compile of each resume function serves every iteration.
_SEQ_ITERATORS = (type(iter([])), type(iter(())))


def _on_resume_stack(tr, source: str) -> bool:
    """Whether `source` is an argument of a resume function that carries its value stack."""
    slot = re.fullmatch(r"L\[(\d+)\]", source)
    names = tr.code.co_varnames
    return slot is not None and int(slot[1]) < len(names) and names[int(slot[1])].startswith(STACK_PREFIX)


def iterator_position(it) -> int:
    """A list or tuple iterator's position, -1 once exhausted (it then drops its sequence)."""
    state = it.__reduce__()
    return state[2] if len(state) > 2 else -1


def iterator_sequence(it):
    return it.__reduce__()[1][0]


@wrapper(*_SEQ_ITERATORS)
def _wrap_seq_iterator(tr, value, source, name):
    if _on_resume_stack(tr, source):  # a loop's iterator at a break: opaque
        return _wrap_object(tr, value, source, name)
    pos = iterator_position(value)
    tr.guards.add(source, f"type(X) is {tr.ns.ref(type(value))} and {tr.ns.ref(iterator_position)}(X) == {pos}",
                  f"{source}: a {type(value).__name__} at position {pos}")
    if pos < 0:
        return IterVar([], py_type=type(value))
    seq = wrap(tr, iterator_sequence(value), f"{tr.ns.ref(iterator_sequence)}({source})", f"{name}_seq")
    if not isinstance(seq, (ListVar, TupleVar)):  # a list subclass, ...: opaque, as before
        return _wrap_object(tr, value, source, name)
    it = IterVar(seq.items, live=True, py_type=type(value))
    it.pos = it.start = pos
    it.source = source
    if isinstance(seq, ListVar):
        it.over = seq  # sees appends made in the loop, as a list iterator does
    tr.input_iterators.append(it)
    return it


@wrapper(GradModeExit)
def _wrap_grad_exit(tr, value, source, name):
    tr.guards.add(source, f"type(X) is {tr.ns.ref(GradModeExit)} and X.restore is {value.restore}")
    return ExitVar(restore=value.restore)


def _wrap_object(tr, value, source, name):
    if source is not None:
        tr.guards.type_is(source, value)
    if isinstance(value, torch.Tensor):
        raise Unsupported("unsupported_input", f"tensor subclass {type(value).__name__}")
    return _pinnable(tr, ObjVar(value, source))


# Note [Identity of real objects]: an object read from the inputs is guarded by its type only
# (its attributes and items by their own sources). A use that computes with the object itself,
# its identity (`m is Mode.A`, `m == Mode.A` by object.__eq__, `k in (A, B)`) or its value (a
# dict key, `Flag & Flag`, `str(o)`), decides for this object, not for its type: such a use
# pins the source to the object (`X is _c`), so another member of the same enum, another
# sentinel `object()`, recompiles instead of reusing the first call's answer.
def _pinnable(tr, var: ObjVar) -> ObjVar:
    source, value = var.source, var.value
    if source is not None:
        var.pin = lambda: tr.guards.add(source, f"X is {tr.ns.ref(value)}",
                                        f"{source} is <{type(value).__qualname__} at {id(value):#x}>")
    return var


def _item(source, key):
    return None if source is None else f"{source}[{key!r}]"


def _is_structseq(cls):
    return cls.__module__ == "torch.return_types"


def is_stable_module(mod) -> bool:
    name = getattr(mod, "__name__", "") or ""
    return name.split(".")[0] in STABLE_MODULE_PREFIXES

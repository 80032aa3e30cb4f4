"""Python object protocols that model libraries use inside ``forward``: ``copy.deepcopy`` and
``copy.copy`` of plain objects and containers, ``setattr``/``delattr``, attribute reads through
a class's own ``__getattribute__`` on an instance made in the trace, and functions behind a
``functools.lru_cache`` wrapper.

Note [Copies]: ``copy.deepcopy(x)`` makes, on every call, a fresh object equal to ``x`` that
shares nothing mutable with it. Capture builds that object symbolically: a container becomes a
new container of copied items, a plain object (its class makes instances with ``object.__new__``
and copies them the default way: no ``__deepcopy__``, ``__reduce__``, ``__reduce_ex__``,
``__getstate__`` or ``__setstate__`` of its own, no ``__slots__``) becomes a ``NewObjVar`` of
the same class whose ``__dict__`` holds copies of the original's attributes, and immutable
values (numbers, strings, classes, functions) are themselves. The original's attributes are read
through ``X.__dict__[name]``, so each is guarded as any read is: a config changed after
compiling recompiles. A memo keyed by symbolic value keeps sharing (two attributes holding one
list hold one copied list). Tensors, modules and objects of other classes are not copied
symbolically: the call is a graph break (``copy.deepcopy`` runs natively there), as before.
Hugging Face T5, BART, Marian and Whisper deep-copy their config in ``forward``
(``get_text_config``, Whisper's decoder-cache config) and then rename attributes on the copy.

Note [lru_cache]: a call through ``functools.lru_cache``'s wrapper with constant arguments calls
the wrapper at trace time and uses its result: on a miss the function runs once, its side
effects (a log, a counter) happen once as eager's first call with that key does, and later calls
with the same (guarded) arguments hit the cache in eager and run nothing in the compiled code.
That holds while the keys stay cached: the entry guards the cache's count of misses (a
`cache_clear()` resets it, and a key is only inserted or evicted on a miss), so after a clear or
another key's miss it recompiles, and the call at trace time runs the function again where eager
would. A mutable result (a list, a tensor) is the cached object itself, held by reference and
guarded, so that mutating it is seen as eager sees it. `cache_info().hits` is not eager's (the
trace's calls are counted). An argument that is a real object hashed and compared by identity
(not a tensor or a module) is a constant key too, its identity guarded: Hugging Face's
`logger.warning_once(msg)`, an lru_cache wrapper set on `logging.Logger` and bound to the
logger, split GPT-2's loss from its model. A call with other arguments (a tensor, an object)
calls the wrapped function (``__wrapped__``, read through the wrapper and guarded), as
torch.compile does: the cache would miss on a new tensor's identity anyway. A function
marked constant (the ``_dynamo_marked_constant`` attribute of torch's assume-constant-result decorator, which
Hugging Face puts on install probes such as ``is_torch_available``) is called once at trace time
with constant arguments and its result used as a constant, as that contract says.
"""
from __future__ import annotations

import abc
import copy
import copyreg
import functools
import operator
import types

import torch

from . import semantics as S
from .attributes import CONTAINER_TYPES, _ABSENT, _is_data_descriptor, bind_class_attr, class_lookup, instance_dict
from .builder import wrap
from .builtins_table import builtin
from .calls import OPERATOR_GETTERS, PURE_MODULES, call, call_rule, inline, pure_argument
from .library import inlinable_file
from .config import Unsupported
from .frame import VERSION
from .resume import STACK_PREFIX
from .variables import ConstVar, DictVar, ListVar, NewObjVar, NullVar, ObjVar, SetVar, TensorVar, TupleVar, Var

# Values that deepcopy returns as they are, or as an equal immutable value (copy's
# _deepcopy_atomic table; torch's dtypes, devices, layouts and memory formats reduce to
# themselves or to an equal value).
_ATOMIC = (type, types.FunctionType, types.BuiltinFunctionType, torch.dtype, torch.device, torch.layout,
           torch.memory_format, type(None), int, float, bool, complex, str, bytes, range, type(Ellipsis),
           type(NotImplemented))
_OWN_COPY_HOOKS = ("__deepcopy__", "__copy__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__")


def plain_class(cls) -> bool:
    """Whether copy.deepcopy copies instances of ``cls`` the default way: a new instance made by
    ``object.__new__`` whose ``__dict__`` is a deep copy of the original's (Note [Copies])."""
    if not isinstance(cls, type) or issubclass(cls, (torch.nn.Module, torch.Tensor, BaseException)):
        return False
    if cls.__new__ is not object.__new__ or any(b in CONTAINER_TYPES for b in cls.__mro__):
        return False
    if type(cls) not in (type, abc.ABCMeta) or cls in copyreg.dispatch_table:
        return False
    for klass in cls.__mro__[:-1]:  # everything but object
        if "__slots__" in klass.__dict__ or any(h in klass.__dict__ for h in _OWN_COPY_HOOKS):
            return False
    return True


def deep_copy(fr, v: Var, memo: dict) -> Var:
    """The symbolic result of ``copy.deepcopy`` of ``v`` (Note [Copies])."""
    seen = memo.get(id(v))
    if seen is not None:
        return seen
    if isinstance(v, ConstVar):
        value = v.value
        if not isinstance(value, _ATOMIC + (tuple, frozenset, torch.Size, slice)):
            raise Unsupported("unsupported_call", f"copy.deepcopy of a {type(value).__name__} constant")
        out = ConstVar(value)
    elif isinstance(v, TensorVar):
        raise Unsupported("unsupported_call", "copy.deepcopy of a tensor")
    elif isinstance(v, ListVar):
        out = memo[id(v)] = ListVar([])
        out.items = [deep_copy(fr, i, memo) for i in v.items]
    elif isinstance(v, TupleVar):
        out = TupleVar([deep_copy(fr, i, memo) for i in v.items], cls=v.cls, fields=v.fields)
    elif isinstance(v, DictVar):
        if getattr(v, "default_factory", None) is not None:
            raise Unsupported("unsupported_call", "copy.deepcopy of a defaultdict")
        out = memo[id(v)] = DictVar({}, cls=v.cls)
        out.items = {k: deep_copy(fr, i, memo) for k, i in v.items.items()}
    elif isinstance(v, SetVar):
        out = SetVar([deep_copy(fr, i, memo) for i in v.items])
    elif isinstance(v, NewObjVar) and v.storage is None and plain_class(v.cls):
        out = memo[id(v)] = NewObjVar(v.cls, {})
        out.attrs = {k: deep_copy(fr, a, memo) for k, a in v.attrs.items()}
    elif isinstance(v, ObjVar) and isinstance(v.value, _ATOMIC):
        out = v
    elif isinstance(v, ObjVar) and plain_class(type(v.value)) and instance_dict(v.value) is not None:
        out = memo[id(v)] = NewObjVar(type(v.value), {})
        out.attrs = {k: deep_copy(fr, a, memo) for k, a in instance_attrs(fr, v).items()}
    else:
        raise Unsupported("unsupported_call", f"copy.deepcopy of {S.describe(v)}")
    memo[id(v)] = out
    return out


def instance_attrs(fr, o: ObjVar) -> dict:
    """The instance dict of a real object, each value wrapped (and guarded) through
    ``X.__dict__[name]``; its keys are guarded in order."""
    tr, d = fr.tr, instance_dict(o.value)
    tr.check_native(d, "vars()", refers=False)  # Note [Mutated input dicts]
    source = o.source if o.source is not None else tr.ns.ref(o.value)
    tr.guards.add(source, f"list(X.__dict__) == {list(d)!r}", f"{source}.__dict__ has the keys {list(d)}")
    return {k: tr.attr_writes.get((id(o.value), k)) or wrap(tr, val, f"{source}.__dict__[{k!r}]", k)
            for k, val in d.items()}


@builtin(copy.deepcopy)
def _deepcopy(fr, args, kwargs):
    if len(args) != 1 or kwargs:
        raise Unsupported("unsupported_call", "copy.deepcopy with a memo")
    return deep_copy(fr, args[0], {})


@builtin(copy.copy)
def _copy(fr, args, kwargs):
    """A shallow copy: the same items or attributes in a new container or object."""
    (v,) = args
    if isinstance(v, ListVar):
        return ListVar(v.items)
    if isinstance(v, DictVar) and getattr(v, "default_factory", None) is None:
        return DictVar(v.items, cls=v.cls)
    if isinstance(v, SetVar):
        return SetVar(v.items)
    if isinstance(v, (ConstVar, TupleVar)) or (isinstance(v, ObjVar) and isinstance(v.value, _ATOMIC)):
        return v
    if isinstance(v, NewObjVar) and v.storage is None and plain_class(v.cls):
        return NewObjVar(v.cls, v.attrs)
    if isinstance(v, ObjVar) and plain_class(type(v.value)) and instance_dict(v.value) is not None:
        return NewObjVar(type(v.value), instance_attrs(fr, v))
    raise Unsupported("unsupported_call", f"copy.copy of {S.describe(v)}")


@builtin(torch._C._log_api_usage_once)
def _log_api_usage_once(fr, args, kwargs):
    """Usage telemetry (torchvision's functional ops call it on each call): logged once per
    process, so logging it while tracing is all a call would do."""
    torch._C._log_api_usage_once(*[S.const_value(a, "_log_api_usage_once()") for a in args])
    return ConstVar(None)


# Note [Frame introspection]: `globals()`, `locals()`, `vars()` and `dir()` without an argument
# answer for the frame that calls them. Run natively at a graph break they would answer for
# ember's entry function instead (its namespace, its locals), so they are modelled: `globals()`
# is the traced frame's module dict, a real object (what the code does with it runs natively,
# at a break, on that dict); `locals()` and `vars()` a dict of the frame's bound variables (its
# cells' contents too) in the order CPython lists them, `dir()` their sorted names. Before 3.13
# that dict is the frame's own, refreshed by each call (`loc = locals()` sees later locals after
# the next call): modelled as one dict per frame, and a frame that made it does not split at a
# graph break (the resume function's dict would be another one): it runs eagerly.
@builtin(globals)
def _globals(fr, args, kwargs):
    return ObjVar(fr.globals, fr.tr.globals_ref(fr.globals))


def _frame_locals(fr) -> DictVar:
    d = getattr(fr, "locals_dict", None)
    if d is None or VERSION >= (3, 13):
        d = DictVar({})
        fr.locals_dict = d
    code = fr.code
    for name in code.co_varnames + code.co_cellvars + code.co_freevars:
        if name.startswith(STACK_PREFIX):
            continue
        value = fr.cells[name].contents if name in fr.cells else fr.locals.get(name)
        if value is not None and not isinstance(value, NullVar):
            d.items[name] = value
        else:
            d.items.pop(name, None)
    return d


@builtin(locals)
def _locals(fr, args, kwargs):
    return _frame_locals(fr)


@builtin(dir)
def _dir(fr, args, kwargs):
    if args or kwargs:
        raise Unsupported("unsupported_call", "dir() of an object")
    return ListVar([ConstVar(k) for k in sorted(_frame_locals(fr).items)])


@builtin(vars)
def _vars(fr, args, kwargs):
    if not args and not kwargs:
        return _frame_locals(fr)
    if len(args) != 1:
        raise Unsupported("unsupported_call", "vars() with more than one argument")
    return S.getattr_var(fr, args[0], "__dict__")


@builtin(setattr)
def _setattr(fr, args, kwargs):
    obj, name, value = args
    S.setattr_var(fr, obj, S.const_value(name, "setattr()"), value)
    return ConstVar(None)


@builtin(delattr, object.__dict__["__delattr__"])
def _delattr(fr, args, kwargs):
    obj, name = args
    name = S.const_value(name, "delattr()")
    if not isinstance(obj, NewObjVar):
        raise Unsupported("side_effect", f"deleting attribute {name!r} of {S.describe(obj)}")
    own = class_lookup(fr.tr, obj.cls, "__delattr__")
    if isinstance(own, types.FunctionType):
        inline(fr, ObjVar(own), [obj, ConstVar(name)], {})
        return ConstVar(None)
    raw = class_lookup(fr.tr, obj.cls, name)
    if raw is not _ABSENT and hasattr(type(raw), "__delete__"):
        raise Unsupported("unsupported_attr", f"deleting {name!r} through a {type(raw).__name__}")
    if name not in obj.attrs:
        raise Unsupported("trace_error", f"{obj.cls.__name__} object has no attribute {name!r}")
    del obj.attrs[name]
    return ConstVar(None)


# -- functools.lru_cache --------------------------------------------------------------------
def is_lru_cached(value) -> bool:
    return isinstance(value, functools._lru_cache_wrapper) and hasattr(value, "__wrapped__")


def is_marked_constant(value) -> bool:
    return isinstance(value, types.FunctionType) and getattr(value, "_dynamo_marked_constant", False) is True


@call_rule(is_lru_cached)
def call_lru_cached(fr, fn: ObjVar, args: list, kwargs: dict) -> Var:
    """A call through an lru_cache wrapper: Note [lru_cache]."""
    tr, wrapper = fr.tr, fn.value
    keys = _constant_arguments(args, kwargs, fr)
    if keys is not None:
        values, named = keys
        try:
            result = wrapper(*values, **named)
        except Exception as e:
            raise Unsupported("trace_error", f"{wrapper.__qualname__} raised {type(e).__name__}: {e}") from None
        _guard_cache_unchanged(tr, fn)
        return ConstVar(result) if _immutable_constant(result) else wrap(tr, result, None)
    src = fn.source if fn.source is not None else tr.ns.ref(wrapper)
    inner = wrap(tr, wrapper.__wrapped__, f"{src}.__wrapped__")
    return call(fr, inner, args, kwargs)


def _guard_cache_unchanged(tr, fn: ObjVar) -> None:
    """Guard that the cache has missed no call since the trace's last call through it: a
    `cache_clear()` resets the count, and only a miss inserts (and evicts) a key, so the keys
    the trace found are still cached and the function would not run (Note [lru_cache])."""
    wrapper = fn.value
    misses = tr.lru_misses.get(id(wrapper))
    if misses is None:
        misses = tr.lru_misses[id(wrapper)] = [0]
        src = fn.source if fn.source is not None else tr.ns.ref(wrapper)
        tr.guards.add(f"{src}.cache_info()", f"X.misses == {tr.ns.ref(misses)}[0]",
                      f"{wrapper.__qualname__}'s cache has missed no call since the trace")
    misses[0] = wrapper.cache_info().misses


def _immutable_constant(value) -> bool:
    if isinstance(value, tuple) and type(value) is tuple:
        return all(_immutable_constant(v) for v in value)
    return value is None or type(value) in (int, float, bool, str, bytes, complex, torch.dtype, torch.device)


def _constant_arguments(args, kwargs, fr=None):
    """The Python values of a call's arguments when all are constants (a cache key), else None.

    With `fr`, a real object that hashes and compares by identity (a logger: Hugging Face's
    `logger.warning_once(msg)` is an lru_cache wrapper bound to the logger) is a key too, its
    identity guarded: the same object hits the same cached key in eager."""
    plain = (ConstVar, TupleVar)
    values = (*args, *kwargs.values())
    if not all(isinstance(a, plain) or (fr is not None and _identity_key(a)) for a in values):
        return None
    try:
        keys = ([_key_value(fr, a) for a in args], {k: _key_value(fr, v) for k, v in kwargs.items()})
    except Unsupported:
        return None
    return keys


def _identity_key(v) -> bool:
    if not isinstance(v, ObjVar) or isinstance(v.value, (torch.Tensor, torch.nn.Module)):
        return False
    cls = type(v.value)
    return getattr(cls, "__hash__", None) is object.__hash__ and getattr(cls, "__eq__", None) is object.__eq__


def _key_value(fr, v):
    if isinstance(v, ObjVar):
        source = v.source if v.source is not None else fr.tr.ns.ref(v.value)
        fr.tr.guards.identity(source, v.value)
        return v.value
    return S.concrete_value(v)


@call_rule(is_marked_constant)
def call_marked_constant(fr, fn: ObjVar, args: list, kwargs: dict) -> Var:
    """A function marked constant (Note [lru_cache]): called now, its result a constant."""
    values = [S.const_value(a, "a function marked constant") for a in args]
    named = {k: S.const_value(v, "a function marked constant") for k, v in kwargs.items()}
    try:
        result = fn.value(*values, **named)
    except Exception as e:
        raise Unsupported("trace_error", f"{fn.value.__qualname__} raised {type(e).__name__}: {e}") from None
    return S.from_python(result)



def is_pure_python_function(value) -> bool:
    """A Python function of a module whose functions are pure (``typing.get_origin``), which
    capture does not inline: computed at trace time on constants, as their builtins are."""
    return (isinstance(value, types.FunctionType) and value.__module__ in PURE_MODULES
            and not inlinable_file(value.__code__.co_filename))


@call_rule(is_pure_python_function)
def call_pure_function(fr, fn: ObjVar, args: list, kwargs: dict) -> Var:
    what = f"{fn.value.__qualname__}()"
    values = [pure_argument(a, what) for a in args]
    named = {k: pure_argument(v, what) for k, v in kwargs.items()}
    return S.from_python(fn.value(*values, **named))


# Note [operator getters]: `operator.attrgetter("a.b")`, `itemgetter(k)` and `methodcaller(name,
# *args)` are C callables whose every call reads its argument: computed at trace time on a real
# object (as a function of a pure module), the first call's attribute was baked into the entry
# with no guard. They are modelled as the reads they make, each through the value protocol
# (and so guarded as any attribute or item read is). The getter itself is immutable.
_IMMUTABLE_ARGS = (int, float, complex, str, bytes, bool, type(None))


def _getter_parts(getter):
    """(kind, parameters) of a getter, from its pickling recipe (the only public view of them)."""
    fn, params = getter.__reduce__()[:2]
    if isinstance(getter, operator.methodcaller):
        if isinstance(fn, functools.partial):  # methodcaller(name, *args, **kwargs)
            return "method", (fn.args[0], params, dict(fn.keywords))
        return "method", (params[0], params[1:], {})
    return ("attr" if isinstance(getter, operator.attrgetter) else "item"), params


def _immutable(value) -> bool:
    return isinstance(value, _IMMUTABLE_ARGS) or (
        type(value) is tuple and all(_immutable(v) for v in value))


@call_rule(lambda value: type(value) in OPERATOR_GETTERS)
def call_operator_getter(fr, fn: ObjVar, args: list, kwargs: dict) -> Var:
    if len(args) != 1 or kwargs:
        raise Unsupported("unsupported_call", f"{type(fn.value).__name__} called with {len(args)} arguments")
    kind, params = _getter_parts(fn.value)
    obj = args[0]
    if kind == "method":
        name, margs, mkwargs = params
        if not all(_immutable(v) for v in (*margs, *mkwargs.values())):
            raise Unsupported("unsupported_call", "methodcaller holding a mutable argument")
        return call(fr, S.getattr_var(fr, obj, name), [ConstVar(v) for v in margs],
                    {k: ConstVar(v) for k, v in mkwargs.items()})

    def one(p):
        if kind == "item":
            if not _immutable(p):
                raise Unsupported("unsupported_call", "itemgetter holding a mutable key")
            return S.getitem(fr, obj, ConstVar(p))
        v = obj
        for part in p.split("."):
            v = S.getattr_var(fr, v, part)
        return v

    values = [one(p) for p in params]
    return values[0] if len(values) == 1 else TupleVar(values)

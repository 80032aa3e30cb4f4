"""Calls: torch ops become graph nodes, user functions are inlined, builtins follow a table.

Which Python functions are inlined is decided in ``library.py`` (Note [Inlining]). Torch
functions (``torch.*``, ``torch.nn.functional.*``, Tensor methods) are leaves: one graph node each.
"""
from __future__ import annotations

import collections
import enum
import functools
import operator
import types
import weakref

import torch
import torch.nn.modules.module as _module_mod

from .attributes import CONTAINER_TYPES, MODULE_CALLS, bind_class_attr, class_lookup, is_container_method
from .builder import stateless_module, wrap
from .config import Unsupported
from .frame import Frame
from .disable import own_attr
from .library import inlinable_file
from .amp import model_for as amp_model_for
from .optim import function_model_for as optim_function_model_for, model_for as optim_model_for
from .tables import TypeTable
from .tensor_state import STATE_FUNCTIONS, tensor_state
from .containers import call_container_method
from .graph import SliceParts
from .guards import NO_FORWARD_HOOKS, NO_GLOBAL_HOOKS, NO_OTHER_HOOKS, global_module_hooks
from .lazy import LazyVar
from .protocol import CALL, call
from . import semantics as S
from .semantics import const_value, from_python, describe, getattr_var, unpack
from .variables import (
    AutocastVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExitVar, FunctionVar, GradModeVar, IterVar,
    ListVar, NewObjVar, NoOpContextVar, NullVar, ObjVar, PartialVar, SetVar, SuperVar, TensorVar, TupleVar, Var,
)

TORCH_FUNCTION_MODULES = frozenset({"torch", "torch.functional", "torch.nn.functional", "torch._tensor",
                                    "torch.random", "torch.fft", "torch.linalg", "torch.special"})
# Torch callables that change global state or need real data: never graph nodes.
TORCH_DENY = frozenset({"manual_seed", "seed", "set_rng_state", "get_rng_state", "set_default_dtype",
                        "set_printoptions", "use_deterministic_algorithms", "save", "load",
                        "set_num_threads", "from_numpy", "is_nonzero", "equal", "allclose"})
# Functions of these modules are pure: calls on constants are computed at trace time (typing's
# get_origin/get_args on a dataclass field's annotation: huggingface_hub's type validators).
PURE_MODULES = frozenset({"math", "cmath", "_operator", "operator", "typing"})
MAX_INLINE_DEPTH = 48
OPERATOR_GETTERS = (operator.attrgetter, operator.itemgetter, operator.methodcaller)
def is_torch_op(value) -> bool:
    if isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True  # torch.ops.aten.*, and custom ops (torch.library)
    if isinstance(value, (types.BuiltinFunctionType, types.MethodDescriptorType,
                          types.WrapperDescriptorType, types.ClassMethodDescriptorType)):
        owner = getattr(value, "__objclass__", None)
        if owner is not None:
            return issubclass(owner, torch._C.TensorBase)
        return (getattr(value, "__module__", None) or "").startswith("torch")
    if isinstance(value, types.FunctionType):
        # Private helpers of torch.nn.functional (F._canonical_mask, ...) are inlined instead.
        return value.__module__ in TORCH_FUNCTION_MODULES and not value.__name__.startswith("_")
    return False


# -- dispatch: the value protocol's CALL table (Note [Value protocol]) ---------------------
_calls = CALL.rule
CALL.refuse(NullVar, ConstVar, TensorVar, ListVar, TupleVar, DictVar, DictViewVar, SetVar, IterVar, CellVar,
            GradModeVar, AutocastVar, NoOpContextVar, SuperVar, NewObjVar, SliceParts, LazyVar)
# Real callables with a rule of their own, as (predicate on the callable, handler(fr, fn, args,
# kwargs)), registered by the modules that model them (pyobjects.py: lru_cache wrappers,
# functions marked constant).
CALL_RULES: list = []


def call_rule(predicate):
    def deco(handler):
        CALL_RULES.append((predicate, handler))
        return handler
    return deco


@_calls(FunctionVar)
def _call_function_var(fr, fn, args, kwargs):
    return inline(fr, fn, args, kwargs)


@_calls(BoundVar)
def _call_bound(fr, fn, args, kwargs):
    model = optim_model_for(fn.func, fn.self_var) or amp_model_for(fn.func, fn.self_var)
    if model is not None:  # Note [optimizer steps], Note [GradScaler steps]
        return model(fr, fn.self_var, args, kwargs)
    return call(fr, fn.func, [fn.self_var] + list(args), kwargs)


@_calls(PartialVar)
def _call_partial(fr, fn, args, kwargs):
    return call(fr, fn.func, fn.args + list(args), {**fn.kwargs, **kwargs})


@_calls(ExitVar)
def _call_exit(fr, fn, args, kwargs):
    graph = fr.tr.graph
    if fn.context is not None:
        graph.exit_autocast(fn, fr.tr)
        return ConstVar(None)
    if fn.restore is not None and graph.grad_enabled != fn.restore:
        graph.set_grad_enabled(fn.restore)
    return ConstVar(None)


@_calls(ObjVar)
def _call_obj(fr, fn, args, kwargs):
    """A call of a real Python object: first the rules that recognise a callable by what it is
    (marked, a builtin with a model, a torch op...), then by its Python type (OBJECT_CALLS)."""
    value = fn.value
    disabled = own_attr(value, "_ember_disabled")
    if disabled is not None:
        raise Unsupported("disabled", f"{getattr(value, '__qualname__', value)} is marked ember.disable")
    inner = own_attr(value, "_ember_state")
    if inner is not None:  # a captured function called from traced code: trace what it wraps
        return call(fr, wrap(fr.tr, inner.eager, None), args, kwargs)
    special = fr.tr.builtins.get(_key(value))
    if special is not None:
        return special(fr, args, kwargs)
    for applies, handler in CALL_RULES:
        if applies(value):
            return handler(fr, fn, args, kwargs)
    scheduled_step = optim_function_model_for(fn)
    if scheduled_step is not None:  # Note [optimizer steps]
        return scheduled_step(fr, args, kwargs)
    if isinstance(own_attr(value, "_opoverload"), torch._ops.OpOverload):  # torch.library.custom_op
        return torch_call(fr, value._opoverload, args, kwargs)
    if is_torch_op(value):
        return torch_call(fr, value, args, kwargs)
    if is_container_method(value):
        return call_container_method(fr, value, args, kwargs)
    return OBJECT_CALLS.find(type(value), _call_other)(fr, fn, args, kwargs)


# Calls of real objects by their Python type (looked up along its MRO).
OBJECT_CALLS = TypeTable()


@OBJECT_CALLS.register(torch.nn.Module)
def _call_module_obj(fr, fn, args, kwargs):
    return call_module(fr, fn, args, kwargs)


OBJECT_CALLS.register(types.FunctionType)(lambda fr, fn, args, kwargs: inline(fr, fn, args, kwargs))


@OBJECT_CALLS.register(types.MethodType)
def _call_bound_method(fr, fn, args, kwargs):
    value = fn.value
    self_var = wrap(fr.tr, value.__self__, None if fn.source is None else f"{fn.source}.__self__")
    return call(fr, ObjVar(value.__func__), [self_var] + list(args), kwargs)


@OBJECT_CALLS.register(functools.partial)
def _call_real_partial(fr, fn, args, kwargs):
    # Its function, arguments and keywords are read through it (and guarded) on each call:
    # two partials of one function with different tensors are different calls.
    value = fn.value
    tr, src = fr.tr, fn.source if fn.source is not None else fr.tr.ns.ref(value)
    tr.guards.add(src, f"type(X) is {tr.ns.ref(type(value))} and len(X.args) == {len(value.args)} "
                  f"and list(X.keywords) == {list(value.keywords)!r}")
    pargs = [wrap(tr, a, f"{src}.args[{i}]") for i, a in enumerate(value.args)]
    pkw = {k: wrap(tr, v, f"{src}.keywords[{k!r}]", k) for k, v in value.keywords.items()}
    return call(fr, wrap(tr, value.func, f"{src}.func"), pargs + list(args), {**pkw, **kwargs})


OBJECT_CALLS.register(type)(lambda fr, fn, args, kwargs: construct(fr, fn.value, args, kwargs))


@OBJECT_CALLS.register(weakref.ReferenceType)
def _call_weakref(fr, fn, args, kwargs):
    if args or kwargs:
        return _call_other(fr, fn, args, kwargs)
    return wrap(fr.tr, fn.value(), None if fn.source is None else f"{fn.source}()")


def _call_other(fr, fn, args, kwargs):
    value = fn.value
    if getattr(value, "__module__", None) in PURE_MODULES:
        what = f"{describe(fn)}()"
        return from_python(value(*[pure_argument(a, what) for a in args],
                                 **{k: pure_argument(v, what) for k, v in kwargs.items()}))
    raise Unsupported("unsupported_call", f"calling {describe(fn)}")


def pure_argument(v: Var, what: str):
    """The value of an argument of a pure function computed at trace time. A real object of a
    user class is refused: the function may read its state (an attribute, a `__index__`), which
    no guard would check on the next call (Note [operator getters] in `pyobjects.py`)."""
    value = const_value(v, what)
    if isinstance(v, ObjVar) and not _stateless(value):
        raise Unsupported("unsupported_call", f"{what} of a {type(value).__name__} object, whose state "
                                              "can change between calls")
    return value


def _stateless(value) -> bool:
    return (isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, enum.Enum))
            or type(value).__module__ in ("builtins", "typing", "types"))


def _key(value):
    try:
        hash(value)
        return value
    except TypeError:
        return None


# -- torch -------------------------------------------------------------------------------
def torch_call(fr, value, args, kwargs):
    name = getattr(value, "__name__", "")
    if name in TORCH_DENY:
        raise Unsupported("unsupported_call", f"torch.{name} is not traced (global state or data)")
    state = STATE_FUNCTIONS.get(value) if len(args) == 1 and not kwargs else None
    if state is not None and isinstance(args[0], TensorVar):  # Note [Tensor state outside the guards]
        return tensor_state(fr, args[0], state)
    return fr.tr.graph.call("call_function", value, list(args), dict(kwargs))


# -- inlining ----------------------------------------------------------------------------
def call_module(fr, mvar: ObjVar, args, kwargs):
    """`m(...)` runs `type(m).__call__`: Module.__call__ unless the class overrides it (Note
    [Attribute lookup] guards which)."""
    call_fn = class_lookup(fr.tr, type(mvar.value), "__call__")
    if call_fn in MODULE_CALLS:
        return module_call_impl(fr, mvar, args, kwargs)
    return call(fr, bind_class_attr(fr, mvar, call_fn, "__call__"), args, kwargs)


def module_call_impl(fr, mvar: ObjVar, args, kwargs):
    """Module.__call__ without hooks: `self.forward(...)`, with forward looked up as Python does
    (a forward set on the instance wins over the class's)."""
    m = mvar.value
    if (m._backward_hooks or m._backward_pre_hooks or global_module_hooks()
            or getattr(m, "_forward_hooks_always_called", None)):
        raise Unsupported("module_hooks", f"{type(m).__name__} has backward, global or always-called hooks")
    _guard_no_other_hooks(fr.tr, mvar)
    forward = getattr_var(fr, mvar, "forward")
    if not (m._forward_hooks or m._forward_pre_hooks):
        if mvar.source is not None:  # a hook registered after this trace changes the call
            fr.tr.guards.add(mvar.source, NO_FORWARD_HOOKS,
                             f"{mvar.source} has no forward hooks")
        return call(fr, forward, args, kwargs)
    return _call_with_hooks(fr, mvar, forward, list(args), dict(kwargs))


def _guard_no_other_hooks(tr, mvar: ObjVar):
    """What module_call_impl refused (backward, global and always-called hooks) is still absent
    on the next call: registered after the trace, it would be silently skipped."""
    mod = tr.ns.ref(_module_mod)
    tr.guards.add(mod, NO_GLOBAL_HOOKS, "no global module hooks")
    if mvar.source is not None:
        tr.guards.add(mvar.source, NO_OTHER_HOOKS, f"{mvar.source} has no backward hooks")


def _call_with_hooks(fr, mvar: ObjVar, forward, args, kwargs):
    """``Module._call_impl`` with forward pre-hooks and hooks: each hook is called as eager calls
    it (and inlined like any function); the hooks and their kinds are guarded by identity."""
    m, tr = mvar.value, fr.tr
    if mvar.source is None:
        raise Unsupported("module_hooks", f"hooks of a {type(m).__name__} without a source")
    for store, flags in (("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"),
                         ("_forward_hooks", "_forward_hooks_with_kwargs")):
        hooks = tuple(getattr(m, store).values())
        tr.guards.add(mvar.source, f"len(X.{store}) == {len(hooks)} and all(a is b for a, b in zip(X.{store}.values(), "
                      f"{tr.ns.ref(hooks)})) and X.{flags} == {tr.ns.ref(dict(getattr(m, flags)))}",
                      f"{mvar.source}.{store} holds the same {len(hooks)} hooks")
    for hook_id, hook in m._forward_pre_hooks.items():
        if hook_id in m._forward_pre_hooks_with_kwargs:
            result = call(fr, wrap(tr, hook, None), [mvar, TupleVar(args), DictVar(kwargs)], {})
            if not S.is_same(result, ConstVar(None)):
                new_args, new_kwargs = unpack(fr, result)
                args, kwargs = unpack(fr, new_args), dict(new_kwargs.items)
        else:
            result = call(fr, wrap(tr, hook, None), [mvar, TupleVar(args)], {})
            if not S.is_same(result, ConstVar(None)):
                args = unpack(fr, result) if isinstance(result, TupleVar) else [result]
    output = call(fr, forward, args, kwargs)
    for hook_id, hook in m._forward_hooks.items():
        hook_args = [mvar, TupleVar(args)] + ([DictVar(kwargs)] if hook_id in m._forward_hooks_with_kwargs else [])
        result = call(fr, wrap(tr, hook, None), hook_args + [output], {})
        if not S.is_same(result, ConstVar(None)):
            output = result
    return output


class RealCell(CellVar):
    """A closure cell of a real function: its contents are wrapped (and guarded) when read."""

    def __init__(self, tr, cell, name, cell_source=None):
        self.tr = tr
        self.real_cell = cell
        self.name = name
        self.cell_source = cell_source or tr.ns.ref(cell)  # where the entry finds this cell
        self._contents = None

    @property
    def contents(self):
        if self._contents is None:
            try:
                value = self.real_cell.cell_contents
            except ValueError:
                return None
            self._contents = wrap(self.tr, value, f"{self.cell_source}.cell_contents", self.name)
        return self._contents

    @contents.setter
    def contents(self, v):
        self._contents = v


def inline(fr, fn: Var, args, kwargs) -> Var:
    tr = fr.tr
    if isinstance(fn, FunctionVar):
        code, globals_ = fn.code, fn.globals
        defaults, kwdefaults = fn.defaults, fn.kwdefaults
        freevars = dict(zip(code.co_freevars, fn.closure or ()))
    else:
        f = fn.value
        if own_attr(f, "_ember_disabled") is not None:
            raise Unsupported("disabled", f"{f.__qualname__} is marked ember.disable")
        code, globals_ = f.__code__, f.__globals__
        if not inlinable_file(code.co_filename):
            raise Unsupported("skipped_function", f"{f.__module__}.{f.__qualname__} is library code (not inlined)")
        # Defaults are the function's own objects, read (and guarded) through it on each call:
        # a mutable default (a tensor updated in place) is a graph input, not a constant.
        src = fn.source if fn.source is not None else tr.ns.ref(f)
        # the same function object may get another body or other defaults in place
        # (`f.__code__ = g.__code__`, `f.__defaults__ = (...)`, `f.__kwdefaults__ = {...}`):
        # guarded where user code reached it (a global, a cell, an argument, an attribute); a
        # method bound from a class dict or a library function is pinned by identity only
        if fn.source is not None:
            tr.guards.add(src, f"X.__code__ is {tr.ns.ref(code)} and len(X.__defaults__ or ()) == "
                          f"{len(f.__defaults__ or ())} and list(X.__kwdefaults__ or ()) == {list(f.__kwdefaults__ or ())!r}",
                          f"{f.__qualname__}'s code and defaults are unchanged")
        defaults = tuple(wrap(tr, d, f"{src}.__defaults__[{i}]", code.co_varnames[code.co_argcount - len(f.__defaults__) + i])
                         for i, d in enumerate(f.__defaults__ or ()))
        kwdefaults = {k: wrap(tr, d, f"{src}.__kwdefaults__[{k!r}]", k) for k, d in (f.__kwdefaults__ or {}).items()}
        freevars = {n: tr.real_cell(c, n) for n, c in zip(code.co_freevars, f.__closure__ or ())}
    if fr.depth >= MAX_INLINE_DEPTH:
        raise Unsupported("recursion", "inlining too deep")
    locals_ = bind_arguments(code, defaults, kwdefaults, list(args), dict(kwargs))
    self_var = args[0] if args else None
    child = Frame(tr, code, globals_, locals_, freevars, parent=fr, self_var=self_var)
    if child.yields is not None:  # a generator runs nothing until its first item is asked for
        it = IterVar(child.yields, live=True, pull=lambda it: _resume_generator(child), py_type=types.GeneratorType)
        it.returned = lambda: child.result if child.result is not None else ConstVar(None)
        return it
    return child.run()


def _resume_generator(frame) -> bool:
    if frame.done:
        return False
    frame.run()
    return not frame.done


def bind_arguments(code, defaults, kwdefaults, args, kwargs) -> dict:
    """Python's argument binding, on symbolic values."""
    argc, kwonly, posonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    names = code.co_varnames
    pos_names, kw_names = names[:argc], names[argc:argc + kwonly]
    i = argc + kwonly
    varargs = names[i] if code.co_flags & 0x04 else None
    varkw = names[i + (1 if varargs else 0)] if code.co_flags & 0x08 else None
    out = dict(zip(pos_names, args))
    if len(args) > argc and varargs is None:
        raise Unsupported("trace_error", f"{code.co_name}() takes {argc} positional arguments")
    if varargs:
        out[varargs] = TupleVar(args[argc:])
    extra = {}
    for k, v in kwargs.items():
        if (k in pos_names[posonly:] or k in kw_names) and k not in out:
            out[k] = v
        elif varkw and k not in out:
            extra[k] = v
        else:
            raise Unsupported("trace_error", f"{code.co_name}() got an unexpected keyword {k!r}")
    first_default = argc - len(defaults)
    for idx, name in enumerate(pos_names):
        if name not in out:
            if idx < first_default:
                raise Unsupported("trace_error", f"{code.co_name}() missing argument {name!r}")
            out[name] = defaults[idx - first_default]
    for name in kw_names:
        if name not in out:
            if name not in kwdefaults:
                raise Unsupported("trace_error", f"{code.co_name}() missing keyword argument {name!r}")
            out[name] = kwdefaults[name]
    if varkw:
        out[varkw] = DictVar(extra)
    return out


def construct(fr, cls, args, kwargs) -> Var:
    """``cls(...)`` for a class: namedtuples and plain user classes (dataclasses) are modelled."""
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        bound = bind_arguments(cls.__new__.__code__, tuple(wrap(fr.tr, d, None) for d in (cls.__new__.__defaults__ or ())),
                               {}, [ObjVar(cls)] + list(args), kwargs)
        return TupleVar([bound[f] for f in cls._fields], cls=cls, fields={f: i for i, f in enumerate(cls._fields)})
    if issubclass(cls, BaseException):  # made here, raised (and caught) by traced code
        # with its arguments' values (a symbolic int by its value, guarded): str(e), e.args and
        # the attributes its __init__ sets are what eager's exception holds
        for a in list(args) + list(kwargs.values()):
            if not isinstance(a, ConstVar):  # a list, a tensor: the exception holds that object
                raise Unsupported("unsupported_call", f"{cls.__name__}() of {S.describe(a)}")
        values = [S.concrete_value(a, f"{cls.__name__}()") for a in args]
        named = {k: S.concrete_value(v, f"{cls.__name__}()") for k, v in kwargs.items()}
        return ConstVar(cls(*values, **named))
    if issubclass(cls, torch.nn.Module):
        return construct_module(fr, cls, args, kwargs)
    obj = _new_instance(cls)
    if obj is not None:
        init = getattr(cls, "__init__")
        if isinstance(init, types.FunctionType):
            inline(fr, ObjVar(init), [obj] + list(args), kwargs)
            return obj
        if init is object.__init__ and not args and not kwargs:
            return obj
        if obj.storage is not None and init is getattr(obj.base, "__init__"):  # dict(...) / list(...)
            S.container_dunder(fr, obj.storage, "__init__", list(args))
            if kwargs and isinstance(obj.storage, DictVar):
                obj.storage.items.update(kwargs)
            elif kwargs:
                raise Unsupported("trace_error", f"{cls.__name__}() takes no keyword arguments")
            return obj
    if cls in OPERATOR_GETTERS and all(isinstance(a, ConstVar) for a in list(args) + list(kwargs.values())):
        # immutable; its calls are modelled as the reads they make (Note [operator getters])
        return ObjVar(cls(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
    if all(isinstance(a, ConstVar) for a in list(args) + list(kwargs.values())) and cls.__module__ in ("builtins", "torch"):
        return ConstVar(cls(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()}))
    raise Unsupported("unsupported_call", f"creating a {cls.__qualname__}")


# Builtin bases whose instances are modelled with their contents (NewObjVar.storage).
_INSTANCE_BASES = {dict: DictVar, collections.OrderedDict: DictVar, list: ListVar}
_TYPE_CALL = type.__dict__["__call__"]


def _new_instance(cls):
    """A fresh instance of a user class as Python's ``cls.__new__(cls)`` would make it, when
    the class is made the ordinary way: a metaclass that does not override ``__call__``
    (``type``, ``abc.ABCMeta``), no abstract methods left, ``__new__`` from object or from a
    builtin dict/OrderedDict/list base (the instance then holds that base's contents). None
    when capture does not model the class."""
    if issubclass(cls, torch.nn.Module) or getattr(cls, "__abstractmethods__", None):
        return None
    meta_call = next(k.__dict__["__call__"] for k in type(cls).__mro__ if "__call__" in k.__dict__)
    if meta_call is not _TYPE_CALL:
        return None
    base = next((b for b in cls.__mro__ if b in CONTAINER_TYPES), None)
    if base is None:
        return NewObjVar(cls, {}) if cls.__new__ is object.__new__ else None
    if base in _INSTANCE_BASES and cls.__new__ is base.__new__ and "__slots__" not in cls.__dict__:
        # the contents remember their base (OrderedDict.move_to_end needs to know it)
        return NewObjVar(cls, {}, base, DictVar({}, cls=base) if base is not list else ListVar([]))
    return None


def construct_module(fr, cls, args, kwargs) -> Var:
    """``torch.nn.CrossEntropyLoss()`` inside a compiled function: a torch.nn layer built from
    constants that owns no parameters, buffers or submodules (a loss, an activation) is built
    at trace time, once per compile. The graph reads only its constant attributes, so a fresh
    instance per call computes the same; it is held by reference (guards and rebuilt values use
    that one instance), which is the same object only for code that keeps it past the call."""
    if not cls.__module__.startswith("torch.nn.modules."):
        raise Unsupported("unsupported_call", f"creating a {cls.__qualname__} (only stateless torch.nn layers are built while tracing)")
    values = [const_value(a, f"{cls.__qualname__}()") for a in args]
    named = {k: const_value(v, f"{cls.__qualname__}()") for k, v in kwargs.items()}
    if any(isinstance(v, torch.Tensor) for v in values + list(named.values())):
        raise Unsupported("unsupported_call", f"creating a {cls.__qualname__} from tensors")
    try:
        with torch.device("meta"):  # a layer with parameters is found without touching the RNG
            probe = cls(*values, **named)
        if not stateless_module(probe):
            raise Unsupported("unsupported_call", f"creating a {cls.__qualname__}, which owns parameters or buffers")
        module = cls(*values, **named)
    except Unsupported:
        raise
    except Exception as e:
        raise Unsupported("trace_error", f"{cls.__qualname__}() raised {type(e).__name__}: {e}") from None
    return ObjVar(module, fr.tr.ns.ref(module))

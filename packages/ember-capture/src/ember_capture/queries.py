"""What a value says about itself: ``len()``, ``type()``, ``hasattr()`` and ``callable()``, the
rules of the value protocol's LEN, TYPE, HASATTR and CALLABLE tables (Note [Value protocol])."""
from __future__ import annotations

import types

import torch

from .config import Unsupported
from .graph import SliceParts
from .lazy import LazyVar
from .protocol import CALLABLE, HASATTR, LEN, TYPE
from .items import guard_len
from .semantics import call_dunder, class_dunder, const_value, tensor_instance_attr
from .sizes import SYM_TYPES
from .variables import (
    AutocastVar, BoundVar, CellVar, ConstVar, DictVar, DictViewVar, ExitVar, FunctionVar, GradModeVar, IterVar,
    ListVar, MethodVar, NewObjVar, NoOpContextVar, NullVar, ObjVar, PartialVar, SetVar, SuperVar, TensorVar, TupleVar,
    Var,
)

# Objects whose str() never changes while they are guarded by identity.
STABLE_TEXT = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType, torch.dtype, torch.device)
# Kinds of value that model no Python type of their own.
_UNTYPED = (NullVar, MethodVar, PartialVar, CellVar, GradModeVar, AutocastVar, NoOpContextVar, ExitVar, SuperVar,
            SliceParts, LazyVar)


def python_type(v: Var) -> type:
    """``type(v)``: the Python type the user's code sees."""
    return TYPE.lookup(type(v))(v)


def hasattr_var(fr, obj: Var, name: str) -> bool:
    """``hasattr(obj, name)``."""
    return HASATTR.lookup(type(obj))(fr, obj, name)


# -- len() -------------------------------------------------------------------------------
LEN.rule(ListVar, TupleVar, DictVar, SetVar)(lambda fr, v: ConstVar(len(v.items)))
LEN.rule(DictViewVar)(lambda fr, v: ConstVar(len(v.dict.items)))
LEN.rule(ConstVar)(lambda fr, v: ConstVar(len(v.value)))
LEN.refuse(*_UNTYPED, IterVar, FunctionVar, BoundVar)


@LEN.rule(TensorVar)
def _tensor_len(fr, v: TensorVar):
    if v.fake.dim() == 0:
        raise Unsupported("trace_error", "len() of a 0-d tensor")
    return ConstVar(v.fake.shape[0])


@LEN.rule(ObjVar)
def _obj_len(fr, v: ObjVar):
    if isinstance(v.value, torch.nn.Module):  # Note [Container module contents] in items.py
        return ConstVar(guard_len(fr, v))
    if v.source is not None and not isinstance(v.value, STABLE_TEXT):
        fr.tr.check_native(v.value, "len()")  # Note [Mutated input dicts]
        n = len(v.value)  # asked natively, and asked again by a guard on each call
        fr.tr.guards.add(v.source, f"len(X) == {n}", f"len({v.source}) == {n}")
        return ConstVar(n)
    return ConstVar(len(const_value(v)))


@LEN.rule(NewObjVar)
def _newobj_len(fr, v: NewObjVar):
    if not class_dunder(v, "__len__"):
        raise Unsupported("trace_error", f"object of type {v.cls.__name__} has no len()")
    return call_dunder(fr, v, "__len__", [])


# -- type() ------------------------------------------------------------------------------
TYPE.rule(TensorVar)(lambda v: getattr(v, "python_type", torch.Tensor))  # nn.Parameter stays a Parameter
TYPE.rule(ObjVar)(lambda v: type(v.value))
TYPE.rule(TupleVar, NewObjVar)(lambda v: v.cls)
TYPE.rule(DictViewVar)(lambda v: type(getattr({}, v.kind)()))
TYPE.rule(IterVar)(lambda v: v.py_type)
TYPE.rule(ListVar)(lambda v: list)
TYPE.rule(DictVar)(lambda v: v.cls)
TYPE.rule(SetVar)(lambda v: set)
TYPE.rule(FunctionVar)(lambda v: types.FunctionType)
TYPE.rule(BoundVar)(lambda v: types.MethodType)
TYPE.refuse(*_UNTYPED)


@TYPE.rule(ConstVar)
def _const_type(v: ConstVar):
    if isinstance(v.value, SYM_TYPES):
        return v.value.node.pytype  # a symbolic size is an int to the user's code
    return type(v.value)


# -- hasattr() ---------------------------------------------------------------------------
HASATTR.rule(ListVar, DictVar, SetVar, DictViewVar, IterVar, FunctionVar, BoundVar)(
    lambda fr, obj, name: hasattr(python_type(obj), name))  # their type's attributes
HASATTR.rule(ConstVar)(lambda fr, obj, name: hasattr(obj.value, name))
HASATTR.rule(TensorVar)(lambda fr, obj, name: hasattr(obj.fake, name) or tensor_instance_attr(fr, obj, name))
HASATTR.rule(NewObjVar)(lambda fr, obj, name: name in obj.attrs or hasattr(obj.cls, name))
HASATTR.refuse(*_UNTYPED)


@HASATTR.rule(ObjVar)
def _obj_hasattr(fr, obj: ObjVar, name) -> bool:
    fr.tr.check_native(obj.value, "hasattr()")  # its instance dict changed earlier (Note [Mutated input dicts])
    found = hasattr(obj.value, name)
    if obj.source is None:
        return found
    if not isinstance(obj.value, STABLE_TEXT):  # an attribute set or deleted later recompiles
        fr.tr.guards.add(obj.source, f"hasattr(X, {name!r}) is {found}", f"hasattr({obj.source}, {name!r}) is {found}")
    else:
        fr.tr.guards.add(obj.source, f"hasattr(X, {name!r}) is {found}")
    return found


@HASATTR.rule(TupleVar)
def _tuple_hasattr(fr, obj: TupleVar, name) -> bool:
    return bool(obj.fields and name in obj.fields) or hasattr(obj.cls, name)


# -- callable() --------------------------------------------------------------------------
CALLABLE.rule(FunctionVar, BoundVar, MethodVar, PartialVar)(lambda v: True)
CALLABLE.rule(ConstVar, ObjVar)(lambda v: callable(v.value))
CALLABLE.rule(NullVar, TensorVar, ListVar, TupleVar, DictVar, DictViewVar, SetVar, IterVar, CellVar, GradModeVar,
              AutocastVar, NoOpContextVar, ExitVar, SuperVar, NewObjVar, SliceParts, LazyVar)(lambda v: False)

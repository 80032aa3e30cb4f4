"""Attribute lookup follows Python's protocol, and code changed after compiling is noticed.

`obj.name` resolves as CPython does (data descriptors on the class, then the instance dict,
then class attributes, then `__getattr__`, where nn.Module keeps its submodules), and a
compiled module follows what `type(m).__call__`, `m.forward` and the classes' methods are at
each call: replacing one after the first call recompiles (or runs eagerly), never runs the old
code. Each case runs through backend="eager" and the default backend, on two inputs, against
eager PyTorch.
"""
from __future__ import annotations

import types
import warnings

import pytest
import torch
from torch import nn

import ember

BACKENDS = ["eager", "inductor"]


def _same(opt, model, *, inputs=None):
    inputs = inputs or [torch.randn(2, 4), torch.randn(2, 4)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for x in inputs:
            torch.testing.assert_close(opt(x), model(x))
    internal = [str(w.message) for w in caught if "internal" in str(w.message)]
    assert not internal, internal


# -- lookup order ------------------------------------------------------------------------
class MethodBase(nn.Module):
    def linear(self, x):
        return x * 100


class SubmoduleNamedLikeMethod(MethodBase):
    """`self.linear` is the base class's method: a submodule is reached only through
    Module.__getattr__, after the class attribute was found."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x)


class PropertyOverInstanceDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.__dict__["k"] = 7.0

    @property
    def k(self):
        return 2.0

    def forward(self, x):
        return x * self.k


class InstanceOverClassAttr(nn.Module):
    factor = 3.0

    def __init__(self):
        super().__init__()
        self.factor = 5.0

    def forward(self, x):
        return x * self.factor


class TensorAttrOverMethod(nn.Module):
    def scale(self):
        return 100.0

    def __init__(self):
        super().__init__()
        self.scale = torch.full((4,), 3.0)  # a plain attribute: the instance dict shadows the method

    def forward(self, x):
        return x * self.scale


class OwnGetattr(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __getattr__(self, name):
        if name == "magic":
            return 9.0
        return super().__getattr__(name)

    def forward(self, x):
        return self.lin(x) * self.magic


class Slotted:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 4.0


class UsesSlots(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = Slotted()

    def forward(self, x):
        return x * self.s.a


class OwnGetattribute:
    def __init__(self):
        self.v = 1.0

    def __getattribute__(self, name):
        if name == "v":
            return 11.0
        return object.__getattribute__(self, name)


class UsesGetattribute(nn.Module):
    def __init__(self):
        super().__init__()
        self.o = OwnGetattribute()

    def forward(self, x):
        return x * self.o.v


class Descriptor:
    """A user data descriptor: its __get__ is Python, traced."""

    def __get__(self, obj, owner):
        return obj.__dict__["_d"] * 2

    def __set__(self, obj, value):
        obj.__dict__["_d"] = value


class UsesDescriptor(nn.Module):
    d = Descriptor()

    def __init__(self):
        super().__init__()
        self.d = 1.5

    def forward(self, x):
        return x * self.d


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [SubmoduleNamedLikeMethod, PropertyOverInstanceDict, InstanceOverClassAttr,
                                 TensorAttrOverMethod, OwnGetattr, UsesSlots, UsesGetattribute, UsesDescriptor])
def test_lookup_order(cls, backend):
    model = cls()
    _same(ember.compile(model, backend=backend), model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slot_and_descriptor_writes_after_compile(backend):
    model = UsesSlots()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.s.a = -2.0
    _same(opt, model)
    model = UsesDescriptor()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.d = 4.0
    _same(opt, model)


# -- code changed after compiling --------------------------------------------------------
class Inner(nn.Module):
    def forward(self, x):
        return x + 1


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.lin = nn.Linear(4, 4)

    def helper(self, x):
        return x * 2

    def forward(self, x):
        return self.helper(self.inner(self.lin(x)))


def _other_forward(self, x):
    return x - 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_forward_replaced_on_the_instance(backend):
    model = Outer()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.forward = types.MethodType(_other_forward, model)
    _same(opt, model)
    del model.forward
    _same(opt, model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_forward_replaced_on_the_instance(backend):
    model = Outer()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.inner.forward = types.MethodType(_other_forward, model.inner)
    _same(opt, model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_replaced_on_the_class(backend):
    class Local(Outer):
        pass

    model = Local()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    Local.helper = lambda self, x: x * -3
    _same(opt, model)
    Local.forward = lambda self, x: self.lin(x) - 1
    _same(opt, model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_replaced(backend):
    class Other(nn.Module):
        def forward(self, x):
            return x.sin()

    model = Outer()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.inner = Other()
    _same(opt, model)


class Doubling(nn.Module):
    """A module whose class overrides __call__: calling it does more than forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __call__(self, x):
        return super().__call__(x) * 2

    def forward(self, x):
        return self.lin(x)


class HoldsDoubling(nn.Module):
    def __init__(self):
        super().__init__()
        self.d = Doubling()

    def forward(self, x):
        return self.d(x) + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [Doubling, HoldsDoubling])
def test_class_that_overrides_call(cls, backend):
    model = cls()
    _same(ember.compile(model, backend=backend), model)


def _scale(x):
    return x * 2


def _uses_global(x):
    return _scale(x) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_function_rebound(backend):
    global _scale
    opt = ember.compile(_uses_global, backend=backend)
    _same(opt, _uses_global)
    saved = _scale
    try:
        _scale = lambda x: x * -7  # noqa: E731
        _same(opt, _uses_global)
    finally:
        _scale = saved


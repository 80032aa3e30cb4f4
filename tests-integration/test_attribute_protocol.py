"""Attribute lookup follows Python's protocol, and code changed after compiling is noticed.

`obj.name` resolves as CPython does (data descriptors on the class, then the instance dict,
then class attributes, then `__getattr__`, where nn.Module keeps its submodules), and a
compiled module follows what `type(m).__call__`, `m.forward` and the classes' methods are at
each call: replacing one after the first call recompiles (or runs eagerly), never runs the old
code. Each case runs through backend="eager" and the default backend, on two inputs, against
eager PyTorch.
"""
from __future__ import annotations

import enum
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


class PropertyReadsParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.raw_scale = nn.Parameter(torch.full((4,), 0.5))
        self.register_buffer("shift", torch.ones(4))

    @property
    def scale(self):
        return self.raw_scale * 2

    def forward(self, x):
        return x * self.scale + self.shift


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("cls", [PropertyReadsParameter, SubmoduleNamedLikeMethod, PropertyOverInstanceDict, InstanceOverClassAttr,
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_attribute_changed_or_shadowed_after_compile(backend):
    class Local(nn.Module):
        factor = 3.0

        def forward(self, x):
            return x * self.factor

    model = Local()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    Local.factor = -1.0
    _same(opt, model)
    model.factor = 4.0  # now the instance dict shadows the class attribute
    _same(opt, model)
    del model.factor
    _same(opt, model)


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffer_and_parameter_replaced_after_compile(backend):
    model = PropertyReadsParameter()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.shift = torch.full((4,), -3.0)  # a buffer: Module.__setattr__ keeps it a buffer
    model.raw_scale = nn.Parameter(torch.full((4,), 7.0))
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



class Flagged(nn.Module):
    def forward(self, x):
        return x * 2 if hasattr(self, "flag") else x


@pytest.mark.parametrize("backend", BACKENDS)
def test_hasattr_answer_is_guarded(backend):
    model = Flagged()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.flag = 1
    _same(opt, model)
    del model.flag
    _same(opt, model)


class Scaler:
    def scale(self, x):
        return x * 2


def _calls_scale(obj, x):
    return obj.scale(x) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_method_of_a_plain_object_replaced(backend):
    class Local(Scaler):
        pass

    obj = Local()
    opt = ember.compile(_calls_scale, backend=backend)
    inputs = [torch.randn(3), torch.randn(3)]
    for x in inputs:
        torch.testing.assert_close(opt(obj, x), _calls_scale(obj, x))
    Local.scale = lambda self, x: x * -4
    for x in inputs:
        torch.testing.assert_close(opt(obj, x), _calls_scale(obj, x))
    obj.scale = lambda x: x + 100  # an instance attribute shadows the method
    for x in inputs:
        torch.testing.assert_close(opt(obj, x), _calls_scale(obj, x))


class Size(enum.Enum):
    SMALL = 2
    LARGE = 3


class UsesEnum(nn.Module):
    def __init__(self):
        super().__init__()
        self.size = Size.SMALL

    def forward(self, x):
        return x * self.size.value  # Enum's `value` is a library property: read natively, guarded


@pytest.mark.parametrize("backend", BACKENDS)
def test_library_property_read_natively_and_guarded(backend):
    model = UsesEnum()
    opt = ember.compile(model, backend=backend)
    _same(opt, model)
    model.size = Size.LARGE
    _same(opt, model)

"""A model's parameters, buffers and configuration changed between two calls of a compiled
model (issues #15/#16: the guard fast paths of Note [Immutable constants by identity] must
not weaken a guard): the second call recompiles (or falls back) and equals eager, through the
default backend and backend="eager"; an equal configuration value assigned anew does not
recompile."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import ember
from ember_capture import native

BACKENDS = ("inductor", "eager")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.pool = nn.AvgPool1d(2, stride=2)
        self.scale = 2.0

    def forward(self, x):
        h = torch.relu(self.norm(self.lin(x))) * self.scale
        return self.pool(h.unsqueeze(1)).squeeze(1)


def _data_shape(m):
    m.lin.weight.data = torch.randn(6, 8)
    m.lin.bias.data = torch.randn(6)
    m.norm = nn.LayerNorm(6)


def _dtype(m):
    m.double()


def _requires_grad(m):
    m.lin.weight.requires_grad_(False)


def _device(m):
    m.to("meta")


def _swapped_submodule(m):
    m.lin = nn.Linear(8, 8)


def _replaced_parameter(m):
    m.lin.weight = nn.Parameter(torch.randn(8, 8))


def _transposed_in_place(m):
    with torch.no_grad():
        m.lin.weight.t_()  # same shape, dtype and device: only the strides tell


def _set_in_place(m):
    with torch.no_grad():
        m.lin.bias.set_(torch.randn(16)[::2])  # same shape: a stride of 2


def _config_value(m):
    m.scale = 3.0


def _config_tuple(m):
    m.pool.stride = (1,)


def _config_value_type(m):
    m.scale = 2  # equal to 2.0, but an int: the type guard tells


def _data_dtype(m):
    for p in m.parameters():  # each tensor object converted in place
        p.data = p.data.to(torch.float64)


def _requires_grad_of_a_norm_weight(m):
    m.norm.weight.requires_grad_(False)  # one parameter, deep in the guards' list


def _data_strides(m):
    m.lin.weight.data = torch.randn(8, 8).t()  # same shape and dtype, transposed


CHANGES = {f.__name__.lstrip("_"): f for f in (
    _data_shape, _dtype, _requires_grad, _device, _swapped_submodule, _replaced_parameter,
    _transposed_in_place, _set_in_place, _config_value, _config_tuple, _config_value_type,
    _data_dtype, _requires_grad_of_a_norm_weight, _data_strides)}


def _input(m):
    p = m.lin.weight
    return torch.randn(3, 8, dtype=p.dtype, device=p.device)


def _same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == want.device
    assert got.requires_grad == want.requires_grad
    if got.device.type != "meta":
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change", CHANGES)
def test_changed_model_recompiles_and_equals_eager(change, backend):
    _changed_model_recompiles_and_equals_eager(change, backend)


@pytest.fixture(params=["native", "python"])
def guard_checks(request):
    """The batched tensor guards through the C++ checker, or through the Python checks that
    stand in before it is built or where it cannot be (Note [Native guards])."""
    if request.param == "native":
        if not native.wait():
            pytest.skip("the native guard checker could not be built on this machine")
        yield
    else:
        with native.python_checks():
            yield


@pytest.mark.parametrize("change", CHANGES)
def test_changed_model_on_each_guard_path(change, guard_checks):
    _changed_model_recompiles_and_equals_eager(change, "eager")


def _changed_model_recompiles_and_equals_eager(change, backend):
    torch.manual_seed(0)
    m = Net()
    compiled = ember.compile(m, backend=backend)
    x = torch.randn(3, 8)
    _same(compiled(x), m(x))
    CHANGES[change](m)
    x = _input(m)
    _same(compiled(x), m(x))  # on new inputs, after the change
    # what the trace relied on changed: a guard failed and the frame was captured again (a
    # parameter is a graph input: a new one like the old is passed to the same graph)
    assert len(ember.compile_record(compiled).capture.graphs) == (1 if change == "replaced_parameter" else 2)
    if x.requires_grad or any(p.requires_grad for p in m.parameters()):
        got_out, want_out = compiled(x), m(x)
        got = torch.autograd.grad(got_out.sum(), [p for p in m.parameters() if p.requires_grad])
        want = torch.autograd.grad(want_out.sum(), [p for p in m.parameters() if p.requires_grad])
        for g, w in zip(got, want):
            _same(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_equal_configuration_assigned_anew_does_not_recompile(backend):
    m = Net()
    compiled = ember.compile(m, backend=backend)
    x = torch.randn(3, 8)
    _same(compiled(x), m(x))
    m.scale = float("2.0")  # an equal float, another object
    m.pool.stride = tuple([2])  # an equal tuple, another object
    x = torch.randn(3, 8)
    _same(compiled(x), m(x))
    assert len(ember.compile_record(compiled).capture.graphs) == 1


# Note [Native source reads]: what each check of the native program covers, changed between
# calls: the result must be eager's on both guard paths (the program, and the Python guards).
class Block(nn.Module):
    SHIFT = 1.0  # a class attribute the forward reads

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)
        self.register_buffer("offset", torch.zeros(8))

    def forward(self, x):
        return self.bn(self.lin(x)) + self.offset + type(self).SHIFT


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x):
        return self.blocks(x) * 2


def _instance_forward(m):
    m.blocks[1].lin.forward = lambda x: x * 3


def _class_attribute(m):
    Block.SHIFT = 5.0


def _buffer_reassigned(m):
    m.blocks[0].offset = torch.full((8,), 2.0)


def _buffer_reassigned_shape(m):
    m.blocks[1].offset = torch.full((1,), 3.0)


def _training_toggled(m):
    m.blocks[1].train()


def _submodule_replaced(m):
    m.blocks[0].lin = nn.Linear(8, 8)


def _submodule_of_another_class(m):
    m.blocks[1].lin = nn.Identity()


def _parameter_data(m):
    m.blocks[1].bn.weight.data = torch.randn(8)


def _parameter_data_strides(m):
    m.blocks[1].lin.weight.data = torch.randn(8, 8).t()  # same shape and dtype, transposed


def _sequential_grown(m):
    m.blocks.append(Block())


def _config_new_equal_object(m):
    m.blocks[0].bn.eps = float("1e-5")  # equal, another object: the Python guards decide


def _config_changed(m):
    m.blocks[0].bn.eps = 0.5


def _forward_hook(m):
    m.blocks[0].bn.register_forward_hook(lambda mod, args, out: out - 1)


FUSED_CHANGES = {f.__name__.lstrip("_"): f for f in (
    _instance_forward, _class_attribute, _buffer_reassigned, _buffer_reassigned_shape, _training_toggled,
    _submodule_replaced, _submodule_of_another_class, _parameter_data, _parameter_data_strides, _sequential_grown,
    _config_new_equal_object, _config_changed, _forward_hook)}


@pytest.mark.parametrize("change", FUSED_CHANGES)
def test_change_under_a_native_read_equals_eager(change, guard_checks):
    torch.manual_seed(0)
    m = Model().eval()
    compiled = ember.compile(m, backend="eager")
    x = torch.randn(4, 8)
    try:
        with torch.no_grad():
            _same(compiled(x), m(x))
            _same(compiled(x), m(x))  # a hit
            FUSED_CHANGES[change](m)
            for _ in range(2):  # after the change, then a hit of whatever entry it made
                x = torch.randn(4, 8, dtype=m.blocks[0].lin.weight.dtype)
                _same(compiled(x), m(x))
    finally:
        Block.SHIFT = 1.0

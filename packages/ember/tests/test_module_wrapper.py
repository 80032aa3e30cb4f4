"""`ember.compile(module)` returns a wrapper that behaves as the module it wraps.

Attribute writes and deletes reach the module (the compiled forward sees them on its next
call), pickling, torch.save and deepcopy give a working compiled copy, and the module's own
state (training, parameters, state_dict names, hooks) is what the wrapper reports. Every case
runs through backend="eager" and the default backend, and compares against eager PyTorch on
two inputs.
"""
from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
from torch import nn

import ember

BACKENDS = ["eager", "inductor"]


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.step = 1

    def forward(self, x):
        return self.lin(x) * self.step


def _inputs():
    return [torch.randn(2, 4), torch.randn(2, 4)]


def _check(opt, model):
    for x in _inputs():
        torch.testing.assert_close(opt(x), model(x))


@pytest.fixture(autouse=True)
def _fresh():
    ember.reset()
    torch.manual_seed(0)
    yield
    ember.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_attribute_write_reaches_the_module(backend):
    model = Scaled()
    opt = ember.compile(model, backend=backend)
    _check(opt, model)
    opt.step = 11
    assert model.step == 11 and opt.step == 11
    _check(opt, model)
    opt.step += 1
    assert model.step == 12
    _check(opt, model)
    assert "step" not in opt.__dict__


@pytest.mark.parametrize("backend", BACKENDS)
def test_submodule_replaced_through_the_wrapper(backend):
    model = Scaled()
    opt = ember.compile(model, backend=backend)
    _check(opt, model)
    opt.lin = nn.Linear(4, 4)
    assert model.lin is opt.lin
    _check(opt, model)


def test_attribute_delete_reaches_the_module():
    model = Scaled()
    opt = ember.compile(model, backend="eager")
    opt.extra = 3
    assert model.extra == 3
    del opt.extra
    assert not hasattr(model, "extra") and not hasattr(opt, "extra")
    with pytest.raises(AttributeError):
        del opt.extra


def test_training_mode_is_the_module_s():
    model = Scaled()
    opt = ember.compile(model, backend="eager")
    assert opt.training and model.training
    opt.eval()
    assert not opt.training and not model.training and not model.lin.training
    model.train()
    assert opt.training
    opt.training = False
    assert not model.training


def test_dir_lists_the_module_s_attributes():
    model = Scaled()
    opt = ember.compile(model, backend="eager")
    names = dir(opt)
    assert {"lin", "step", "forward", "state_dict"} <= set(names)


def test_parameters_and_state_dict_are_the_module_s():
    model = Scaled()
    opt = ember.compile(model, backend="eager")
    assert list(opt.state_dict()) == list(model.state_dict()) == ["lin.weight", "lin.bias"]
    assert [id(p) for p in opt.parameters()] == [id(p) for p in model.parameters()]
    assert [n for n, _ in opt.named_parameters()] == ["lin.weight", "lin.bias"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hooks_on_wrapper_and_on_module(backend):
    model = Scaled()
    opt = ember.compile(model, backend=backend)
    seen = []
    handle = opt.register_forward_hook(lambda mod, args, out: seen.append(("wrapper", mod)))
    _check(opt, model)
    assert seen and all(mod is opt for _, mod in seen)
    handle.remove()
    seen.clear()
    handle = model.register_forward_hook(lambda mod, args, out: seen.append(("module", mod)))
    x = torch.randn(2, 4)
    out = opt(x)
    handle.remove()
    assert seen == [("module", model)]
    torch.testing.assert_close(out, model(x))


def _roundtrip_pickle(opt):
    return pickle.loads(pickle.dumps(opt))


def _roundtrip_torch_save(opt):
    buf = io.BytesIO()
    torch.save(opt, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("copier", [_roundtrip_pickle, _roundtrip_torch_save, copy.deepcopy],
                         ids=["pickle", "torch_save", "deepcopy"])
def test_copies_are_compiled_copies_of_their_own_module(backend, copier):
    model = Scaled()
    opt = ember.compile(model, backend=backend)
    _check(opt, model)
    clone = copier(opt)
    assert type(clone) is type(opt)
    inner = clone._orig_mod
    assert inner is not model and inner.lin.weight is not model.lin.weight
    _check(clone, inner)
    # The copy runs its own module's weights, not the original's.
    with torch.no_grad():
        inner.lin.weight.mul_(-2)
    _check(clone, inner)
    _check(opt, model)
    clone.step = 5
    assert inner.step == 5 and model.step == 1
    _check(clone, inner)

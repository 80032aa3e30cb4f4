"""Note [Value protocol]: every kind of symbolic value answers every operation, or refuses it
with the graph-break reason the user reads."""
import pytest
import torch

import ember_capture
from ember_capture import BreakKind, CaptureConfig, Unsupported
from ember_capture import tracer  # noqa: F401  (imports every module that fills the tables)
from ember_capture.protocol import OPERATIONS
from ember_capture.variables import Var
from capture_helpers import Recorder


def _kinds(cls=Var):
    for sub in cls.__subclasses__():
        yield sub
        yield from _kinds(sub)


KINDS = sorted(set(_kinds()), key=lambda c: c.__qualname__)


def test_the_protocol_has_its_operations():
    assert {"getattr"} <= set(OPERATIONS)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_kind_of_value_answers_or_refuses(name):
    op = OPERATIONS[name]
    undeclared = [cls.__qualname__ for cls in KINDS if op.declared(cls) is None]
    assert not undeclared, f"{name}: no rule and no refusal for {undeclared}"
    assert BreakKind.of(op.kind)


def _breaks(fn, *args):
    rec = Recorder()
    with pytest.raises(Unsupported) as e:
        ember_capture.capture(fn, rec, CaptureConfig(fullgraph=True))(*args)
    return e.value


def test_a_refusal_is_the_operations_graph_break():
    def attr_of_function(x):
        def inner():
            return x
        return inner.some_attribute

    err = _breaks(attr_of_function, torch.randn(2))
    assert err.kind == "unsupported_attr" and "attribute 'some_attribute' of function" in str(err)

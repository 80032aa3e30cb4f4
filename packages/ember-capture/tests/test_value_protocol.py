"""Note [Value protocol]: every kind of symbolic value answers every operation, or refuses it
with the graph-break reason the user reads."""
import operator

import pytest
import torch

import ember_capture
from ember_capture import BreakKind, CaptureConfig, Unsupported
from ember_capture import tracer  # noqa: F401  (imports every module that fills the tables)
from ember_capture.protocol import OPERATIONS
from ember_capture.variables import FunctionVar, Var
from capture_helpers import Recorder


def _kinds(cls=Var):
    for sub in cls.__subclasses__():
        yield sub
        yield from _kinds(sub)


KINDS = sorted(set(_kinds()), key=lambda c: c.__qualname__)


# The operands each operation is asked with, around the value (``v``) it dispatches on.
ARGS = {
    "getattr": lambda v: (None, v, "weight"), "setattr": lambda v: (None, v, "weight", None),
    "const_value": lambda v: (v, "range()"), "identity": lambda v: (v,), "truth": lambda v: (None, v),
    "iter": lambda v: (None, v), "unpack": lambda v: (None, v), "contains": lambda v: (None, v, None),
    "getitem": lambda v: (None, v, None), "setitem": lambda v: (None, v, None, None),
    "delitem": lambda v: (None, v, None), "call": lambda v: (None, v, [], {}),
    "method": lambda v: (None, v, "append", [], {}), "binary": lambda v: (None, operator.add, v, v),
    "rbinary": lambda v: (None, operator.add, v, v),
    "unary": lambda v: (None, operator.neg, v), "len": lambda v: (None, v), "type": lambda v: (v,),
    "hasattr": lambda v: (None, v, "weight"), "callable": lambda v: (v,),
}
# What the user reads for a refused function value (a FunctionVar: describe() says "function").
REASONS = {
    "getattr": "attribute 'weight' of function", "setattr": "setting attribute 'weight' on function",
    "const_value": "range() needs a constant, got function", "unpack": "iterating over function",
    "contains": "iterating over function", "getitem": "indexing function", "setitem": "item assignment on function",
    "delitem": "del on function", "method": "method 'append' of function",
}


def test_the_protocol_has_its_operations():
    assert set(ARGS) == set(OPERATIONS)


def _bare(cls):
    v = cls.__new__(cls)
    v.value = None  # what describe() reads of a ConstVar or ObjVar
    return v


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_refusal_is_a_graph_break_of_the_operations_kind(name):
    op = OPERATIONS[name]
    refused = [cls for cls in KINDS if op.declared(cls) == "refused"]
    for cls in refused:
        with pytest.raises(Unsupported) as e:
            op.lookup(cls)(*ARGS[name](_bare(cls)))
        assert e.value.kind == op.kind and e.value.reason, (name, cls)
    if name in REASONS:
        with pytest.raises(Unsupported) as e:
            op.lookup(FunctionVar)(*ARGS[name](_bare(FunctionVar)))
        assert e.value.reason == REASONS[name]


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


def test_a_kind_registered_nowhere_is_refused():
    class Unmodelled(Var):
        pass

    op = OPERATIONS["getitem"]
    assert op.declared(Unmodelled) is None
    with pytest.raises(Unsupported, match="indexing unmodelled"):
        op.lookup(Unmodelled)(None, Unmodelled(), None)


def test_refusals_reach_the_user_with_their_line():
    def iterate_a_function(x):
        def inner():
            return x
        for _ in inner:
            x = x + 1
        return x

    def index_a_function(x):
        def inner():
            return x
        return inner[0]

    err = _breaks(iterate_a_function, torch.randn(2))
    assert err.kind == "unsupported_iter" and "iterating over function" in str(err) and "for _ in inner" in str(err)
    err = _breaks(index_a_function, torch.randn(2))
    assert err.kind == "unsupported_subscript" and "indexing function" in str(err) and "return inner[0]" in str(err)

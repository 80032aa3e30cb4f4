"""The code capture generates always compiles: in-place operators on values that are not graph
values (Note [in-place operators in FX code]), and a fallback when generated code does not
compile anyway (issue 13: T5 and MPNet raised `SyntaxError: 'literal' is an illegal expression
for augmented assignment` to the user)."""
import operator
import warnings

import pytest
import torch

import ember_capture
from capture_helpers import Recorder, check
from ember_capture import CaptureConfig, Unsupported
from ember_capture.graph import OutputGraph


def relative_buckets(x):  # T5's _relative_position_bucket starts from a Python 0
    buckets = 0
    buckets += (x > 0).to(torch.long) * 8
    buckets *= 2
    scale = 1.0
    scale /= x.abs() + 1
    flags = False
    flags |= x > 1
    return buckets, scale, flags


def test_inplace_operator_on_a_constant_is_the_plain_operator():
    rec, _ = check(relative_buckets, torch.randn(5), torch.randn(5), graphs=1)
    ops = rec.ops()
    assert operator.iadd not in ops and operator.itruediv not in ops and operator.ior not in ops
    assert operator.imul in ops  # `buckets` is a tensor by then


def test_inplace_operator_on_a_tensor_stays_in_place():
    def f(x):
        y = x * 1
        y += 2
        y *= x
        return y

    rec, _ = check(f, torch.randn(4), torch.randn(4), graphs=1)
    assert operator.iadd in rec.ops() and operator.imul in rec.ops()


def _invalid_code(self, outputs):
    raise SyntaxError("illegal expression", ("<eval_with_key>", 3, 5, "    0 += mul\n"))


def test_generated_code_that_does_not_compile_falls_back(monkeypatch):
    monkeypatch.setattr(OutputGraph, "finish", _invalid_code)
    captured = ember_capture.capture(relative_buckets, Recorder())
    x = torch.randn(5)
    with pytest.warns(UserWarning, match="ember generated invalid code .*bug in ember"):
        out = captured(x)
    for a, e in zip(out, relative_buckets(x)):
        torch.testing.assert_close(a, e)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the eager entry is cached: no second warning
        captured(torch.randn(5))


def test_generated_code_that_does_not_compile_raises_under_fullgraph(monkeypatch):
    monkeypatch.setattr(OutputGraph, "finish", _invalid_code)
    captured = ember_capture.capture(relative_buckets, Recorder(), CaptureConfig(fullgraph=True))
    with pytest.raises(Unsupported, match="relative_buckets|test_generated_code.py"):
        captured(torch.randn(5))


def test_generated_code_that_does_not_compile_raises_with_raise_internal(monkeypatch):
    monkeypatch.setattr(OutputGraph, "finish", _invalid_code)
    captured = ember_capture.capture(relative_buckets, Recorder(), CaptureConfig(raise_internal=True))
    with pytest.raises(SyntaxError):
        captured(torch.randn(5))

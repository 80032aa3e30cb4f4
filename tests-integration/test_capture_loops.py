"""Capture breadth beyond Hugging Face (issue 13): graph breaks inside loops and inside
context-manager blocks resume in the same frame, and profiler annotations are captured.

Each case runs through ember.compile with the default backend (inductor) and with
backend="eager" (a recording backend), on two calls with fresh inputs, against eager.
float32 tolerances: eager backend rtol=1e-5, atol=1e-5; inductor rtol=1e-4, atol=1e-5.
"""
import warnings

import pytest
import torch

import ember

TOL = {"eager": dict(rtol=1e-5, atol=1e-5), "inductor": dict(rtol=1e-4, atol=1e-5)}
BACKENDS = ["eager", "inductor"]


def check(fn, backend, recorder, inputs, *, eager_frames=0):
    """Compiled equals eager on every input; no frame runs eagerly (no 'running ... eagerly'
    warning) unless `eager_frames` allows it. Returns the explain() report of the first input."""
    compiled = ember.compile(fn, backend=recorder if backend == "eager" else backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for args in inputs:
            expected = fn(*[a.clone() for a in args])
            got = compiled(*[a.clone() for a in args])
            torch.testing.assert_close(got, expected, **TOL[backend])
    eager = [str(w.message) for w in caught if "eagerly" in str(w.message)]
    assert len(eager) <= eager_frames, eager
    ember.reset()
    return ember.explain(fn)(*inputs[0])


def inputs(*shapes):
    return [(torch.randn(*s),) for s in shapes]


# -- record_function (Note [Profiler contexts]) --------------------------------------------

def record_function_block(x):
    with torch.profiler.record_function("block"):
        y = x.sin() * 2
    return y + 1


@torch.profiler.record_function("decorated")
def _decorated(x):
    return x.cos() - 1


def record_function_decorator(x):
    return _decorated(x) * 3


def record_function_with_break(x):
    with torch.profiler.record_function("block"):
        y = x.sin()
        print("inside the profiled block")
        y = y * 2
    return y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [record_function_block, record_function_decorator])
def test_record_function_is_captured(fn, backend, recorder):
    report = check(fn, backend, recorder, inputs((3, 4), (5,)))
    assert report.graph_count == 1 and report.graph_break_count == 0, report


@pytest.mark.parametrize("backend", BACKENDS)
def test_record_function_break_resumes_inside(backend, recorder, capsys):
    report = check(record_function_with_break, backend, recorder, inputs((3,), (4,)))
    assert report.graph_count == 2 and report.graph_break_count == 1, report

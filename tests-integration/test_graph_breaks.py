"""The documents' graph-break examples through ember.compile, each equal to eager.

float32 tolerances: torch.testing defaults (rtol=1.3e-6, atol=1e-5) for the eager backend,
rtol=1e-4, atol=1e-5 for inductor (generated kernels).
"""
import warnings

import pytest
import scipy.fft
import torch

import ember

INDUCTOR_TOL = dict(rtol=1e-4, atol=1e-5)


def f1(x, y):
    if x.sum() < 0:
        return -y
    return y


def f2(x, y):
    return x + y


def f3(x):
    x = x * 2
    x = torch.from_numpy(scipy.fft.dct(x.numpy()))
    return x * 2


def bar(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_data_dependent_branch(backend):
    opt = ember.compile(f1, backend=backend)
    for sign in (1.0, -1.0):
        x, y = sign * torch.rand(8).add(0.1), torch.randn(8)
        torch.testing.assert_close(opt(x, y), f1(x, y))


def test_python_int_argument_is_guarded():
    opt = ember.compile(f2, backend="eager")
    x = torch.randn(5)
    torch.testing.assert_close(opt(x, 3), x + 3)
    torch.testing.assert_close(opt(x, 4), x + 4)  # a different int: the guard fails, recompiles


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_numpy_round_trip_breaks_the_graph(backend):
    opt = ember.compile(f3, backend=backend)
    x = torch.randn(16, dtype=torch.float64)
    torch.testing.assert_close(opt(x), f3(x))


def test_bar_three_graphs_and_explain(recorder):
    opt = ember.compile(bar, backend=recorder)
    a, b = torch.randn(10), torch.randn(10)
    torch.testing.assert_close(opt(a, b), bar(a, b))
    torch.testing.assert_close(opt(a, -b), bar(a, -b))
    assert len(recorder.graphs) == 3  # before the branch, and each side's resume
    report = ember.explain(bar)(a, b)
    assert report.graph_count == 2 and report.graph_break_count == 1
    reason = report.break_reasons[0]
    assert "b.sum() < 0" in reason.source_line
    assert reason.lineno > 0 and reason.filename.endswith("test_graph_breaks.py")
    text = str(report)
    assert "Graph Count" in text or "graph" in text.lower()


def test_fullgraph_raises_at_the_break():
    opt = ember.compile(bar, backend="eager", fullgraph=True)
    with pytest.raises(Exception, match="b.sum\\(\\) < 0"):
        opt(torch.randn(4), torch.randn(4))


def complex_conjugate(z):
    return torch.conj(z)


def complex_function(real, imag):
    z = torch.complex(real, imag)
    return complex_conjugate(z)


def test_disable_non_recursive_still_compiles_callee(recorder):
    ember.disable(complex_function, recursive=False)  # marks the function; returns it wrapped
    wrapped = ember.disable(complex_function, recursive=False)
    opt = ember.compile(wrapped, backend=recorder)
    r, i = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(opt(r, i), complex_function(r, i))
    graphs_ops = [recorder.targets(k) for k in range(len(recorder.graphs))]
    assert all(torch.complex not in ops for ops in graphs_ops)  # complex_function itself untraced
    assert any(torch.conj in ops for ops in graphs_ops)  # complex_conjugate still traced


def test_disable_recursive_skips_both(recorder):
    wrapped = ember.disable(complex_function, recursive=True)
    opt = ember.compile(wrapped, backend=recorder)
    r, i = torch.randn(4), torch.randn(4)
    torch.testing.assert_close(opt(r, i), complex_function(r, i))
    assert recorder.graphs == []


def test_unsupported_code_warns_once_and_is_still_right():
    def uses_print(x):
        y = x * 2
        print("value:", y.shape)
        return y + 1

    opt = ember.compile(uses_print, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.randn(3)
        torch.testing.assert_close(opt(x), x * 2 + 1)

"""The documents' first examples (issue 2 and issue 3), each compared with eager."""
import pytest
import scipy.fft
import torch
import torch.nn as nn
import torch.nn.functional as F

import ember_capture
from ember_capture import CaptureConfig, Unsupported

from capture_helpers import Recorder, check


def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b


class MyModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(100, 10)

    def forward(self, x):
        return F.relu(self.lin(x))


class OuterModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = MyModule()
        self.outer = nn.Linear(10, 2)

    def forward(self, x):
        return F.relu(self.outer(self.inner(x)))


def test_foo_one_graph():
    rec, _ = check(foo, (torch.randn(10, 10), torch.randn(10, 10)), (torch.randn(10, 10), torch.randn(10, 10)), graphs=1)
    assert rec.ops() == [torch.sin, torch.cos, __import__("operator").add]
    for node in rec.graphs[0].graph.nodes:
        if node.op != "output":
            assert "example_value" in node.meta and "test_seed_examples.py" in node.meta["stack_trace"]


def test_foo_recompiles_on_new_shape():
    check(foo, (torch.randn(3), torch.randn(3)), (torch.randn(4, 2), torch.randn(4, 2)), (torch.randn(3), torch.randn(3)),
          graphs=2)


def test_my_module_lifts_parameters():
    m = MyModule()
    rec, _ = check(m, torch.randn(10, 100), torch.randn(10, 100), graphs=1)
    placeholders = [n for n in rec.graphs[0].graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == 3  # x, weight, bias
    assert any(p is m.lin.weight for p in rec.example_inputs[0])


def test_outer_module_one_graph():
    check(OuterModule(), torch.randn(10, 100), torch.randn(10, 100), graphs=1)


def f1(x, y):
    if x.sum() < 0:
        return -y
    return y


def test_f1_branch_both_signs():
    x = torch.randn(5).abs() + 0.1
    check(f1, (x, torch.randn(5)), (-x, torch.randn(5)), (x * 2, torch.randn(5)))


def f2(x, y):
    return x + y


def test_f2_guard_on_int():
    rec, _ = check(f2, (torch.randn(3), 3), (torch.randn(3), 3), (torch.randn(3), 4), graphs=2)


def f3(x):
    x = x * 2
    x = scipy.fft.dct(x.numpy())
    x = torch.from_numpy(x)
    x = x * 2
    return x


def test_f3_numpy_roundtrip():
    check(f3, torch.randn(8), torch.randn(8), graphs=2)


def bar(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def test_bar_three_graphs_and_explain():
    a, b = torch.randn(10), torch.randn(10)
    b = b if b.sum() > 0 else -b
    check(bar, (a, b), (a, -b), graphs=3)
    out = ember_capture.explain(bar, a, -b)
    assert out.graph_count == 2 and out.graph_break_count == 1
    reason = out.break_reasons[0]
    assert reason.kind == "data_dependent" and reason.source_line == "if b.sum() < 0:"
    assert reason.filename.endswith("test_seed_examples.py")
    assert torch.abs in out.ops_per_graph[0]
    assert "Graph count: 2" in str(out) and "if b.sum() < 0:" in str(out)


def test_fullgraph_raises_with_line():
    captured = ember_capture.capture(bar, Recorder(), CaptureConfig(fullgraph=True))
    with pytest.raises(Unsupported) as info:
        captured(torch.randn(3), torch.randn(3))
    assert "if b.sum() < 0:" in str(info.value) and "test_seed_examples.py:" in str(info.value)


def complex_conjugate(z):
    return torch.conj(z)


def make_complex_function(recursive):
    @ember_capture.disable(recursive=recursive)
    def complex_function(real, imag):
        z = torch.complex(real, imag)
        return complex_conjugate(z)
    return complex_function


@pytest.mark.parametrize("recursive", [False, True])
def test_disable_complex_function(recursive):
    complex_function = make_complex_function(recursive)

    def outer_function(real, imag):
        z = complex_function(real * 1, imag * 1)
        return torch.abs(z)

    rec, _ = check(outer_function, (torch.randn(2), torch.randn(2)), (torch.randn(2), torch.randn(2)))
    all_ops = [t for i in range(len(rec.graphs)) for t in rec.ops(i)]
    assert torch.complex not in all_ops  # complex_function itself is never traced
    assert (torch.conj in all_ops) == (not recursive)

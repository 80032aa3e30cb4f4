"""The documents' first examples through ember.compile, each equal to eager and captured as one graph.

Tolerances: float32 rtol=1.3e-6, atol=1e-5 (torch.testing defaults); the eager backend runs the
same ATen kernels, so results agree to that.
"""
import pytest
import torch
import torch.nn.functional as F

import ember


def foo(x, y):
    a = torch.sin(x)
    b = torch.cos(y)
    return a + b


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x):
        return F.relu(self.lin(x))


class OuterModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = MyModule()
        self.outer = torch.nn.Linear(10, 2)

    def forward(self, x):
        x = self.inner(x)
        return F.relu(self.outer(x))


def check_graph_node_meta(gm):
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            assert "example_value" in node.meta, node
            assert "stack_trace" in node.meta, node


@pytest.mark.parametrize("backend", ["eager", "recorder"])
def test_foo_as_call(backend, recorder):
    be = recorder if backend == "recorder" else backend
    opt_foo = ember.compile(foo, backend=be)
    for _ in range(2):
        x, y = torch.randn(10, 10), torch.randn(10, 10)
        torch.testing.assert_close(opt_foo(x, y), foo(x, y))
    if backend == "recorder":
        assert len(recorder.graphs) == 1
        targets = recorder.targets()
        assert torch.sin in targets and torch.cos in targets
        check_graph_node_meta(recorder.graphs[0])


def test_foo_as_decorator(recorder):
    @ember.compile(backend=recorder)
    def opt_foo(x, y):
        a = torch.sin(x)
        b = torch.cos(y)
        return a + b

    @ember.compile
    def default_foo(x, y):  # decorator without arguments: the default backend
        return torch.sin(x) + torch.cos(y)

    x, y = torch.randn(10, 10), torch.randn(10, 10)
    torch.testing.assert_close(opt_foo(x, y), foo(x, y))
    assert opt_foo.__name__ == "opt_foo"
    assert len(recorder.graphs) == 1
    if "inductor" in ember.list_backends():
        torch.testing.assert_close(default_foo(x, y), foo(x, y))


# placeholders: x plus each lifted parameter (MyModule: weight, bias; OuterModule: two Linears)
@pytest.mark.parametrize("make,placeholders", [(MyModule, 3), (OuterModule, 5)], ids=["MyModule", "OuterModule"])
@pytest.mark.parametrize("backend", ["eager", "recorder"])
def test_modules(make, placeholders, backend, recorder):
    mod = make()
    opt_mod = ember.compile(mod, backend=recorder if backend == "recorder" else backend)
    for _ in range(2):
        x = torch.randn(10, 100)
        torch.testing.assert_close(opt_mod(x), mod(x))
    if backend == "recorder":
        assert len(recorder.graphs) == 1
        gm = recorder.graphs[0]
        assert sum(n.op == "placeholder" for n in gm.graph.nodes) == placeholders
        check_graph_node_meta(gm)


def test_module_wrapper_shares_state():
    mod = OuterModule()
    opt = ember.compile(mod, backend="eager")
    assert opt.state_dict().keys() == mod.state_dict().keys()
    assert all(a is b for a, b in zip(opt.parameters(), mod.parameters()))
    with torch.no_grad():
        mod.outer.bias.fill_(3.0)  # an update through the original is seen by the wrapper
    x = torch.randn(4, 100)
    torch.testing.assert_close(opt(x), mod(x))
    opt.eval()
    assert not mod.training
    assert opt.inner is mod.inner

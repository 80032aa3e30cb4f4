"""Custom ops (torch.library) and `torch.ops.*` calls in user code are graph nodes, as torch ops
are: capture called them unsupported and broke the graph at each one."""
import warnings

import pytest
import torch

import ember


@torch.library.custom_op("ember_test_custom::scaled_add", mutates_args=())
def scaled_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x + alpha * y


@scaled_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


@torch.library.custom_op("ember_test_custom::add_into", mutates_args=("out",))
def add_into(out: torch.Tensor, x: torch.Tensor) -> None:
    out.add_(x)


@add_into.register_fake
def _(out, x):
    return None


def uses_custom_op(x, y):
    return scaled_add(x.sin(), y, 0.5).cos() * 2


def uses_ops_namespace(x, y):
    return torch.ops.ember_test_custom.scaled_add(x, y, 2.0) + torch.ops.aten.mul(x, y)


def mutates_through_custom_op(acc, x):
    add_into(acc, x * 3)
    return acc.sum()


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("fn", [uses_custom_op, uses_ops_namespace])
def test_custom_op_calls_are_graph_nodes(fn, backend, dynamic):
    compiled = ember.compile(fn, backend=backend, dynamic=dynamic, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (5, 9):
            x, y = torch.randn(3, n), torch.randn(3, n)
            torch.testing.assert_close(compiled(x, y), fn(x, y), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_custom_op_mutation_reaches_the_argument(backend):
    """The op returns None: capture kept it as a node only when its result was used, so the write
    was lost (a silently wrong sum). The AOT backends auto-functionalize it (Note
    [auto-functionalization] in ember_autograd): the graph compiles, with no warning."""
    compiled = ember.compile(mutates_through_custom_op, backend=backend)
    acc, ref = torch.zeros(4), torch.zeros(4)
    x = torch.randn(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(acc, x)
    expected = mutates_through_custom_op(ref, x)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(acc, ref)
    assert [str(w.message) for w in caught] == []


def test_custom_op_gradients_need_an_autograd_formula():
    """A custom op with no registered autograd formula: torch raises at backward; so does ember's
    result (through eager's error), never a silently wrong gradient."""
    x = torch.randn(3, requires_grad=True)
    y = torch.randn(3)
    compiled = ember.compile(uses_custom_op)
    with pytest.raises(RuntimeError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled(x, y).sum().backward()
    with pytest.raises(RuntimeError):
        uses_custom_op(x, y).sum().backward()

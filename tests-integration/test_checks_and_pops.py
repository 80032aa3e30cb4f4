"""torch._check (no graph break) and pops of what is not there (the user's KeyError/IndexError,
raised in the traced code), through the default backend and `eager`, on two calls with fresh
inputs, against eager PyTorch (capture's own tests: test_library_code.py, test_breadth.py)."""
import collections
import warnings

import pytest
import torch

import ember


def checked(x):
    torch._check(x.shape[0] > 1, lambda: "needs two rows")
    torch._check_value(x.dim() == 2)
    return x.sum(0) * 2


def pops_what_is_not_there(x):
    table, stack = {"a": 1}, []
    try:
        scale = table.pop("missing")
    except KeyError:
        scale = 2.0
    try:
        stack.pop()
    except IndexError:
        scale = scale + 1
    order = collections.OrderedDict(a=1)
    try:
        order.move_to_end("missing")
    except KeyError:
        scale = scale * 2
    return x.cos() * scale


def pops_uncaught(x):
    table = {"a": x}
    return table.pop("missing") * 2


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize("fn", [checked, pops_what_is_not_there])
def test_one_graph_equal_to_eager(fn, backend):
    compiled = ember.compile(fn, backend=backend, fullgraph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback, no internal-error warning
        for rows in (3, 5):
            x = torch.randn(rows, 4)
            torch.testing.assert_close(compiled(x), fn(x))


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_failing_check_and_uncaught_pop_raise_as_eager(backend):
    with pytest.raises(RuntimeError, match="needs two rows"):
        ember.compile(checked, backend=backend)(torch.randn(1, 4))
    with pytest.raises(KeyError, match="missing"):
        ember.compile(pops_uncaught, backend=backend)(torch.randn(3))

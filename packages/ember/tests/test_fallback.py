"""ember.fallback: the failure policy of one graph (Note [one failure path])."""
import warnings

import pytest
import torch

from ember.errors import BackendCompilerFailed
from ember.fallback import Fallback, Site, site_of


def graph():
    gm = torch.fx.symbolic_trace(lambda x: (x.sin() + 1,))
    for node in gm.graph.nodes:
        node.meta["stack_trace"] = ('  File "/src/model.py", line 12, in forward\n    h = self.block(x)\n'
                                    '  File "/src/block.py", line 3, in block\n    return x.sin() + 1\n')
    return gm


def boom(*args):
    raise RuntimeError("boom")


def test_site_is_the_outermost_user_frame_of_the_first_op():
    assert site_of(graph()) == Site("forward", "/src/model.py", 12)
    assert site_of(torch.fx.symbolic_trace(lambda x: x + 1)) is None


def test_compile_failure_warns_once_at_the_site_and_returns_the_graph():
    gm, fallback = graph(), Fallback("mine", False, site_of(graph()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fallback.compile(lambda g, ex: boom(), gm, [], "forward", boxed=False) == gm.forward
        fallback.compile(lambda g, ex: boom(), gm, [], "backward", boxed=True)
    (w,) = caught
    assert (w.filename, w.lineno) == ("/src/model.py", 12)
    assert "'mine' failed at the forward compile" in str(w.message) and "RuntimeError: boom" in str(w.message)


def test_fullgraph_raises_naming_the_site():
    fallback = Fallback("mine", True, Site("forward", "/src/model.py", 12))
    with pytest.raises(BackendCompilerFailed, match=r"backward compile of the graph of forward \(/src/model.py:12\)"):
        fallback.fail("backward compile", RuntimeError("boom"))


@pytest.mark.parametrize("boxed", [False, True])
def test_first_call_failure_switches_to_eager_for_good(boxed):
    fallback = Fallback("mine", False, None)
    calls = []

    def eager(x):
        calls.append(x)
        return (x + 1,)

    run = fallback.first_call(boom, eager, "first call", boxed=boxed)
    x = torch.zeros(2)
    with pytest.warns(UserWarning, match="failed at the first call"):
        out = run([x]) if boxed else run(x)
    torch.testing.assert_close(out[0], x + 1)
    run([x]) if boxed else run(x)
    assert len(calls) == 2


def test_first_call_success_keeps_the_compiled_callable():
    fallback = Fallback("mine", False, None)
    run = fallback.first_call(lambda x: (x * 3,), boom, "first call", boxed=False)
    for _ in range(2):
        torch.testing.assert_close(run(torch.ones(1))[0], torch.full((1,), 3.0))


def test_every_call_lets_the_users_own_error_through():
    fallback = Fallback("mine", False, None)

    def user_error(x):
        raise IndexError("index 7 is out of bounds")

    run = fallback.every_call(user_error, user_error)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(IndexError):
        warnings.simplefilter("always")
        run(torch.ones(1))
    assert not caught  # the user's error, not ember's: no fallback warning


def test_first_call_error_that_eager_raises_too_is_the_users():
    fallback = Fallback("mine", False, None)

    def out_of_bounds(x):
        raise IndexError("index 7 is out of bounds")

    run = fallback.first_call(out_of_bounds, out_of_bounds, "first call", boxed=False)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(IndexError):
        warnings.simplefilter("always")
        run(torch.ones(1))
    assert not caught and not fallback.warned

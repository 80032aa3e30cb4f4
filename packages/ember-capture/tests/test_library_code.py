"""Patterns of installed model libraries (transformers' decorators, timm's asserts, torch's
MultiheadAttention fast-path checks) capture into one graph and equal eager."""
import functools
import os

import pytest
import torch

import ember_capture
from ember_capture.calls import inlinable_file


def counting_backend(graphs):
    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    return backend


def fills_kwargs(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        for name in ("scale",):
            kwargs[name] = kwargs.get(name, 2.0)  # writes the call's own **kwargs dict
        torch._assert(args[0].ndim == 2, "expected a matrix")
        return f(*args, **kwargs)
    return wrapper


@fills_kwargs
def scaled(x, scale=1.0):
    return torch.relu(x) * scale


def test_kwargs_written_by_a_decorator_and_torch_assert():
    graphs = []
    compiled = ember_capture.capture(scaled, counting_backend(graphs))
    for kwargs in ({}, {"scale": 3.0}):
        x = torch.randn(3, 4)
        torch.testing.assert_close(compiled(x, **kwargs), scaled(x, **kwargs))
    assert len(graphs) == 2  # one per kwargs key set (guarded), none broken


def test_dispatch_mode_stack_question_is_answered():
    def f(x):
        if not torch.utils._python_dispatch._get_current_dispatch_mode_stack():
            return x + 1
        return x - 1
    graphs = []
    compiled = ember_capture.capture(f, counting_backend(graphs))
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), f(x))
    assert len(graphs) == 1


def test_installed_packages_are_inlined_but_numpy_is_not():
    import numpy
    assert not inlinable_file(numpy.__file__)
    assert not inlinable_file(os.__file__)  # the standard library
    assert not inlinable_file(torch.__file__)  # torch's own code, outside torch.nn
    assert inlinable_file(torch.nn.modules.linear.__file__)


def plain(a, b):
    return a * 2 + b


def calls_plain_by_keyword_after_a_break(x, y):
    print("a graph break")  # the call below then runs natively, through capture
    return plain(x, b=y)


def test_function_with_plain_signature_called_by_keyword():
    graphs = []
    compiled = ember_capture.capture(calls_plain_by_keyword_after_a_break, counting_backend(graphs))
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compiled(x, y), plain(x, b=y))
    torch.testing.assert_close(ember_capture.capture(plain, counting_backend(graphs))(x, b=y), plain(x, b=y))


def test_distributed_wrappers_under_torch_nn_run_natively():
    """DDP's forward drives its reducer and profiler records (it raised AssertionError when
    inlined); DataParallel's scatters to devices: both run natively, the module they wrap is
    captured where it is called."""
    import inspect
    assert not inlinable_file(inspect.getfile(torch.nn.parallel.DistributedDataParallel))
    assert not inlinable_file(inspect.getfile(torch.nn.DataParallel))
    assert inlinable_file(torch.nn.modules.container.__file__)


def test_a_module_that_is_not_inlined_still_runs_its_captured_inner_module():
    inner = torch.nn.Linear(4, 4)
    graphs = []
    wrapped = torch.nn.DataParallel(ember_capture.capture(inner, counting_backend(graphs)))  # no GPU: calls the module

    def step(x):
        return wrapped(x).relu().sum()

    compiled = ember_capture.capture(step, counting_backend(graphs))
    for _ in range(2):
        x = torch.randn(2, 4)
        torch.testing.assert_close(compiled(x), step(x))
    assert graphs  # the inner module and the step's tail were captured


def checked(x):
    torch._check(x.shape[0] > 1, lambda: "needs two rows")
    torch._check_is_size(x.shape[0])
    torch._check_value(x.dim() == 2)
    return x.sum(0) * 2


@pytest.mark.filterwarnings("ignore:_check_is_size:FutureWarning")
def test_torch_check_is_no_break():
    """torch._check and its kinds were 'library code (not inlined)': a graph break at each."""
    for dynamic in (False, True):
        graphs = []
        compiled = ember_capture.capture(checked, counting_backend(graphs), config=ember_capture.CaptureConfig(
            dynamic=dynamic, fullgraph=True))
        for rows in (3, 5):
            x = torch.randn(rows, 4)
            torch.testing.assert_close(compiled(x), checked(x))
        assert len(graphs) == (1 if dynamic else 2)


def test_torch_check_that_fails_raises_the_users_message():
    compiled = ember_capture.capture(checked, counting_backend([]))
    with pytest.raises(RuntimeError, match="needs two rows"):
        compiled(torch.randn(1, 4))

"""Capture breadth beyond Hugging Face (issue 13): graph breaks inside loops and inside
context-manager blocks resume in the same frame, and profiler annotations are captured.

Each case runs through ember.compile with the default backend (inductor) and with
backend="eager" (a recording backend), on two calls with fresh inputs, against eager.
float32 tolerances: eager backend rtol=1e-5, atol=1e-5; inductor rtol=1e-4, atol=1e-5.
"""
import collections
import dataclasses
import functools
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
            assert_same(got, expected, backend)
    eager = [str(w.message) for w in caught if "eagerly" in str(w.message)]
    assert len(eager) <= eager_frames, eager
    ember.reset()
    return ember.explain(fn)(*inputs[0])


def assert_same(got, expected, backend):
    if isinstance(expected, (list, tuple)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, backend)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected, **TOL[backend])
    elif dataclasses.is_dataclass(expected):
        assert type(got) is type(expected)
        assert_same(list(vars(got).values()), list(vars(expected).values()), backend)
    else:
        assert got == expected


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


# -- graph breaks inside loops (Note [Breaks in loops]) -----------------------------------

def for_range_with_print(x):
    for i in range(3):
        x = x * 2
        print("iteration")
        x = x + 1
    return x


def for_list_appending(x):
    out = []
    for t in [x, x * 2, x * 3]:
        out.append(t.sin())
        print("item")
    return torch.stack(out)


def while_item_condition(x):
    x = x.abs()
    while x.sum().item() < 100:
        x = x * 2 + 1
    return x


def nested_loops_with_break(x):
    acc = x
    for t in [x, x + 1]:
        for s in (0.5, 2.0):
            acc = acc + t * s
            if acc.sum() > 0:  # data-dependent: a break in the inner loop
                acc = acc - 1
    return acc


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("layer")  # a break inside the callee: the loop in the caller resumes
        return y.relu()


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(3)])

    def forward(self, x):
        hidden = []
        for layer in self.layers:
            x = layer(x)
            hidden.append(x)
        return x, hidden


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [for_range_with_print, for_list_appending, while_item_condition,
                                nested_loops_with_break])
def test_break_inside_loop_resumes(fn, backend, recorder, capsys):
    report = check(fn, backend, recorder, inputs((3,), (4,)))
    assert report.graph_count >= 2 and report.graph_break_count >= 1, report
    if backend == "eager":
        assert recorder.graphs  # parts of the loop were captured, not only the code around it


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_module_loop(backend, recorder, capsys):
    torch.manual_seed(0)
    model = Stack()
    compiled = ember.compile(model, backend=recorder if backend == "eager" else backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (2, 5):
            x = torch.randn(n, 4)
            got, expected = compiled(x), model(x)
            torch.testing.assert_close(got, expected, **TOL[backend])
    assert not [w for w in caught if "eagerly" in str(w.message)]
    if backend == "eager":
        assert len(recorder.graphs) >= 3


def long_loop(x, n):
    i = torch.zeros(())
    while bool(i < n):  # a break on every iteration, with no Python value that changes
        i = i + 1
        x = x * 1.001
    return x, i


def test_long_loop_runs_at_constant_depth(recorder):
    """A break on each of 3,000 iterations: resume functions do not call each other (the
    recursion limit is far below the number of iterations)."""
    compiled = ember.compile(long_loop, backend=recorder)
    x, n = torch.ones(2), torch.tensor(3000.0)
    got = compiled(x, n)
    torch.testing.assert_close(got, long_loop(x, n))
    assert 2 <= len(recorder.graphs) <= 6  # the same few resume functions, compiled once each


# -- lists from the inputs changed by the trace (Note [Mutated input lists]) ----------------

def append_to_inputs(x, out, state):
    out.append(x * 2)
    out[0] = out[0] + 1
    state["seen"].append(x.sum())
    del state["seen"][0]
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_lists_written_back(backend, recorder):
    compiled = ember.compile(append_to_inputs, backend=recorder if backend == "eager" else backend)
    for n in (3, 4):
        x = torch.randn(n)
        runs = []
        for fn in (append_to_inputs, compiled):
            out, state = [torch.ones(n)], {"seen": [torch.zeros(()), torch.ones(())]}
            result = fn(x, out, state)
            assert result is out  # the same list object, changed in place
            runs.append((out, state["seen"]))
        (eager_out, eager_seen), (got_out, got_seen) = runs
        torch.testing.assert_close(got_out, eager_out, **TOL[backend])
        torch.testing.assert_close(got_seen, eager_seen, **TOL[backend])
    ember.reset()
    report = ember.explain(append_to_inputs)(torch.randn(3), [torch.ones(3)], {"seen": [torch.zeros(())]})
    assert report.graph_count == 1 and report.graph_break_count == 0, report


def while_scalar_limit(x, limit):
    x = x.abs() + 0.01
    steps = torch.zeros(())
    while x.sum().item() < limit:  # ~50 iterations, a new float from .item() on each
        x = x * 1.1 + 0.01
        steps = steps + 1
    return x, steps


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_condition_runs_natively(backend, recorder):
    """Note [Scalar conditions at a break]: the float from .item() is compared natively, so
    the resume functions do not specialize on it: a few compiles, not one per iteration (which
    would end at the recompile limit with the loop running eagerly)."""
    report = check(lambda x: while_scalar_limit(x, 300.0), backend, recorder,
                   [(torch.rand(3),), (torch.rand(3),)])
    assert report.graph_count <= 4, report


# -- graph breaks inside context-manager blocks ----------------------------------------------

def autocast_with_breaks(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ x.T
        print("inside autocast")
        z = y @ y  # bfloat16: the resume function runs under the same autocast
        if z.sum() > 0:  # a second break in the same block
            z = z * 2
        w = z @ y
    return w, w.float() @ x


def grad_modes_with_break(x):
    with torch.no_grad():
        a = x * 2
        with torch.enable_grad():
            b = x * 3
            print("inside enable_grad")
            c = b * a
        d = c + a
    return d, c, a.requires_grad, c.requires_grad, d.requires_grad


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_autocast_resumes_inside(backend, recorder, capsys):
    report = check(autocast_with_breaks, backend, recorder, inputs((4, 4), (3, 4)))
    assert report.graph_count >= 3, report
    assert not torch.is_autocast_enabled("cpu")  # the block was left


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_grad_mode_blocks(backend, recorder, capsys):
    x = torch.randn(3, requires_grad=True)
    report = check(grad_modes_with_break, backend, recorder, [(x,), (torch.randn(4, requires_grad=True),)])
    assert report.graph_count == 2 and report.graph_break_count == 1, report
    assert torch.is_grad_enabled()


# -- OrderedDict ------------------------------------------------------------------------------

def ordered_dict_built(x):
    d = collections.OrderedDict()
    d["a"] = x
    d["b"] = x * 2
    d["c"] = x - 1
    d.move_to_end("a")
    d.move_to_end("c", last=False)
    key, last = d.popitem()
    first_key, first = d.popitem(last=False)
    return sum(d.values()) + last * first, list(d.keys()), key, first_key


def ordered_dict_input(x, d):
    return x * sum(d.values()) + len(d.keys())


@pytest.mark.parametrize("backend", BACKENDS)
def test_ordered_dict_methods_captured(backend, recorder):
    report = check(ordered_dict_built, backend, recorder, inputs((3,), (4,)))
    assert report.graph_count == 1 and report.graph_break_count == 0, report


@pytest.mark.parametrize("backend", BACKENDS)
def test_ordered_dict_input_bound_methods(backend, recorder):
    """`d.values` read from an OrderedDict input is a new bound method on each read: guarded as
    the same method of the same object, not by identity (which failed on the inputs it was made
    from: 'internal guard error')."""
    compiled = ember.compile(ordered_dict_input, backend=recorder if backend == "eager" else backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (3, 3, 4):
            x = torch.randn(n)
            d = collections.OrderedDict(a=torch.randn(n), b=torch.randn(n))
            torch.testing.assert_close(compiled(x, d), ordered_dict_input(x, d), **TOL[backend])


# -- a disable(recursive=False) function's callees (issue 13) -----------------------------------

def make_shallow_disabled():
    def inner(x):  # reached through outer's closure
        return x.sin() * 3

    @ember.disable(recursive=False)
    def outer(x):
        return inner(x) + 1

    def fn(x):
        return outer(x) * 2
    return fn


@pytest.mark.parametrize("backend", BACKENDS)
def test_shallow_disable_captures_closure_callees(backend, recorder):
    fn = make_shallow_disabled()
    check(fn, backend, recorder, inputs((3,), (4,)))
    if backend == "eager":
        ops = [n.target for gm in recorder.graphs for n in gm.graph.nodes]
        assert "sin" in ops  # inner was compiled, though outer's own body ran natively


# -- the rest of issue 13's list: each captured in one graph, or a clean break -----------------

def import_inside(x):
    import math
    from torch.nn import functional as F
    return F.relu(x) * math.pi


def _mul(x, y=2):
    return x * y


_PARTIAL = functools.partial(_mul, y=3)


def hasattr_on_partial(x):
    if hasattr(_PARTIAL, "func") and not hasattr(_PARTIAL, "missing"):
        x = _PARTIAL(x)
    return x


_Pair = collections.namedtuple("_Pair", ["a", "b"])


def namedtuple_built(x):
    p, q = _Pair(x, x * 2), _Pair(a=x + 1, b=3)
    return p.a + p.b + q.a * q.b, p


def len_of_tensor(x):
    return x * len(x)


def generators(x):
    def scaled(n):
        for i in range(n):
            yield x * i
    return sum(scaled(3)), sum(t.sum() for t in (x, x * 2))


class _Left(torch.nn.Module):
    def f(self, x):
        return x + 1


class _Right(torch.nn.Module):
    def f(self, x):
        return x * 2


class _Both(_Left, _Right):
    def f(self, x):
        return super().f(x) + super(_Left, self).f(x)

    def forward(self, x):
        return self.f(x)


class _WithProperty(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @property
    def doubled(self):
        return self.lin.weight * 2

    def forward(self, x):
        return x @ self.doubled


@dataclasses.dataclass
class _Out:
    value: torch.Tensor
    scale: int = 1


def dataclass_output(x):
    return _Out(x * 2, 3)


_LAZY = torch.nn.LazyLinear(3)


def lazy_module(x):
    return _LAZY(x).relu()


def numpy_break(x):
    y = x * 2
    return torch.from_numpy(y.numpy() * 3) + 1


def tolist_break(x):
    y = x * 2
    values = y.tolist()
    return y + len(values), values[0]


CAPTURED = [import_inside, hasattr_on_partial, namedtuple_built, len_of_tensor, generators, _Both(),
            _WithProperty(), dataclass_output, lazy_module]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", CAPTURED, ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_captured_in_one_graph(fn, backend, recorder):
    report = check(fn, backend, recorder, inputs((3, 4), (5, 4)))
    assert report.graph_count == 1 and report.graph_break_count == 0, report


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [numpy_break, tolist_break])
def test_data_reads_are_clean_breaks(fn, backend, recorder):
    report = check(fn, backend, recorder, inputs((3, 4), (5, 4)))
    assert report.graph_count >= 2 and report.graph_break_count >= 1, report
    assert all(r.kind != "cannot_resume" for r in report.break_reasons)


def test_fullgraph_error_names_function_file_and_line():
    def helper(x):
        print("inside helper")
        return x

    def outer(x):
        for i in range(2):
            x = helper(x) + i
        return x

    with pytest.raises(Exception, match="print") as info:
        ember.compile(outer, backend="eager", fullgraph=True)(torch.randn(2))
    text = str(info.value)
    assert "outer" in text and "helper" in text and __file__ in text and "print(" in text


class DeepStack(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer() for _ in range(n)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x) * 1.5  # i is not read: it is not guarded
        return x


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_in_each_of_many_layers(backend, recorder, capsys):
    """Note [Lazy locals]: the loop's index and layer pass through the resume functions without
    being guarded, so 12 iterations (more than the recompile limit, 8) reuse one compile of each;
    the 12 layers, submodules of the captured model, are each captured."""
    torch.manual_seed(0)
    model = DeepStack(12)
    compiled = ember.compile(model, backend=recorder if backend == "eager" else backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (2, 2, 3):
            x = torch.randn(n, 4)
            torch.testing.assert_close(compiled(x), model(x), **TOL[backend])
    assert not [str(w.message) for w in caught if "eagerly" in str(w.message)]

"""Dynamic shapes in capture (issue #18; Note [Dynamic shapes in capture] in sizes.py).

Every case runs captured and eagerly on several sizes, including sizes the first compile did
not see, counts the graphs the backend got, and checks each graph against the spec
(verify_graph) and its example values against a real run.
"""
from __future__ import annotations

import math
import operator

import pytest
import torch
from ember_symbolic import hint_of, is_symbolic

import ember_capture
from ember_capture import CaptureConfig
from capture_helpers import check_example_values


class Counting:
    """A backend that runs the graph as it is, keeping each graph and its example inputs."""

    def __init__(self, symbolic=True):
        self.graphs, self.inputs = [], []
        if not symbolic:
            setattr(self, ember_capture.SYMBOLIC_SIZES_ATTR, False)

    def __call__(self, gm, example_inputs):
        ember_capture.verify_graph(gm, example_inputs)
        check_example_values(gm, example_inputs)
        self.graphs.append(gm)
        self.inputs.append(list(example_inputs))
        return gm.forward


def run(fn, inputs, dynamic=None, backend=None, logs=frozenset()):
    """Capture ``fn``, call it on each tuple of ``inputs``, compare with eager; the backend."""
    backend = backend or Counting()
    g = ember_capture.capture(fn, backend, CaptureConfig(dynamic=dynamic, raise_internal=True, logs=logs))
    for args in inputs:
        expected = fn(*args)
        got = g(*args)
        _same(got, expected)
    return backend


def _same(got, expected):
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected)
    elif isinstance(expected, (tuple, list)):
        assert type(got) is type(expected) and len(got) == len(expected)
        for a, b in zip(got, expected):
            _same(a, b)
    else:
        assert type(got) is type(expected) and got == expected, (got, expected)


def symbolic_placeholders(gm):
    out = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta["example_value"]
        shape = v.shape if isinstance(v, torch.Tensor) else [v]
        if any(is_symbolic(s) for s in shape):
            out.append(n.name)
    return out


BATCHES = (3, 4, 6, 9, 12, 17)


def mlp(x, w):
    n, d = x.shape
    h = torch.relu(x @ w).view(n, 2, -1)
    return h.reshape(n * 2, -1).sum(0) / n, h.size(0)


@pytest.mark.parametrize("dynamic,compiles", [(None, 2), (True, 1), (False, len(BATCHES))])
def test_six_batch_sizes_compile_counts(dynamic, compiles):
    w = torch.randn(8, 6)
    backend = run(mlp, [(torch.randn(b, 8), w) for b in BATCHES], dynamic=dynamic)
    assert len(backend.graphs) == compiles
    if dynamic is not False:  # the graph the backend got is symbolic in the batch dim
        last = backend.graphs[-1]
        assert symbolic_placeholders(last) == (["x"] if dynamic is None else ["x", "w"])
        fake = next(iter(last.graph.nodes)).meta["example_value"]
        assert is_symbolic(fake.shape[0]) and fake.shape[1] == 8
        targets = {n.target for n in last.graph.nodes}
        assert torch.ops.aten.sym_size.int in targets and operator.mul in targets
    else:
        assert all(symbolic_placeholders(gm) == [] for gm in backend.graphs)


def test_dynamic_true_makes_every_dim_symbolic_but_not_parameters():
    lin = torch.nn.Linear(5, 3)

    def f(x):
        return lin(x).softmax(-1)

    backend = run(f, [(torch.randn(b, 7, 5),) for b in (2, 4, 6)], dynamic=True)
    assert len(backend.graphs) == 1
    values = {n.name: n.meta["example_value"] for n in backend.graphs[0].graph.nodes if n.op == "placeholder"}
    x = next(v for k, v in values.items() if tuple(hint_of(s) for s in v.shape) == (2, 7, 5))
    assert is_symbolic(x.shape[0]) and is_symbolic(x.shape[1]) and x.shape[2] == 5  # 5 is the weight's: a guard
    assert all(not is_symbolic(s) for k, v in values.items() if v is not x for s in v.shape)


def test_size_arithmetic_into_view_reshape_expand_and_factories():
    def f(x):
        b, t, c = x.shape
        half = c // 2
        y = x.reshape(b * t, c).view(-1, 2, half)
        z = torch.zeros(b, t, dtype=x.dtype) + torch.arange(t, dtype=x.dtype)
        e = x[:, :1].expand(b, t, c)
        a, _ = x.split([half, c - half], dim=2)
        m = x.new_empty((b, c)).fill_(1.0)
        return y.sum(), z, e, a, m, max(b, t), min(b, t) * 2, math.ceil(b / 2), divmod(t, 2), b % 3

    backend = run(f, [(torch.randn(b, t, 6),) for b, t in ((2, 3), (4, 5), (7, 2), (3, 9))], dynamic=True)
    assert len(backend.graphs) == 1


def test_size_reads_len_numel_size_unpacking():
    def f(x):
        n = len(x)
        total = x.numel()
        rows, cols = x.size()
        return x.view(total) * n, x.size(1) + rows, cols, x.shape, x.size()

    backend = run(f, [(torch.randn(b, 3),) for b in (2, 5, 8)], dynamic=True)
    assert len(backend.graphs) == 1


def test_formatting_a_dynamic_size_works_and_specializes():
    def f(x):
        tag = f"{x.shape[0]:03d}-{x.size(1)}" + str(len(x)) + "%d" % x.shape[0] + "{}".format(x.shape[0])
        return x * 2, tag

    backend = run(f, [(torch.randn(b, 3),) for b in (4, 7, 4, 7, 12)], dynamic=True)
    assert len(backend.graphs) == 3  # one per size formatted: each entry is guarded on its value


def test_returned_and_stored_sizes_stay_symbolic():
    class Box:
        pass

    box = Box()

    def f(x, out):
        n = x.shape[0]
        box.n = n * 2
        out.append(n + 1)
        return x.sum(), n, (n, n - 1), [x.size(0)]

    inputs = [(torch.randn(b, 2), []) for b in (3, 5, 11)]
    backend = run(f, inputs, dynamic=True)  # appends twice: eagerly, then captured
    assert len(backend.graphs) == 1
    assert box.n == 22 and [args[1] for args in inputs] == [[4, 4], [6, 6], [12, 12]]


def test_concrete_uses_guard_on_the_value():
    table = {3: "three", 5: "five"}

    def f(x):
        n = x.shape[0]
        names = ["a", "b", "c", "d", "e", "f", "g"]
        acc = x
        for _ in range(n):
            acc = acc + 1
        return acc, names[n], table.get(n, "?")

    backend = run(f, [(torch.randn(b),) for b in (3, 5, 3, 5)], dynamic=True)
    assert len(backend.graphs) == 2


def test_branch_on_a_size_recompiles_when_it_flips():
    def f(x):
        if x.shape[0] > 4:
            return x.sum(0) * 2
        return x.mean(0)

    backend = run(f, [(torch.randn(b, 3),) for b in (3, 2, 6, 9, 4, 5)], dynamic=True)
    assert len(backend.graphs) == 2


def test_failing_relation_guard_recompiles_and_says_why():
    def f(x):
        n = x.shape[0]
        if n % 2 == 0:
            return x.view(2, -1).sum(1)
        return x * 2

    events = []
    stats = ember_capture.CaptureStats()
    backend = Counting()
    g = ember_capture.capture(f, backend, CaptureConfig(dynamic=True, raise_internal=True), stats=stats)
    for b in (4, 6, 8, 5, 7, 10):
        x = torch.randn(b)
        _same(g(x), f(x))
    assert len(backend.graphs) == 2
    events = [e for e in stats.events if e.kind == "recompile"]
    assert len(events) == 1 and "sizes:" in events[0].reason and "x.size(0)" in events[0].reason


def test_sizes_zero_and_one_are_specialized():
    def f(x, y):
        return x + y  # broadcasting depends on whether a size is 1

    y = torch.randn(5)
    backend = run(f, [(torch.randn(b, 5), y) for b in (3, 1, 4, 0, 1)], dynamic=True)
    assert len(backend.graphs) == 3  # symbolic (>= 2), 1, 0


def test_strides_of_dynamic_inputs_are_guarded():
    def f(x):
        return x.view(-1) * 2 if x.is_contiguous() else x.sum(0)

    inputs = [(torch.randn(b, 4),) for b in (3, 5)] + [(torch.randn(4, b).t(),) for b in (3, 6)]
    backend = run(f, inputs, dynamic=True)
    assert len(backend.graphs) == 2


def test_mark_dynamic_and_mark_static():
    def f(x):
        return x.sum(1) * x.shape[1]

    xs = [torch.randn(b, 5) for b in (3, 4, 6)]
    for x in xs:
        ember_capture.mark_dynamic(x, 0)
    backend = run(f, [(x,) for x in xs], dynamic=False)
    assert len(backend.graphs) == 1 and symbolic_placeholders(backend.graphs[0]) == ["x"]

    ys = [torch.randn(b, 5) for b in (3, 4, 6)]
    for y in ys:
        ember_capture.mark_static(y, 0)
    backend = run(f, [(y,) for y in ys], dynamic=True)
    assert len(backend.graphs) == 3
    with pytest.raises(IndexError):
        ember_capture.mark_dynamic(torch.randn(3), 1)


def test_int_inputs_that_vary_become_symbolic():
    def f(x, step):
        return x * step + step // 2, step + 1

    backend = run(f, [(torch.randn(3), s) for s in (3, 4, 5, 6, 10)])
    assert len(backend.graphs) == 2
    ph = [n for n in backend.graphs[1].graph.nodes if n.op == "placeholder"]
    assert isinstance(ph[1].meta["example_value"], torch.SymInt)
    assert backend.inputs[1][1] == 4 and type(backend.inputs[1][1]) is int

    backend = run(f, [(torch.randn(3), s) for s in (3, 4, 5)], dynamic=False)
    assert len(backend.graphs) == 3
    backend = run(f, [(torch.randn(3), s) for s in (3, 4, 5)], dynamic=True)
    assert len(backend.graphs) == 1


def test_data_dependent_sizes_stay_a_graph_break():
    def f(x):
        y = x * 2
        idx = torch.nonzero(y > 0)
        return idx.shape[0] + 0, y.sum()

    stats = ember_capture.CaptureStats()
    g = ember_capture.capture(f, Counting(), CaptureConfig(dynamic=True), stats=stats)
    for b in (4, 7):
        x = torch.randn(b)
        _same(g(x), f(x))
    assert stats.breaks and stats.breaks[0].kind == "data_dependent"
    assert "nonzero" in stats.breaks[0].reason


def test_a_size_left_on_the_stack_at_a_graph_break():
    def f(x):
        n = x.shape[0] * 3
        print("size", n)
        return x + n

    backend = run(f, [(torch.randn(b),) for b in (2, 5, 9)], dynamic=True)
    # the print gets the value; the resume function takes n as a symbolic int argument
    assert len(backend.graphs) == 1
    assert [type(v) for v in backend.inputs[0]] == [torch.Tensor, int]


def test_backend_that_takes_static_graphs_gets_static_graphs(capsys):
    backend = run(mlp, [(torch.randn(b, 8), torch.randn(8, 6)) for b in (3, 4, 5)], dynamic=True,
                  backend=Counting(symbolic=False))
    assert len(backend.graphs) == 3 and all(symbolic_placeholders(gm) == [] for gm in backend.graphs)
    run(mlp, [(torch.randn(b, 8), torch.randn(8, 6)) for b in (3, 4)], backend=Counting(symbolic=False),
        logs=frozenset({"recompiles"}))
    assert "x.size(0) changed; the backend compiles static graphs only" in capsys.readouterr().err


def test_recompiles_log_names_the_dimension(capsys):
    run(mlp, [(torch.randn(b, 8), torch.randn(8, 6)) for b in (3, 4, 5)], logs=frozenset({"recompiles"}))
    err = capsys.readouterr().err
    assert "x.size(0) became dynamic" in err and err.count("became dynamic") == 1


def test_explain_lists_dynamic_inputs():
    x = torch.randn(6, 4)
    ember_capture.mark_dynamic(x, 0)
    report = ember_capture.explain(lambda x, k: x.sum(0) * x.shape[0], x, 3)
    assert report.dynamic_inputs == [["x.size(0) (s0)"]]
    assert "Dynamic inputs of graph 1: x.size(0) (s0)" in str(report)


def test_training_with_a_dynamic_batch():
    lin = torch.nn.Linear(4, 2)

    def step(x):
        loss = lin(x).pow(2).sum() / x.shape[0]
        return loss

    backend = Counting()
    g = ember_capture.capture(step, backend, CaptureConfig(dynamic=True, raise_internal=True))
    for b in (3, 6, 10):
        x = torch.randn(b, 4)
        lin.zero_grad()
        g(x).backward()
        got = [p.grad.clone() for p in lin.parameters()]
        lin.zero_grad()
        step(x).backward()
        for a, e in zip(got, [p.grad for p in lin.parameters()]):
            torch.testing.assert_close(a, e)
    assert len(backend.graphs) == 1


def test_ops_whose_fake_kernels_need_numbers_specialize_their_arguments():
    import torch.nn.functional as F

    def f(x):
        # constant_pad_nd takes no symbolic pads: the pad is specialized, the rest stays symbolic
        return F.pad(x, (0, x.shape[-1])) * 2, x.view(int(x.shape[0] * 0.5), -1), x + torch.tensor(x.shape[0])

    backend = run(f, [(torch.randn(b, 2),) for b in (4, 6, 4)], dynamic=True)
    assert len(backend.graphs) == 2


def test_guard_reads_each_symbol_once():
    def f(x):
        return x.view(2, -1) if x.shape[0] % 2 == 0 else x

    g = ember_capture.capture(f, Counting(), CaptureConfig(dynamic=True, raise_internal=True))
    g(torch.randn(4, 3))
    source = g._ember_state.entries[0].source
    assert "_z0 = L[0].size(0)" in source and "_z0 % 2" in source.replace("(", "").replace(")", "")


def test_float_arithmetic_on_a_symbolic_int():
    # `1 - step / 100` is a float: its terms are true divisions, not floor divisions
    def f(x, step):
        return x * (1 - step / 100) * 0.9 ** step, x * float(step) / 3

    backend = run(f, [(torch.ones(3), s) for s in (2, 3, 7, 40)], dynamic=True)
    assert len(backend.graphs) == 1


def test_a_float_of_sizes_used_as_a_number_guards_the_sizes():
    # math.log of a symbolic float has no graph form: specialized on the symbols' values (a guard
    # on the float itself would compare decimal-printed floats and fail on its own inputs)
    def f(x, step):
        return x * math.log(step / 3) + x * round(step / 7, 3)

    backend = run(f, [(torch.ones(3), s) for s in (2, 3, 2, 5)], dynamic=True)
    assert len(backend.graphs) == 3


def test_a_non_leaf_input_stays_a_non_leaf():
    def f(h):
        h.mul_(2)  # legal on a non-leaf, not on a leaf that requires grad
        return h.sum(1)

    w = torch.randn(3, requires_grad=True)
    backend, stats = Counting(), ember_capture.CaptureStats()
    g = ember_capture.capture(f, backend, CaptureConfig(dynamic=True, raise_internal=True), stats=stats)
    for b in (2, 5, 7):
        x = torch.randn(b, 3)
        torch.testing.assert_close(g(x * w), f(x * w))
    assert len(backend.graphs) == 1 and stats.breaks == []


def test_views_with_a_storage_offset_stay_static():
    def f(x):
        return x * 2, x.storage_offset()

    base = torch.randn(40)
    backend = run(f, [(base[k:k + b],) for k, b in ((1, 4), (2, 6), (3, 8))], dynamic=True)
    assert all(symbolic_placeholders(gm) == [] for gm in backend.graphs)

"""Guards and caching: what is guarded, recompiles, the recompile limit, logs."""
import warnings

import pytest
import torch
import torch.nn as nn

import ember_capture
from ember_capture import CaptureConfig, CaptureStats
from capture_helpers import Recorder, check

SCALE = 2.0
ACTIVATION = torch.relu


def uses_globals(x):
    return ACTIVATION(x) * SCALE


def test_global_constant_and_function_guarded():
    global SCALE, ACTIVATION
    rec = Recorder()
    f = ember_capture.capture(uses_globals, rec)
    x = torch.randn(4)
    torch.testing.assert_close(f(x), uses_globals(x))
    SCALE = 3.0
    torch.testing.assert_close(f(x), uses_globals(x))
    ACTIVATION = torch.tanh
    try:
        torch.testing.assert_close(f(x), uses_globals(x))
    finally:
        SCALE, ACTIVATION = 2.0, torch.relu
    assert len(rec.graphs) == 3


def test_closure_contents_guarded():
    k = 2

    def f(x):
        return x * k

    rec = Recorder()
    g = ember_capture.capture(f, rec)
    x = torch.randn(3)
    torch.testing.assert_close(g(x), x * 2)
    k = 5  # noqa: F841 - read through the closure cell
    torch.testing.assert_close(g(x), x * 5)
    assert len(rec.graphs) == 2


def test_module_attribute_guarded():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.alpha = 1.0
            self.use_bias = True

        def forward(self, x):
            return x * self.alpha + (1 if self.use_bias else 0)

    m = M()
    rec = Recorder()
    g = ember_capture.capture(m, rec)
    x = torch.randn(3)
    torch.testing.assert_close(g(x), m(x))
    m.alpha = 4.0
    torch.testing.assert_close(g(x), m(x))
    m.use_bias = False
    torch.testing.assert_close(g(x), m(x))
    assert len(rec.graphs) == 3


def test_swapped_submodule_guarded():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x)

    m = M()
    g = ember_capture.capture(m, Recorder())
    x = torch.randn(2, 3)
    torch.testing.assert_close(g(x), m(x))
    m.lin = nn.Linear(3, 3)
    torch.testing.assert_close(g(x), m(x))
    with torch.no_grad():
        m.lin.weight.mul_(2)  # in-place parameter update: no recompile needed, still right
    torch.testing.assert_close(g(x), m(x))


def test_guards_walk_each_module_path_once():
    """A nested parameter's guard reads its module from the local that module's own guard
    bound (the entry does not re-walk L[0]._modules[...] per parameter), and the graph's inputs
    are the guards' locals; a swapped deep parameter still misses and recompiles."""
    m = nn.Sequential(nn.Sequential(nn.Linear(3, 3), nn.ReLU()), nn.Linear(3, 2))
    g = ember_capture.capture(m, Recorder())
    x = torch.randn(2, 3)
    torch.testing.assert_close(g(x), m(x))
    (entry,) = g._ember_state.entries
    assert entry.source.count("L[0]") == 1, entry.source  # the root is read once, then its local
    # the children are read from the root's local (their names guarded: Note [Container module contents])
    assert "= _s0._modules" in entry.source, entry.source
    call = entry.source.split("__compiled(")[1].split(")")[0]
    assert "_modules" not in call, entry.source  # the inputs reuse the guards' locals
    m[0][0].weight = nn.Parameter(torch.randn(3, 3, dtype=torch.float64))
    m[0][0].bias = nn.Parameter(torch.randn(3, dtype=torch.float64))
    m[1].double()
    torch.testing.assert_close(g(x.double()), m(x.double()))
    assert len(g._ember_state.entries) == 2


def test_tensor_property_guards():
    def f(x):
        return x * 2

    check(f, torch.randn(3), torch.randn(3, dtype=torch.float64), torch.randn(4, 3).t(),
          torch.randn(3, requires_grad=True), torch.randn(3), graphs=4)


def test_list_length_and_dict_keys_guarded():
    def f(xs, d):
        return sum(xs) * len(d) + d.get("a", 0)

    check(f, ([torch.randn(2)], {"a": 1}), ([torch.randn(2), torch.randn(2)], {"a": 1}),
          ([torch.randn(2)], {"b": 1, "a": 2}), graphs=3)


def test_python_constant_arguments():
    def f(x, n, flag, name):
        return x * n if flag else x + len(name)

    check(f, (torch.randn(2), 2, True, "ab"), (torch.randn(2), 3, True, "ab"), (torch.randn(2), 3, False, "abc"),
          (torch.randn(2), 2.5, True, "ab"), graphs=4)


def test_grad_mode_guarded():
    def f(x):
        return x * 2

    rec = Recorder()
    g = ember_capture.capture(f, rec)
    x = torch.randn(3, requires_grad=True)
    assert g(x).requires_grad
    with torch.no_grad():
        assert not g(x).requires_grad
    assert len(rec.graphs) == 2


def test_recompile_limit_then_eager_with_one_warning():
    def f(x, n):
        return x + n

    rec = Recorder()
    g = ember_capture.capture(f, rec, CaptureConfig(recompile_limit=3, dynamic=False))  # an int that varies: one entry per value
    x = torch.randn(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(6):
            torch.testing.assert_close(g(x, n), x + n)
    limit_warnings = [w for w in caught if "recompile limit" in str(w.message)]
    assert len(limit_warnings) == 1 and len(rec.graphs) == 3


def test_cache_hit_reuses_entry():
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    def f(x):
        return x.sin()

    g = ember_capture.capture(f, backend)
    for _ in range(5):
        x = torch.randn(4)
        torch.testing.assert_close(g(x), x.sin())
    assert len(calls) == 1


def test_reset_forgets_entries():
    rec = Recorder()
    g = ember_capture.capture(lambda x: x + 1, rec)
    x = torch.randn(2)
    g(x)
    ember_capture.reset()
    g(x)
    assert len(rec.graphs) == 2


def test_logs_print_breaks_recompiles_guards_graph(capsys):
    def f(x):
        y = x * 2
        print("between")
        return y + 1

    g = ember_capture.capture(f, Recorder(), CaptureConfig(logs=frozenset({"graph_breaks", "recompiles", "guards", "graph"})))
    g(torch.randn(2))
    g(torch.randn(3))
    err = capsys.readouterr().err
    assert "[ember:graph_breaks]" in err and 'print("between")' in err
    assert "[ember:recompiles]" in err and "X.shape" not in err and "shape" in err
    assert "[ember:guards]" in err and "[ember:graph]" in err


def test_config_validation():
    with pytest.raises(ValueError, match="unknown log names"):
        CaptureConfig(logs=frozenset({"nope"}))
    with pytest.raises(ValueError):
        CaptureConfig(recompile_limit=0)
    with pytest.raises(TypeError):
        ember_capture.capture(lambda x: x, Recorder(), config={"fullgraph": True})


def test_stats_and_explain_on_straight_line():
    out = ember_capture.explain(lambda x: (x + 1).relu(), torch.randn(3))
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.break_reasons == []
    assert len(out.ops_per_graph[0]) == 2


def test_bound_method_capture():
    class Thing:
        def __init__(self):
            self.k = 3.0

        def run(self, x):
            return x * self.k

    t = Thing()
    stats = CaptureStats()
    g = ember_capture.capture(t.run, Recorder(), stats=stats)
    x = torch.randn(2)
    torch.testing.assert_close(g(x), x * 3)
    t.k = 4.0
    torch.testing.assert_close(g(x), x * 4)
    assert stats.recompiles == 1


def test_no_module_leak():
    import gc
    import weakref

    m = nn.Linear(2, 2)
    g = ember_capture.capture(m, Recorder())
    g(torch.randn(1, 2))
    ref = weakref.ref(m)
    del m, g
    gc.collect()
    assert ref() is None


class Settings:
    factor = 2


def uses_class_attr(x):
    return x * Settings.factor


def test_class_attribute_guarded():
    rec = Recorder()
    g = ember_capture.capture(uses_class_attr, rec)
    x = torch.randn(3)
    torch.testing.assert_close(g(x), x * 2)
    Settings.factor = 5
    try:
        torch.testing.assert_close(g(x), x * 5)
    finally:
        Settings.factor = 2


def test_python_random_is_not_frozen():
    import random

    def f(x):
        return x + random.random()

    g = ember_capture.capture(f, Recorder())
    x = torch.zeros(2)
    random.seed(0)
    expected = [f(x) for _ in range(3)]
    random.seed(0)
    with warnings.catch_warnings():  # random.random is a method of the module's Random instance,
        warnings.simplefilter("error")  # not of the module: its guard must hold (no "internal guard error")
        actual = [g(x) for _ in range(3)]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


def test_returned_python_lists_are_fresh_each_call():
    def f(x):
        out = sorted([3, 1, 2])
        out.append(x.shape[0])
        return out

    g = ember_capture.capture(f, Recorder())
    first = g(torch.randn(2))
    first.append("mutated by the caller")
    assert g(torch.randn(2)) == [1, 2, 3, 2]


def test_root_varargs_kwargs_and_defaults():
    def f(x, *rest, scale=2.0, **extra):
        out = x * scale
        for r in rest:
            out = out + r
        return out + extra.get("bias", 0)

    check(f, (torch.randn(2),), (torch.randn(2), torch.randn(2)), graphs=2)
    g = ember_capture.capture(f, Recorder())
    x, y = torch.randn(2), torch.randn(2)
    torch.testing.assert_close(g(x, y, scale=3.0, bias=1), f(x, y, scale=3.0, bias=1))
    torch.testing.assert_close(g(x=x), f(x=x))
    with pytest.raises(TypeError):
        g()


def test_mutable_default_list_guarded():
    def f(x, acc=[1]):  # noqa: B006 - the point of the test
        return x * len(acc)

    g = ember_capture.capture(f, Recorder())
    x = torch.randn(2)
    torch.testing.assert_close(g(x), x)
    f.__defaults__[0].append(2)
    torch.testing.assert_close(g(x), x * 2)


def test_autocast_and_default_dtype_guarded():
    def f(x):
        return x @ x.t(), torch.ones(2)

    rec = Recorder()
    g = ember_capture.capture(f, rec)
    x = torch.randn(3, 3)
    assert g(x)[0].dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert g(x)[0].dtype == f(x)[0].dtype == torch.bfloat16
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert g(x)[1].dtype == torch.float64
    finally:
        torch.set_default_dtype(old)
    assert len(rec.graphs) == 3


def test_captured_function_called_from_captured_code_is_inlined():
    inner_rec, outer_rec = Recorder(), Recorder()
    inner = ember_capture.capture(lambda t: t.sin() * 2, inner_rec)

    def outer(x):
        return inner(x) + 1

    g = ember_capture.capture(outer, outer_rec)
    x = torch.randn(3)
    torch.testing.assert_close(g(x), x.sin() * 2 + 1)
    assert len(outer_rec.graphs) == 1 and not inner_rec.graphs  # one graph, inlined
    twice = ember_capture.capture(inner, Recorder())
    torch.testing.assert_close(twice(x), x.sin() * 2)


def uses_builtin_len(x):
    return x * len(x)


def test_builtin_shadowed_by_a_later_global():
    g = ember_capture.capture(uses_builtin_len, Recorder())
    x = torch.randn(3)
    torch.testing.assert_close(g(x), x * 3)
    globals()["len"] = lambda t: 10
    try:
        torch.testing.assert_close(g(x), x * 10)
    finally:
        del globals()["len"]
    torch.testing.assert_close(g(x), x * 3)


def test_no_module_leak_with_graph_breaks(capsys):
    import gc
    import weakref

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            y = self.lin(x)
            print("between")
            if y.sum() > 0:
                y = y * 2
            return y + 1

    m = M()
    g = ember_capture.capture(m, Recorder())
    for _ in range(3):
        x = torch.randn(1, 2)
        torch.testing.assert_close(g(x), m(x))
    ref = weakref.ref(m)
    del m, g
    gc.collect()
    assert ref() is None


def test_recompile_log_names_the_failed_guard_and_the_value(capsys):
    """A recompile line names the argument, the condition that failed and the value that failed it."""
    def scale(x, n):
        return x * n

    g = ember_capture.capture(scale, Recorder(), CaptureConfig(logs=frozenset({"recompiles"})))
    x = torch.randn(3)
    torch.testing.assert_close(g(x, 2), x * 2)
    assert capsys.readouterr().err == ""  # the first compile is not a recompile
    x64 = torch.randn(3, dtype=torch.float64)
    torch.testing.assert_close(g(x64, 2), x64 * 2)
    err = capsys.readouterr().err
    assert f"recompiling {scale.__qualname__} ({__file__}:" in err
    assert "guard failed: L['x'].dtype is torch.float32 (got torch.float64)" in err
    torch.testing.assert_close(g(x64, 3), x64 * 3)
    assert "L['n'] == 2 (got 3)" in capsys.readouterr().err
    with torch.no_grad():  # global state: named like a guard too
        torch.testing.assert_close(g(x64, 3), x64 * 3)
    assert "torch.is_grad_enabled() is True (got False)" in capsys.readouterr().err


class _Sub(torch.Tensor):
    pass


# Each change of a parameter's metadata must miss the cache; all but the device (`.data =`
# refuses a meta tensor for a CPU one) keep the Parameter object.
_PARAMETER_CHANGES = {
    "shape": lambda m: setattr(m.weight, "data", torch.randn(4, 4)),
    "stride": lambda m: setattr(m.weight, "data", torch.randn(3, 3).t()),
    "dtype": lambda m: setattr(m.weight, "data", m.weight.data.double()),
    "device": lambda m: setattr(m, "weight", nn.Parameter(torch.empty(3, 3, device="meta"))),
    "requires_grad": lambda m: m.weight.requires_grad_(False),
}


@pytest.mark.parametrize("change", sorted(_PARAMETER_CHANGES))
def test_parameter_changed_in_place_misses_the_cache(change):
    m = nn.Linear(3, 3, bias=False)
    graphs = []
    g = ember_capture.capture(m, lambda gm, inputs: graphs.append(gm) or gm.forward)
    x = torch.randn(2, 3)
    g(x)
    _PARAMETER_CHANGES[change](m)
    x = torch.randn(2, m.weight.shape[1], dtype=m.weight.dtype, device=m.weight.device)
    out = g(x)
    assert len(graphs) == 2, change
    assert out.device == m.weight.device and out.dtype == m.weight.dtype
    if change != "device":
        torch.testing.assert_close(out, m(x))


def test_tensor_subclass_and_device_of_input_guarded():
    def f(x):
        return x * 2

    graphs = []
    g = ember_capture.capture(f, lambda gm, inputs: graphs.append(gm) or gm.forward)
    g(torch.randn(3))
    g(torch.randn(3))
    assert len(graphs) == 1
    sub = torch.randn(3).as_subclass(_Sub)  # misses the entry (runs eagerly or recompiles)
    out = g(sub)
    assert type(out) is _Sub
    torch.testing.assert_close(out.as_subclass(torch.Tensor), sub.as_subclass(torch.Tensor) * 2)
    before = len(graphs)
    assert g(torch.empty(3, device="meta")).device.type == "meta"
    assert len(graphs) == before + 1


# Note [Stride guard]: a row-major tensor whose sizes are all >= 2 is guarded by
# `X.is_contiguous()`; where a size is 0 or 1 the strides there are free under torch's
# contiguity, so the exact comparison stays. Each pair below has equal shapes and both
# tensors are "contiguous" or not alike only by that loose notion: the second must miss.
_SAME_SHAPE_OTHER_STRIDES = {
    "size-1 dim": (lambda: torch.randn(1, 3), lambda: torch.randn(3, 1).t()),
    "transposed": (lambda: torch.randn(3, 4), lambda: torch.randn(4, 3).t()),
    "expanded": (lambda: torch.randn(2, 3), lambda: torch.randn(1, 3).expand(2, 3)),
    "size-1 inner": (lambda: torch.randn(2, 1), lambda: torch.randn(2, 2)[:, :1]),
}


@pytest.mark.parametrize("case", sorted(_SAME_SHAPE_OTHER_STRIDES))
def test_same_shape_other_strides_misses_the_cache(case):
    first, second = (make() for make in _SAME_SHAPE_OTHER_STRIDES[case])
    assert first.shape == second.shape and first.stride() != second.stride()
    graphs = []
    g = ember_capture.capture(lambda x: x * 2 + 1, lambda gm, inputs: graphs.append(gm) or gm.forward)
    torch.testing.assert_close(g(first), first * 2 + 1)
    torch.testing.assert_close(g(first.clone()), first * 2 + 1)  # a new tensor, same layout: a hit
    assert len(graphs) == 1
    out = g(second)
    torch.testing.assert_close(out, second * 2 + 1)
    assert len(graphs) == 2, case


def test_row_major_and_0d_tensors_skip_the_stride_tuple():
    def f(x, s):
        return x * s

    g = ember_capture.capture(f, Recorder(), CaptureConfig(logs=frozenset()))
    x, s = torch.randn(2, 3), torch.tensor(2.0)
    torch.testing.assert_close(g(x, s), x * s)
    checks = " ".join(" ".join(c) for c in g._ember_state.entries[0].guard_checks.values())
    assert "X.is_contiguous()" in checks and "X.stride()" not in checks
    x2 = torch.randn(3, 2).t()  # same shape, column-major: misses and recompiles
    torch.testing.assert_close(g(x2, s), x2 * s)
    assert len(g._ember_state.entries) == 2


def test_module_configuration_checked_by_identity_first():
    """Note [Immutable constants by identity]: a module's stride tuple is checked as the object
    the trace saw; its type, length and items only when another object is there (an equal
    tuple assigned anew still hits, a different one recompiles)."""
    m = nn.Conv1d(2, 3, 3, stride=2)
    g = ember_capture.capture(m, Recorder())
    x = torch.randn(1, 2, 9)
    torch.testing.assert_close(g(x), m(x))
    (entry,) = g._ember_state.entries
    lines = entry.source.split("\n")
    stride = next(i for i, line in enumerate(lines) if line.endswith(".stride"))
    assert lines[stride + 1].strip().startswith("if X is not _c"), entry.source
    indent = len(lines[stride]) - len(lines[stride].lstrip())
    assert lines[stride + 2].startswith(" " * (indent + 4) + "if not (type(X) is"), entry.source  # nested
    m.stride = tuple([2])
    torch.testing.assert_close(g(x), m(x))
    assert len(g._ember_state.entries) == 1
    m.stride = (1,)
    torch.testing.assert_close(g(x), m(x))
    assert len(g._ember_state.entries) == 2


def test_tuple_argument_with_a_symbolic_item_is_not_folded():
    """An int inside a tuple argument that is a graph input (dynamic=True) keeps its local:
    the tuple is not checked by identity alone."""
    def f(x, shape):
        return x.reshape(shape) * 2

    shape = (4, 3)
    g = ember_capture.capture(f, Recorder(), CaptureConfig(dynamic=True, raise_internal=True))
    for x, s in ((torch.randn(12), shape), (torch.randn(12), shape), (torch.randn(20), (5, 4)), (torch.randn(12), shape)):
        torch.testing.assert_close(g(x, s), f(x, s))  # the same tuple object again: still bound
    assert len(g._ember_state.entries) == 1


def test_class_of_an_identity_guarded_module_assigned_after_the_trace():
    """A submodule guarded by identity kept its trace after `m.a.__class__ = B` (the same
    object, another forward): the identity guard now checks the class too."""
    class A(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x)

    class B(A):
        def forward(self, x):
            return self.lin(x) * 10

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = A()

        def forward(self, x):
            return self.a(x) + 1

    m = Outer()
    f = ember_capture.capture(m, lambda gm, ex: gm.forward)
    x = torch.ones(1, 2)
    torch.testing.assert_close(f(x), m(x))
    torch.testing.assert_close(f(x), m(x))
    m.a.__class__ = B
    torch.testing.assert_close(f(x), m(x))
    assert len(f._ember_state.entries) == 2


def test_guard_code_is_built_in_time_linear_in_the_guarded_sources(monkeypatch):
    # Guards.lines folds each pinned source's subtree: finding a subtree by scanning every
    # later source was quadratic (densenet121: ~2,800 sources, 3.9 million prefix tests).
    from ember_capture import guards
    calls = [0]
    real = guards._extends

    def counted(source, prefix):
        calls[0] += 1
        return real(source, prefix)

    monkeypatch.setattr(guards, "_extends", counted)
    model = nn.Sequential(*(nn.Linear(2, 2) for _ in range(150)))
    rec = Recorder()
    f = ember_capture.capture(model, rec)
    x = torch.randn(3, 2)
    torch.testing.assert_close(f(x), model(x))
    assert len(rec.graphs) == 1
    assert 0 < calls[0] < 20_000, calls[0]  # a scan of all later sources: about 400,000


def test_later_extensions_are_the_sources_a_prefix_extends():
    from ember_capture.guards import _extends, _later_extensions
    sources = ["L['m']", "L['m']._modules['a']", "L['m2']", "L['m']._modules['a'].w", "L['m'][0]",
               "G['x']", "L['m']._modules['ab']", "L['m']._modules['a'][1]", "L['m']x"]
    of = _later_extensions(sources)
    for i, s in enumerate(sources):
        assert of(i) == [j for j in range(i + 1, len(sources)) if _extends(sources[j], s)]

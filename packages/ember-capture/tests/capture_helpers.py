"""Shared test helpers: a recording backend and an eager comparison with stated tolerances."""
from __future__ import annotations

import warnings

import torch
from ember_symbolic import hint_of

import ember_capture
from ember_capture import CaptureConfig
from ember_capture.verify import verify_graph

# Tolerances per dtype (the backend here runs the captured graph eagerly, so results should
# match closely; reductions may be reordered by a different backend).
TOLERANCES = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-10, 1e-10), torch.float16: (1e-3, 1e-3),
              torch.bfloat16: (1e-2, 1e-2)}


class Recorder:
    """A torch.compile-protocol backend that keeps the graphs it is given."""

    def __init__(self):
        self.graphs = []
        self.example_inputs = []

    def __call__(self, gm, example_inputs):
        verify_graph(gm, example_inputs)
        self.graphs.append(gm)
        self.example_inputs.append(example_inputs)
        return gm.forward

    def ops(self, i=-1):
        return [n.target for n in self.graphs[i].graph.nodes if n.op in ("call_function", "call_method")]


def assert_same(actual, expected, path="out"):
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: {type(actual)} is not a tensor"
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, path
        rtol, atol = TOLERANCES.get(expected.dtype, (0, 0))
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, msg=path)
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), f"{path}: {type(actual)} vs {type(expected)}"
        assert len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and list(actual) == list(expected), path
        for k in expected:
            assert_same(actual[k], expected[k], f"{path}[{k!r}]")
    elif hasattr(expected, "__dict__") and not isinstance(expected, type):
        assert type(actual) is type(expected), path
        assert_same(vars(actual), vars(expected), path)
    else:
        assert actual == expected or (actual != actual and expected != expected), f"{path}: {actual!r} != {expected!r}"


def check_example_values(gm, inputs):
    """meta["example_value"] agrees with what each node really computes (shape and dtype)."""
    real = {}

    class Recording(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            real[n] = out
            return out

    with torch.no_grad():
        Recording(gm).run(*[x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    for node, value in real.items():
        fake = node.meta.get("example_value")
        if isinstance(value, torch.Tensor) and isinstance(fake, torch.Tensor):
            # a symbolic size by its value in this call (comparing SymInts would add guards)
            shape = tuple(hint_of(s) for s in fake.shape)
            assert shape == tuple(value.shape) and fake.dtype == value.dtype, f"{node.name}: {fake} vs {value.shape}"
        elif isinstance(fake, torch.SymInt):
            assert hint_of(fake) == value, f"{node.name}: {fake} (hint {hint_of(fake)}) vs {value}"


def clone_tree(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(clone_tree(i) for i in x)
    if isinstance(x, dict):
        return {k: clone_tree(v) for k, v in x.items()}
    return x


def check(fn, *input_sets, graphs=None, breaks=None, fallback_ok=False, config=CaptureConfig(), seed=True):
    """Run ``fn`` eagerly and captured on each input set (cloned), and compare.

    ``graphs``: the number of graphs compiled in all; ``fallback_ok``: whether a whole-frame
    eager fallback is acceptable (else its warning fails the test).
    """
    assert len(input_sets) >= 2, "compare on two or more inputs"
    rec = Recorder()
    stats = ember_capture.CaptureStats()
    captured = ember_capture.capture(fn, rec, config, stats=stats)
    for args in input_sets:
        args = args if isinstance(args, tuple) else (args,)
        eager_args, cap_args = clone_tree(args), clone_tree(args)
        if seed:
            torch.manual_seed(1234)
        expected = fn(*eager_args)
        if seed:
            torch.manual_seed(1234)
        with warnings.catch_warnings():
            if not fallback_ok:
                warnings.simplefilter("error")
            actual = captured(*cap_args)
        assert_same(actual, expected)
        assert_same(list(cap_args), list(eager_args), "inputs after the call")
    for gm, inputs in zip(rec.graphs, rec.example_inputs):
        check_example_values(gm, inputs)
    if graphs is not None:
        assert len(rec.graphs) == graphs, f"expected {graphs} graphs, got {len(rec.graphs)}: {stats.breaks}"
    if breaks is not None:
        assert len(stats.breaks) == breaks, stats.breaks
    if not fallback_ok:
        assert not stats.fallbacks, stats.fallbacks
    return rec, stats


def check_module(make, input_sets, train=False, graphs=None, breaks=0, rtol=None, atol=None):
    """Build the module twice from one seed, run eager and captured on each input set (same RNG
    seed for both), and compare outputs and the final state_dict (buffers included)."""
    torch.manual_seed(0)
    model = make().train(train)
    torch.manual_seed(0)
    eager = make().train(train)
    rec = Recorder()
    stats = ember_capture.CaptureStats()
    compiled = ember_capture.capture(model, rec, stats=stats)
    for args in input_sets:
        args = args if isinstance(args, tuple) else (args,)
        torch.manual_seed(3)
        actual = compiled(*args)
        torch.manual_seed(3)
        expected = eager(*args)
        if rtol is None:
            assert_same(actual, expected)
        else:
            torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
    for (name, a), (_, b) in zip(model.state_dict().items(), eager.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert not stats.fallbacks, stats.fallbacks
    if breaks is not None:
        assert len(stats.breaks) == breaks, stats.breaks
    if graphs is not None:
        assert len(rec.graphs) == graphs, f"expected {graphs} graphs, got {len(rec.graphs)}"
    return rec, stats

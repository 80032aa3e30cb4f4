"""Note [checked boundaries] (ember/checks.py): with EMBER_CHECK=1 (or options={"check": True})
every layer's verifier runs where a graph crosses into the next layer, and a malformed graph
raises `ember.SpecError` naming the layer, never a silent fallback."""
import ast
import dataclasses
import pathlib

import pytest
import torch
import torch.fx

import ember
import ember_autograd
import ember_capture
import ember_inductor
import ember_prims
from ember.backends import AotComposition, build_compiler, lookup
from ember.checks import LAYER_SPEC_ERRORS
from ember.settings import make_settings


def settings(backend="eager", check=True):
    return make_settings(backend_name=backend, fullgraph=False, dynamic=None, mode=None,
                         options={"check": check}, env={})


def eager(gm, example_inputs):
    return gm.forward


def step(x, w):
    return torch.tanh(x @ w).sum()


def test_capture_boundary_catches_graph_without_stack_traces():
    # a hand-made torch-level graph, as capture never makes one: no meta at all
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_function(torch.sin, (x,)),))
    gm = torch.fx.GraphModule({}, g)
    with pytest.raises(ember.SpecError, match="capture.*example_value|capture.*stack_trace") as info:
        build_compiler("eager", settings(check=True))(gm, [torch.randn(3)])
    assert info.value.layer == "capture"
    assert isinstance(info.value.__cause__, ember_capture.SpecError)
    x = torch.randn(3)  # unchecked, the same graph just runs
    torch.testing.assert_close(build_compiler("eager", settings(check=False))(gm, [x])(x)[0], torch.sin(x))


def _mutating_partition(joint):
    part = ember_autograd.default_partition(joint)
    fw = part.forward
    first = next(n for n in fw.graph.nodes if n.op == "placeholder")
    with fw.graph.inserting_before(fw.graph.output_node()):
        node = fw.graph.call_function(torch.ops.aten.add_.Tensor, (first, first))
        node.meta["val"] = first.meta["val"]
    fw.recompile()
    return part


def test_autograd_boundary_catches_a_mutating_forward_graph():
    compiled = ember.compile(step, backend=AotComposition(eager, partition=_mutating_partition),
                             options={"check": True})
    x, w = torch.randn(4, 5), torch.randn(5, 3, requires_grad=True)
    with pytest.raises(ember.SpecError, match="mutates its inputs") as info:
        compiled(x, w)
    assert info.value.layer == "autograd"


@pytest.mark.skipif("inductor" not in ember.list_backends(), reason="the inductor layer is not here")
def test_prims_boundary_catches_foreign_ops_reaching_the_inductor(tmp_path):
    inductor = lookup("inductor").build(settings("inductor"))
    # a decomposition table that emits torch's own prims (namespace "prims"): neither ember_prims
    # ops nor functional ATen ops the inductor could run as library calls
    foreign = {torch.ops.aten.tanh.default: lambda x: torch.ops.prims.tanh.default(x)}
    undecomposed = dataclasses.replace(inductor, decompositions=lambda: foreign)
    # debug keeps the chained internal cause (hidden from users otherwise: Note [hidden frames])
    compiled = ember.compile(step, backend=undecomposed, options={"check": True, "debug": True})
    with pytest.raises(ember.SpecError, match="not a prims-level graph") as info:
        compiled(torch.randn(4, 5), torch.randn(5, 3))
    assert info.value.layer == "inductor"
    assert isinstance(info.value.__cause__, ember_inductor.SpecError)


def test_each_layer_verifier_raises_its_spec_error_on_a_hand_made_graph():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(torch.ops.aten.add_.Tensor, (x, x))  # mutating, no meta["val"]
    g.output((y,))
    gm = torch.fx.GraphModule({}, g)
    checks = {
        ember_capture.SpecError: lambda: ember_capture.verify_graph(gm, [torch.randn(2)]),
        ember_autograd.SpecError: lambda: ember_autograd.verify_functional(gm),
        ember_prims.SpecError: lambda: ember_prims.verify(gm),
        ember_inductor.SpecError: lambda: ember_inductor.verify_graph(gm),
    }
    assert set(checks) == set(LAYER_SPEC_ERRORS)
    for error, check in checks.items():
        with pytest.raises(error):
            check()


def test_verifiers_use_no_assert_statement():
    # `python -O` strips assert statements: a check written with them checks nothing there
    for module in (ember_capture.verify_graph, ember_autograd.verify_functional, ember_prims.verify,
                   ember_inductor.verify_graph):
        source = pathlib.Path(module.__code__.co_filename).read_text()
        asserts = [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assert)]
        assert not asserts, (module.__code__.co_filename, asserts)


def test_check_switch_from_environment_passes_on_real_code(monkeypatch):
    monkeypatch.setenv("EMBER_CHECK", "1")
    for backend in ("eager", "aot_eager", "inductor"):
        if backend not in ember.list_backends():
            continue
        compiled = ember.compile(step, backend=backend)
        for seed in (0, 1):
            g = torch.Generator().manual_seed(seed)
            x, w = torch.randn(4, 5, generator=g), torch.randn(5, 3, generator=g)
            w_c, w_e = w.clone().requires_grad_(), w.clone().requires_grad_()
            loss = compiled(x, w_c)
            loss.backward()
            expected = step(x, w_e)
            expected.backward()
            torch.testing.assert_close(loss, expected)
            torch.testing.assert_close(w_c.grad, w_e.grad)


def test_bad_switch_value_is_rejected(monkeypatch):
    monkeypatch.setenv("EMBER_CHECK", "maybe")
    with pytest.raises(ember.InvalidArgument, match="EMBER_CHECK='maybe'"):
        ember.compile(step)


def test_compiled_graph_output_is_checked_against_its_promise():
    def wrong_shape(gm, example_inputs):
        def run(*args):
            return tuple(o.reshape(-1)[:1] if isinstance(o, torch.Tensor) else o for o in gm(*args))
        return run

    compiled = ember.compile(step, backend=AotComposition(wrong_shape), options={"check": True})
    with pytest.raises(ember.SpecError, match="promised") as info:
        compiled(torch.randn(4, 5), torch.randn(5, 3))
    assert info.value.layer == "compiled graph"

"""Symbolic traces (issue #18, Note [symbolic traces]): torch-level graphs whose placeholders'
example values have SymInt sizes, traced once and run through `aot` with eager compilers (the
aot_eager equivalent) on inputs of sizes the trace never saw, outputs and gradients against eager.
"""
import importlib.util
import operator
import pathlib
import sys

import pytest
import torch
import torch.fx

from ember_autograd import aot, default_partition, min_cut_partition, verify_functional


def _load(name):
    spec = importlib.util.spec_from_file_location(f"ember_autograd_test_{name}",
                                                  pathlib.Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


dyn = _load("dynamic_util")
models = _load("models")
aten = torch.ops.aten
TOL = dict(rtol=1e-5, atol=1e-5)


class Compilers:
    """Eager fw/bw compilers that keep what they were given."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        verify_functional(gm)
        self.graphs.append((gm, list(example_inputs)))
        return gm


def _check_training(module, compiled, params, inputs):
    out = compiled(*inputs, *params)
    out = out[0] if isinstance(out, tuple) else out
    out.square().sum().backward()
    grads = [p.grad for p in params]
    for p in params:
        p.grad = None
    ref = module(*inputs)
    ref.square().sum().backward()
    torch.testing.assert_close(out, ref, **TOL)
    for g, p in zip(grads, params):
        torch.testing.assert_close(g, p.grad, **TOL)
        p.grad = None


def _size_nodes(gm) -> list:
    return [n for n in gm.graph.nodes if n.target is aten.sym_size.int]


def test_mlp_one_trace_runs_every_batch_size():
    torch.manual_seed(0)
    model = models.MLP()
    gm, params = dyn.lifted(model)
    x = torch.randn(8, 16)
    env = dyn.mark_dynamic(gm, [x, *params], {0: (0,)})
    compilers = Compilers()
    compiled = aot(gm, [x, *params], compilers)
    assert len(compilers.graphs) == 2  # forward and backward, both at once
    for batch in (3, 8, 13, 2):
        _check_training(model, compiled, params, [torch.randn(batch, 16)])
    assert len(compilers.graphs) == 2 and env.guards == []
    fw, fw_inputs = compilers.graphs[0]
    assert str(fw_inputs[0].shape) == "torch.Size([s0, 16])"


@pytest.mark.parametrize("partition", [default_partition, min_cut_partition])
def test_attention_block_symbolic_batch_and_sequence(partition):
    torch.manual_seed(0)
    model = dyn.AttentionBlock()
    gm, params = dyn.lifted(model)
    x = torch.randn(2, 8, 32)
    env = dyn.mark_dynamic(gm, [x, *params], {0: (0, 1)})
    compilers = Compilers()
    compiled = aot(gm, [x, *params], compilers, partition=partition)
    for b, t in ((3, 5), (2, 8), (4, 13), (1, 7)):
        _check_training(model, compiled, params, [torch.randn(b, t, 32)])
    assert env.guards == []  # pure shape arithmetic decides nothing
    (fw, _), (bw, bw_inputs) = compilers.graphs
    assert _size_nodes(fw) and _size_nodes(bw)  # view(b, t, 4, 8) takes sym_size nodes
    for gm_ in (fw, bw):
        for n in gm_.graph.nodes:
            if n.op == "call_function" and n.target in (operator.mul, aten.sym_size.int):
                assert isinstance(n.meta["val"], torch.SymInt)


def test_backward_gets_the_symbols_its_tensors_lack_as_int_inputs():
    # sum() saves nothing: the backward expands its scalar gradient to (s0, s1), read from ints
    # that the forward returns after its saved tensors
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_method("sum", (g.call_function(torch.mul, (x, 2.0)),)),))
    gm = torch.fx.GraphModule({}, g)
    ex = torch.randn(4, 6, requires_grad=True)
    env = dyn.mark_dynamic(gm, [ex], {0: (0, 1)})
    compilers = Compilers()
    compiled = aot(gm, [ex], compilers)
    (fw, _), (bw, bw_inputs) = compilers.graphs
    assert compiled.training.saved == [] and len(bw_inputs) == 3
    assert [str(v) for v in bw_inputs[:2]] == ["s0", "s1"]
    assert all(isinstance(v, torch.SymInt) for v in bw_inputs[:2])
    assert [str(a.meta["val"]) for a in fw.graph.output_node().args[0][1:]] == ["s0", "s1"]
    for shape in ((3, 5), (7, 2), (4, 6)):
        xr = torch.randn(*shape, requires_grad=True)
        compiled(xr)[0].backward()
        torch.testing.assert_close(xr.grad, torch.full(shape, 2.0))
    assert env.guards == []


def _reshape_graph() -> torch.fx.GraphModule:
    """Capture's form of `n` (a dynamic int) and size reads: sym_size/operator nodes as arguments."""
    g = torch.fx.Graph()
    x, n = g.placeholder("x"), g.placeholder("n")
    s0 = g.call_function(aten.sym_size.int, (x, 0))
    s1 = g.call_function(aten.sym_size.int, (x, 1))
    flat = g.call_method("view", (x, g.call_function(operator.mul, (s0, s1))))
    swapped = g.call_method("view", (flat, s1, s0))
    head = g.call_function(operator.getitem, (g.call_method("reshape", (g.call_method("t", (swapped,)), -1)),
                                              slice(None, n)))
    loss = g.call_method("sum", (g.call_function(torch.sin, (head,)),))
    g.output((loss, g.call_function(operator.mul, (s0, 2)), g.call_method("view", (x, -1)),
              g.call_method("unsqueeze", (swapped, 0))))
    return torch.fx.GraphModule({}, g)


@pytest.mark.parametrize("requires_grad", [True, False])
def test_reshape_heavy_graph_with_a_dynamic_int(requires_grad):
    gm = _reshape_graph()
    ex = torch.randn(6, 4, requires_grad=requires_grad)
    env = dyn.mark_dynamic(gm, [ex, 5], {0: (0, 1), 1: ()})
    compilers = Compilers()
    compiled = aot(gm, [ex, 5], compilers)
    fw = compilers.graphs[0][0]
    placeholders = [n for n in fw.graph.nodes if n.op == "placeholder"]
    assert [p.name for p in placeholders] == ["primals_1", "s2"] and str(placeholders[1].meta["val"]) == "s2"
    for shape, n in (((6, 4), 5), ((3, 7), 11), ((9, 2), 17), ((2, 2), 4)):
        xr = torch.randn(*shape, requires_grad=requires_grad)
        out, ref = compiled(xr, n), gm(xr, n)
        assert out[1] == ref[1] == shape[0] * 2  # a size the graph returns
        for a, b in zip(out, ref):
            torch.testing.assert_close(a, b)
        assert out[2].data_ptr() == xr.data_ptr()  # x.view(-1): still a view of the input
        if requires_grad:
            (out[0] + out[3].sum()).backward()
            got, xr.grad = xr.grad, None
            (ref[0] + ref[3].sum()).backward()
            torch.testing.assert_close(got, xr.grad)
    assert [str(g) for g in env.guards] == ["s2 <= s0*s1"]  # the slice [:n] needs it


def test_static_graphs_compile_the_backward_lazily_as_before():
    gm = torch.fx.symbolic_trace(lambda x: (torch.sin(x).sum(),))
    compilers = Compilers()
    compiled = aot(gm, [torch.randn(3, requires_grad=True)], compilers)
    assert len(compilers.graphs) == 1
    compiled(torch.randn(3, requires_grad=True))[0].backward()
    assert len(compilers.graphs) == 2


def _prims_config():
    import ember_prims
    from ember_autograd import AotConfig

    cheap = (ember_prims.UNARY, ember_prims.BINARY, ember_prims.TERNARY, ember_prims.CAST,
             ember_prims.VIEW, ember_prims.CREATION, ember_prims.RANDOM)
    return ember_prims.Decomposer(), AotConfig(recompute_ops=frozenset(
        f"ember_prims::{n}" for n, info in ember_prims.PRIMS.items() if info.category in cheap))


def test_attention_block_through_prims_decompositions_and_min_cut():
    torch.manual_seed(0)
    model = dyn.AttentionBlock()
    gm, params = dyn.lifted(model)
    x = torch.randn(2, 8, 32)
    env = dyn.mark_dynamic(gm, [x, *params], {0: (0, 1)})
    decomposer, config = _prims_config()
    compilers = Compilers()
    compiled = aot(gm, [x, *params], compilers, decompositions=decomposer, partition=min_cut_partition,
                   config=config)
    for b, t in ((3, 5), (4, 13), (1, 7)):
        _check_training(model, compiled, params, [torch.randn(b, t, 32)])
    assert env.guards == []
    (fw, _), (bw, _) = compilers.graphs
    assert any(n.target is torch.ops.ember_prims.reshape.default for n in fw.graph.nodes)
    assert _size_nodes(fw) and _size_nodes(bw)


@pytest.mark.parametrize("prims", [False, True], ids=["aten", "prims"])
def test_convnet_with_batch_norm_statistics_every_image_size(prims):
    import copy

    torch.manual_seed(0)
    model = dyn.ConvNet()
    ref = copy.deepcopy(model)
    gm, params = dyn.lifted(model)
    x = torch.randn(4, 3, 8, 8)
    env = dyn.mark_dynamic(gm, [x, *params], {0: (0, 2, 3)})
    decomposer, config = _prims_config() if prims else (None, None)
    compiled = aot(gm, [x, *params], Compilers(), decompositions=decomposer, config=config)
    # torch's conv fake kernel picks its layout on the batch (s0 < 16) and adaptive pooling to 2
    # reshapes when the pooled size is even: decisions, kept as guards that these sizes satisfy
    assert "s0 < 16" in [str(g) for g in env.guards]
    for b, h, w in ((3, 8, 8), (5, 12, 4), (2, 4, 16)):
        assert env.guards_hold({"s0": b, "s1": h, "s2": w})
        xb = torch.randn(b, 3, h, w)
        out = compiled(xb, *params)
        expected = ref(xb)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        out.sum().backward()
        expected.sum().backward()
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
            p.grad = q.grad = None
        for p, q in zip(model.buffers(), ref.buffers()):
            torch.testing.assert_close(p, q)
    assert not env.guards_hold({"s0": 16, "s1": 8, "s2": 8})


def test_an_output_aliasing_an_input_with_an_offset_is_rebuilt_at_its_offset():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output((g.call_method("view", (x, -1)), g.call_method("transpose", (x, 0, 1))))
    gm = torch.fx.GraphModule({}, g)
    dyn.mark_dynamic(gm, [torch.randn(4, 3)], {0: (0, 1)})
    compiled = aot(gm, [torch.randn(4, 3)], Compilers())
    for rows, cols in ((5, 2), (3, 7)):
        base = torch.randn(rows + 1, cols)
        flat, tr = compiled(base[1:])
        assert flat.data_ptr() == base[1:].data_ptr() and flat.shape == (rows * cols,)
        torch.testing.assert_close(flat, base[1:].reshape(-1))
        torch.testing.assert_close(tr, base[1:].t())


def test_mutations_of_a_symbolic_input_through_views_are_copied_back():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    head = g.call_function(operator.getitem, (x, (slice(None), slice(None, 2))))
    g.call_method("zero_", (head,))
    g.call_method("mul_", (x, 2.0))
    g.output((g.call_method("sum", (x, 1)),))
    gm = torch.fx.GraphModule({}, g)
    env = dyn.mark_dynamic(gm, [torch.randn(4, 5)], {0: (0, 1)})
    compiled = aot(gm, [torch.randn(4, 5)], Compilers())
    # torch's fake kernel of zero_ asks whether x[:, :2] is contiguous (only if s1 == 2): a guard
    assert [str(g) for g in env.guards] == ["Ne(s1, 2)"]
    for shape in ((3, 7), (6, 3), (2, 4)):
        mine = torch.randn(*shape)
        ref = mine.clone()
        out, expected = compiled(mine)[0], gm(ref)[0]
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(mine, ref)


@pytest.mark.parametrize("prims", [False, True], ids=["aten", "prims"])
def test_numel_and_stride_reads_as_capture_emits_them(prims):
    g = torch.fx.Graph()
    x = g.placeholder("x")
    numel = g.call_function(aten.sym_numel.default, (x,))
    stride = g.call_function(aten.sym_stride.int, (x, 0))
    y = g.call_method("reshape", (x, numel))
    g.output((g.call_function(torch.mul, (y, stride)), numel))
    gm = torch.fx.GraphModule({}, g)
    env = dyn.mark_dynamic(gm, [torch.randn(4, 6)], {0: (0, 1)})
    decomposer, config = _prims_config() if prims else (None, None)
    compiled = aot(gm, [torch.randn(4, 6, requires_grad=True)], Compilers(), decompositions=decomposer,
                   config=config)
    assert env.guards == []
    for shape in ((3, 8), (5, 4), (7, 2)):
        t = torch.randn(*shape, requires_grad=True)
        out, ref = compiled(t), gm(t)
        torch.testing.assert_close(out[0], ref[0])
        assert out[1] == ref[1] == shape[0] * shape[1]
        out[0].sum().backward()
        torch.testing.assert_close(t.grad, torch.full(shape, float(shape[1])))

"""decompose() and verify() on ATen graphs of small seed-like models, forward and backward.

The ATen graphs are made here with make_fx (tests may use torch's tracer; product code may not).
Each graph is decomposed, verified, and run with the prims' reference kernels against ATen.
"""
import json
import pathlib

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import ember_prims

aten = torch.ops.aten
HERE = pathlib.Path(__file__).resolve().parent


def _aten_graph(fn, *args):
    gm = make_fx(fn, tracing_mode="fake")(*args)
    for node in gm.graph.nodes:  # what an upstream tracer records: the user's line
        node.meta.setdefault("stack_trace", f'  File "model.py", line 1, in forward\n    {node.name}')
    return gm


def _check(fn, *args, atol=1e-5, rtol=1.3e-5):
    gm = _aten_graph(fn, *args)
    pg = ember_prims.decompose(gm)
    ember_prims.verify(pg)
    expected = fn(*args)
    got = pg(*args)
    torch.testing.assert_close(got, expected, atol=atol, rtol=rtol)
    return pg


def _with_grads(model_fn, params):
    """loss and its gradients w.r.t. params: forward and backward ATen ops in one graph."""
    def run(x, *ps):
        ps = [p.detach().requires_grad_() for p in ps]
        loss = model_fn(x, *ps)
        return (loss, *torch.autograd.grad(loss, ps))
    return run


def test_mlp_forward_backward():
    def mlp(x, w1, b1, w2, b2):
        return F.linear(F.relu(F.linear(x, w1, b1)), w2, b2).sum()
    params = [torch.randn(16, 8), torch.randn(16), torch.randn(4, 16), torch.randn(4)]
    pg = _check(_with_grads(mlp, params), torch.randn(5, 8), *params, atol=1e-4, rtol=1e-4)
    targets = {n.target for n in pg.graph.nodes if n.op == "call_function"}
    assert aten.mm.default in targets and torch.ops.ember_prims.maximum.default in targets


def test_convnet_batchnorm_pool_forward_backward():
    def net(x, w, g, b, w2):
        y = F.conv2d(x, w, padding=1)
        y = F.batch_norm(y, None, None, g, b, training=True)
        y = F.max_pool2d(F.relu(y), 3, 2, 1)
        y = F.avg_pool2d(F.conv2d(y, w2), 2)
        y = F.adaptive_avg_pool2d(y, 1)
        return torch.cat([y, y * 2], 1).mean()
    params = [torch.randn(4, 3, 3, 3), torch.rand(4) + 0.5, torch.randn(4), torch.randn(6, 4, 1, 1)]
    _check(_with_grads(net, params), torch.randn(2, 3, 10, 10), *params, atol=1e-4, rtol=1e-4)


def test_transformer_block_forward_backward():
    def block(ids, emb, ln_w, ln_b, wq, wo):
        x = F.embedding(ids, emb)
        h = F.layer_norm(x, (8,), ln_w, ln_b)
        q = h @ wq
        att = (q @ q.transpose(-1, -2)) / 8 ** 0.5
        mask = torch.ones(ids.shape[-1], ids.shape[-1], dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = F.gelu(att @ q @ wo, approximate="tanh") + x
        return F.cross_entropy(y.reshape(-1, 8), ids.reshape(-1))
    params = [torch.randn(8, 8), torch.rand(8) + 0.5, torch.randn(8), torch.randn(8, 8), torch.randn(8, 8)]
    ids = torch.randint(0, 8, (2, 5))
    _check(_with_grads(block, params), ids, *params, atol=1e-4, rtol=1e-4)


def test_undecomposed_op_names_the_op_and_the_users_line():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.randn(4)
    y = g.call_function(aten.histc.default, (x,))
    y.meta["stack_trace"] = '  File "train.py", line 42, in step\n    h = torch.histc(x)'
    g.output(y)
    with pytest.raises(ember_prims.UndecomposedOpError, match=r"(?s)aten.histc.default.*train.py.*line 42"):
        ember_prims.decompose(torch.fx.GraphModule(torch.nn.Module(), g))


def test_verify_rejects_aten_and_missing_meta():
    gm = _aten_graph(lambda x: torch.sin(x) + 1, torch.randn(3))
    with pytest.raises(ValueError, match="neither a prim nor an extern"):
        ember_prims.verify(gm)
    pg = ember_prims.decompose(gm)
    ember_prims.verify(pg)
    next(n for n in pg.graph.nodes if n.op == "call_function").meta.pop("val")
    with pytest.raises(ValueError, match="no meta"):
        ember_prims.verify(pg)


def test_table_is_a_fresh_copy_and_overrides_win():
    t = ember_prims.table()
    assert t is not ember_prims.table() and aten.gelu.default in t
    t[aten.sin.default] = lambda x: torch.ops.ember_prims.cos(x)  # a researcher's override
    t[aten.mm.default] = lambda a, b: torch.ops.ember_prims.sum(  # a table entry wins over extern
        torch.ops.ember_prims.mul(torch.ops.ember_prims.broadcast_in_dim(a, [2, 3, 2], [0, 1]),
                                  torch.ops.ember_prims.broadcast_in_dim(b, [2, 3, 2], [1, 2])), [1])
    gm = _aten_graph(lambda x, m: (torch.sin(x), x @ m), torch.randn(2, 3), torch.randn(3, 2))
    pg = ember_prims.decompose(gm, t)
    x, m = torch.randn(2, 3), torch.randn(3, 2)
    s, p = pg(x, m)
    torch.testing.assert_close(s, torch.cos(x))
    torch.testing.assert_close(p, x @ m)
    assert aten.mm.default not in {n.target for n in pg.graph.nodes}


def test_meta_val_on_every_node_matches_real_output():
    gm = _aten_graph(lambda x: (x.exp() * 2).sum(0), torch.randn(3, 4))
    pg = ember_prims.decompose(gm)
    vals = {}
    interp = torch.fx.Interpreter(pg)
    orig_run = interp.run_node

    def run_node(n):
        out = orig_run(n)
        vals[n] = out
        return out
    interp.run_node = run_node
    interp.run(torch.randn(3, 4))
    for n, out in vals.items():
        if isinstance(out, torch.Tensor):
            v = n.meta["val"]
            assert (v.shape, v.dtype, v.stride()) == (out.shape, out.dtype, out.stride()), n.format_node()


def test_seed_model_ops_all_decompose_or_are_externs():
    seed = json.loads((HERE.parent / "src" / "ember_prims" / "seed_model_aten_ops.json").read_text())
    table = {str(k) for k in ember_prims.table()}
    externs = {str(k) for k in ember_prims.EXTERN_OPS}
    missing = [op for op in seed["all"] if op not in table and op not in externs]
    assert not missing


def test_zero_dim_cpu_operand_with_tensors_of_another_device():
    """Note [0-d CPU operands]: ATen reads a 0-d CPU tensor next to tensors of another device as
    a scalar (Adam's step count and lr on CUDA parameters). The decomposition moves it to that
    device with device_put after converting it to the computation's dtype; what is computed from
    it alone stays on the CPU. The meta device stands in for CUDA here (no GPU in CI)."""
    def fn(x, step):
        step = step + 1  # the new step count: a CPU tensor, as in eager
        correction = 1 - 0.9 ** step
        return x * correction, torch.lerp(x, x * 2, step / 10), step
    x, step = torch.randn(4, 3, device="meta"), torch.tensor(2.0)
    gm = _aten_graph(fn, x, step)
    pg = ember_prims.decompose(gm)
    ember_prims.verify(pg)
    puts = [n for n in pg.graph.nodes if n.target is torch.ops.ember_prims.device_put.default]
    assert puts and all(n.args[0].meta["val"].device.type == "cpu" and n.args[0].meta["val"].dim() == 0
                        for n in puts)
    out = [n.meta["val"] for n in pg.graph.find_nodes(op="output")[0].args[0]]
    assert [o.device.type for o in out] == ["meta", "meta", "cpu"]
    meta, cpu = torch.device("meta"), torch.device("cpu")
    for n in pg.graph.nodes:  # run it on the CPU: the same graph with every device the CPU
        n.args, n.kwargs = torch.fx.node.map_aggregate((n.args, n.kwargs), lambda a: cpu if a == meta else a)
    pg.recompile()
    real = torch.randn(4, 3)
    got = pg(real, torch.tensor(2.0))
    want = fn(real, torch.tensor(2.0))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)


def test_a_decomposition_that_calls_its_own_op_emits_that_call():
    # Note [applying the table]: "lower small matmuls, leave big ones to BLAS": the entry calls
    # its own op for the big case, which is then emitted as the extern it is (no recursion).
    table = ember_prims.table()
    table[aten.mm.default] = lambda a, b: (aten.mm.default(a, b) if a.shape[0] > 4
                                           else (a.unsqueeze(2) * b.unsqueeze(0)).sum(1))
    small, big = torch.randn(2, 3), torch.randn(8, 3)
    m = torch.randn(3, 5)
    gm = _aten_graph(lambda s, b, m: (s @ m, b @ m), small, big, m)
    pg = ember_prims.decompose(gm, table)
    ember_prims.verify(pg)
    assert [n.target for n in pg.graph.nodes].count(aten.mm.default) == 1
    got = pg(small, big, m)
    torch.testing.assert_close(got[0], small @ m)
    torch.testing.assert_close(got[1], big @ m)


def test_a_decomposition_may_call_a_composite_op_outside_the_table():
    # aten.matmul has no entry but a CompositeImplicitAutograd kernel: it is broken into the ops
    # eager would run (mm, views), which the table then covers.
    table = ember_prims.table()
    table[aten.dot.default] = lambda a, b: aten.matmul.default(a.unsqueeze(0), b.unsqueeze(1)).reshape(())
    a, b = torch.randn(6), torch.randn(6)
    pg = ember_prims.decompose(_aten_graph(lambda a, b: (torch.dot(a, b),), a, b), table)
    ember_prims.verify(pg)
    assert aten.matmul.default not in {n.target for n in pg.graph.nodes}
    torch.testing.assert_close(pg(a, b)[0], torch.dot(a, b))


def test_an_op_the_dispatcher_does_not_know_has_no_decomposition():
    # TorchScript's aten::size(Tensor) -> int[] reaches a dispatch mode from a backward (fuzz
    # seed 50242 with --train); the decomposer must answer None, not raise
    for op in (torch.ops.aten.size.default, torch.ops.aten.stride.default):
        assert ember_prims.Decomposer()(op) is None


def test_cpu_float32_batch_norm_sums_in_double():
    # Note [batch-norm sums in double on the CPU]: as ATen's CPU kernels (acc_type), so that a
    # model whose batch norms see few values per channel (shufflenet_v2 and mobilenet_v3 at small
    # images) is as close to a float64 run as eager; float32 sums were 100x further (gpu-broad
    # suite, tests-integration/zoo_broad.py). Forward statistics and the backward's sums.
    def run(x, g, b, w):
        x = x.detach().requires_grad_()
        y = F.batch_norm(x, None, None, g, b, training=True)
        return (y, *torch.autograd.grad((y * w).sum(), (x,)))

    x, g, b, w = torch.randn(2, 3, 2, 2), torch.randn(3), torch.randn(3), torch.randn(2, 3, 2, 2)
    pg = _check(run, x, g, b, w, atol=1e-4, rtol=1e-4)
    reductions = [n for n in pg.graph.nodes if n.op == "call_function" and "sum" in str(n.target)]
    assert reductions and all(n.meta["val"].dtype == torch.float64 for n in reductions), \
        [(n.target, n.meta["val"].dtype) for n in reductions]


ACTIVATION_EDGES = [-float("inf"), -20.5, -20.0, -6.0, -3.5, -3.0, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5,
                    3.0, 3.5, 6.0, 20.0, 20.5, float("inf")]
_aten = torch.ops.aten
# (op, args of (g, x)); not at NaN, where eager differs from itself: hardtanh's, elu's and
# hardswish's backward give 0 or NaN in their CPU kernels' vector lanes, the gradient in the tail
ACTIVATION_BACKWARDS = {
    "threshold": (_aten.threshold_backward.default, lambda g, x: (g, x, 0.0)),
    "leaky_relu": (_aten.leaky_relu_backward.default, lambda g, x: (g, x, 0.01, False)),
    "softplus": (_aten.softplus_backward.default, lambda g, x: (g, x, 1.0, 20.0)),
    "hardsigmoid": (_aten.hardsigmoid_backward.default, lambda g, x: (g, x)),
    "hardswish": (_aten.hardswish_backward.default, lambda g, x: (g, x)),
    "silu": (_aten.silu_backward.default, lambda g, x: (g, x)),
    "mish": (_aten.mish_backward.default, lambda g, x: (g, x)),
}


@pytest.mark.parametrize("name", ACTIVATION_BACKWARDS)
def test_activation_backward_at_its_edges_is_atens(name):
    # fuzz seed 91008 with --train: hardswish's backward at exactly -3 and 3 (rounded values) was
    # -g/2 and 3g/2, ATen's is 0 and g
    op, make = ACTIVATION_BACKWARDS[name]
    x = torch.tensor(ACTIVATION_EDGES * 3)  # past the CPU kernel's vector lanes
    args = make(torch.linspace(0.5, 2.0, x.numel()), x)
    torch.testing.assert_close(ember_prims.table()[op](*args), op(*args), equal_nan=True)


@pytest.mark.parametrize("layout", ["channels_last", "transpose", "contiguous"])
def test_as_strided_of_a_dense_permuted_tensor_reads_its_storage(layout):
    # fuzz seed 71583: as_strided of a channels_last input was refused ("its storage is not a
    # value"): its storage is its elements in memory order
    x = torch.randn(6, 3, 4, 3)
    x = {"channels_last": x.contiguous(memory_format=torch.channels_last), "transpose": x.transpose(1, 3),
         "contiguous": x}[layout]
    decomposition = ember_prims.table()[torch.ops.aten.as_strided.default]
    for size, stride, offset in [((2, 2), (1, 2), 0), ((3, 5), (7, 1), 4), ((4,), (3,), None)]:
        torch.testing.assert_close(decomposition(x, size, stride, offset), x.as_strided(size, stride, offset))


def test_as_strided_of_an_overlapping_tensor_is_still_refused():
    x = torch.randn(3, 1).expand(3, 4)
    with pytest.raises(NotImplementedError, match="storage is not a value"):
        ember_prims.table()[torch.ops.aten.as_strided.default](x, (2, 2), (1, 2), 0)

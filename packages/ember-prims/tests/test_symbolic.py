"""Decompositions with symbolic sizes (issue #18, Note [symbolic decomposition]): an ATen graph
recorded once on fakes whose sizes are symbols is decomposed once, and the prims graph runs on
real inputs of sizes the trace never saw, equal to eager (forward and, with `grad`, backward
ops); shape arithmetic records no guard; SymInt arguments are size nodes of the graph."""
import operator

import pytest
import torch
import torch.nn.functional as F

import ember_prims
from prims_symbolic_graphs import aten_graph, eager_outputs

aten = torch.ops.aten
TOL = dict(rtol=1e-4, atol=1e-5)


def _w(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape) + sum(shape)))


W, B, G = _w(16, 8), _w(16), _w(8)
WQ = _w(16, 16)
CONV_W = _w(4, 3, 3, 3)
EMB = _w(20, 8)


def _attention(x, w):
    b, t, d = x.shape
    q = F.linear(x, w).view(b, t, 2, 8).transpose(1, 2)
    att = (q @ q.transpose(-2, -1) * 0.25).masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), -1e9)
    return (att.softmax(-1) @ q).transpose(1, 2).reshape(b, t, -1)


# name: (fn, example inputs, {input: symbolic dims}, new sizes for input 0 (others fixed), expected guards)
CASES = {
    "softmax_log_softmax": (lambda x: (x.softmax(-1), x.log_softmax(1)), [_w(6, 5)], {0: (0, 1)},
                            [(3, 9), (2, 2), (11, 4)], []),
    "layer_norm": (lambda x, g, b: F.layer_norm(x, (8,), g, b[:8]), [_w(6, 5, 8), G, B], {0: (0, 1)},
                   [(3, 9, 8), (2, 2, 8), (7, 4, 8)], []),
    "linear_matmul_addmm": (lambda x, w, b: (F.linear(x, w, b), x @ w.t(), torch.addmm(b, x.flatten(0, 1), w.t())),
                            [_w(4, 5, 8), W, B], {0: (0, 1)}, [(3, 9, 8), (2, 2, 8)], []),
    "view_reshape_expand": (lambda x: (x.view(-1), x.reshape(x.shape[1], -1).t(), x[:, None].expand(-1, 3, -1),
                                       x.flatten().unflatten(0, (x.shape[0], x.shape[1])) * 2),
                            [_w(6, 4)], {0: (0, 1)}, [(3, 7), (2, 2), (9, 5)], []),
    "cat_stack_slicing": (lambda x: (torch.cat([x, x * 2], 1)[:, 1:], torch.stack([x, x])[..., ::2], x[1:-1],
                                     x.narrow(1, 1, x.shape[1] - 1), x.flip(0)),
                          [_w(6, 4)], {0: (0, 1)}, [(3, 7), (2, 2), (9, 5)], []),
    "mean_var_over_dims": (lambda x: (x.mean((0, 2)), x.var(1), x.sum(0, keepdim=True), x.amax(-1), x.std(0)),
                           [_w(6, 5, 3)], {0: (0, 1)}, [(3, 9, 3), (2, 2, 3), (7, 4, 3)], []),
    "embedding": (lambda i, w: F.embedding(i, w).sum(-1), [torch.arange(12).view(3, 4) % 20, EMB],
                  {0: (0, 1)}, [(2, 5), (4, 2), (6, 7)], []),
    "cross_entropy": (lambda x, t: (F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="none")),
                      [_w(6, 5), torch.arange(6) % 5], {0: (0,), 1: (0,)}, [(3, 5), (9, 5), (2, 5)], []),
    "conv2d": (lambda x, w: F.conv2d(x, w, padding=1), [_w(2, 3, 6, 5), CONV_W], {0: (0, 2, 3)},
               [(3, 3, 7, 4), (2, 3, 2, 9)], []),
    "batch_norm_eval": (lambda x, m, v, g, b: F.batch_norm(x, m, v, g, b, training=False),
                        [_w(4, 3, 5), _w(3), _w(3).abs(), _w(3) + 1, _w(3)], {0: (0, 2)}, [(3, 3, 7), (2, 3, 2)], []),
    "pooling": (lambda x: (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 1, 1), F.adaptive_avg_pool2d(x, 1)),
                [_w(2, 3, 6, 8)], {0: (0, 2, 3)}, [(3, 3, 4, 10), (2, 3, 9, 5)], []),
    "attention": (_attention, [_w(2, 5, 16).double(), WQ.double()], {0: (0, 1)}, [(3, 7, 16), (1, 2, 16), (2, 9, 16)], []),
}


def _inputs(case, shape):
    fn, inputs, dynamic, _, _ = CASES[case]
    x = inputs[0]
    new = torch.randint(0, 20, shape) if not x.is_floating_point() else _w(*shape).to(x.dtype)
    rest = list(inputs[1:])
    if case == "cross_entropy":
        rest = [torch.arange(shape[0]) % shape[1]]
    return [new, *rest]


@pytest.mark.parametrize("grad", [False, True], ids=["forward", "backward"])
@pytest.mark.parametrize("case", list(CASES))
def test_one_decomposition_runs_every_size(case, grad):
    fn, inputs, dynamic, shapes, guards = CASES[case]
    constants = (1, 2) if case == "batch_norm_eval" else ()  # running statistics
    gm, env = aten_graph(fn, inputs, dynamic, grad=grad, constants=constants)
    traced_guards = list(env.guards)
    pg = ember_prims.decompose(gm)
    ember_prims.verify(pg)
    assert [str(g) for g in env.guards if g not in traced_guards] == guards  # decompositions decide nothing
    for shape in shapes:
        real = _inputs(case, shape)
        for got, want in zip(pg(*real), eager_outputs(fn, real, grad=grad, constants=constants), strict=True):
            torch.testing.assert_close(got, want, **TOL)


def test_sizes_become_graph_nodes_with_symbolic_values():
    gm, env = aten_graph(lambda x: x.flatten().mean(0), [_w(6, 4)], {0: (0, 1)})
    pg = ember_prims.decompose(gm)
    sizes = [n for n in pg.graph.nodes if n.target in (aten.sym_size.int, operator.mul, operator.floordiv)]
    assert sizes and all(isinstance(n.meta["val"], torch.SymInt) for n in sizes)
    # the mean divides by a size: full(shape, s0*s1) takes a size node as its value
    fulls = [n for n in pg.graph.nodes if n.target is torch.ops.ember_prims.full.default]
    assert any(isinstance(a, torch.fx.Node) for n in fulls for a in n.args[1:2])
    for n in pg.graph.nodes:
        if n.op == "call_function" and isinstance(n.meta["val"], torch.Tensor):
            assert all(isinstance(s, (int, torch.SymInt)) for s in n.meta["val"].shape)
    torch.testing.assert_close(pg(torch.arange(30.0).view(5, 6))[0], torch.arange(30.0).mean(0))
    assert env.guards == []


def test_a_size_decision_is_a_guard_not_an_assumption():
    # squeeze(1) removes dim 1 only when it is 1: a symbolic dim (>= 2) never is, decided without
    # a guard; x[:, :3] needs s1 >= 3, which becomes a guard
    gm, env = aten_graph(lambda x: (x.squeeze(1), x[:, :3]), [_w(6, 4)], {0: (0, 1)})
    ember_prims.decompose(gm)
    assert [str(g) for g in env.guards] == ["s1 >= 3"]


def test_dropout_draws_a_mask_of_the_symbolic_shape():
    gm, env = aten_graph(lambda x: aten.native_dropout(x, 0.5, True)[0], [_w(6, 4)], {0: (0, 1)})
    pg = ember_prims.decompose(gm)
    ember_prims.verify(pg)
    uniforms = [n for n in pg.graph.nodes if n.target is torch.ops.ember_prims.uniform.default]
    assert uniforms and isinstance(uniforms[0].args[0][0], torch.fx.Node)  # shape [s0, s1] from sizes
    for shape in ((3, 7), (2, 2), (9, 5)):
        x = _w(*shape) + 3  # no zeros: a dropped element is exactly 0
        out = pg(x)[0]
        assert out.shape == x.shape
        kept = out != 0
        torch.testing.assert_close(out[kept], 2 * x[kept])
        assert 0 < kept.sum() < x.numel() or x.numel() < 8
    assert env.guards == []

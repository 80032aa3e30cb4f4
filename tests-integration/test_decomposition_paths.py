"""The decomposition table's two entry points give the same prims graph (issue 14 item 5).

`ember_prims.decompose(aten_gm)` (what the inductor's OpInfo and hand-built-graph tests feed it)
and ember-autograd's tracer with the facade's `ember_prims.Decomposer()` (what `ember.compile`
runs) both apply the table through `Decomposer`, Note [applying the table]: the same ATen graph
into either gives the same graph out, node for node.
"""
import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx  # tests may trace with torch's tools
from torch.utils import _pytree as pytree

import ember
import ember_prims
from ember_autograd import trace_inference

aten = torch.ops.aten


def _canonical(gm: torch.fx.GraphModule) -> list:
    """The graph's computation, without node names: each call as (target, args), a node argument
    written as the position of the node that made it among placeholders and calls."""
    index, lines = {}, []
    for node in gm.graph.nodes:
        if node.op == "output":
            outs = pytree.tree_leaves(node.args[0])
            lines.append(("output", [index[o] if isinstance(o, torch.fx.Node) else o for o in outs]))
            continue
        index[node] = len(index)
        if node.op == "call_function":
            args = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: f"%{index[n]}")
            lines.append((str(node.target), str(args)))
        else:
            lines.append((node.op, None))
    return lines


def _both_ways(fn, *inputs, table=None):
    aten_gm = make_fx(fn, tracing_mode="fake")(*inputs)
    for node, x in zip([n for n in aten_gm.graph.nodes if n.op == "placeholder"], inputs):
        node.meta["val"] = x
    by_decompose = ember_prims.decompose(aten_gm, table)
    by_tracer = trace_inference(aten_gm, list(inputs), decompositions=ember_prims.Decomposer(table)).gm
    return by_decompose, by_tracer


def _mlp(x, w1, b1, w2):
    return (F.gelu(F.linear(x, w1, b1)) @ w2).softmax(-1), F.layer_norm(x, (8,))


def _conv(x, w, g, b):
    y = F.batch_norm(F.conv2d(x, w, padding=1), None, None, g, b, training=True)
    return (F.max_pool2d(F.relu(y), 2).flatten(1).sum(1),)


def _views(x):
    return x.t().reshape(-1)[2:9].view(7, 1).expand(7, 3).cumsum(0), torch.cat([x, x.flip(0)]).amax(0)


def _own_op(a, b):  # with a table whose mm entry calls mm for the big case
    return a @ b, a[:2] @ b


def _small_mm_table():
    table = ember_prims.table()
    table[aten.mm.default] = lambda a, b: (aten.mm.default(a, b) if a.shape[0] > 4
                                           else (a.unsqueeze(2) * b.unsqueeze(0)).sum(1))
    return table


CASES = {
    "mlp": (_mlp, lambda: (torch.randn(4, 8), torch.randn(16, 8), torch.randn(16), torch.randn(16, 5)), None),
    "conv_batchnorm_pool": (_conv, lambda: (torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3),
                                            torch.randn(4), torch.randn(4)), None),
    "views_scan_cat": (_views, lambda: (torch.randn(4, 6),), None),
    "entry_calls_its_own_op": (_own_op, lambda: (torch.randn(8, 3), torch.randn(3, 5)), _small_mm_table),
}


@pytest.mark.parametrize("case", CASES)
def test_decompose_and_the_tracer_give_the_same_graph(case):
    fn, inputs, table = CASES[case]
    by_decompose, by_tracer = _both_ways(fn, *inputs(), table=table() if table else None)
    ember_prims.verify(by_tracer)
    assert _canonical(by_tracer) == _canonical(by_decompose)


def test_ember_compile_hands_the_inductor_decomposes_graph():
    # what ember.compile's inductor is handed (its compile record's forward graph) is the graph
    # decompose makes of the same function's ATen graph; the compiled function equals eager on
    # fresh inputs (a second call, through the guards), as does the eager backend's
    def f(x, w, m):
        return torch.dot(x[0], w[0]) * F.gelu(m @ w.t()).softmax(-1)

    compiled = ember.compile(f)
    for _ in range(2):
        x, w, m = torch.randn(3, 6), torch.randn(4, 6), torch.randn(5, 6)
        torch.testing.assert_close(compiled(x, w, m), f(x, w, m))
    torch.testing.assert_close(ember.compile(f, backend="eager")(x, w, m), f(x, w, m))
    forward = [s.artifact for s in ember.compile_record(compiled).steps
               if s.layer == "autograd" and s.stage == "forward_compile"]
    aten_gm = make_fx(lambda *a: (f(*a),), tracing_mode="fake")(x, w, m)
    for node, t in zip([n for n in aten_gm.graph.nodes if n.op == "placeholder"], (x, w, m)):
        node.meta["val"] = t
    assert len(forward) == 1 and _canonical(forward[0]) == _canonical(ember_prims.decompose(aten_gm))

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


def _opinfo_cases():
    pytest.importorskip("expecttest", reason="torch's OpInfo database needs expecttest")
    from torch.testing._internal.common_methods_invocations import op_db
    names = set(OPINFO_OPS)
    seen = {}
    for op in op_db:
        if op.name in names and op.variant_test_name == "" and op.name not in seen:
            seen[op.name] = op
    return [seen[n] for n in OPINFO_OPS if n in seen]


# the ops of ember-inductor's OpInfo test (test_opinfo_codegen.py), which feeds decompose's graphs
OPINFO_OPS = """abs neg exp log1p sqrt sin tanh erf floor sign reciprocal isnan add sub mul div
floor_divide remainder pow maximum atan2 eq lt logical_and bitwise_xor where clamp sum prod amax
mean var std argmax any softmax log_softmax nn.functional.layer_norm nn.functional.gelu sigmoid
nn.functional.silu lerp addcmul xlogy cat stack flip roll transpose permute reshape expand squeeze
narrow gather index_select nn.functional.pad masked_fill tril cumsum""".split()


@pytest.mark.slow
def test_opinfo_samples_give_the_same_graph_both_ways():
    """The inductor's OpInfo test checks kernels on decompose's graphs: they are the graphs
    ember.compile's tracer makes of the same ATen graphs, op by op."""
    checked, differ = 0, []
    for op in _opinfo_cases():
        sample = next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=False)))
        flat, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
        is_t = [isinstance(x, torch.Tensor) for x in flat]
        tensors = [x for x in flat if isinstance(x, torch.Tensor)]

        def fn(*ts, op=op, flat=flat, spec=spec, is_t=is_t):
            it = iter(ts)
            inp, args, kwargs = pytree.tree_unflatten([next(it) if t else x for x, t in zip(flat, is_t)], spec)
            # fresh outputs: an output that is a view of an input is regenerated by ember-autograd's
            # runtime rather than computed in the graph (a rule of functionalization, not of the table)
            return tuple(o.clone() for o in pytree.tree_leaves(op.op(inp, *args, **kwargs))
                         if isinstance(o, torch.Tensor))

        try:
            by_decompose, by_tracer = _both_ways(fn, *tensors)
        except ember_prims.UndecomposedOpError:
            continue  # not covered by the table: neither path makes a prims graph
        checked += 1
        if _canonical(by_tracer) != _canonical(by_decompose):
            differ.append(op.name)
    assert checked >= 40 and not differ, (checked, differ)

"""Inference tracing and functionalization: graphs are functional, state after a call equals eager."""
import math

import pytest
import torch
import torch.fx

from ember_autograd import AotTraceError, VerificationError, aot, trace_inference, verify_functional

aten = torch.ops.aten


def eager_compiler(gm, example_inputs):
    verify_functional(gm)
    return gm


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def run_both(fn, *inputs):
    """Runs `fn` eagerly on clones and through aot; returns (eager_out, aot_out, eager_in, aot_in)."""
    gm = torch.fx.symbolic_trace(fn)
    eager_in = [x.clone() for x in inputs]
    aot_in = [x.clone() for x in inputs]
    compiled = aot(gm, aot_in, fw_compiler=eager_compiler)
    return fn(*eager_in), compiled(*aot_in), eager_in, aot_in, compiled


def assert_same(a, b):
    for x, y in zip(torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b)):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def test_pure_graph_golden():
    gm = torch.fx.symbolic_trace(lambda x, w: (torch.sin(x @ w),))
    traced = trace_inference(gm, [torch.randn(3, 4), torch.randn(4, 2)])
    assert targets(traced.gm) == [aten.mm.default, aten.sin.default]
    assert traced.signature.mutated_inputs == ()
    verify_functional(traced.gm)


def test_input_mutation_is_returned_and_replayed():
    def f(x, buf):
        buf.add_(1)
        buf.mul_(x.sum())
        return (x * 2,)

    eager_out, aot_out, eager_in, aot_in, compiled = run_both(f, torch.randn(3), torch.zeros(3))
    assert_same(eager_out, aot_out)
    assert_same(eager_in, aot_in)
    gm = compiled.artifacts.forward
    assert aten.add_.Tensor not in targets(gm) and aten.add.Tensor in targets(gm)
    assert compiled.artifacts.signature.mutated_inputs == (1,)


def test_mutation_through_views_scatters_back():
    def f(x, y):
        x[1].fill_(3.0)  # select on an input
        x[:, 1:3].mul_(2.0)  # slice
        x.t()[0].add_(y)  # transpose then select
        z = y.clone()
        v = z.view(2, 2)
        v[0, 0].fill_(7.0)  # mutation through a view of an intermediate
        z.index_put_((torch.tensor([3]),), torch.tensor(-1.0))
        return (z + 1, v)

    eager_out, aot_out, eager_in, aot_in, compiled = run_both(f, torch.randn(4, 4), torch.randn(4))
    assert_same(eager_out, aot_out)
    assert_same(eager_in, aot_in)
    ops = targets(compiled.artifacts.forward)
    assert aten.select_scatter.default in ops and aten.slice_scatter.default in ops


def test_stale_view_is_regenerated():
    def f(x):
        v = x[0]  # view taken before the mutation of the base
        x.add_(1)
        return (v * 1,)  # must see the new value

    eager_out, aot_out, eager_in, aot_in, _ = run_both(f, torch.randn(2, 3))
    assert_same(eager_out, aot_out)
    assert_same(eager_in, aot_in)


def test_outputs_aliasing_inputs_are_views_of_the_real_input():
    def f(x):
        return (x.view(-1), x, x[1:])

    x = torch.randn(3, 2)
    compiled = aot(torch.fx.symbolic_trace(f), [x], fw_compiler=eager_compiler)
    flat, same, tail = compiled(x)
    assert same is x
    assert flat.data_ptr() == x.data_ptr() and tail.data_ptr() == x[1:].data_ptr()
    x.add_(1)
    torch.testing.assert_close(flat, x.view(-1))
    assert compiled.artifacts.signature.num_graph_outputs == 0


def test_batchnorm_buffers_in_inference_and_train_mode():
    bn = torch.nn.BatchNorm1d(4)
    x = torch.randn(8, 4)

    def f(x, rm, rv, nbt, w, b):
        nbt.add_(1)
        return (torch.nn.functional.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5),)

    state = [bn.running_mean, bn.running_var, bn.num_batches_tracked, bn.weight.detach(), bn.bias.detach()]
    eager_out, aot_out, eager_in, aot_in, compiled = run_both(f, x, *state)
    torch.testing.assert_close(eager_out, aot_out)
    for a, b in zip(eager_in, aot_in):
        torch.testing.assert_close(a, b)
    assert compiled.artifacts.signature.mutated_inputs == (1, 2, 3)


def test_decompositions_apply_recursively():
    # sin -> cos(x - pi/2); sub -> add(x, -y): the sub emitted by the sin decomposition is
    # decomposed again, so neither sin nor sub reaches the graph.
    table = {
        aten.sin.default: lambda x: torch.cos(x - math.pi / 2),
        aten.sub.Tensor: lambda x, y, alpha=1: torch.add(x, y, alpha=-alpha),
    }
    gm = torch.fx.symbolic_trace(lambda x: (torch.sin(x),))
    traced = trace_inference(gm, [torch.randn(5)], decompositions=table)
    assert targets(traced.gm) == [aten.add.Tensor, aten.cos.default]
    x = torch.randn(5)
    torch.testing.assert_close(traced.gm(x)[0], torch.sin(x), rtol=1e-5, atol=1e-5)


def test_functionalization_output_goes_through_decompositions():
    # the slice_scatter that functionalization emits is itself decomposed by the table (whose
    # entry calls its own op: Note [applying the table] makes that call the base case)
    ember_prims = pytest.importorskip("ember_prims")
    seen = []

    def slice_scatter(base, src, dim=0, start=None, end=None, step=1):
        seen.append(dim)
        return aten.slice_scatter.default(base, src, dim, start, end, step)

    gm = torch.fx.symbolic_trace(lambda x: (x.clone()[1:].fill_(0.0),))
    trace_inference(gm, [torch.randn(4)], decompositions=ember_prims.Decomposer({aten.slice_scatter.default: slice_scatter}))
    assert seen == [0]


def with_stack_traces(fn):
    """symbolic_trace, then a fake user line on every node (what capture records)."""
    gm = torch.fx.symbolic_trace(fn)
    for n in gm.graph.nodes:
        n.meta["stack_trace"] = f'File "user.py", line 7, in f\n    {n.name} = {n.target}'
    return gm


def test_meta_val_and_stack_trace_on_every_node():
    def f(x):
        return (torch.relu(x) + 1,)

    gm = with_stack_traces(f)
    traced = trace_inference(gm, [torch.randn(3)])
    for n in traced.gm.graph.nodes:
        if n.op == "call_function":
            assert isinstance(n.meta["val"], torch.Tensor)
            assert 'File "user.py", line 7' in n.meta["stack_trace"]


def test_data_dependent_op_raises_with_user_line():
    def f(x):
        return (torch.nonzero(x),)

    gm = with_stack_traces(f)
    with pytest.raises(AotTraceError) as info:
        aot(gm, [torch.randn(4)], fw_compiler=eager_compiler)
    assert info.value.kind == "dynamic_output_shape"
    assert "nonzero" in str(info.value) and "nonzero = <built-in method nonzero" in str(info.value)


def test_verifier_rejects_mutation_and_missing_meta():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.add_.Tensor, (x, x))
    g.output((y,))
    with pytest.raises(VerificationError, match="mutates"):
        verify_functional(torch.fx.GraphModule({}, g))


def test_int_inputs_are_specialized_and_checked():
    gm = torch.fx.symbolic_trace(lambda x, n: (x * n,))
    compiled = aot(gm, [torch.ones(2), 3], fw_compiler=eager_compiler)
    torch.testing.assert_close(compiled(torch.ones(2), 3)[0], torch.full((2,), 3.0))
    with pytest.raises(ValueError, match="specialized"):
        compiled(torch.ones(2), 4)


def test_constants_become_get_attr():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("c", torch.arange(3.0))

        def forward(self, x):
            return (x + self.c,)

    gm = torch.fx.symbolic_trace(M())
    x = torch.randn(3)
    compiled = aot(gm, [x], fw_compiler=eager_compiler)
    torch.testing.assert_close(compiled(x)[0], x + torch.arange(3.0))


def test_inplace_view_ops_on_intermediates():
    def f(x):
        y = x * 2
        v = y[0]  # a view of y taken before y's metadata changes
        y.unsqueeze_(0)  # y: (1, 3, 4)
        y.add_(1)  # mutates through the new metadata; v must see it
        w = x[1].clone()
        w.t_()
        return (y, v * 1, w)

    eager_out, aot_out, eager_in, aot_in, compiled = run_both(f, torch.randn(3, 4))
    assert_same(eager_out, aot_out)



@pytest.mark.parametrize("op", ["cummin", "max", "sort"])
def test_inplace_view_of_an_element_of_a_multi_output_op_keeps_the_ops_metadata(op):
    # fuzz seed 93019 (--triton): `torch.cummin(x, 0).values.unsqueeze_(0)` changed the fake that
    # cummin's tuple `meta["val"]` holds; the inductor then expected (1, 2, 4) from cummin
    def f(x):
        v = getattr(torch, op)(x, 0).values
        v.unsqueeze_(0)
        return (v,)

    x = torch.randn(2, 4)
    gm = trace_inference(torch.fx.symbolic_trace(f), [x]).gm

    class Check(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            want = n.meta.get("val")
            for got, val in zip(out, want) if isinstance(want, (tuple, list)) else [(out, want)]:
                if isinstance(val, torch.Tensor):
                    assert got.shape == val.shape, (n.format_node(), got.shape, val.shape)
            return out

    torch.testing.assert_close(Check(gm).run(x)[0], f(x)[0])

def test_inplace_view_of_an_input_is_refused():
    gm = torch.fx.symbolic_trace(lambda x: (x.unsqueeze_(0),))
    with pytest.raises(AotTraceError, match="graph input"):
        aot(gm, [torch.randn(3)], fw_compiler=eager_compiler)


@pytest.mark.parametrize("case", ["split", "unbind", "permute", "diagonal", "unsqueeze", "chain", "out", "as_strided"])
def test_view_inverse_table(case):
    def f(x, y):
        if case == "split":
            x.split([1, 3], dim=1)[1].mul_(2)
        elif case == "unbind":
            x.unbind(0)[2].add_(1)
        elif case == "permute":
            x.view(2, 2, 4).permute(2, 0, 1)[1].sub_(y[:4].view(2, 2))
        elif case == "diagonal":
            x.diagonal().fill_(5.0)
        elif case == "unsqueeze":
            x.unsqueeze(0).squeeze(0)[0].zero_()
        elif case == "chain":
            x[1:].t()[2][1:].mul_(-1)
        elif case == "out":
            torch.add(y[:4], 1, out=x[0])
        elif case == "as_strided":
            x.as_strided((2, 2), (4, 1), 5).mul_(10)
        return (x * 1, y * 1)

    eager_out, aot_out, eager_in, aot_in, _ = run_both(f, torch.randn(4, 4), torch.randn(4))
    assert_same(eager_out, aot_out)
    assert_same(eager_in, aot_in)


def test_mutating_ops_are_functionalized_before_decomposition():
    # Note [functionalize before decompose]: a table entry for the in-place op is not used;
    # the functional counterpart is decomposed instead.
    seen = []
    table = {
        aten.add_.Tensor: lambda *a, **k: seen.append("add_"),
        aten.add.Tensor: lambda x, y, alpha=1: seen.append("add") or aten.sub.Tensor(x, y, alpha=-alpha),
    }

    def f(x, buf):
        buf.add_(x)
        return (x * 1,)

    gm = torch.fx.symbolic_trace(f)
    traced = trace_inference(gm, [torch.randn(3), torch.zeros(3)], decompositions=table)
    assert seen == ["add"] and aten.sub.Tensor in targets(traced.gm)
    buf = torch.zeros(3)
    x = torch.randn(3)
    compiled = aot(gm, [x, buf], fw_compiler=eager_compiler, decompositions=table)
    compiled(x, buf)
    torch.testing.assert_close(buf, x)


def test_batchnorm_running_stats_with_ember_prims_table():
    ember_prims = pytest.importorskip("ember_prims")
    bn, ref = torch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)

    def f(x, w, b, rm, rv, nbt):
        nbt.add_(1)
        return (torch.nn.functional.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5),)

    x = torch.randn(4, 3, 5, 5)
    args = [x, bn.weight.detach(), bn.bias.detach(), bn.running_mean, bn.running_var, bn.num_batches_tracked]
    fn = aot(torch.fx.symbolic_trace(f), args, fw_compiler=eager_compiler,
             decompositions=ember_prims.Decomposer())
    for _ in range(2):
        out = fn(*args)[0]
        expected = f(x, ref.weight.detach(), ref.bias.detach(), ref.running_mean, ref.running_var,
                     ref.num_batches_tracked)[0]
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for a, b in zip(bn.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    ember_prims.verify(fn.inference.forward)


def test_no_grad_update_of_parameters_is_an_inference_graph():
    """An optimizer step: parameters that require grad updated in place under no_grad, no
    output that requires grad. It compiles as an inference graph (Note [inference-only
    graphs]) and the update is replayed into the parameters, as eager's step does."""
    def step(p, g, buf):
        buf.mul_(0.9).add_(g)
        p.add_(buf * -0.1)
        return ()

    gm = torch.fx.symbolic_trace(step)  # with the grad-mode switches capture records around it
    first, out = next(n for n in gm.graph.nodes if n.op != "placeholder"), gm.graph.output_node()
    with gm.graph.inserting_before(first):
        gm.graph.call_function(torch._C._set_grad_enabled, (False,))
    with gm.graph.inserting_before(out):
        gm.graph.call_function(torch._C._set_grad_enabled, (True,))
    gm.recompile()

    def step(p, g, buf):
        with torch.no_grad():
            buf.mul_(0.9).add_(g)
            p.add_(buf * -0.1)
    for _ in range(2):
        p, g, buf = torch.randn(5, requires_grad=True), torch.randn(5), torch.randn(5)
        ours = [p.detach().clone().requires_grad_(), g.clone(), buf.clone()]
        step(p, g, buf)
        compiled = aot(gm, ours, fw_compiler=eager_compiler)
        assert compiled(*ours) == ()
        torch.testing.assert_close(ours[0], p)
        torch.testing.assert_close(ours[2], buf)
        assert ours[0].requires_grad and ours[0].grad_fn is None
        assert compiled.training is None and compiled.inference is not None


# Decompositions that compute a view op's value as a fresh tensor (as ember_prims' do).
FRESH_VIEWS = {
    aten.select.int: lambda a, dim, index: aten.clone.default(aten.select.int(a, dim, index)),
    aten.slice.Tensor: lambda a, dim=0, start=None, end=None, step=1:
        aten.clone.default(aten.slice.Tensor(a, dim, start, end, step)),
    aten.t.default: lambda a: aten.clone.default(aten.t.default(a)),
    aten.view.default: lambda a, shape: aten.clone.default(aten.view.default(a, shape)),
    aten.detach.default: lambda a: aten.clone.default(a),
}


@pytest.mark.parametrize("case", ["input", "intermediate", "detach"])
def test_view_ops_are_functionalized_before_decomposition(case):
    # Note [functionalize before decompose]: a view op whose decomposition computes a fresh
    # tensor is still tracked as a view, so writes through it reach the base (issue 13).
    def f(x):
        if case == "input":
            x[1].fill_(0.0)
            x[:, 2].sub_(3)
            return (x + 0,)
        if case == "detach":
            y = x * 1
            y.detach().add_(1)
            return (y,)
        b = x.clone()
        v = b.view(-1)
        v.add_(1)
        b.t()[1].fill_(3.0)
        return (b, v.sum())

    # each entry calls its own op: Note [applying the table] makes that call the base case
    decomposer = pytest.importorskip("ember_prims").Decomposer(FRESH_VIEWS)
    gm = torch.fx.symbolic_trace(f)
    for _ in range(2):
        x = torch.randn(4, 4)
        eager_in, aot_in = x.clone(), x.clone()
        compiled = aot(gm, [aot_in], fw_compiler=eager_compiler, decompositions=decomposer)
        assert_same(f(eager_in), compiled(aot_in))
        assert_same(eager_in, aot_in)


def test_view_replay_passes_keyword_only_arguments():
    # expand(..., *, implicit) regenerated after its base changed
    def f(x):
        y = x.clone()
        e = y[0:1].expand(3, 4)
        y[0].add_(1)
        return (e * 1,)

    eager_out, aot_out, *_ = run_both(f, torch.randn(3, 4))
    assert_same(eager_out, aot_out)


def test_dtype_changing_view_of_an_input_keeps_its_dtype():
    def f(x):
        c = torch.view_as_complex(x)
        return (c, torch.view_as_real(c)[1:])

    x = torch.randn(4, 2)
    compiled = aot(torch.fx.symbolic_trace(f), [x], fw_compiler=eager_compiler)
    c, r = compiled(x)
    assert c.dtype == torch.complex64 and c.data_ptr() == x.data_ptr()
    assert_same((c, r), f(x))


def test_writes_through_real_and_imag():
    def f(x):
        c = torch.view_as_complex(x.clone())
        c.real.mul_(2.0)
        c.imag.add_(1.0)
        return (c,)

    eager_out, aot_out, *_ = run_both(f, torch.randn(3, 2))
    assert_same(eager_out, aot_out)


def fresh_outputs_compiler(gm, example_inputs):
    """Returns every output in a buffer of its own (as a kernel compiler does)."""
    def run(*args):
        return tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in gm(*args))
    return run


@pytest.mark.parametrize("grad", [False, True])
def test_outputs_viewing_one_intermediate_share_its_memory(grad):
    def f(x):
        y = x * 2
        return (y, y[1], y.t(), y[0:2].view(-1))

    gm = torch.fx.symbolic_trace(f)
    x = torch.randn(3, 4, requires_grad=grad)
    compiled = aot(gm, [x], fw_compiler=fresh_outputs_compiler)
    out = compiled(x)
    assert_same(out, f(x))
    assert len({o.untyped_storage().data_ptr() for o in out}) == 1
    if grad:
        sum(o.sum() for o in out).backward()
        ref = x.detach().clone().requires_grad_()
        sum(o.sum() for o in f(ref)).backward()
        torch.testing.assert_close(x.grad, ref.grad)
    else:
        out[1].mul_(0)
        torch.testing.assert_close(out[0][1], torch.zeros(4))  # the write is seen through y


def test_inplace_as_strided_of_an_intermediate():
    # ATen's adaptive_avg_pool2d to 1x1 of a channels-last input restrides its mean in place
    # (as_strided_ with no storage offset): the view step hangs off the base (Note [as_strided
    # views]); it crashed the trace (a None offset added to an int).
    def f(x):
        y = x * 2
        y.as_strided_((2, 3, 1), (3, 1, 3))
        z = (x + 1)[1:]
        z.as_strided_((3,), (1,))  # a view with an offset into its base: the offset is kept
        return (y + 1, z * 3, torch.nn.functional.adaptive_avg_pool1d(x.t().unsqueeze(0), 1))

    gm = torch.fx.symbolic_trace(f)
    compiled = aot(gm, [torch.randn(2, 3)], fw_compiler=eager_compiler)
    for _ in range(2):
        x = torch.randn(2, 3)
        assert_same(compiled(x), f(x))

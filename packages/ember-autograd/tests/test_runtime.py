"""Runtime behaviour: inference vs training paths, lazy backward compile, aliases, errors."""
import weakref

import pytest
import torch
import torch.fx
import torch.nn.functional as F

from ember_autograd import AotConfig, AotTraceError, aot, verify_functional
from ember_autograd.runtime import history_checked


def eager_compiler(gm, example_inputs):
    verify_functional(gm)
    return gm


def test_no_grad_gives_a_single_inference_graph_then_training_on_demand():
    gm = torch.fx.symbolic_trace(lambda x, w: (torch.tanh(x @ w),))
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    with torch.no_grad():
        fn = aot(gm, [x, w], fw_compiler=eager_compiler)
        out = fn(x, w)[0]
    assert fn.inference is not None and fn.training is None and not out.requires_grad
    out = fn(x, w)[0]  # grad enabled now: the training path is compiled
    assert fn.training is not None and out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(w.grad, x.t() @ (1 - torch.tanh(x @ w) ** 2).detach())


def test_compilers_get_fake_inputs_and_backward_compiles_lazily():
    seen = []

    def fw(gm, inputs):
        seen.append(("fw", type(inputs[0]).__name__))
        return gm

    def bw(gm, inputs):
        seen.append(("bw", type(inputs[0]).__name__))
        return gm

    gm = torch.fx.symbolic_trace(lambda x: (x.exp(),))
    x = torch.randn(3, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=fw, bw_compiler=bw)
    y = fn(x)[0]
    assert seen == [("fw", "FakeTensor")]
    y.sum().backward()
    y2 = fn(x)[0]
    y2.sum().backward()
    assert seen == [("fw", "FakeTensor"), ("bw", "FakeTensor")]
    assert "bw_compile" in fn.training.timings


def test_forward_may_lay_out_saved_tensors_and_backward_compiles_for_that_layout():
    """The forward graph's output node marks where the saved tensors start
    (meta["ember_saved_outputs"]); a forward compiler may return those in its own layout (the
    inductor returns convolution activations channels-last), and the backward compiler is
    given examples with the layouts it will be called with."""
    seen = {}

    def fw(gm, inputs):
        seen["saved_from"] = gm.graph.output_node().meta["ember_saved_outputs"]

        def run(*args):
            outs = list(gm(*args))
            return [o.contiguous(memory_format=torch.channels_last) if k >= seen["saved_from"] else o
                    for k, o in enumerate(outs)]
        return run

    def bw(gm, inputs):
        seen["bw_strides"] = [t.stride() for t in inputs if t.dim() == 4]
        return gm

    gm = torch.fx.symbolic_trace(lambda x: (torch.sin(x) * x,))
    x = torch.randn(2, 3, 4, 5, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=fw, bw_compiler=bw)
    fn(x)[0].sum().backward()
    assert seen["saved_from"] == 1
    channels_last = x.contiguous(memory_format=torch.channels_last).stride()
    assert channels_last in seen["bw_strides"], seen  # the saved input, as the forward returned it
    torch.testing.assert_close(x.grad, torch.cos(x) * x + torch.sin(x))


def test_boxed_calling_convention():
    def boxed(gm, inputs):
        def run(args):
            assert isinstance(args, list)
            return gm(*args)
        run._boxed_call = True
        return run

    gm = torch.fx.symbolic_trace(lambda x: (x * 3,))
    x = torch.randn(2, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=boxed)
    fn(x)[0].sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 3.0))


def test_training_with_inplace_on_intermediates_and_aliased_outputs():
    def f(x, w):
        y = x @ w
        y.mul_(3)
        y.relu_()
        return (y, x.view(-1), w.t())

    gm = torch.fx.symbolic_trace(f)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    fn = aot(gm, [x, w], fw_compiler=eager_compiler)
    got, expected = fn(x, w), f(x2, w2)
    assert got[1]._base is x and got[2]._base is w  # aliases of inputs are real views
    loss = sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in got)
    ref = sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in expected)
    loss.backward()
    ref.backward()
    torch.testing.assert_close(x.grad, x2.grad)
    torch.testing.assert_close(w.grad, w2.grad)


def test_batchnorm_training_updates_buffers_and_grads():
    bn, ref = torch.nn.BatchNorm1d(4), torch.nn.BatchNorm1d(4)

    def f(x, w, b, rm, rv, nbt):
        nbt.add_(1)
        return (F.batch_norm(x, rm, rv, w, b, True, 0.1, 1e-5).pow(2).sum(),)

    x = torch.randn(6, 4, requires_grad=True)
    args = [x, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked]
    fn = aot(torch.fx.symbolic_trace(f), args, fw_compiler=eager_compiler)
    for _ in range(2):
        fn(*args)[0].backward()
        x2 = x.detach().clone().requires_grad_()
        f(x2, ref.weight, ref.bias, ref.running_mean, ref.running_var, ref.num_batches_tracked)[0].backward()
    for a, b in zip(bn.state_dict().values(), ref.state_dict().values()):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(bn.weight.grad, ref.weight.grad)


def test_mutating_a_non_leaf_input_that_requires_grad_is_recorded_as_in_eager():
    # Note [writes to inputs that require grad]: the runtime copies the new value onto the input
    # with autograd recording; the leaf behind it gets eager's gradient through the write
    def f(h, w):
        old = h * 2 + w  # saves nothing that the write overwrites
        h.mul_(3).add_(w)
        return (old, h)

    gm = torch.fx.symbolic_trace(f)
    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3, requires_grad=True)
    fn = aot(gm, [x * 2, w], fw_compiler=eager_compiler)
    grads = []
    for run in (f, fn):
        x.grad = w.grad = None
        h = x * 2
        old, new = run(h, w)
        assert new is h and h.grad_fn is not None
        (old * torch.arange(3.0)).sum().add((h * h).sum()).backward()
        grads.append((old.detach(), h.detach(), x.grad, w.grad))
    for got, want in zip(*reversed(grads)):
        torch.testing.assert_close(got, want)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        fn(torch.randn(3, requires_grad=True), w)  # a leaf: eager's error


def test_debug_verify_flag_runs_the_verifier():
    gm = torch.fx.symbolic_trace(lambda x: (x.sin(),))
    x = torch.randn(3, requires_grad=True)
    fn = aot(gm, [x], fw_compiler=lambda g, i: g, config=AotConfig(verify=True))
    assert fn.training.backward is not None
    assert "backward" in str(fn.training)


def test_unsupported_op_names_op_and_line():
    gm = torch.fx.symbolic_trace(lambda x: (x[x > 0],))
    for n in gm.graph.nodes:
        n.meta["stack_trace"] = 'File "model.py", line 12, in forward\n    return x[x > 0]'
    with pytest.raises(AotTraceError) as info:
        aot(gm, [torch.randn(4)], fw_compiler=eager_compiler)
    msg = str(info.value)
    assert "aten." in msg and "model.py\", line 12" in msg


def test_ember_prims_decompositions_training_matches_eager():
    ember_prims = pytest.importorskip("ember_prims")

    def f(x, w, b):
        return (F.gelu(F.linear(x, w, b)).softmax(-1).sum(),)

    gm = torch.fx.symbolic_trace(f)
    args = [torch.randn(4, 8), torch.randn(6, 8, requires_grad=True), torch.randn(6, requires_grad=True)]
    ref = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    fn = aot(gm, args, fw_compiler=eager_compiler, decompositions=ember_prims.Decomposer())
    fn(*args)[0].backward()
    f(*ref)[0].backward()
    torch.testing.assert_close(args[1].grad, ref[1].grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(args[2].grad, ref[2].grad, rtol=1e-5, atol=1e-5)
    for gm in (fn.training.forward, fn.training.backward):
        ember_prims.verify(gm)  # prims-level: the table applied recursively, backward included


def test_mutated_input_sharing_memory_with_another_input_runs_eagerly():
    # the graph treats inputs as independent: such a call runs the torch-level graph, with a warning
    def f(a, b):
        a.add_(1)
        return (b * 1,)

    gm = torch.fx.symbolic_trace(f)
    fn = aot(gm, [torch.zeros(4), torch.zeros(4)], fw_compiler=eager_compiler)
    base = torch.zeros(4)
    with pytest.warns(UserWarning, match="shares memory"):
        out = fn(base, base.view(2, 2).view(4))
    torch.testing.assert_close(out[0], torch.ones(4))
    torch.testing.assert_close(base, torch.ones(4))
    torch.testing.assert_close(fn(torch.zeros(4), torch.zeros(4))[0], torch.zeros(4))  # compiled


def test_docstring_examples():
    import doctest

    import ember_autograd.api
    import ember_autograd.verify

    for module in (ember_autograd.api, ember_autograd.verify):
        assert doctest.testmod(module).failed == 0


def test_parameters_not_lifted_are_refused_for_training_but_fine_for_inference():
    lin = torch.nn.Linear(3, 2)
    gm = torch.fx.symbolic_trace(torch.nn.Sequential(lin))  # weight, bias stay get_attr/call_module
    x = torch.randn(4, 3, requires_grad=True)
    with pytest.raises(AotTraceError, match="lift parameters"):
        aot(gm, [x], fw_compiler=eager_compiler)
    with torch.no_grad():
        fn = aot(gm, [x], fw_compiler=eager_compiler)
        torch.testing.assert_close(fn(x), lin(x))


def test_autocast_state_keys_the_compiled_graphs():
    gm = torch.fx.symbolic_trace(lambda x, w: (x @ w,))
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    fn = aot(gm, [x, w], fw_compiler=eager_compiler)
    assert fn(x, w)[0].dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert fn(x, w)[0].dtype == torch.bfloat16
    assert fn(x, w)[0].dtype == torch.float32


def test_training_through_inplace_view_mutations_matches_eager():
    def f(x, w):
        y = x * w
        y[0].mul_(2)  # CopySlices in eager's autograd graph
        y[:, 1:].add_(w[1:])
        z = y.t()
        z[0].sigmoid_()
        return (y.sum(1), z)

    gm = torch.fx.symbolic_trace(f)
    x, w = torch.randn(3, 3, requires_grad=True), torch.randn(3, requires_grad=True)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    fn = aot(gm, [x, w], fw_compiler=eager_compiler)
    got, expected = fn(x, w), f(x2, w2)
    g = [torch.randn_like(o) for o in expected]
    torch.autograd.backward(got, g)
    torch.autograd.backward(expected, g)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close((x.grad, w.grad), (x2.grad, w2.grad))


@pytest.mark.parametrize("shape", ["leaf", "flat", "nested", "dict"])
def test_user_outputs_keep_their_structure(shape):
    """A single value and a flat tuple take the fast rebuild; nested and dict outputs the
    general one: each comes back in the structure the function returned."""
    def f(x):
        a, b, c = x * 2, x + 1, x - 1
        return {"leaf": a, "flat": (a, b, c), "nested": (a, (), (b, [c])), "dict": {"a": a, "bc": (b, c)}}[shape]

    x = torch.randn(3, requires_grad=True)
    gm = torch.fx.symbolic_trace(f)  # its list outputs are fx's immutable_list: compare with gm
    fn = aot(gm, [x], fw_compiler=eager_compiler)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            got, want = fn(x), gm(x)
        # fx records list and dict outputs as its immutable_list / immutable_dict (subclasses)
        same = str(torch.utils._pytree.tree_structure(got)).replace("immutable_", "")
        assert same == str(torch.utils._pytree.tree_structure(want)).replace("immutable_", "")
        for g, w in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
            torch.testing.assert_close(g, w)


def test_mutated_inputs_are_written_back_in_one_call():
    """A ResNet step writes back three buffers per batch norm: one _foreach_copy_ per dtype (CUDA
    copies a list of mixed dtypes one tensor at a time), not a copy_ each (host time per step),
    with the same values as eager."""
    from torch.utils._python_dispatch import TorchDispatchMode

    def f(x, a, b, n, c):
        a.add_(x.sum())
        b.add_(x.sum() * 2)
        n.add_(1)
        c.add_(x.sum() * 3)
        return (x * 2,)

    bufs = [torch.zeros(4), torch.zeros(3), torch.zeros((), dtype=torch.long), torch.zeros(5)]
    ref = [b.clone() for b in bufs]
    fn = aot(torch.fx.symbolic_trace(f), [torch.randn(2), *bufs], fw_compiler=eager_compiler)

    class Count(TorchDispatchMode):
        ops: list = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func)
            return func(*args, **(kwargs or {}))

    for _ in range(2):
        x = torch.randn(2)
        with Count() as seen:
            fn(x, *bufs)
        f(x, *ref)
        torch.testing.assert_close(bufs, ref)
        assert torch.ops.aten.copy_.default not in seen.ops
        assert seen.ops.count(torch.ops.aten._foreach_copy_.default) == 2  # float32, int64
        seen.ops.clear()


def test_requires_grad_pattern_changing_between_calls_picks_the_matching_graphs():
    """Note [speculative requires-grad key]: a call in grad mode first tries the training graphs
    of the last call, which check the inputs' requires-grad pattern themselves; every change of
    the pattern (one input of many, all of them, an int input alongside) must run the graphs
    traced for the new pattern, with gradients exactly where eager puts them."""
    def f(x, w, b, n):
        return (torch.tanh(x @ w + b) * n, (x * 2).sum())

    gm = torch.fx.symbolic_trace(f)
    x, w, b = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    fn = aot(gm, [x, w.requires_grad_(), b.requires_grad_(), 3], fw_compiler=eager_compiler)
    patterns = [(False, True, True), (True, True, True), (False, False, True), (False, False, False),
                (False, True, True), (True, False, False), (False, True, True)]
    for xg, wg, bg in patterns:
        inputs = [t.detach().clone().requires_grad_(g) for t, g in ((torch.randn(3, 4), xg), (w, wg), (b, bg))]
        ref = [t.detach().clone().requires_grad_(t.requires_grad) for t in inputs]
        got, got_sum = fn(*inputs, 3)
        want, want_sum = f(*ref, 3)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_sum, want_sum)
        assert got.requires_grad == want.requires_grad and got_sum.requires_grad == want_sum.requires_grad
        if want.requires_grad:
            (got.sum() + got_sum).backward() if got_sum.requires_grad else got.sum().backward()
            (want.sum() + want_sum).backward() if want_sum.requires_grad else want.sum().backward()
        for a, e in zip(inputs, ref):
            assert (a.grad is None) == (e.grad is None)
            if e.grad is not None:
                torch.testing.assert_close(a.grad, e.grad)
    # one trace per distinct pattern (all False: the inference graph), none per call
    assert len(fn._runners) == len(set(patterns))


def test_gradients_of_some_inputs_only_reach_those_inputs():
    """The backward's results are scattered to the inputs that get a gradient (the others get
    None): inputs that do not require grad between ones that do."""
    def f(a, b, c, d):
        return ((a * b + c * d).sum(),)

    gm = torch.fx.symbolic_trace(f)
    a, b, c, d = (torch.randn(4, requires_grad=g) for g in (False, True, False, True))
    fn = aot(gm, [a, b, c, d], fw_compiler=eager_compiler)
    fn(a, b, c, d)[0].backward()
    assert a.grad is None and c.grad is None
    torch.testing.assert_close(b.grad, a)
    torch.testing.assert_close(d.grad, c)


def test_an_output_the_loss_does_not_reach_gives_no_gradient():
    # Note [unreached outputs]: eager runs no backward for b; a zero tangent through its
    # backward would make x.grad NaN (0 * inf in normalize's backward) and give y a zero grad
    gm = torch.fx.symbolic_trace(lambda x, y: (x * 3, F.normalize(x, dim=-1) + y.exp()))
    x = torch.tensor([1.0, float("inf"), 2.0], requires_grad=True)
    y = torch.randn(3, requires_grad=True)
    seen = []

    def bw(gm, inputs):
        seen.append(len(inputs))
        return eager_compiler(gm, inputs)

    fn = aot(gm, [x, y], fw_compiler=eager_compiler, bw_compiler=bw)
    for _ in range(2):
        x.grad = None
        a, b = fn(x, y)
        a.sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 3.0))
        assert y.grad is None
    assert len(seen) == 1  # the specialized backward is compiled once, then reused
    a, b = fn(x, y)
    (a.sum() + b.sum()).backward()  # both reached: the full backward, NaN as in eager
    assert x.grad.isnan().any() and y.grad is not None


def test_an_unreached_outputs_tangent_is_no_input_and_the_saved_values_are_handed_over():
    # A language model's training call returns (loss, logits) and the loss never reaches the
    # logits: the backward specialized to that takes no tangent for them (no zero tensor the
    # size of the logits is built), and it gets the saved values in a list it may empty, so
    # that each is freed after its last use (Note [saved tensors handed over]).
    gm = torch.fx.symbolic_trace(lambda x, w: ((x @ w).tanh().sum(), x @ w.t()))
    x = torch.randn(4, 5, requires_grad=True)
    w = torch.randn(5, 5, requires_grad=True)
    graphs, handed = [], []

    def bw(gm, inputs):
        graphs.append(gm)
        inner = eager_compiler(gm, inputs)

        def run(args):
            out = inner(*args)
            refs = [weakref.ref(a) for a in args if isinstance(a, torch.Tensor)]
            args.clear()  # the runtime holds no other reference to a saved intermediate
            handed.append([r() is not None for r in refs])
            return out
        run._boxed_call = True
        return run

    fn = aot(gm, [x, w], fw_compiler=eager_compiler, bw_compiler=bw)
    loss, logits = fn(x, w)
    loss.backward()
    placeholders = [n for n in graphs[0].graph.nodes if n.op == "placeholder"]
    assert not any(n.meta["val"].shape == logits.shape and "tangent" in n.name for n in placeholders)
    assert [n.name for n in placeholders if "tangent" in n.name] == ["tangents_1"]
    assert False in handed[0]  # (x @ w).tanh(), saved, was freed with the list
    ref_x, ref_w = x.detach().requires_grad_(), w.detach().requires_grad_()
    (ref_x @ ref_w).tanh().sum().backward()
    torch.testing.assert_close(x.grad, ref_x.grad)
    torch.testing.assert_close(w.grad, ref_w.grad)


class _NoGradForY(torch.autograd.Function):
    # a backward that gives None for an input it has an edge to: eager delivers nothing to y
    @staticmethod
    def forward(ctx, x, y):
        return x * 2 + y.floor()

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


def _no_grad_for_y(x, y):
    return _NoGradForY.apply(x, y)


def _zeros_like_constant(t, **kwargs):
    # floor's backward is zeros_like(grad): decomposed to a constant, as ember_prims does
    return torch.zeros(t.shape, dtype=t.dtype, device=t.device)


@pytest.mark.parametrize("body", ["floor", "function_giving_none"])
def test_an_input_gets_zeros_or_none_as_eager_where_one_output_is_unreached(body):
    # Note [zero, not None]: the loss reaches only the first output. floor: eager's engine runs
    # floor's node, x.grad is zeros (the pruned backward did not compute it: made only of the
    # unreached sin's tangent and a constant). function_giving_none: the Function's node gives y
    # nothing, y.grad stays None although the Function has an edge to y.
    g = torch.fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    if body == "floor":
        first = g.call_function(torch.mul, (g.call_function(torch.floor, (x,)), y))
    else:
        first = g.call_function(_no_grad_for_y, (x, y))
    g.output((first, g.call_function(torch.sin, (y,)), g.call_function(torch.cos, (x,))))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    args = [torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)]
    fn = aot(gm, args, fw_compiler=eager_compiler,
             decompositions={torch.ops.aten.zeros_like.default: _zeros_like_constant})
    for _ in range(2):
        want = [t.detach().clone().requires_grad_() for t in args]
        got = [t.detach().clone().requires_grad_() for t in args]
        gm(*want)[0].sum().backward()
        fn(*got)[0].sum().backward()
        for w, c in zip(want, got):
            assert (w.grad is None) == (c.grad is None), (w.grad, c.grad)
            if w.grad is not None:
                torch.testing.assert_close(c.grad, w.grad)



def _stale(x: torch.Tensor, deeper: bool) -> torch.Tensor:
    v = x.exp()
    v.add_(1)  # ExpBackward0 saved its result: stale now
    return v * 1 if deeper else v  # deeper: the stale node a step further up


STALE_INPUT_USES = {
    "other_output": lambda v, y: (v * 2, y * 3),  # the loss reaches only the second output
    "detached": lambda v, y: ((y * v.detach()).sum(),),  # v reaches no output
    "other_output_deeper": lambda v, y: (v.sin(), y.cos()),
}


@pytest.mark.parametrize("name", STALE_INPUT_USES)
def test_an_input_whose_history_is_stale_raises_only_where_eager_does(name):
    # Note [a written input's saved history] (runtime.py): v's history saved a value written in
    # place since; the compiled node's edge to that history made any backward through it raise,
    # where eager's loss never reaches v. Such a call runs eagerly, with a warning.
    f = STALE_INPUT_USES[name]
    fn = aot(torch.fx.symbolic_trace(f), [torch.randn(3, requires_grad=True)] * 2, fw_compiler=eager_compiler)
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    y_ref = y.detach().clone().requires_grad_()
    v = _stale(x, "deeper" in name)
    f(v, y_ref)[-1].sum().backward()
    with pytest.warns(UserWarning, match="written in place since"):
        outs = fn(v, y)
    outs[-1].sum().backward()
    torch.testing.assert_close(y.grad, y_ref.grad)
    if len(outs) > 1:  # where the loss reaches v, eager's error
        with pytest.raises(RuntimeError, match="modified by an inplace"):
            fn(v, y)[0].sum().backward()


def test_an_input_every_output_reaches_is_not_searched():
    # eager's loss reaches such an input's history whenever it reaches the compiled node
    fn = aot(torch.fx.symbolic_trace(lambda v, y: ((v * y).sum(),)), [torch.randn(3, requires_grad=True)] * 2,
             fw_compiler=eager_compiler)
    fn(torch.randn(3, requires_grad=True) * 1, torch.randn(3, requires_grad=True))
    assert history_checked(fn.training.signature) == ()


def test_a_multi_output_view_whose_base_is_written_raises_only_in_a_backward_that_reaches_it():
    # fuzz seed 60011 with --train: y, an unbind output, is saved by y * y, then its base is
    # written in place; eager raises "Output 0 of Unbind is a view and its base ... has been
    # modified inplace" only in a backward that reaches that node. The joint trace raised it for
    # the whole graph, and the forward compile fell back (Note [outputs whose backward reads a
    # mutated saved value], joint.py).
    def f(x):
        h = x * 1
        y = h.unbind(1)[0]
        z = y * y
        h.mul_(2)
        return z, h.sum()

    x = torch.randn(3, 2, requires_grad=True)
    fn = aot(torch.fx.symbolic_trace(f), [x], fw_compiler=eager_compiler)
    fn(x)[1].backward()
    torch.testing.assert_close(x.grad, torch.full((3, 2), 2.0))
    for g in (f, fn):
        with pytest.raises(RuntimeError, match="is a view and its base"):
            g(x)[0].sum().backward()


def test_a_gradient_of_no_tangent_from_a_reached_output_flows_on_as_in_eager():
    # fuzz seed 90111: floor's backward (or an empty narrow's) is a constant zero; the loss
    # reaches only `first`, so eager runs floor's node and divides its zeros by d: 0 / 0 is NaN
    # where d is 0. The pruned backward took the sum of that constant and the unreached sin's
    # tangent for a value made of absent tangents only, and gave x zeros (Note [gradients eager
    # computes from no tangent], unreached.py).
    def f(x, d):
        h = x / d
        return h.floor(), h.sin()

    args = [torch.randn(3, requires_grad=True), torch.tensor([0.0, 2.0, 0.0])]
    fn = aot(torch.fx.symbolic_trace(f), args, fw_compiler=eager_compiler,
             decompositions={torch.ops.aten.zeros_like.default: _zeros_like_constant})
    for _ in range(2):
        want, got = (args[0].detach().clone().requires_grad_() for _ in range(2))
        f(want, args[1])[0].sum().backward()
        fn(got, args[1])[0].sum().backward()
        assert want.grad.isnan().tolist() == [True, False, True]
        torch.testing.assert_close(got.grad, want.grad, equal_nan=True)

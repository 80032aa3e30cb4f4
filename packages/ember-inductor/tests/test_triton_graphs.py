"""Hand-built prims graphs through `compile_graph(..., backend="triton")`, compared with eager.

On CPU tensors the generated Triton kernels run under Triton's interpreter (how CI checks the GPU
code path); the `gpu` variants compile them for CUDA. Every check draws fresh inputs after
compiling. Tolerances: float32 1e-5/1e-5, float64 1e-10, float16 1e-3, bfloat16 1.6e-2/1e-2;
integers and booleans exact; NaN must match NaN.
"""
from __future__ import annotations

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.float16: dict(rtol=1e-3, atol=1e-3)}


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    return InductorOptions(cache_dir=str(tmp_path_factory.mktemp("triton_graphs")), backend="triton")


def _fresh(x):
    if x.dtype.is_floating_point:
        return torch.randn_like(x)
    if x.dtype == torch.bool:
        return torch.rand(x.shape, device=x.device) > 0.5
    return x.clone()


def run(build, inputs, options, n_kernels=None, fresh=True):
    """build(b, *input nodes) -> output node(s); compile, then compare on fresh inputs."""
    b = GraphBuilder()
    outs = build(b, *[b.input(x) for x in inputs])
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    b.output(*outs)
    cg = compile_graph(b.build(), b.examples, options)
    assert cg.backend == "triton"
    new = [_fresh(x) for x in inputs] if fresh else inputs
    b2 = GraphBuilder()
    outs2 = build(b2, *[b2.input(x) for x in new])
    expected = [n.meta["val"] for n in (outs2 if isinstance(outs2, (tuple, list)) else [outs2])]
    for got, exp in zip(cg(new), expected):
        assert got.shape == exp.shape and got.dtype == exp.dtype, (got, exp)
        torch.testing.assert_close(got, exp, **TOL.get(exp.dtype, dict(rtol=0, atol=0)), equal_nan=True)
    if n_kernels is not None:
        assert len(cg.kernels) == n_kernels, cg.source
    return cg


def simple_fn(b, x):
    for _ in range(20):
        x = b.call(P.add.default, x, b.call(P.sin.default, x))
    return x


def softmax(b, x):
    shape = list(x.meta["val"].shape)
    m = b.call(P.amax.default, x, [1])
    e = b.call(P.exp.default, b.call(P.sub.default, x, b.call(P.broadcast_in_dim.default, m, shape, [0])))
    s = b.call(P.sum.default, e, [1])
    return b.call(P.div.default, e, b.call(P.broadcast_in_dim.default, s, shape, [0]))


def layer_norm(b, x, w):
    n, d = x.meta["val"].shape
    dev = x.meta["val"].device
    full = lambda v: b.call(P.full.default, [n], v, dtype=torch.float32, device=dev)  # noqa: E731
    mean = b.call(P.div.default, b.call(P.sum.default, x, [1]), full(float(d)))
    xc = b.call(P.sub.default, x, b.call(P.broadcast_in_dim.default, mean, [n, d], [0]))
    var = b.call(P.div.default, b.call(P.sum.default, b.call(P.mul.default, xc, xc), [1]), full(float(d)))
    rstd = b.call(P.rsqrt.default, b.call(P.add.default, var, full(1e-5)))
    y = b.call(P.mul.default, xc, b.call(P.broadcast_in_dim.default, rstd, [n, d], [0]))
    return b.call(P.mul.default, y, b.call(P.broadcast_in_dim.default, w, [n, d], [1]))


@pytest.mark.parametrize("device", DEVICES)
def test_simple_fn_one_kernel(options, device):
    cg = run(simple_fn, [torch.randn(10_000, device=device)], options, n_kernels=1)
    assert cg.kernels[0].source.count("libdevice.sin(") == 20  # each producer evaluated once


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_and_layer_norm_one_kernel(options, device):
    run(softmax, [torch.randn(7, 129, device=device)], options, n_kernels=1)
    run(layer_norm, [torch.randn(6, 300, device=device), torch.randn(300, device=device)], options,
        n_kernels=1)


def layer_norm_saving_stats(b, x, w):
    """Layer norm as a training forward has it: mean and rstd kept with keepdim (n, 1), saved as
    outputs for the backward, each computed from the first reduction's result."""
    n, d = x.meta["val"].shape
    dev = x.meta["val"].device
    full = lambda v: b.call(P.full.default, [n, 1], v, dtype=torch.float32, device=dev)  # noqa: E731
    keep = lambda v: b.call(P.broadcast_in_dim.default, v, [n, 1], [0])  # noqa: E731
    wide = lambda v: b.call(P.broadcast_in_dim.default, b.call(P.reshape.default, v, [n]), [n, d], [0])  # noqa: E731
    mean = b.call(P.div.default, keep(b.call(P.sum.default, x, [1])), full(float(d)))
    xc = b.call(P.sub.default, x, wide(mean))
    var = b.call(P.div.default, keep(b.call(P.sum.default, b.call(P.mul.default, xc, xc), [1])), full(float(d)))
    rstd = b.call(P.rsqrt.default, b.call(P.add.default, var, full(1e-5)))
    y = b.call(P.mul.default, b.call(P.mul.default, xc, wide(rstd)),
               b.call(P.broadcast_in_dim.default, w, [n, d], [1]))
    return y, mean, rstd


@pytest.mark.parametrize("device", DEVICES)
def test_layer_norm_saving_its_statistics_is_one_kernel(options, device):
    # Note [statistics kept with keepdim]: the (n, 1) statistics a training forward saves were
    # each a kernel of their own (GPT-2's layer norms: 5 kernels each instead of 1).
    run(layer_norm_saving_stats, [torch.randn(6, 300, device=device), torch.randn(300, device=device)],
        options, n_kernels=1)


@pytest.mark.parametrize("device", DEVICES)
def test_relu_chain(options, device):
    def build(b, x, y):
        dev = x.meta["val"].device
        full = lambda v: b.call(P.full.default, [1000], v, dtype=torch.float32, device=dev)  # noqa: E731
        t = b.call(P.add.default, b.call(P.mul.default, x, full(2.0)), full(1.0))
        return b.call(P.mul.default, b.call(P.maximum.default, t, full(0.0)), y)
    run(build, [torch.randn(1000, device=device), torch.randn(1000, device=device)], options, n_kernels=1)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["sum", "amax", "argmax", "any"])
def test_reductions(options, device, kind):
    x = torch.randn(5, 6, 7, device=device)
    if kind == "argmax":
        run(lambda b, x: b.call(P.argmax.default, x, 1), [x], options)
    elif kind == "any":
        run(lambda b, x: b.call(P.any.default, x, [0, 2]), [x > 0.5], options)
    else:
        for dims in ([0], [1], [0, 2]):
            run(lambda b, x: b.call(getattr(P, kind).default, x, dims), [x], options)


@pytest.mark.parametrize("device", DEVICES)
def test_views_transpose_and_epilogue(options, device):
    def build(b, x):
        t = b.call(P.permute.default, x, [1, 0, 2])
        r = b.call(P.reshape.default, t, [6, 4 * 5])
        e = b.call(P.exp.default, r)
        return b.call(P.rev.default, e, [1]), b.call(P.sum.default, e, [0])
    run(build, [torch.randn(4, 6, 5, device=device)], options)

    def transpose_add(b, x, y):
        return b.call(P.add.default, b.call(P.permute.default, x, [1, 0]), y)
    run(transpose_add, [torch.randn(40, 33, device=device), torch.randn(33, 40, device=device)], options)


@pytest.mark.parametrize("device", DEVICES)
def test_gather_and_index(options, device):
    def build(b, x, i, j):
        return b.call(P.gather.default, x, 1, i), b.call(P.index.default, x, [j])
    run(build, [torch.randn(5, 7, device=device), torch.randint(0, 7, (5, 3), device=device),
                torch.randint(0, 5, (4,), device=device)], options)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.float16, torch.bfloat16])
def test_dtypes(options, device, dtype):
    def build(b, x, y):
        z = b.call(P.mul.default, b.call(P.add.default, x, y), y)
        return z, b.call(P.maximum.default, x, y), b.call(P.sum.default, z, [1])
    if dtype.is_floating_point:
        xs = [torch.randn(4, 33, dtype=dtype, device=device) for _ in range(2)]
    else:
        xs = [torch.randint(-50, 50, (4, 33), dtype=dtype, device=device) for _ in range(2)]
    run(build, xs, options)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_division_semantics(options, device):
    a = torch.randint(-20, 20, (64,), device=device)
    d = torch.randint(1, 7, (64,), device=device) * torch.where(torch.rand(64, device=device) > 0.5, 1, -1)

    def build(b, x, y):
        return tuple(b.call(getattr(P, k).default, x, y) for k in
                     ("div", "floor_divide", "remainder", "fmod", "shift_right"))
    run(build, [a, d], options)


def test_equal_kernels_share_one_launcher():
    """Kernels equal but for their name and comments (one per block of a model) compile once."""
    P = ember_prims.ops
    b = GraphBuilder()
    x, w = b.input(torch.randn(8, 8)), b.input(torch.randn(8, 8))
    m = b.call(torch.ops.aten.mm.default, b.call(P.sin.default, x), w)
    b.output(b.call(P.sin.default, m), m)  # m returned: the second sin does not write into m
    cg = compile_graph(b.build(), b.examples, {"backend": "triton"})
    launchers = cg._fn.__globals__
    assert len(cg.kernels) == 2 and launchers["kernel0"] is launchers["kernel1"]
    xs = [torch.randn(8, 8), torch.randn(8, 8)]
    torch.testing.assert_close(cg(xs)[0], torch.sin(torch.sin(xs[0]) @ xs[1]))


def test_interpreted_launch_leaves_triton_language_as_it_was(options):
    """Note [interpreter patches]: an interpreted kernel that calls Triton's library functions
    (tl.sum, tl.max: device functions) must not leave triton.language patched for the
    interpreter, else every later GPU compile in the process fails inside tl.arange."""
    import triton.language as tl
    before = {name: getattr(tl, name) for name in ("arange", "load", "store", "sum", "max", "program_id")}
    before_core = tl.core.arange
    run(lambda b, x: b.call(P.div.default, b.call(P.exp.default, x),
                            b.call(P.broadcast_in_dim.default, b.call(P.sum.default, b.call(P.exp.default, x), [1]),
                                   [8, 32], [0])),
        [torch.randn(8, 32)], options)
    assert {name: getattr(tl, name) for name in before} == before
    assert tl.core.arange is before_core


SPLIT_CASES = {  # Note [split reductions]: (input shape, dims, channels-last input)
    "bn-stats": ((8, 3, 32, 32), [0, 2, 3], False),          # the batch dim kept as partial rows
    "bn-stats-channels-last": ((8, 3, 32, 32), [0, 2, 3], True),
    "batch-1": ((1, 4, 64, 80), [0, 2, 3], True),           # H split as 16 x 4
    "few-long-rows": ((4, 32768), [1], False),             # the row split as 32 x 1024
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prim", ["sum", "amax"])
@pytest.mark.parametrize("case", list(SPLIT_CASES))
def test_split_reduction(case, prim, device, options):
    """A reduction of few output rows and long rows runs as two kernels (partials, then their
    reduction), with the same result as eager."""
    shape, dims, channels_last = SPLIT_CASES[case]
    x = torch.randn(shape, device=device)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    run(lambda b, x: b.call(getattr(P, prim).default, x, dims), [x], options, n_kernels=2)


def test_split_plan_keeps_rows_and_leaves_long_rest():
    from ember_inductor.lowering.reductions import split_plan
    assert split_plan((32, 64, 112, 112), (0, 2, 3)) == [(0, 32), (2, 4)]   # 8192 rows of 3136
    assert split_plan((1, 64, 112, 112), (0, 2, 3)) == [(2, 28)]           # 1792 rows of 448
    assert split_plan((2048, 768), (0,)) is None                           # short enough
    assert split_plan((2048, 4096), (1,)) is None                          # ... or enough rows
    assert split_plan((4, 32768), (1,)) == [(1, 128)]                      # 512 rows of 256


def test_batch_norm_statistics_in_one_pass(options):
    """Note [batch-norm statistics in one pass]: batch norm's training statistics over long rows
    run as one pass of partials and one of their reduction (3 kernels with the normalization,
    not 5), and stay as accurate as eager's with a mean 1e5 times the
    standard deviation (the naive E[x^2] - E[x]^2 would lose every digit)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    aten = torch.ops.aten

    def bn(x, w, b, rm, rv):
        return aten._native_batch_norm_legit_functional(x, w, b, rm, rv, True, 0.1, 1e-5)

    def inputs():
        return [torch.randn(8, 3, 32, 32) * 0.01 + 1000, torch.randn(3), torch.randn(3),
                torch.randn(3), torch.rand(3) + 0.5]
    gm = ember_prims.decompose(make_fx(bn, tracing_mode="fake")(*inputs()))
    cg = compile_graph(gm, inputs(), options)
    assert len(cg.kernels) == 3, cg.ir
    for _ in range(2):
        args = inputs()
        got = cg(args)
        want = bn(*[a.double() for a in args])
        eager = bn(*args)
        for g, w, e in zip(got, want, eager):
            err, eager_err = (g.double() - w).abs().max(), (e.double() - w).abs().max()
            assert err <= 2 * eager_err + 1e-6 * w.abs().max(), (err, eager_err)


def _linear_head(b, x, w, bias, then=None):
    """x @ w + bias as decomposition leaves addmm (mm, broadcast bias, add), then `then`."""
    mm = b.call(torch.ops.aten.mm.default, x, w)
    out = b.call(P.add.default, b.call(P.broadcast_in_dim.default, bias, [x.meta["val"].shape[0], 24], [1]), mm)
    return then(b, out) if then else b.call(P.reshape.default, out, [2, 8, 24])


@pytest.mark.parametrize("device", DEVICES)
def test_bias_that_only_leaves_the_graph_goes_into_the_matmul(options, device):
    """Note [bias in the matmul]: a linear head's bias add, whose value only leaves the graph,
    is one addmm (the library applies the bias): no kernel of its own re-reading the product."""
    inputs = [torch.randn(16, 32, device=device), torch.randn(32, 24, device=device), torch.randn(24, device=device)]
    cg = run(_linear_head, inputs, options, n_kernels=0)
    assert "addmm_default: extern" in cg.source and "# mm_default: extern" not in cg.source, cg.source


@pytest.mark.parametrize("device", DEVICES)
def test_bias_followed_by_pointwise_work_stays_fused_with_it(options, device):
    """Note [bias in the matmul]: when pointwise work follows (an activation), the bias add stays
    a kernel fused with it (one pass either way), and the product stays a plain mm."""
    inputs = [torch.randn(16, 32, device=device), torch.randn(32, 24, device=device), torch.randn(24, device=device)]
    cg = run(lambda b, x, w, bias: _linear_head(b, x, w, bias, lambda b, o: b.call(P.tanh.default, o)),
             inputs, options, n_kernels=1)
    assert "addmm" not in cg.source, cg.source


@pytest.mark.parametrize("device", DEVICES)
def test_bias_whose_value_leaves_the_graph_goes_into_the_matmul_even_when_read_again(options, device):
    """Note [bias in the matmul]: logits returned and also fed to pointwise work: one addmm
    writes them once; the pointwise kernel reads its result (no separate product buffer)."""
    inputs = [torch.randn(16, 32, device=device), torch.randn(32, 24, device=device), torch.randn(24, device=device)]
    cg = run(lambda b, x, w, bias: _linear_head(b, x, w, bias, lambda b, o: (o, b.call(P.tanh.default, o))),
             inputs, options, n_kernels=1)
    assert "addmm_default: extern" in cg.source and "# mm_default: extern" not in cg.source, cg.source


@pytest.mark.parametrize("device", DEVICES)
def test_a_permute_of_a_permute_folds(options, device):
    """Note [permutes folded]: a linear's weight gradient as decomposition leaves it,
    permute(permute(mm(gT, x))), is the product itself (no copy kernel); a chain that is not the
    identity becomes one permute (its copy into the output is the one kernel)."""
    def weight_grad(b, g, x):
        prod = b.call(torch.ops.aten.mm.default, b.call(P.permute.default, g, [1, 0]), x)
        return b.call(P.permute.default, b.call(P.permute.default, prod, [1, 0]), [1, 0])
    inputs = [torch.randn(16, 24, device=device), torch.randn(16, 32, device=device)]
    cg = run(weight_grad, inputs, options, n_kernels=0)
    assert "permute" not in cg.source, cg.source

    def three_d(b, x):
        return b.call(P.permute.default, b.call(P.permute.default, x, [1, 2, 0]), [1, 2, 0])
    run(three_d, [torch.randn(3, 4, 5, device=device)], options, n_kernels=1)

    def of_an_input(b, x):  # eager's result is a view of x: the graph's output stays a fresh copy
        return b.call(P.permute.default, b.call(P.permute.default, x, [1, 0]), [1, 0])
    x = torch.randn(4, 5, device=device)
    cg = run(of_an_input, [x], options, n_kernels=1)
    assert cg([x])[0].data_ptr() != x.data_ptr()


def test_layout_check_in_one_pass_sends_every_misfit_to_the_copy(options):
    """Note [layout check in one pass]: inputs as compiled skip the per-input loop; an input with
    other strides, or one that does not start its storage (Note [input offsets]), still gets
    copied into the compiled layout, and the result is right."""
    def build(b, x, y, s):
        return b.call(P.add.default, b.call(P.mul.default, x, y), s)
    inputs = [torch.randn(6, 5), torch.randn(6, 5), torch.randn(6, 5)]
    cg = run(build, inputs, options)
    check = cg._as_compiled
    x, y, s = (torch.randn(6, 5) for _ in range(3))
    transposed = torch.randn(5, 6).t()  # same shape, column-major
    shifted = torch.randn(7, 5)[1:]     # same shape and strides, storage offset 5
    assert check([x, y, s]) and not check([x, transposed, s]) and not check([shifted, y, s])
    for args in ([x, y, s], [x, transposed, s], [shifted, y, s], [shifted, transposed, s]):
        torch.testing.assert_close(cg(args)[0], args[0] * args[1] + args[2])

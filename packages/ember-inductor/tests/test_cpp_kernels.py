"""Hand-built prims graphs through the C++ backend, compared with the prims' eager kernels."""
import os
import sys

import pytest
import torch
import ember_prims

from ember_inductor import compile_graph
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10),
       torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2), torch.float16: dict(rtol=1e-3, atol=1e-3)}


def assert_close(actual, expected):
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (actual, expected)
    torch.testing.assert_close(actual, expected, **TOL.get(expected.dtype, dict(rtol=0, atol=0)),
                               equal_nan=True)


def run(build, inputs, options, n_kernels=None):
    """build(b, *input nodes) -> output nodes; compile, then compare on fresh inputs."""
    b = GraphBuilder()
    nodes = [b.input(x) for x in inputs]
    outs = build(b, *nodes)
    b.output(*(outs if isinstance(outs, (tuple, list)) else [outs]))
    cg = compile_graph(b.build(), b.examples, options)
    fresh = [torch.randn_like(x) if x.dtype.is_floating_point else x for x in inputs]
    b2 = GraphBuilder()  # eager reference on the fresh inputs
    nodes2 = [b2.input(x) for x in fresh]
    outs2 = build(b2, *nodes2)
    expected = [n.meta["val"] for n in (outs2 if isinstance(outs2, (tuple, list)) else [outs2])]
    got = cg(fresh)
    for g, e in zip(got, expected):
        assert_close(g, e)
    if n_kernels is not None:
        assert len(cg.kernels) == n_kernels, cg.source
    return cg


def simple_fn(b, x):
    for _ in range(20):
        x = b.call(P.add.default, x, b.call(P.sin.default, x))
    return x


def test_simple_fn_one_kernel_fast(options):
    cg = run(simple_fn, [torch.randn(10_000)], options, n_kernels=1)
    front = sum(v for k, v in cg.timings.items() if k != "build")
    assert front < 0.5, cg.timings


def softmax(b, x):
    m = b.call(P.amax.default, x, [1])
    mb = b.call(P.broadcast_in_dim.default, m, list(x.meta["val"].shape), [0])
    e = b.call(P.exp.default, b.call(P.sub.default, x, mb))
    s = b.call(P.sum.default, e, [1])
    sb = b.call(P.broadcast_in_dim.default, s, list(x.meta["val"].shape), [0])
    return b.call(P.div.default, e, sb)


def test_softmax_one_kernel(options):
    run(softmax, [torch.randn(37, 129)], options, n_kernels=1)


def layer_norm(b, x, w):
    n, d = x.meta["val"].shape
    full = lambda v: b.call(P.full.default, [n], v, dtype=torch.float32, device=torch.device("cpu"))  # noqa
    mean = b.call(P.div.default, b.call(P.sum.default, x, [1]), full(float(d)))
    xc = b.call(P.sub.default, x, b.call(P.broadcast_in_dim.default, mean, [n, d], [0]))
    var = b.call(P.div.default, b.call(P.sum.default, b.call(P.mul.default, xc, xc), [1]), full(float(d)))
    rstd = b.call(P.rsqrt.default, b.call(P.add.default, var, full(1e-5)))
    y = b.call(P.mul.default, xc, b.call(P.broadcast_in_dim.default, rstd, [n, d], [0]))
    return b.call(P.mul.default, y, b.call(P.broadcast_in_dim.default, w, [n, d], [1]))


def test_layer_norm_one_kernel(options):
    run(layer_norm, [torch.randn(16, 300), torch.randn(300)], options, n_kernels=1)


def test_layer_norm_saving_its_statistics_is_one_kernel(options):
    sys.path.insert(0, os.path.dirname(__file__))
    from test_triton_graphs import layer_norm_saving_stats  # Note [statistics kept with keepdim]
    run(layer_norm_saving_stats, [torch.randn(16, 300), torch.randn(300)], options, n_kernels=1)


@pytest.mark.parametrize("kind", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dims", [[0], [1], [0, 1], [0, 2]])
def test_reductions(options, kind, dims):
    run(lambda b, x: b.call(getattr(P, kind).default, x, dims), [torch.randn(5, 6, 7)], options)


def test_full_sum_large_parallel_inner(options):
    run(lambda b, x: b.call(P.sum.default, x, [0]), [torch.randn(200_000, dtype=torch.float64)], options)


def test_amax_propagates_nan(options):
    x = torch.randn(4, 8)
    b = GraphBuilder()
    n = b.input(x)
    b.output(b.call(P.amax.default, n, [1]))
    cg = compile_graph(b.build(), b.examples, options)
    x[2, 3] = float("nan")
    out = cg([x])[0]
    assert torch.isnan(out[2]) and not torch.isnan(out[[0, 1, 3]]).any()


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
def test_arg_reductions(options, kind):
    run(lambda b, x: b.call(getattr(P, kind).default, x, 1), [torch.randn(6, 9)], options)


def test_any_all(options):
    def build(b, x):
        pos = b.call(P.gt.default, x, b.call(P.full.default, [5, 6], 0.0, dtype=torch.float32,
                                             device=torch.device("cpu")))
        return b.call(P.any.default, pos, [1]), b.call(P.all.default, pos, [0])
    run(build, [torch.randn(5, 6)], options)


def test_views_and_epilogue(options):
    def build(b, x):
        t = b.call(P.permute.default, x, [1, 0, 2])
        r = b.call(P.reshape.default, t, [6, 4 * 5])
        s = b.call(P.slice.default, r, [1, 0], [6, 20], [2, 3])
        e = b.call(P.exp.default, s)
        return b.call(P.rev.default, e, [1]), b.call(P.sum.default, e, [0])
    run(build, [torch.randn(4, 6, 5)], options)


def test_reshape_of_lazy_value(options):
    def build(b, x):
        y = b.call(P.cos.default, b.call(P.permute.default, x, [1, 0]))
        return b.call(P.reshape.default, y, [3, 2, 4])
    run(build, [torch.randn(4, 6)], options)


def test_cat_pad_squeeze(options):
    def build(b, x, y):
        c = b.call(P.cat.default, [x, y], 1)
        p = b.call(P.pad.default, c, 0.5, [1, 0], [2, 3])
        return b.call(P.squeeze.default, b.call(P.reshape.default, p, [1, 7 * 11]), [0])
    run(build, [torch.randn(4, 3), torch.randn(4, 5)], options)


def test_gather_and_index(options):
    idx = torch.randint(0, 7, (5, 3))
    flat = torch.randint(0, 5, (4,))

    def build(b, x, i, j):
        return b.call(P.gather.default, x, 1, i), b.call(P.index.default, x, [j])
    run(build, [torch.randn(5, 7), idx, flat], options)


@pytest.mark.parametrize("dtype", [torch.float64, torch.int32, torch.int64, torch.bfloat16, torch.float16])
def test_dtypes(options, dtype):
    def build(b, x, y):
        z = b.call(P.mul.default, b.call(P.add.default, x, y), y)
        return z, b.call(P.maximum.default, x, y), b.call(P.sum.default, z, [1])
    if dtype.is_floating_point:
        xs = [torch.randn(8, 33, dtype=dtype), torch.randn(8, 33, dtype=dtype)]
    else:
        xs = [torch.randint(-50, 50, (8, 33), dtype=dtype), torch.randint(-50, 50, (8, 33), dtype=dtype)]
    run(build, xs, options)


def test_integer_division_semantics(options):
    a = torch.randint(-20, 20, (64,))
    bb = torch.randint(1, 7, (64,)) * torch.where(torch.rand(64) > 0.5, 1, -1)

    def build(b, x, y):
        return tuple(b.call(getattr(P, k).default, x, y) for k in
                     ("div", "floor_divide", "remainder", "fmod", "bitwise_and", "shift_right"))
    run(build, [a, bb], options)


def test_convert_and_where(options):
    def build(b, x):
        i = b.call(P.convert_element_type.default, b.call(P.mul.default, x, x), torch.int32)
        h = b.call(P.convert_element_type.default, x, torch.bfloat16)
        c = b.call(P.gt.default, x, b.call(P.neg.default, x))
        return i, h, b.call(P.where.default, c, x, b.call(P.exp.default, x))
    run(build, [torch.randn(100)], options)


def test_iota_full(options):
    def build(b, x):
        i = b.call(P.iota.default, 10, start=3, step=2, dtype=torch.float32, device=torch.device("cpu"))
        return b.call(P.add.default, x, i)
    run(build, [torch.randn(10)], options)


def test_uniform_and_normal_match_reference(options):
    seed = torch.tensor(1234567, dtype=torch.int64)

    def build(b, s):
        u = b.call(P.uniform.default, [3, 1000], s, 77, dtype=torch.float32, device=torch.device("cpu"))
        n = b.call(P.normal.default, [3, 1000], s, 5, dtype=torch.float32, device=torch.device("cpu"))
        return u, n
    b = GraphBuilder()
    s = b.input(seed)
    b.output(*build(b, s))
    cg = compile_graph(b.build(), b.examples, options)
    u, n = cg([seed])
    assert torch.equal(u, b.values[0])  # bit for bit
    torch.testing.assert_close(n, b.values[1], rtol=1e-5, atol=1e-5)


def test_extern_matmul_between_kernels(options):
    def build(b, x, w):
        h = b.call(P.exp.default, x)
        y = b.call(torch.ops.aten.mm.default, h, w)
        return b.call(P.tanh.default, y)
    cg = run(build, [torch.randn(8, 16), torch.randn(16, 4)], options, n_kernels=2)
    assert any("mm" in f[1] for f in cg.fallbacks)


def test_output_is_input_view_and_multiple_outputs(options):
    def build(b, x):
        return x, b.call(P.permute.default, x, [1, 0]), b.call(P.neg.default, x)
    run(build, [torch.randn(3, 4)], options)


def test_noncontiguous_input_is_relayouted(options):
    b = GraphBuilder()
    x = b.input(torch.randn(4, 6))
    b.output(b.call(P.sin.default, x))
    cg = compile_graph(b.build(), b.examples, options)
    t = torch.randn(6, 4).t()
    torch.testing.assert_close(cg([t])[0], torch.sin(t))


def _assembly(cg, options) -> str:
    """objdump of the built library of a one-kernel graph."""
    import shutil
    import subprocess
    from ember_inductor.codegen.cpp import PRELUDE
    from ember_inductor.codegen.cpp_build import compiler_command, library_path, prepare_prelude
    if shutil.which("objdump") is None:
        pytest.skip("objdump not installed")
    body = cg.kernels[0].meta["body"].replace('extern "C" void kernel(', 'extern "C" void kernel_0(', 1)
    include, _ = prepare_prelude(PRELUDE, compiler_command(options), options)
    return subprocess.run(["objdump", "-d", library_path(include + "\n" + body, options)],
                          capture_output=True, text=True).stdout


def test_vectorized_math_in_assembly(options):
    """The simple_fn loop calls libmvec's vector sinf (checked once in the built library)."""
    asm = _assembly(run(simple_fn, [torch.randn(4096)], options), options)
    assert "_ZGV" in asm and "sinf" in asm  # e.g. _ZGVeN16v_sinf: 16 lanes per call


def test_column_reduction_assembly_reads_rows_without_gathers(options):
    """The interchanged loops of a column reduction vectorize along the row (contiguous loads),
    not across rows: g++ did the latter, with gather instructions, until told otherwise."""
    def build(b, g, x):
        return b.call(P.sum.default, b.call(P.mul.default, g, x), [0]), b.call(P.sum.default, g, [0])
    cg = run(build, [torch.randn(256, 64), torch.randn(256, 64)], options, n_kernels=1)
    asm = _assembly(cg, options)
    assert "part" in cg.kernels[0].meta["body"] and "gather" not in asm


def test_num_threads_option(options):
    cg = run(simple_fn, [torch.randn(100_000)], options.replace(num_threads=1))
    assert "num_threads(1)" in cg.kernels[0].source


def test_inlined_expf_accuracy(options):
    """ember_expf: within 1 ulp of the correctly rounded exp, special values exact."""
    x = torch.cat([torch.randn(100_000) * 30, torch.linspace(-110, 95, 100_000),
                   torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 88.72, 88.73, -87.3])])
    b = GraphBuilder()
    b.output(b.call(P.exp.default, b.input(x)))
    out = compile_graph(b.build(), b.examples, options)([x])[0]
    ref = torch.exp(x.double()).float()
    normal = torch.isfinite(ref) & (ref > 1e-37)
    ulp = (out.view(torch.int32).long() - ref.view(torch.int32).long()).abs()
    assert ulp[normal].max() <= 1
    torch.testing.assert_close(out, torch.exp(x), rtol=1e-6, atol=1e-38, equal_nan=True)


def test_zero_size_scalar_and_size_one_reduction(options):
    def build(b, x, s, e):
        return (b.call(P.sum.default, x, [1]), b.call(P.mul.default, s, s),
                b.call(P.exp.default, e), b.call(P.sum.default, e, [0]))
    run(build, [torch.randn(4, 1), torch.randn(()), torch.randn(0, 3)], options)


def test_multi_output_extern(options):
    def build(b, x):
        top = b.call(torch.ops.aten.topk.default, b.call(P.exp.default, x), 3)
        values = b.call(__import__("operator").getitem, top, 0)
        indices = b.call(__import__("operator").getitem, top, 1)
        return b.call(P.neg.default, values), indices
    run(build, [torch.randn(4, 10)], options)


def test_int_and_bool_reductions(options):
    def build(b, x, m):
        return b.call(P.sum.default, x, [0]), b.call(P.amax.default, x, [1]), b.call(P.any.default, m, [0, 1])
    run(build, [torch.randint(-9, 9, (7, 5), dtype=torch.int32), torch.rand(7, 5) > 0.9], options)


@pytest.mark.parametrize("kind", ["sum", "amax", "amin", "prod"])
@pytest.mark.parametrize("shape,dims", [((512, 300), [0]), ((64, 8, 130), [0, 1]), ((200, 3, 70), [0])])
def test_column_reductions(options, kind, shape, dims):
    """Reductions over strided dimensions take the interchanged loops of Note [column
    reductions] (per-thread partial rows, combined in order), alone and fused with an
    elementwise output over the same rows."""
    def build(b, x, y):
        prod = b.call(P.mul.default, x, y)
        return b.call(getattr(P, kind).default, prod, dims), b.call(P.exp.default, prod)
    x = torch.randn(shape)
    y = torch.rand(shape) + 0.5 if kind != "prod" else torch.rand(shape) * 0.02 + 0.995
    b = GraphBuilder()
    b.output(*build(b, b.input(x), b.input(y)))
    cg = compile_graph(b.build(), b.examples, options)
    assert len(cg.kernels) == 1 and "part" in cg.kernels[0].meta["body"], "expected column-reduction loops"
    got = cg([x, y])
    def reduce(t):
        for d in sorted(dims, reverse=True):
            t = getattr(t, kind)(d)
        return t
    ref, ref64 = reduce(x * y), reduce(x.double() * y.double())
    # a sum's rounding depends on its order: no further from float64 than eager's, or within 1e-5
    err, eager_err = (got[0].double() - ref64).abs().max(), (ref.double() - ref64).abs().max()
    assert err <= max(2 * eager_err, 1e-5 * ref64.abs().max()), (err, eager_err)
    assert_close(got[1], torch.exp(x * y))


def test_column_reduction_nan_and_bool(options):
    x = torch.randn(1000, 64)
    def build(b, x):
        pos = b.call(P.gt.default, x, b.call(P.full.default, [1000, 64], 0.5, dtype=torch.float32,
                                             device=torch.device("cpu")))
        return b.call(P.amax.default, x, [0]), b.call(P.amin.default, x, [0]), b.call(P.any.default, pos, [0])
    b = GraphBuilder()
    outs = build(b, b.input(x))
    b.output(*outs)
    cg = compile_graph(b.build(), b.examples, options)
    x[17, 5] = float("nan")
    x[999, 63] = float("nan")
    got = cg([x])
    for g, e in zip(got, (x.amax(0), x.amin(0), (x > 0.5).any(0))):
        torch.testing.assert_close(g, e, equal_nan=True)


def test_transposed_matmul_output_is_computed_transposed(options):
    """Note [transposed matmul outputs]: permute(mm(a, b)) is bᵀ @ aᵀ, with no copy kernel;
    a transposed elementwise operand is written in its own order and passed strided."""
    def build(b, x, g):
        relu = b.call(P.maximum.default, g, b.call(P.full.default, [64, 48], 0.0, dtype=torch.float32,
                                                   device=torch.device("cpu")))
        mm = b.call(torch.ops.aten.mm.default, b.call(P.permute.default, x, [1, 0]), relu)
        return b.call(P.permute.default, mm, [1, 0])
    cg = run(build, [torch.randn(64, 32), torch.randn(64, 48)], options)
    assert "permute" not in " ".join(k.meta["body"] for k in cg.kernels) and len(cg.kernels) == 1, cg.source
    assert "(48, 64), (1, 48)" in cg.source, cg.source  # allocated as the BLAS reads it (Note [allocated as read])


def test_value_realized_for_an_extern_is_read_not_recomputed(options):
    """Note [realized values are read, not recomputed]: sin(x) feeds a matmul and a column
    sum; it is computed once (the sum loads the matmul's operand buffer)."""
    def build(b, x, w):
        s = b.call(P.sin.default, x)
        return b.call(torch.ops.aten.mm.default, s, w), b.call(P.sum.default, s, [0])
    cg = run(build, [torch.randn(64, 32), torch.randn(32, 16)], options)
    assert sum(k.meta["body"].count("sinf(") for k in cg.kernels) == 1, cg.kernel_sources


def test_residual_stream_is_realized_not_regrown(options):
    """Note [bounded recomputation]: a residual stream (x = x + f(norm(x)), a matmul between
    steps) is realized once its expression loads more than MAX_RECOMPUTED_READS buffers, so
    step k's kernels do not re-read every earlier step's output."""

    def build(b, x, w):
        for _ in range(8):
            mean = b.call(P.broadcast_in_dim.default, b.call(P.sum.default, x, [1]), [16, 32], [0])
            mm = b.call(torch.ops.aten.mm.default, b.call(P.sub.default, x, mean), w)
            x = b.call(P.add.default, x, b.call(P.tanh.default, mm))
        return x
    b = GraphBuilder()
    inputs = [torch.randn(16, 32), torch.randn(32, 32) * 0.1]
    b.output(build(b, *[b.input(t) for t in inputs]))
    cg = compile_graph(b.build(), b.examples, options)
    # eight matmuls deep: rounding differences of the sums grow, so a looser tolerance
    torch.testing.assert_close(cg(inputs)[0], b.values[0], rtol=1e-4, atol=1e-4)
    loads = [sum(op.kind == "load" for op in k.kernel.ops) for k in cg.kernels]
    assert max(loads) <= 5, loads  # unbounded, the last step's kernel would load 9



def test_column_reduction_with_an_outer_output(options):
    """An output over the kept dimensions that does not need the reduction (it may sit before
    the reduction loops) is written once per element, and right."""
    def build(b, x, w):
        return b.call(P.sum.default, x, [0]), b.call(P.exp.default, w)
    cg = run(build, [torch.randn(3000, 40), torch.randn(40)], options, n_kernels=1)
    body = cg.kernels[0].meta["body"]
    assert "part" in body and body.count("p3[") == 1, body  # exp(w) stored once, after the rows


def test_column_reduction_in_two_dependent_stages(options):
    """A variance after its mean, both over the rows of a row-major matrix (batch norm's
    statistics over channels-last memory): two column passes, the second reading the first's
    combined result per column; the mean's own store runs once per column."""
    def build(b, x):
        mean = b.call(P.div.default, b.call(P.sum.default, x, [0]),
                      b.call(P.full.default, [40], 3000.0, dtype=torch.float32, device=torch.device("cpu")))
        centered = b.call(P.sub.default, x, b.call(P.broadcast_in_dim.default, mean, [3000, 40], [1]))
        return mean, b.call(P.sum.default, b.call(P.mul.default, centered, centered), [0])
    cg = run(build, [torch.randn(3000, 40) + 5.0], options, n_kernels=1)
    body = cg.kernels[0].meta["body"]
    assert body.count("#pragma omp parallel") == 2 and "res" in body, body


def test_division_by_a_row_value_multiplies_by_its_inverse(options):
    """Softmax's division by its row sum is a multiply by the inverse; a subnormal divisor
    (whose inverse overflows) still divides, and zero/inf/NaN divisors give the quotient's
    results."""
    def build(b, x, d):
        s = b.call(P.sum.default, d, [1])
        return b.call(P.div.default, x, b.call(P.broadcast_in_dim.default, s, [5, 8], [0]))
    d = torch.rand(5, 8) + 0.5
    d[1] = 1e-40                      # row sum 8e-40: subnormal
    d[2] = 0.0
    d[3, 0] = float("inf")
    d[4, 0] = float("nan")
    x = torch.randn(5, 8)
    x[1] = 1e-40
    b = GraphBuilder()
    b.output(build(b, b.input(x), b.input(d)))
    cg = compile_graph(b.build(), b.examples, options)
    assert " * inv" in cg.kernels[0].meta["body"]
    torch.testing.assert_close(cg([x, d])[0], x / d.sum(1, keepdim=True), rtol=3e-7, atol=0, equal_nan=True)


def test_loop_invariant_values_are_computed_once_before_the_loop(options):
    """An optimizer's bias correction, 1 - 0.9 ** (step + 1) from a 0-d step count, scaling a
    parameter: the powf runs once, before the element loop, not once per element."""
    cpu = torch.device("cpu")

    def build(b, p, step):
        full = lambda v: b.call(P.full.default, [], v, dtype=torch.float32, device=cpu)  # noqa: E731
        corr = b.call(P.sub.default, full(1.0), b.call(P.pow.default, full(0.9), b.call(P.add.default, step, full(1.0))))
        return b.call(P.mul.default, p, b.call(P.broadcast_in_dim.default, corr, [4096], []))
    cg = run(build, [torch.randn(4096), torch.tensor(3.0)], options, n_kernels=1)
    body = cg.kernels[0].meta["body"]
    assert "powf" in body and body.index("powf") < body.index("for (")

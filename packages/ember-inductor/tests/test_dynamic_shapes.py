"""Symbolic sizes through the inductor (issue #18, Note [symbolic sizes in the inductor]).

Each graph is compiled ONCE with symbolic sizes (hints: the sizes in the build) and called with
inputs of sizes never seen at compile time, including 2 and sizes no block size divides,
compared with eager. The C++ backend runs every graph; Triton (interpreted on the CPU) a few.
"""
from __future__ import annotations

import operator
import os
import sys

import pytest
import sympy
import torch

from ember_inductor import InductorOptions, compile_graph

sys.path.insert(0, os.path.dirname(__file__))
from symbolic_graphs import P, SymbolicGraph, aten  # noqa: E402

SIZES = (2, 5, 37, 130)  # never the hint (8), odd, not a multiple of any block


@pytest.fixture
def triton_options(tmp_path_factory):
    return InductorOptions(cache_dir=str(tmp_path_factory.mktemp("triton_dynamic")), backend="triton")


def _check(compiled, make_inputs, reference, sizes=SIZES, **tol):
    for n in sizes:
        inputs = make_inputs(n)
        got = compiled(inputs)
        want = reference(*inputs)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, **tol)


def _compile(g: SymbolicGraph, options):
    guards = list(g.env.guards)
    compiled = compile_graph(g.build(), g.examples, options)
    new = g.env.guards[len(guards):]
    # every compile-time choice here is correct for all sizes: nothing was guarded but, on
    # Triton, 32-bit indices (Note [32-bit indices of symbolic kernels]): bounds near 2**31
    assert g.env.guards[:len(guards)] == guards
    assert all(isinstance(r, sympy.Le) and r.rhs >= 2**20 for r in new) and (options.backend == "triton" or not new)
    return compiled


# -- pointwise -----------------------------------------------------------------------------------

def _pointwise_graph():
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(12)
    x = g.input(torch.randn(8, 12), (n, m))
    b = g.input(torch.randn(12), (m,))
    rows, cols = g.size(x, 0), g.size(x, 1)
    bb = g.call(P.broadcast_in_dim.default, b, [rows, cols], [1])
    rowsum = g.call(P.sum.default, x, [1])
    rb = g.call(P.broadcast_in_dim.default, rowsum, [rows, cols], [0])
    y = g.call(P.mul.default, g.call(P.sin.default, g.call(P.add.default, x, bb)), rb)
    g.output(y, rowsum)
    return g


def _pointwise_ref(x, b):
    return torch.sin(x + b) * x.sum(1, keepdim=True), x.sum(1)


def _pointwise_inputs(n):
    return [torch.randn(n, n + 3), torch.randn(n + 3)]


def test_pointwise_broadcast_chain(options):
    g = _pointwise_graph()
    compiled = _compile(g, options)
    assert "s0" in compiled.source and "s1" in compiled.source  # bound in the wrapper, by name
    assert all("const int64_t s0" in k.source for k in compiled.kernels)  # kernels take the sizes
    _check(compiled, _pointwise_inputs, _pointwise_ref, atol=1e-4, rtol=1e-4)


def test_pointwise_broadcast_chain_triton(triton_options):
    compiled = _compile(_pointwise_graph(), triton_options)
    assert "s0" in compiled.kernels[0].source
    _check(compiled, _pointwise_inputs, _pointwise_ref, sizes=(2, 37), atol=1e-4, rtol=1e-4)


# -- reductions ----------------------------------------------------------------------------------

def test_reductions_over_symbolic_and_static_dims(options):
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 16), (n, 16))
    cols = g.call(P.sum.default, x, [0])         # over the symbolic dim (a column reduction)
    rows = g.call(P.amax.default, x, [1])        # over the static dim of a symbolic tensor
    total = g.call(P.sum.default, x, [0, 1])     # everything
    g.output(cols, rows, total)
    compiled = _compile(g, options)
    # the sum over rows reads them contiguously into per-thread partial rows (Note [column
    # reductions]): the outer size is static, the row count an argument
    assert any("const int64_t lo = s0 * t / nth" in k.source for k in compiled.kernels)
    _check(compiled, lambda n: [torch.randn(n, 16)],
           lambda x: (x.sum(0), x.amax(1), x.sum()), atol=1e-4, rtol=1e-4)


def _softmax_graph():
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(12)
    x = g.input(torch.randn(8, 12), (n, m))
    rows, cols = g.size(x, 0), g.size(x, 1)
    mx = g.call(P.broadcast_in_dim.default, g.call(P.amax.default, x, [1]), [rows, cols], [0])
    e = g.call(P.exp.default, g.call(P.sub.default, x, mx))
    s = g.call(P.broadcast_in_dim.default, g.call(P.sum.default, e, [1]), [rows, cols], [0])
    g.output(g.call(P.div.default, e, s))
    return g


def _softmax_inputs(n):
    return [torch.randn(n, 2 * n + 1) * 4]


def test_softmax_symbolic_rows(options):
    compiled = _compile(_softmax_graph(), options)
    assert len(compiled.kernels) == 1
    assert "static thread_local float* row" in compiled.kernels[0].source  # exp(x - max) computed once per element
    _check(compiled, _softmax_inputs, lambda x: (torch.softmax(x, 1),))


def test_softmax_symbolic_rows_triton(triton_options):
    compiled = _compile(_softmax_graph(), triton_options)
    assert "(looped)" in compiled.kernels[0].source  # a row of symbolic length never fits a fixed block
    _check(compiled, _softmax_inputs, lambda x: (torch.softmax(x, 1),), sizes=(2, 37))


def test_layer_norm_symbolic_batch(options):
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 32), (n, 32))
    w, b = g.input(torch.randn(32)), g.input(torch.randn(32))
    rows = g.size(x, 0)

    def rowwise(v):
        return g.call(P.broadcast_in_dim.default, v, [rows, 32], [0])

    def cols(v):
        return g.call(P.broadcast_in_dim.default, v, [rows, 32], [1])
    inv_n = g.call(P.full.default, [], 1.0 / 32, dtype=torch.float32, device=torch.device("cpu"))
    mean = g.call(P.mul.default, g.call(P.sum.default, x, [1]), g.call(P.broadcast_in_dim.default, inv_n, [rows], []))
    d = g.call(P.sub.default, x, rowwise(mean))
    var = g.call(P.mul.default, g.call(P.sum.default, g.call(P.mul.default, d, d), [1]),
                 g.call(P.broadcast_in_dim.default, inv_n, [rows], []))
    eps = g.call(P.full.default, [rows], 1e-5, dtype=torch.float32, device=torch.device("cpu"))
    rstd = g.call(P.rsqrt.default, g.call(P.add.default, var, eps))
    y = g.call(P.add.default, g.call(P.mul.default, g.call(P.mul.default, d, rowwise(rstd)), cols(w)), cols(b))
    g.output(y)
    compiled = _compile(g, options)
    _check(compiled, lambda n: [torch.randn(n, 32), torch.randn(32), torch.randn(32)],
           lambda x, w, b: (torch.nn.functional.layer_norm(x, (32,), w, b, 1e-5),), atol=1e-5, rtol=1e-4)


def test_mean_divides_by_a_size_node(options):
    """x.sum(1) / x.shape[1]: a size used as a value (full of a size node)."""
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(12)
    x = g.input(torch.randn(8, 12), (n, m))
    cols = g.size(x, 1)
    count = g.call(P.full.default, [g.size(x, 0)], cols, dtype=torch.float32, device=torch.device("cpu"))
    g.output(g.call(P.div.default, g.call(P.sum.default, x, [1]), count))
    compiled = _compile(g, options)
    _check(compiled, lambda n: [torch.randn(n, 3 * n)], lambda x: (x.mean(1),), atol=1e-5, rtol=1e-5)


# -- views -----------------------------------------------------------------------------------

def test_views_reshape_permute(options):
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 12), (n, 12))
    rows = g.size(x, 0)
    three = g.arith(operator.mul, rows, 3)
    y = g.call(P.exp.default, x)                                       # lazy: views remap its index
    a = g.call(P.reshape.default, y, [rows, 3, 4])
    a = g.call(P.permute.default, a, [2, 0, 1])                        # (4, s0, 3)
    a = g.call(P.reshape.default, g.call(P.add.default, a, a), [4, three])  # (4, 3*s0)
    xb = g.call(P.reshape.default, x, [three, 4])                      # a view of the input buffer
    xt = g.call(P.permute.default, xb, [1, 0])                         # (4, 3*s0) strided
    g.output(g.call(P.sub.default, a, xt))
    compiled = _compile(g, options)

    def ref(x):
        n = x.shape[0]
        a = (2 * torch.exp(x)).reshape(n, 3, 4).permute(2, 0, 1).reshape(4, 3 * n)
        return (a - x.reshape(3 * n, 4).t(),)
    _check(compiled, lambda n: [torch.randn(n, 12)], ref, atol=1e-5, rtol=1e-5)


def test_reshape_merges_symbolic_dims(options):
    """(s0, s1) permuted, then flattened: the index unflattens by a symbolic size."""
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(6)
    x = g.input(torch.randn(8, 6), (n, m))
    flat = g.arith(operator.mul, g.size(x, 0), g.size(x, 1))
    t = g.call(P.permute.default, g.call(P.neg.default, x), [1, 0])
    g.output(g.call(P.reshape.default, t, [flat]), g.call(P.reshape.default, x, [flat]))
    compiled = _compile(g, options)
    _check(compiled, lambda n: [torch.randn(n, n + 1)], lambda x: ((-x).t().reshape(-1), x.reshape(-1)))


def test_cat_and_slice(options):
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(5)
    x = g.input(torch.randn(8, 4), (n, 4))
    y = g.input(torch.randn(5, 4), (m, 4))
    c = g.call(P.cat.default, [g.call(P.sin.default, x), y], 0)         # (s0 + s1, 4)
    total = g.arith(operator.add, g.size(x, 0), g.size(y, 0))
    s = g.call(P.slice.default, c, [1, 1], [total, 3], [1, 1])          # c[1:, 1:3]
    g.output(c, g.call(P.mul.default, s, s))
    compiled = _compile(g, options)

    def ref(x, y):
        c = torch.cat([torch.sin(x), y])
        return c, c[1:, 1:3] ** 2
    _check(compiled, lambda n: [torch.randn(n, 4), torch.randn(2 * n + 1, 4)], ref)


def test_cat_triton(triton_options):
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(5)
    x = g.input(torch.randn(8, 3), (n, 3))
    y = g.input(torch.randn(5, 3), (m, 3))
    g.output(g.call(P.cat.default, [g.call(P.sin.default, x), y], 0))
    compiled = _compile(g, triton_options)
    _check(compiled, lambda n: [torch.randn(n, 3), torch.randn(n + 4, 3)],
           lambda x, y: (torch.cat([torch.sin(x), y]),), sizes=(2, 37))


# -- externs -----------------------------------------------------------------------------------

@pytest.mark.parametrize("padding", [False, True])
def test_matmul_extern_with_epilogue(options, padding):
    """A product of a symbolic number of rows (shape_padding leaves it alone: its padding would
    depend on the sizes) with a bias and a ReLU fused after it."""
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 100), (n, 100))
    w, b = g.input(torch.randn(100, 72)), g.input(torch.randn(72))
    mm = g.call(aten.mm.default, x, w)
    bias = g.call(P.broadcast_in_dim.default, b, [g.size(x, 0), 72], [1])
    zero = g.call(P.full.default, [g.size(x, 0), 72], 0.0, dtype=torch.float32, device=torch.device("cpu"))
    g.output(g.call(P.maximum.default, g.call(P.add.default, mm, bias), zero))
    compiled = _compile(g, InductorOptions(cache_dir=options.cache_dir, backend="cpp", shape_padding=padding))
    assert any("mm" in str(f[1]) for f in compiled.fallbacks)
    _check(compiled, lambda n: [torch.randn(n, 100), torch.randn(100, 72), torch.randn(72)],
           lambda x, w, b: (torch.relu(x @ w + b),), atol=1e-4, rtol=1e-4)


# -- int inputs and int outputs ------------------------------------------------------------------

def test_int_input_symbol(options):
    """A dynamic int input (a step counter): its symbol is read from the argument; an int the
    graph computes from sizes is returned as an int."""
    g = SymbolicGraph()
    n, k = g.symbol(8), g.symbol(3)
    x = g.input(torch.randn(8, 4), (n, 4))
    step = g.int_input(3, k)
    scaled = g.call(P.full.default, [g.size(x, 0), 4], step, dtype=torch.float32, device=torch.device("cpu"))
    g.output(g.call(P.mul.default, x, scaled), g.arith(operator.mul, g.size(x, 0), step))
    compiled = _compile(g, options)
    for n, s in ((2, 7), (37, 2), (5, 100)):
        x = torch.randn(n, 4)
        out, count = compiled([x, s])
        torch.testing.assert_close(out, x * s)
        assert count == n * s and isinstance(count, int)


def test_symbol_only_in_a_stride_is_bound(options):
    """A symbol that is no input's size but is a stride of one (x is a column slice of a wider
    matrix) is read from that stride."""
    g = SymbolicGraph()
    n, w = g.symbol(8), g.symbol(10)
    base = torch.randn(8, 10)
    x = g.input(base[:, :4], (n, 4))
    x.meta["val"] = torch.empty_strided((n, 4), (w, 1), device="meta")
    with g.fake_mode:
        x.meta["val"] = g.fake_mode.from_tensor(torch.empty(0)).new_empty_strided((n, 4), (w, 1))
    g.output(g.call(P.cos.default, x))
    compiled = _compile(g, options)
    assert "stride(0)" in compiled.source
    for n, width in ((2, 7), (37, 5)):
        big = torch.randn(n, width)
        torch.testing.assert_close(compiled([big[:, :4]])[0], torch.cos(big[:, :4]))


def test_new_layout_is_copied_first(options):
    """A symbolic input with strides other than those compiled for is relaid, not misread."""
    g = _pointwise_graph()
    compiled = _compile(g, options)
    x = torch.randn(9, 6).t()  # (6, 9), column-major
    b = torch.randn(9)
    for got, want in zip(compiled([x, b]), _pointwise_ref(x, b)):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_static_graph_has_no_size_arguments(options):
    """Static graphs compile as before: sizes are literals, kernels take no size argument."""
    from ember_inductor.graph_builder import GraphBuilder
    b = GraphBuilder()
    x = b.input(torch.randn(8, 12))
    b.output(b.call(P.sin.default, x))
    compiled = compile_graph(b.build(), b.examples, options)
    assert compiled.kernels[0].kernel.sizevars == ()
    assert "const int64_t s0" not in compiled.kernels[0].source and "s0" not in compiled.source


def test_symbolic_and_static_kernels_differ(options):
    """The same computation compiled static and symbolic: different kernel sources (a cache
    keyed by source cannot confuse them)."""
    from ember_inductor.graph_builder import GraphBuilder
    b = GraphBuilder()
    x = b.input(torch.randn(8, 12))
    b.output(b.call(P.sin.default, x))
    static = compile_graph(b.build(), b.examples, options)
    g = SymbolicGraph()
    xs = g.input(torch.randn(8, 12), (g.symbol(8), 12))
    g.output(g.call(P.sin.default, xs))
    dynamic = _compile(g, options)
    assert static.kernels[0].source != dynamic.kernels[0].source
    torch.testing.assert_close(dynamic([torch.ones(3, 12)])[0], torch.sin(torch.ones(3, 12)))


def test_size_nodes_pass_the_spec_check_and_print_as_names(options):
    """sym_size and operator nodes are part of the inductor's input spec; the diagram and the IR
    name the symbols."""
    from ember_inductor import verify_graph
    from ember_inductor.diagram import to_dot
    g = _softmax_graph()
    gm = g.build()
    verify_graph(gm, strict=True)
    compiled = compile_graph(gm, g.examples, InductorOptions(cache_dir=options.cache_dir, backend="cpp",
                                                               debug_verify=True))
    assert "over [s0, s1]" in to_dot(compiled.schedule)
    assert "in0[s0, s1]" in compiled.ir


def test_artifact_round_trip(options):
    """A symbolic CompiledGraph saved as data and rebuilt (warm start) still binds its sizes."""
    from ember_inductor.artifacts import from_artifact, to_artifact
    compiled = _compile(_pointwise_graph(), options)
    loaded = from_artifact(to_artifact(compiled), options)
    _check(loaded, _pointwise_inputs, _pointwise_ref, sizes=(3, 11), atol=1e-4, rtol=1e-4)


def test_size_nodes_are_not_buffer_reads(options):
    """Note [bounded recomputation] counts the buffers a lazy value loads; the size nodes its
    broadcasts take are not buffers, so a value of three loads stays lazy as in a static graph
    (it was realized into a buffer of its own)."""
    g = SymbolicGraph()
    n, m = g.symbol(8), g.symbol(6)
    x, y = g.input(torch.randn(8, 6), (n, m)), g.input(torch.randn(8, 6), (n, m))
    b = g.input(torch.randn(6), (m,))
    rows, cols = g.size(x, 0), g.size(x, 1)
    nb = g.call(P.neg.default, b)  # lazy: the broadcast's reads are its loads and its size nodes
    a = g.call(P.add.default, g.call(P.add.default, x, y), g.call(P.broadcast_in_dim.default, nb, [rows, cols], [1]))
    out1 = g.call(P.clone.default, g.call(P.permute.default, a, [1, 0]))
    out2 = g.call(P.mul.default, a, a)
    g.output(out1, out2)
    compiled = _compile(g, options)
    assert compiled.source.count("empty_strided") == 2  # the two outputs, no buffer for `a`
    _check(compiled, lambda n: [torch.randn(n, n + 2), torch.randn(n, n + 2), torch.randn(n + 2)],
           lambda x, y, b: ((x + y - b).t(), (x + y - b) ** 2))


def _reduction_graph():
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 16), (n, 16))
    g.output(g.call(P.sum.default, x, [0]), g.call(P.amax.default, x, [1]))
    return g


def test_reductions_triton(triton_options):
    """Over the symbolic dim (a static number of rows, each of symbolic length) and over the
    static one (a symbolic number of rows)."""
    compiled = _compile(_reduction_graph(), triton_options)
    _check(compiled, lambda n: [torch.randn(n, 16)], lambda x: (x.sum(0), x.amax(1)), sizes=(2, 37),
           atol=1e-4, rtol=1e-4)


def test_convolution_extern_symbolic_batch_and_image(options):
    """Convolutions called with the call's sizes; the channels-last layout plan holds with
    symbolic sizes (strides as expressions)."""
    g = SymbolicGraph()
    n, h = g.symbol(4), g.symbol(8)
    x = g.input(torch.randn(4, 3, 8, 8), (n, 3, h, h))
    w, b, w2 = g.input(torch.randn(6, 3, 3, 3)), g.input(torch.randn(6)), g.input(torch.randn(5, 6, 1, 1))
    r = g.call(P.exp.default, g.call(aten.convolution.default, x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1))
    c2 = g.call(aten.convolution.default, r, w2, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    g.output(g.call(P.sum.default, r, [0, 2, 3]), c2)
    compiled = compile_graph(g.build(), g.examples, options)

    def ref(x, w, b, w2):
        r = torch.exp(torch.nn.functional.conv2d(x, w, b, padding=1))
        return r.sum((0, 2, 3)), torch.nn.functional.conv2d(r, w2)
    weights = g.examples[1:]
    _check(compiled, lambda n: [torch.randn(n, 3, n + 3, n + 3), *weights], ref, sizes=(2, 5), atol=1e-3, rtol=1e-4)


def test_triton_indices_32_bit_under_a_guard(triton_options):
    """Note [32-bit indices of symbolic kernels]: one guard bounds the sizes, the kernel indexes
    in 32 bits; sizes whose hints are near 2**31 elements index in 64 bits, with no guard."""
    g = _softmax_graph()
    compiled = compile_graph(g.build(), g.examples, triton_options)
    assert [str(r) for r in g.env.guards] == ["s1*(s0 + 1) <= 2147483647"]
    assert g.env.guards_hold({"s0": 1000, "s1": 1000}) and not g.env.guards_hold({"s0": 2**16, "s1": 2**15})
    assert "tl.int64" not in compiled.kernels[0].source.split("xindex")[0]  # no 64-bit size casts
    big = SymbolicGraph()
    n = big.symbol(2**20)  # a hint of 2**20 rows of 2**12: 2**32 elements (the example stays small)
    x = big.input(torch.randn(8, 4096), (n, 4096))
    big.output(big.call(P.sin.default, x))
    compiled = compile_graph(big.build(), big.examples, triton_options)
    assert big.env.guards == [] and "tl.cast(s0, tl.int64)" in compiled.kernels[0].source
    _check(compiled, lambda n: [torch.randn(n, 4096)], lambda x: (torch.sin(x),), sizes=(3,))


def test_float_values_of_sizes(options):
    """x * (1 / n) and x / sqrt(n) with n a size: a ratio of sizes is computed in the kernel, a
    square root by the wrapper (full runs there, with the expression as its value)."""
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 4), (n, 4))
    rows = g.size(x, 0)
    inv = g.arith(operator.truediv, 1, rows)
    root = g.call(torch.sym_sqrt, rows)
    cpu = torch.device("cpu")
    a = g.call(P.mul.default, x, g.call(P.full.default, [rows, 4], inv, dtype=torch.float32, device=cpu))
    b = g.call(P.div.default, x, g.call(P.full.default, [rows, 4], root, dtype=torch.float32, device=cpu))
    g.output(a, b)
    compiled = _compile(g, options)
    assert "sqrt(s0)" in compiled.source and any("full" in f[1] for f in compiled.fallbacks)
    _check(compiled, lambda n: [torch.randn(n, 4)], lambda x: (x * (1 / x.shape[0]), x / x.shape[0] ** 0.5))


def _rev_argmax_gather(g):
    n, m = g.symbol(8), g.symbol(6)
    x = g.input(torch.randn(8, 5), (n, 5))
    i = g.input(torch.zeros(8, 2, dtype=torch.int64), (n, 2))
    j = g.input(torch.zeros(6, dtype=torch.int64), (m,))
    e = g.call(P.exp.default, x)
    g.output(g.call(P.rev.default, e, [0]), g.call(P.argmax.default, x, 0), g.call(P.gather.default, e, 1, i),
             g.call(P.index.default, x, [j]))


def test_flip_argmax_gather_index(options):
    g = SymbolicGraph()
    _rev_argmax_gather(g)
    compiled = _compile(g, options)

    def make(n):
        return [torch.randn(n, 5), torch.randint(0, 5, (n, 2)), torch.randint(0, n, (2 * n + 1,))]

    def ref(x, i, j):
        return x.exp().flip(0), x.argmax(0), x.exp().gather(1, i), x[j]
    _check(compiled, make, ref)


def test_buffer_of_a_size_that_may_be_zero_is_freed(options):
    """x[1:] has s0 - 1 rows (4*s0 - 4 bytes: the bounds do not say it is not 0): a buffer of
    that size is planned, freed and offered for reuse like any other."""
    g = SymbolicGraph()
    n = g.symbol(8)
    x = g.input(torch.randn(8, 4), (n, 4))
    rows = g.size(x, 0)
    y = g.call(P.exp.default, g.call(P.slice.default, x, [1, 0], [rows, 4], [1, 1]))
    per_row = g.call(P.sum.default, y, [1])               # a buffer of s0 - 1 floats
    g.output(g.call(P.sum.default, per_row, [0]))          # read by the next kernel, then freed
    compiled = _compile(g, options)
    assert "del buf" in compiled.source
    _check(compiled, lambda n: [torch.randn(n, 4)], lambda x: (x[1:].exp().sum(),), atol=1e-4, rtol=1e-4)


def test_linear_head_bias_into_the_product(options):
    """A 3-D linear whose output only leaves the graph (a language model's logits): the bias
    goes into one addmm and the reshape back becomes a view of its result (Note [bias in the
    matmul]); the view's sizes are the call's, not the hints'."""
    g = SymbolicGraph()
    n, t = g.symbol(2), g.symbol(8)
    x = g.input(torch.randn(2, 8, 16), (n, t, 16))
    w, b = g.input(torch.randn(16, 12)), g.input(torch.randn(12))
    rows = g.arith(operator.mul, g.size(x, 0), g.size(x, 1))
    flat = g.call(P.reshape.default, x, [rows, 16])
    mm = g.call(aten.mm.default, flat, w)
    out = g.call(P.add.default, mm, g.call(P.broadcast_in_dim.default, b, [rows, 12], [1]))
    g.output(g.call(P.reshape.default, out, [g.size(x, 0), g.size(x, 1), 12]))
    compiled = _compile(g, options)
    assert any("addmm" in f[1] for f in compiled.fallbacks)
    _check(compiled, lambda n: [torch.randn(n, n + 3, 16), torch.randn(16, 12), torch.randn(12)],
           lambda x, w, b: (x @ w + b,), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("make", [_softmax_graph, _pointwise_graph, _reduction_graph])
def test_symbolic_triton_kernels_compiled_on_the_gpu(triton_options, make):
    """The compiled (not interpreted) path of symbolic Triton kernels: 32-bit size arguments
    under their guard, the grid per launch, Triton's own specialization of int arguments
    (a size that is a multiple of 16, or not)."""
    g = make()
    cuda = [x.cuda() if isinstance(x, torch.Tensor) else x for x in g.examples]
    gm = g.build()
    for node in gm.graph.nodes:  # the same graph on the GPU
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            with g.fake_mode:
                node.meta["val"] = torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device="cuda")
    compiled = compile_graph(gm, cuda, triton_options)
    refs = {_softmax_graph: lambda x: (torch.softmax(x, 1),), _pointwise_graph: _pointwise_ref,
            _reduction_graph: lambda x: (x.sum(0), x.amax(1))}
    inputs = {_softmax_graph: lambda n: [torch.randn(n, 2 * n + 1, device="cuda")],
              _pointwise_graph: lambda n: [torch.randn(n, n + 3, device="cuda"), torch.randn(n + 3, device="cuda")],
              _reduction_graph: lambda n: [torch.randn(n, 16, device="cuda")]}
    _check(compiled, inputs[make], refs[make], sizes=(2, 16, 37, 1000), atol=1e-4, rtol=1e-4)
    # Note [Launch fast path]: one fast launch per specialization of the int arguments seen; from
    # then on, calls at those sizes never reach Triton's JIT (which now raises if reached)
    launchers = [compiled._fn.__globals__[k.name] for k in compiled.kernels]
    assert all(launcher._fast_by_spec for launcher in launchers)
    for launcher in launchers:
        launcher._fns = {False: _NotLaunched()}
    _check(compiled, inputs[make], refs[make], sizes=(2, 16, 37, 1000), atol=1e-4, rtol=1e-4)


class _NotLaunched:
    def __getitem__(self, grid):
        raise AssertionError("Triton's JIT launch was reached: the fast path was not taken")

"""Wrong results found by the program fuzzer (program_fuzz.py, tools/fuzz_programs.py),
minimized: each compiled program must equal eager, NaN positions and missing gradients included.

Tolerances: float32 rtol=1e-5, atol=1e-5; NaN positions must match (equal_nan).
"""
import math
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

import ember

TOL = dict(rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.fixture(autouse=True)
def _compiled_not_fallen_back():
    """Each program here must be compiled: a fallback to eager would pass for the wrong reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    fell = [str(w.message) for w in caught if "ember" in str(w.message)]
    assert not fell, fell
SPECIAL = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, 2.5, -1.0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_sign_of_nan_is_zero_as_in_eager(dtype):
    x = SPECIAL.to(dtype)
    for fn in (lambda t: torch.sign(t), lambda t: t.sgn() * 2):
        ember.reset()
        torch.testing.assert_close(ember.compile(fn)(x), fn(x), **TOL)


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax, F.softmax], ids=["softmax", "log_softmax", "F"])
def test_softmax_of_a_row_holding_inf_is_nan_as_in_eager(fn):
    # eager: x - max is inf - inf = NaN for the whole row; a row of -inf only is NaN too
    inf = math.inf
    x = torch.tensor([[inf, 1.0, 2.0], [-inf, inf, 0.0], [-inf, -inf, -inf], [-inf, 0.0, 1.0], [1.0, 2.0, 3.0]])
    f = lambda t: fn(t, 1)  # noqa: E731
    torch.testing.assert_close(ember.compile(f)(x), f(x), **TOL)


def test_an_output_the_loss_does_not_reach_gives_no_gradient():
    # fuzz seeds 340 and 236 (there the unreached outputs were values live across a graph
    # break): eager gives x a finite grad and y none; a zero tangent pushed through normalize's
    # backward (0 * inf) made x.grad NaN, and y.grad zeros
    def f(x, y):
        return x * torch.arange(3.0), F.normalize(x, dim=-1) + y.prod(-1, keepdim=True)

    compiled = ember.compile(f)
    for call in range(2):
        grads = []
        for fn in (f, compiled):
            x = torch.tensor([1.0, math.inf, -2.0 - call], requires_grad=True)
            y = torch.tensor([0.5], requires_grad=True)
            a, b = fn(x, y)
            a.sum().backward()
            grads.append((x.grad, y.grad))
        (want_x, want_y), (got_x, got_y) = grads
        torch.testing.assert_close(got_x, want_x, **TOL)
        assert want_y is None and got_y is None


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.int64])
def test_logit_clamps_to_eps_rounded_to_the_input_dtype(dtype):
    # fuzz seeds 1589 and 203: in bfloat16 ATen's 1 - eps is 1.0, so logit(1, eps=1e-3) is inf
    # there; ember clamped to 0.999 in float32 and gave 6.9 (float16: 0.99902 vs 0.999)
    x = torch.tensor([0.0, 1.0, 0.5, 2.0, -1.0, 0.9995, 0.0004]).to(dtype)
    f = lambda t: torch.logit(t, eps=1e-3)  # noqa: E731
    torch.testing.assert_close(ember.compile(f)(x), f(x), rtol=0, atol=0, equal_nan=True)


def test_a_mutated_input_written_in_place_is_read_back_by_a_later_kernel():
    # fuzz seed 330: the fill_ result is stored straight into a0 (Note [mutated inputs written
    # in place]); the next kernel got a0 as its argument but still loaded the old buffer's name
    # (KeyError: 'buf1'), so the graph fell back to eager
    def f(a0):
        a0.fill_(-0.0)
        v1 = torch.frac(a0)
        return (torch.floor_divide(a0 < v1, v1),)

    for shape in [(), (5,)]:
        x, y = torch.ones(shape), torch.ones(shape)
        ember.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback
            got = ember.compile(f, fullgraph=True)(y)
        want = f(x)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, **TOL)
        torch.testing.assert_close(y, x, **TOL)


def test_bool_add_with_alpha_stays_logical():
    # fuzz seed 3327: a.add_(a, alpha=2) on a bool tensor; the decomposition scaled b by the
    # int 2 (promoting it to int64), so True + 2 * True was 3 (exp gave e**3, not e)
    def f(a, b):
        a.add_(a, alpha=2)
        return torch.exp(a), torch.add(b, a, alpha=2), torch.add(a, True, alpha=3)

    a, b = torch.tensor([True, False, True]), torch.tensor([1.5, -1.0, 0.0])
    ae = a.clone()
    want = f(ae, b)
    got = ember.compile(f)(a, b)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL)
    assert torch.equal(a, ae)


def test_a_saved_output_mutated_after_the_call_fails_the_backward_only_where_eager_does():
    # fuzz seed 3331: a value saved for the backward (pow saves y) is also returned, then the
    # user writes it in place. Eager's backward raises only if the loss reaches the node that
    # saved it; ember's single backward checked every saved tensor and raised either way
    def f(x):
        y = torch.clamp(x, -1.0, 1.5)
        return y, y ** y

    def run(fn, reach_pow):
        x = torch.tensor([0.5, 0.7, 2.0], dtype=torch.float64, requires_grad=True)
        y, z = fn(x)
        y.add_(2.25)
        (y.sum() + (z.sum() if reach_pow else 0)).backward()
        return x.grad

    compiled = ember.compile(f)
    torch.testing.assert_close(run(compiled, False), run(f, False), **TOL)
    for fn in (f, compiled):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            run(fn, True)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_dropout_that_drops_nothing_returns_its_input_under_dynamic_shapes(requires_grad):
    # fuzz seed 3256: the graph after a data-dependent shape was recompiled with symbolic sizes
    # and traced dropout through torch's Python kernel, which clones where ATen returns the
    # input: the output lost its aliasing and its strides
    def f(a):
        v = a[a > 0]  # a graph break; v's size differs between the calls
        w = v >= v
        return F.dropout(a, p=0.0, training=True), F.dropout(a, 0.5, training=False), torch.dropout(a, 0.0, True), w

    compiled = ember.compile(f)
    for seed in range(3):
        torch.manual_seed(seed)
        a = torch.randn(6, 1, 2, 7, requires_grad=requires_grad)[..., 1::2]
        for got, want in zip(compiled(a)[:3], f(a)[:3]):
            assert want is a
            assert got.data_ptr() == a.data_ptr() and got.stride() == a.stride()


def test_as_strided_of_a_value_the_trace_lays_out_otherwise_than_eager_falls_back():
    # fuzz seed 3137: as_strided reads its input's storage. Eager's division of a transposed
    # tensor keeps the transposed layout; the trace's is row-major, so ember read other
    # elements. Until the trace keeps eager's layouts, such a graph runs eagerly (one warning)
    def f(a):
        return (a / 2.25).as_strided((2, 2), (1, 2), 0), (a.contiguous() / 2).as_strided((3,), (2,), 1)

    a = torch.randn(6, 5, 6).transpose(-1, -2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = ember.compile(f)(a)
    assert len([w for w in caught if "storage_layout" in str(w.message)]) == 1
    for g, w in zip(got, f(a)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_an_integer_tensor_to_a_half_power_is_computed_in_float():
    # fuzz seed 3500: pow's fast paths (sqrt for 0.5, rsqrt for -0.5, ...) ran in the input's
    # integer dtype: sqrt(-4) was NaN cast to int32 (-2147483648.0), 4 ** -0.5 was 0
    x = torch.tensor([-4, -1, 0, 1, 4, 9], dtype=torch.int32)

    def f(a):
        return a ** 0.5, torch.pow(a, -0.5), a ** -1.0, a ** 2.0, a.to(torch.uint8) ** -2.0, a.bool() ** 0.5

    for g, w in zip(ember.compile(f)(x), f(x)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, **TOL)


@pytest.mark.parametrize("write", ["fill", "through_a_view"])
def test_an_expanded_input_written_in_place_runs_eagerly_once(write):
    # fuzz seeds 3645 and 3909: an expanded input's elements share memory. Written through a
    # view of one element (x.select(0, 1).mul_(7)), eager changes every element and the graph,
    # which gives each element its own value, changed one (a silently wrong result); filled,
    # the write-back's copy_ refused the destination after the graph had written another input,
    # and the eager rerun divided that input twice. The graph is refused before it runs
    def f(a, b):
        b.div_(0.001)
        if write == "fill":
            a.fill_(3.0)
        else:
            a.select(-1, -1).mul_(7)
        return a + 1, b * 1, a.sum()

    def inputs():
        torch.manual_seed(0)
        return [torch.randn(1).expand(4), torch.randn(3)]

    args, want_args = inputs(), inputs()
    want = f(*want_args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = ember.compile(f)(*args)
    assert len([w for w in caught if "overlapping_mutated_input" in str(w.message)]) == 1
    for g, w in [*zip(got, want), *zip(args, want_args)]:
        torch.testing.assert_close(g, w, **TOL)


def test_a_kernel_over_an_empty_input_loads_nothing():
    # fuzz seed 3674: the C++ kernel computed a load with a constant index (a stride-0 input)
    # once before its loops; an empty tensor's data pointer is null, and the loops that would
    # never have run it crashed the process. In a subprocess: a segfault must fail one test only
    import os
    import subprocess
    import sys
    program = (
        "import torch, ember\n"
        "def f(a):\n"
        "    return (torch.rsqrt(a).index_add(-1, torch.tensor([], dtype=torch.int64), torch.lgamma(a), alpha=2),)\n"
        "a = torch.zeros(1).expand(0)\n"
        "got, want = ember.compile(f)(a)[0], f(a)[0]\n"
        "assert got.shape == want.shape == (0,), got\n")
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "EMBER_WARM_START": "0"})
    assert run.returncode == 0, run.stderr[-2000:]


def test_triton_negative_zero_constant_and_a_broadcast_libdevice_call(monkeypatch):
    # fuzz seed 115 (--triton): in a reduction kernel, libdevice.fmod of a [1] constant and an
    # [X, R] block was typed [1] by the interpreter's libdevice shim, and the next op failed to
    # broadcast it (the graph fell back); and Triton makes any constant equal to 0 its +0.0, so
    # remainder(-0.0, b) lost its sign
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))

    def f(a, b):
        v = torch.remainder(torch.full_like(a, -0.0), b)
        return v, torch.max(v, 1)[0], a.new_full((3,), -0.0)

    a, b = torch.randn(3, 1, dtype=torch.float64), torch.tensor([1, -2, 3, 5, 7])
    got = ember.compile(f, options={"backend": "triton"})(a, b)
    for g, w in zip(got, f(a, b)):
        torch.testing.assert_close(g, w, **TOL)
        assert torch.equal(g.signbit(), w.signbit())


def test_an_input_whose_only_use_the_loss_does_not_reach_gets_no_gradient_even_from_round():
    # fuzz seed 3895: round(a) is live across a graph break but unused by the loss. Eager's
    # engine never reaches a, so a.grad stays None; ember's backward of round is a constant
    # (zeros, depending on no tangent), which the pruning of unreached outputs kept: a.grad was 0
    def f(a, b):
        r = torch.round(a, decimals=1)  # noqa: F841 - live across the break, unused by the loss
        v = b * 2
        torch.scatter(b, -1, torch.argsort(torch.rand([5, 3], generator=torch.Generator().manual_seed(8)), -1), v)
        return (v,)

    compiled = ember.compile(f)
    for fn in (f, compiled):
        a = torch.randn(2, 1, dtype=torch.float64, requires_grad=True)
        b = torch.randn(5, 3, requires_grad=True)
        fn(a, b)[0].sum().backward()
        assert a.grad is None and b.grad is not None


@pytest.mark.parametrize("dim", [-1, 0, (0, 1), None])
def test_var_mean_of_a_group_holding_an_infinity_is_welfords(dim):
    # fuzz seeds 3142 and 4350: ATen's var_mean takes the mean by Welford's update: an
    # infinity before a group's last element makes it NaN (inf - inf), one in the last place
    # makes it that infinity; ember's sum / n gave the infinity in every case
    inf, nan = math.inf, math.nan
    x = torch.tensor([[1.89, -inf, 3.75, -2.5], [-1.5, -0.1, 0.9, inf], [1.0, 2.0, 3.0, 4.0],
                      [inf, 1.0, 2.0, -inf], [nan, 1.0, 2.0, 3.0], [1.0, 2.0, inf, inf]])
    f = lambda t: (*torch.var_mean(t, dim), *torch.std_mean(t.double(), dim, keepdim=True))  # noqa: E731
    for g, w in zip(ember.compile(f)(x), f(x)):
        torch.testing.assert_close(g, w, **TOL)


def test_a_zero_constant_and_a_negative_zero_constant_stay_apart():
    # found triaging fuzz seed 115: the kernel builder's common-subexpression table keyed
    # constants by value, and -0.0 == 0.0, so `a * 0` reused the -0.0 of full_like(a, -0.0)
    a = torch.tensor([0.0, 1.0, -0.0, -2.0])

    def f(a):
        return torch.full_like(a, -0.0) + a * 0, 1 / (-0.0 + a * 0), 1 / (a * -0.0 + 0.0)

    for g, w in zip(ember.compile(f)(a), f(a)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
        assert torch.equal(g.signbit(), w.signbit())


def test_triton_integer_constant_out_of_its_dtypes_range_wraps_as_in_eager(monkeypatch):
    # fuzz seed 229 (--triton): ATen converts a scalar to the tensor's integer dtype by wrapping
    # (int32 < 2**40 compares with 0); the Triton kernel's constant was out of int32's range and
    # Triton refused it at the launch (the graph fell back)
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))
    a = torch.tensor([1, -5, 7, 2 ** 31 - 1, -2 ** 31], dtype=torch.int32)

    def f(a):
        return torch.lt(a, 2 ** 40), a > -2 ** 40, a == 2 ** 32 + 1, a.to(torch.int16) < 2 ** 20

    for g, w in zip(ember.compile(f, options={"backend": "triton"})(a), f(a)):
        assert torch.equal(g, w)


@pytest.mark.parametrize("other", ["weight", "none"])
def test_a_double_backward_through_a_compiled_graph_raises_rather_than_drops_a_term(other):
    # found probing training programs: the gradient taken with create_graph=True through a
    # compiled graph came back with no grad_fn (once_differentiable wraps its results in an
    # error node only when an incoming gradient requires grad, and the tangent of `.sum()`
    # does not), so a gradient penalty plus another term silently lost the penalty's part:
    # w.grad was all ones where eager's holds the second-order term. Eager is not reproduced
    # (the backward is compiled once-differentiable); it must raise, as torch.compile does.
    def f(x, w):
        return (x @ w).tanh()

    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(4, 4, requires_grad=True)
    g, = torch.autograd.grad(ember.compile(f)(x, w).sum(), x, create_graph=True)
    assert g.requires_grad
    penalty = g.pow(2).sum() + (w.sum() if other == "weight" else 0)
    with pytest.raises(RuntimeError, match="double backward"):
        penalty.backward()
    # without create_graph the gradient is the plain value, as before
    ember.reset()
    g1, = torch.autograd.grad(ember.compile(f)(x, w).sum(), x)
    torch.testing.assert_close(g1, torch.autograd.grad(f(x, w).sum(), x)[0], **TOL)
    assert not g1.requires_grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_an_operand_is_rounded_to_the_promoted_dtype_before_the_op(dtype):
    # fuzz seed 9016: `a3 % a1` of a bfloat16 tensor and a zero-dim float32 one is bfloat16, and
    # ATen rounds the modulus to bfloat16 (5.0745 -> 5.0625) before computing in float32; ember
    # computed with 5.0745, so 5.0625 % m was 5.0625 where eager's is 0, and `(a3 % a1) != 3.0`
    # differed. Eager's mul and div read a scalar second operand unrounded: those stay exact.
    a = torch.tensor([5.0625, -2.0625, 10.125, 1.0, 3.0, -7.5]).to(dtype)
    ints = torch.tensor([2049, -4097, 300, 7])
    m = torch.tensor(5.0745)

    def f(a, m, ints):
        return (a % m, a % m != 3.0, a + m, m - a, torch.atan2(a, m), a + 5.0745, a % 5.0745,
                a * m, a / m, m * a, a * 5.0745, ints + m.to(a.dtype), ints * m.to(a.dtype))

    for g, w in zip(ember.compile(f)(a, m, ints), f(a, m, ints)):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_an_in_place_op_with_a_wider_operand_keeps_its_targets_dtype():
    # fuzz seed 6791: `v10 = torch.asin(a2)` (float16), `v10.mul_(v7)` (v7 float32): eager
    # stores the product in float16; the functional `mul` that replaced `mul_` returns float32
    # and that value became v10's, so the returned v10 was float32 (and so was its gradient path)
    def f(a, b):
        v = torch.asin(a)
        v.mul_(b)
        w = a * 2
        w[0].add_(b[0])
        return v, w, w * 3

    a = torch.rand(2, 3).half()
    b = torch.rand(2, 3)
    for grad in (False, True):
        ember.reset()
        got = ember.compile(f)(a.clone().requires_grad_(grad), b)
        want = f(a.clone().requires_grad_(grad), b)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        if grad:
            x1, x2 = a.clone().requires_grad_(), a.clone().requires_grad_()
            sum(o.float().sum() for o in ember.compile(f)(x1, b)).backward()
            sum(o.float().sum() for o in f(x2, b)).backward()
            torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("view", [
    lambda t: t.unflatten(0, (2, -1)),
    lambda t: t.view(2, 2, 1, 3),
    lambda t: t.unsqueeze(1)[:, :, 0],
    lambda t: t.reshape(4, 1, 1, 3).squeeze(2),
], ids=["unflatten", "view", "unsqueeze_select", "reshape_squeeze"])
def test_a_view_of_an_input_has_eagers_strides_on_size_one_dims(view):
    # fuzz seed 5630: a [4, 1, 3] slice of strides (7, 7, 2) unflattened: eager's size-1 dim has
    # stride 6, the fake tensors' (torch's Python view references) 7; as_strided reads them
    base = torch.randn(4, 1, 7)
    x = base[..., 1::2]
    f = lambda t: (view(t), t.sin())  # noqa: E731
    ember.reset()
    got, want = ember.compile(f)(x)[0], f(x)[0]
    assert got.stride() == want.stride() and got.storage_offset() == want.storage_offset()
    assert got.data_ptr() == want.data_ptr()
    torch.testing.assert_close(got.as_strided((2, 2), (6, 1)), want.as_strided((2, 2), (6, 1)))


@pytest.mark.parametrize("fn", [
    lambda t: F.layer_norm(t, (3,), torch.linspace(0.5, 1.5, 3, dtype=t.dtype), None, 1e-5),
    lambda t: F.group_norm(t.reshape(2, 3, 3), 3),
    lambda t: t.var(1) / 1e-30,
    lambda t: t.std(1, correction=0) / 1e-30,
    lambda t: torch.var_mean(t, 1)[0] / 1e-30,
], ids=["layer_norm", "group_norm", "var", "std", "var_mean"])
def test_the_variance_of_a_constant_row_is_exactly_zero(fn):
    # fuzz seed 6909: sum / n of three float32 -7.7 is not -7.7, so layer norm scaled the residue
    # x - mean by rsqrt(eps): 1.5e-4 where eager (and float64) give 0
    x = torch.tensor([[2147483647.0] * 3, [1.0] * 3, [0.1] * 3, [3.3] * 3, [1e4] * 3, [-7.7] * 3])
    ember.reset()
    got, want = ember.compile(fn)(x), fn(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(want, fn(x.double()).float(), rtol=0, atol=0)  # eager is exact here


def _mutated_saved_output(x):
    y = F.log_softmax(x, -1, dtype=torch.float64)  # LogSoftmax saves its output y ...
    y.neg_()  # ... which is written in place: a backward through y raises
    return torch.atan(x) * 2, y.masked_fill(y > 1, 2)


@pytest.mark.parametrize("reach", ["first", "second", "both"])
def test_a_mutated_saved_value_raises_only_where_the_loss_reaches_it(reach):
    # fuzz seed 2001: the joint trace differentiated every output at once and raised "modified
    # by an inplace operation" for the whole graph, which then ran eagerly
    ember.reset()
    compiled = ember.compile(_mutated_saved_output)
    results = []
    for fn in (_mutated_saved_output, compiled):
        x = torch.linspace(-2, 3, 10).reshape(2, 5).requires_grad_()
        a, b = fn(x)
        loss = {"first": a.sum(), "second": b.sum(), "both": a.sum() + b.sum()}[reach]
        try:
            loss.backward()
            results.append(x.grad)
        except RuntimeError as exc:
            assert "modified by an inplace operation" in str(exc)
            results.append("raised")
    if reach == "first":
        assert isinstance(results[1], torch.Tensor)
        torch.testing.assert_close(results[1], results[0], **TOL)
    else:
        assert results == ["raised", "raised"]


@pytest.mark.parametrize("src, dst", [(s, d) for s in (torch.bool, torch.int32, torch.int64, torch.float64, torch.float16)
                                      for d in (torch.bfloat16, torch.float16) if s != d])
def test_triton_conversion_to_a_half_type_goes_through_float32(monkeypatch, src, dst):
    # fuzz seed 2011 (--triton): bool -> bfloat16 gave 9.2e-41 for True (the interpreter copied the
    # bits of an integer into a bfloat16) or failed at the launch; ATen converts through float
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))
    x = torch.tensor([1, 0, -5, 7, 100, -100, 256, 3])
    x = x > 0 if src == torch.bool else x.to(src)

    def f(t):
        return (t if src == torch.bool else t * 1).to(dst), (t if src == torch.bool else t * 1).to(dst) * 2

    ember.reset()
    for g, w in zip(ember.compile(f, options={"backend": "triton"})(x), f(x)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def _write_after_break(h, w):
    print("a graph break: h is an input of the graph after it")  # noqa: T201
    before = h * 2 - w  # reads the old value (saves nothing eager would see overwritten)
    h.mul_(3).add_(w)
    h[0].add_(w[1] * w[2])
    return before, h.sin(), h, h[1:]


def _write_after_break_no_grad(h, w):
    print("a graph break")  # noqa: T201
    with torch.no_grad():
        h.mul_(2)
    return h * w,


@pytest.mark.parametrize("fn", [_write_after_break, _write_after_break_no_grad], ids=["recorded", "no_grad"])
def test_a_write_to_a_non_leaf_input_that_requires_grad_compiles(fn, capsys):
    # the largest fallback class of the fuzz rounds (mutated_grad_input): a tensor computed before
    # a graph break, written in place after it. Compiled now, as AOT autograd does: the graph
    # returns the new value, the runtime copies it onto the input with autograd recording.
    def outer(x, w):
        return fn(x * 2, w)

    compiled = ember.compile(outer)
    for call in range(3):
        results = []
        for f in (outer, compiled):
            x = torch.linspace(-1, 2, 12).reshape(3, 4).requires_grad_()
            w = torch.linspace(0.5, 3, 12).reshape(3, 4).add(call).requires_grad_()
            outs = f(x, w)
            weights = [torch.linspace(-1, 1, o.numel()).reshape(o.shape) for o in outs]
            sum((o * k).sum() for o, k in zip(outs, weights)).backward(retain_graph=True)
            g1 = (x.grad.clone(), w.grad.clone())
            (outs[-1] * 3).sum().backward()  # a second backward, through the kept graph
            results.append((outs, g1, x.grad, w.grad))
        (e_outs, e_g1, e_x, e_w), (c_outs, c_g1, c_x, c_w) = results
        for c, e in zip(c_outs, e_outs):
            torch.testing.assert_close(c, e, **TOL)
        for c, e in zip((*c_g1, c_x, c_w), (*e_g1, e_x, e_w)):
            torch.testing.assert_close(c, e, **TOL)
    if fn is _write_after_break:
        assert c_outs[3]._base is c_outs[2]._base or c_outs[3]._base is c_outs[2]  # h[1:] views h


@pytest.mark.parametrize("make", [lambda x: x, lambda x: x[1:]], ids=["leaf", "view_of_leaf"])
def test_a_write_to_a_leaf_that_requires_grad_raises_eagers_error(make):
    def f(x, w):
        y = make(x)
        y.mul_(w[: y.shape[0]])
        return y.sum(),

    for fn in (f, ember.compile(f)):
        x, w = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad is being used in an in-place"):
            fn(x, w)


def test_an_op_without_a_derivative_raises_only_where_the_loss_reaches_it():
    # fuzz seeds 12040, 12085, 12182: floor_divide of a tensor that requires grad has no
    # derivative; eager raises only when a backward runs its node, the joint trace raised for the
    # whole graph (which ran eagerly, or crashed in the backward where eager did not)
    def f(x):
        return x.sin() * 2, torch.floor_divide(x, 3) + x

    compiled = ember.compile(f)
    for fn in (f, compiled):
        x = torch.linspace(-4, 4, 6).requires_grad_()
        a, b = fn(x)
        a.sum().backward()
        torch.testing.assert_close(x.grad, 2 * torch.cos(x.detach()), **TOL)
        with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
            fn(x)[1].sum().backward()


def test_an_input_written_with_a_value_that_requires_grad_gets_its_history():
    # fuzz seed 12136: a1 (no grad) takes a value that requires grad: eager records the copy on
    # a1, which then requires grad; the joint trace refused it (mutated_grad_input)
    def f(x, acc):
        acc.copy_(x.tanh())
        acc.mul_(3)
        return acc.sum() + x.sum(),

    compiled = ember.compile(f)
    for call in range(2):
        results = []
        for fn in (f, compiled):
            x = torch.linspace(-2, 2, 5).add(call).requires_grad_()
            acc = torch.zeros(5)
            out = fn(x, acc)[0]
            assert acc.requires_grad and acc.grad_fn is not None
            (out + (acc * acc).sum()).backward()
            results.append((out.detach(), acc.detach(), x.grad))
        for got, want in zip(results[1], results[0]):
            torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("n", [6, 3000], ids=["persistent", "looped"])
def test_triton_bfloat16_constants_and_arg_reductions(monkeypatch, n):
    # fuzz seeds 12003, 12016, 12026 (--triton): a bfloat16 constant failed at the launch under
    # the interpreter (no get_bf16: the graph fell back); once it ran, argmax over a bfloat16 dim
    # gave 2**63 - 1 (the interpreter compares bfloat16 blocks wrongly): both go through float32
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", os.environ.get("TRITON_INTERPRET", "1"))
    x = torch.linspace(-3, 3, 2 * n).reshape(2, n)[:, torch.randperm(n, generator=torch.Generator().manual_seed(0))]
    x = x.to(torch.bfloat16)

    def f(t):
        values, index = torch.max(t, 1)
        return t + 0.1, torch.full_like(t, 2.7) * t, values, index, t.argmin(1), (t * 3).argmax(1)

    ember.reset()
    for g, w in zip(ember.compile(f, options={"backend": "triton"})(x), f(x)):
        if w.dtype == torch.bfloat16:
            torch.testing.assert_close(g, w, rtol=8e-3, atol=0)  # interpreter: float32 -> bf16 truncates
        else:
            assert torch.equal(g, w)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.bool])
def test_a_cat_of_empty_tensors_compiles(dtype):
    # fuzz seed 22: cat of pieces all empty along the dim made a kernel value of None, and the
    # inductor failed (the graph fell back)
    a = torch.zeros(0, 3, dtype=dtype)

    def f(t):
        return torch.cat([t, t], 0), torch.cat([t, t], 0).expand([2, 0, 3]), torch.cat([t, t.clone()], 1)

    ember.reset()
    for g, w in zip(ember.compile(f)(a), f(a)):
        assert g.shape == w.shape and g.dtype == w.dtype


ZERO_DERIVATIVE = {
    "floor": torch.floor,
    "round": torch.round,
    "sign": torch.sign,
    "trunc_then_scale": lambda t: torch.trunc(t) * 3,
    "narrow_to_nothing": lambda t: t.narrow(-1, 0, 0).sum(-1, keepdim=True) + t.ceil(),
}


@pytest.mark.parametrize("unused", ["live_across_a_break", "second_output"])
@pytest.mark.parametrize("op", ZERO_DERIVATIVE.values(), ids=ZERO_DERIVATIVE.keys())
def test_an_input_a_reached_output_leads_to_through_a_zero_derivative_gets_zeros_not_none(op, unused):
    # fuzz seeds 41080 (a narrow to nothing) and 41085 (floor) with --train: the loss reaches x
    # only through ops whose derivative is zero, and another use of x (sin) is not reached (live
    # across a graph break, or an output the loss leaves out). Eager's engine runs the reached
    # nodes: x.grad is zeros. The backward pruned for the unreached value did not compute x's
    # gradient (only the absent tangent and constants made it) and gave None (Note [zero, not None])
    def f(x, w):
        u = x.sin()
        y = op(x) * w
        if unused == "live_across_a_break":
            print("", end="")  # a graph break: u is an output of the first graph
            return (y,)
        return y, u

    compiled = ember.compile(f)
    for call in range(2):
        grads = []
        for fn in (f, compiled):
            g = torch.Generator().manual_seed(call)
            x = (torch.randn(3, 4, generator=g) * 3).requires_grad_()
            w = torch.randn(4, generator=g, requires_grad=True)
            fn(x, w)[0].sum().backward()
            grads.append((x.grad, w.grad))
        (want_x, want_w), (got_x, got_w) = grads
        assert want_x is not None and got_x is not None, (want_x, got_x)
        torch.testing.assert_close(got_x, want_x, **TOL)
        torch.testing.assert_close(got_w, want_w, **TOL)


def test_a_backward_that_asks_for_a_tensors_sizes_compiles():
    # fuzz seed 50242 with --train: sgn's backward, after a boolean mask across a graph break,
    # dispatches TorchScript's aten::size(Tensor) -> int[], an op the dispatcher does not know:
    # asking it for a CompositeImplicitAutograd kernel raised, and the graph ran eagerly
    def f(a):
        v = a[a > 0]
        return (torch.sgn(v) + v * 2,)

    compiled = ember.compile(f)
    for negatives in (3, 5, 6):
        grads = []
        for fn in (f, compiled):
            x = torch.linspace(-1, 1, 8)
            x[:negatives] = -1
            x.requires_grad_()
            fn(x)[0].sum().backward()
            grads.append(x.grad)
        torch.testing.assert_close(grads[1], grads[0], **TOL)


ALPHA_PAIRS = [(torch.int32, torch.bool), (torch.int8, torch.bool), (torch.bool, torch.bool),
               (torch.float16, torch.int32), (torch.bfloat16, torch.int8), (torch.int32, torch.float16),
               (torch.int8, torch.bfloat16), (torch.float16, torch.float16), (torch.float32, torch.int64)]


@pytest.mark.parametrize("op", [torch.add, torch.sub, torch.rsub], ids=["add", "sub", "rsub"])
@pytest.mark.parametrize("alpha", [2, 0.1])
def test_alpha_scales_in_the_promoted_dtype(op, alpha):
    # fuzz seed 50473 with --train: torch.add(int32, bool, alpha=2) was int64 (b * alpha was an op
    # of its own, promoting b with alpha), and a half plus an integer tensor with a float alpha
    # was float32; ATen converts alpha to the computation's dtype and scales there
    g = torch.Generator().manual_seed(0)
    pairs = []
    for da, db in ALPHA_PAIRS:
        a, b = (torch.randint(-9, 9, (6,), generator=g).to(d) if not d.is_floating_point
                else (torch.randn(6, generator=g) * 3).to(d) for d in (da, db))
        try:
            op(a, b, alpha=alpha)
        except RuntimeError:  # bool subtraction, a float alpha with integers
            continue
        pairs += [a, b]

    def f(*ts):
        return tuple(op(ts[k], ts[k + 1], alpha=alpha) for k in range(0, len(ts), 2))

    for got, want in zip(ember.compile(f)(*pairs), f(*pairs)):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        tol = dict(rtol=1e-2, atol=1e-2) if want.dtype in (torch.float16, torch.bfloat16) else TOL
        torch.testing.assert_close(got, want, **tol)


PROD_VALUES = {"inf": [[2.0, math.inf, 3.0], [1.0, 2.0, 4.0]], "one_zero_nan": [[2.0, 0.0, 3.0], [5.0, 2.0, math.nan]],
               "two_zeros_nan": [[2.0, 0.0, 0.0], [1.0, math.nan, 3.0]], "plain": [[2.0, 3.0, -1.0], [2.0, 5.0, 7.0]]}


@pytest.mark.parametrize("values", PROD_VALUES.values(), ids=PROD_VALUES.keys())
@pytest.mark.parametrize("reduce", [lambda t: t.prod(), lambda t: torch.prod(t, 1), lambda t: t.prod(-2, keepdim=True),
                                    lambda t: t.prod(dtype=torch.float64)], ids=["all", "dim", "keepdim", "dtype"])
def test_prod_backward_at_zeros_infinities_and_nans_is_eagers(values, reduce):
    # fuzz seeds 51064, 51598 and 13117 with --train: torch's formula on fake tensors is the
    # product of the other elements; eager's divides the product by the input where no element
    # is zero (inf / inf = NaN) and gives zeros where several are (Note [derivatives that branch
    # on values], ember_autograd/derivatives.py)
    def f(x):
        return reduce(x * 1),

    compiled = ember.compile(f)
    grads = []
    for fn in (f, compiled):
        x = torch.tensor(values, requires_grad=True)
        (out,) = fn(x)
        out.sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0], **TOL)


@pytest.mark.parametrize("reduce", [torch.max, torch.Tensor.min, torch.median, torch.nanmedian],
                         ids=["max", "min", "median", "nanmedian"])
@pytest.mark.parametrize("values", [[1.0, 3.0, 3.0, -2.0], [1.0, math.nan, 3.0, 0.5]], ids=["tie", "nan"])
def test_a_whole_tensor_selection_sends_a_nan_gradient_only_to_the_selected(reduce, values):
    # fuzz seed 51621 with --train: a NaN gradient reaching max() (through softmax of an
    # infinity); eager's backward fills the selected positions of zeros, the fake-tensor
    # formula multiplied the mask by it, 0 * NaN = NaN everywhere (Note [derivatives that
    # branch on values], ember_autograd/derivatives.py)
    def f(x):
        return reduce(x * 1) * torch.tensor([math.inf, 1.0]),

    compiled = ember.compile(f)
    grads = []
    for fn in (f, compiled):
        x = torch.tensor(values, requires_grad=True)
        (out,) = fn(x)
        (out * torch.tensor([0.0, 2.0])).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0], **TOL)


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("dst", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_a_float_out_of_an_integers_range_converts_as_in_eager(src, dst):
    # fuzz seed 70015 with --train: torch.where(x < 1, x, inf).to(torch.int64); a C++ cast of
    # NaN, an infinity or an out-of-range value is undefined, and gcc folded the constant one to
    # INT64_MAX where eager's x86 conversion gives INT64_MIN (bfloat16's NaN gave 0)
    values = [math.inf, -math.inf, math.nan, 3e9, -3e9, 1e19, 300.0, -1.0, -129.5, 70000.0, 2.5, -2.5]
    x = torch.tensor(values, dtype=torch.float64).to(src)

    def f(t):
        return (t * 1).to(dst), torch.where(t < 1, t, math.inf).to(dst), torch.where(t < 1, t, math.nan).to(dst)

    for got, want in zip(ember.compile(f)(x), f(x)):
        assert torch.equal(got, want), (got, want)


SAVES_ITS_RESULT = {"scatter_reduce": lambda x: x.scatter_reduce(0, torch.tensor([[0, 1, 1], [1, 0, 0]]), x, "prod"),
                    "exp_of_a_view": lambda x: x.exp()[1:], "sigmoid_then_add": lambda x: x.sigmoid().add_(1)}


@pytest.mark.parametrize("make", SAVES_ITS_RESULT.values(), ids=SAVES_ITS_RESULT.keys())
def test_a_write_to_an_input_its_history_saved_runs_eagerly_not_a_backward_error(make):
    # fuzz seed 51152 with --train: v, an input of the graph (made before a graph break), was
    # saved by its own history (scatter_reduce 'prod' saves its result), and the graph writes
    # it; the compiled node has an edge to v's history, and autograd runs that node, stale, on
    # any backward: "modified by an inplace operation" where eager's loss never reaches v (Note
    # [a written input's saved history], ember_autograd/runtime.py). The call runs eagerly.
    def f(v, y):
        out = torch.where(y > 0, y, -math.inf).index_add(-1, torch.tensor([2, 0, 1]), y, alpha=2)
        v[0] = 7.0
        return (out,)

    compiled = ember.compile(f)
    for fn in (f, compiled):
        x = torch.randn(2, 3, requires_grad=True)
        y = torch.randn(2, 3, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (out,) = fn(make(x), y)
        out.sum().backward()
        torch.testing.assert_close(y.grad, torch.where(y > 0, 1.0, 0.0) + 2, **TOL)
    assert any("written in place" in str(w.message) for w in caught), [str(w.message) for w in caught]

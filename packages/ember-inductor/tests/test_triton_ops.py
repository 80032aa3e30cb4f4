"""The Triton expression table and reductions against the ember_prims references (= eager ATen).

Each sample renders a one-op kernel from a hand-built KernelSpec, runs it under Triton's
interpreter on CPU tensors (compiled on CUDA where the `gpu` variants run), and compares with
the prim's reference kernel on fresh random inputs plus the special values 0, -0, +-inf, NaN.
Tolerances (rtol, atol): float32 1e-5/1e-5 (transcendentals 2e-5), float16 1e-3/1e-3,
float64 1e-9/1e-9; integers and booleans exact; NaN must match NaN.
"""
from __future__ import annotations

import os
import sys

import zlib

import pytest
import torch

import ember_prims
from ember_inductor.codegen import triton as triton_codegen
from ember_inductor.codegen.triton import TritonBackend
from ember_inductor.codegen.triton_prims import ExprCtx, render
from ember_inductor.lowering.registry import prims_in
from ember_inductor.options import InductorOptions

sys.path.insert(0, os.path.dirname(__file__))
from test_triton_specs import SpecBuilder  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy on inf/NaN samples
P = ember_prims.ops
N = 61  # ragged: never a multiple of the block
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 0.5, -2.5, 3.5]
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.float64: (1e-9, 1e-9)}
LOOSE = {"lgamma", "erfinv", "tan", "pow", "expm1", "sinh", "cosh", "atan2", "hypot", "exp",
         "exp2", "log", "log2", "rsqrt", "erfc"}


@pytest.fixture(scope="module")
def run_spec(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("triton_cache"))
    backend = TritonBackend()
    opts = InductorOptions(cache_dir=cache)

    def run(spec, *tensors):
        [launcher] = backend.build([backend.render(spec, opts)], opts)
        launcher(*tensors)
        return launcher
    return run


def _seed(*parts) -> int:
    """A seed from the test's parameters, the same in every process (`hash()` of a string is
    salted per process: a rare input that fails would come and go between runs)."""
    return zlib.crc32(" ".join(map(str, parts)).encode())


def _domain(prim, n, dtype, device, g):
    u = torch.rand(n, generator=g, dtype=torch.float64)
    if prim in ("log", "log2", "log1p", "sqrt", "rsqrt", "lgamma"):
        x = u * 10
    elif prim in ("asin", "acos", "atanh", "erfinv"):
        x = u * 2 - 1
    elif prim == "acosh":
        x = 1 + u * 5
    else:
        x = (u * 2 - 1) * 4
    x = torch.cat([x, torch.tensor(SPECIAL, dtype=torch.float64)])
    return x.to(dtype).to(device)


def _ints(n, dtype, device, g, lo=-50, hi=50):
    return torch.randint(lo, hi, (n,), generator=g).to(dtype).to(device)


def _compare(out, ref, dtype, prim=""):
    if dtype.is_floating_point:
        rtol, atol = TOL[dtype]
        if prim in LOOSE and dtype == torch.float32:
            rtol, atol = 2e-5, 2e-5
        torch.testing.assert_close(out, ref, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(out, ref), (out, ref)


def _pointwise_spec(prim, in_dtypes, out_dtype, n):
    b = SpecBuilder(f"t_{prim}", (n,))
    args = [b.load(f"in{i}", b.x(0), dt) for i, dt in enumerate(in_dtypes)]
    b.store("out", b.x(0), b.pw(prim, *args, dtype=out_dtype))
    return b.build()


FLOAT_UNARY = [p for p in prims_in(ember_prims.UNARY) if p not in ("bitwise_not",)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("prim", FLOAT_UNARY)
def test_unary_float(run_spec, prim, dtype, device):
    if dtype != torch.float32 and prim not in ("sin", "exp", "sqrt", "round", "sign", "isnan", "signbit",
                                               "expm1", "lgamma", "erfinv", "reciprocal", "abs"):
        pytest.skip("float16/float64 run on a representative subset (interpreter time)")
    g = torch.Generator().manual_seed(_seed(prim, dtype))
    x = _domain(prim, N, dtype, device, g)
    ref = getattr(P, prim)(x)
    out = torch.empty_like(ref)
    run_spec(_pointwise_spec(prim, [dtype], ref.dtype, x.numel()), x, out)
    _compare(out, ref, ref.dtype, prim)


INT_UNARY = ["abs", "neg", "sign", "bitwise_not", "floor", "ceil", "round", "trunc", "logical_not",
             "isnan", "isinf", "isfinite", "signbit"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prim", INT_UNARY)
def test_unary_int(run_spec, prim, device):
    g = torch.Generator().manual_seed(_seed(prim))
    x = _ints(N, torch.int32, device, g)
    ref = getattr(P, prim)(x)
    out = torch.empty_like(ref)
    run_spec(_pointwise_spec(prim, [torch.int32], ref.dtype, N), x, out)
    _compare(out, ref, ref.dtype)


FLOAT_BINARY = [p for p in prims_in(ember_prims.BINARY) if not p.startswith(("bitwise", "shift"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("prim", FLOAT_BINARY)
def test_binary_float(run_spec, prim, dtype, device):
    if dtype == torch.float16 and prim not in ("add", "div", "remainder", "floor_divide", "pow",
                                               "maximum", "atan2", "lt"):
        pytest.skip("float16 runs on a representative subset (interpreter time)")
    g = torch.Generator().manual_seed(_seed(prim, dtype))
    a = _domain(prim, N, dtype, device, g)
    b = _domain(prim, N, dtype, device, g)
    if prim in ("remainder", "fmod", "floor_divide", "div"):
        b = b.flip(0)  # special values against ordinary ones, and vice versa
    ref = getattr(P, prim)(a, b)
    if prim == "floor_divide" and dtype == torch.float16:
        # ATen's CPU float16 floor_divide rounds its steps in float16 (2.7246 // 0.0036144 gives
        # 752; the exact floor is 753): the reference is the exact floor, rounded once
        ref = getattr(P, prim)(a.double(), b.double()).to(dtype)
    out = torch.empty_like(ref)
    run_spec(_pointwise_spec(prim, [dtype, dtype], ref.dtype, a.numel()), a, b, out)
    _compare(out, ref, ref.dtype, prim)


INT_BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "maximum",
              "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
              "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("prim", INT_BINARY)
def test_binary_int(run_spec, prim, dtype, device):
    if dtype == torch.int64 and prim not in ("floor_divide", "remainder", "pow", "shift_right", "mul"):
        pytest.skip("int64 runs on a representative subset (interpreter time)")
    g = torch.Generator().manual_seed(_seed(prim, dtype))
    a = _ints(N, dtype, device, g)
    if prim in ("div", "floor_divide", "remainder", "fmod"):
        b = _ints(N, dtype, device, g, 1, 9) * (torch.randint(0, 2, (N,), generator=g).to(device) * 2 - 1).to(dtype)
    elif prim in ("shift_left", "shift_right"):
        b = _ints(N, dtype, device, g, 0, 8)
    elif prim == "pow":
        a = _ints(N, dtype, device, g, -4, 5)
        b = _ints(N, dtype, device, g, -2, 7)
    else:
        b = _ints(N, dtype, device, g)
    ref = getattr(P, prim)(a, b)
    out = torch.empty_like(ref)
    run_spec(_pointwise_spec(prim, [dtype, dtype], ref.dtype, N), a, b, out)
    _compare(out, ref, ref.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prim", ["logical_and", "logical_or", "logical_xor", "bitwise_and",
                                  "bitwise_or", "bitwise_xor", "eq", "ne"])
def test_binary_bool(run_spec, prim, device):
    g = torch.Generator().manual_seed(_seed(prim))
    a = torch.randint(0, 2, (N,), generator=g).bool().to(device)
    b = torch.randint(0, 2, (N,), generator=g).bool().to(device)
    ref = getattr(P, prim)(a, b)
    out = torch.empty_like(ref)
    run_spec(_pointwise_spec(prim, [torch.bool, torch.bool], ref.dtype, N), a, b, out)
    _compare(out, ref, ref.dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_where(run_spec, device):
    g = torch.Generator().manual_seed(0)
    c = (torch.rand(N, generator=g) > 0.5).to(device)
    a, b = torch.randn(N, generator=g).to(device), torch.randn(N, generator=g).to(device)
    bld = SpecBuilder("t_where", (N,))
    ops = [bld.load("c", bld.x(0), torch.bool), bld.load("a", bld.x(0), torch.float32),
           bld.load("b", bld.x(0), torch.float32)]
    bld.store("out", bld.x(0), bld.pw("where", *ops, dtype=torch.float32))
    out = torch.empty_like(a)
    run_spec(bld.build(), c, a, b, out)
    _compare(out, P.where(c, a, b), torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src,dst", [(torch.float32, torch.int32), (torch.float32, torch.bool),
                                     (torch.int64, torch.float32), (torch.float32, torch.float16),
                                     (torch.float16, torch.float32), (torch.int32, torch.int8),
                                     (torch.bool, torch.float32), (torch.float32, torch.bfloat16)])
def test_convert(run_spec, src, dst, device):
    if dst == torch.bfloat16 and device == "cpu":
        pytest.xfail("Triton 3.6's interpreter rounds float32 -> bfloat16 toward zero; compiled "
                     "code rounds to nearest even, like ATen (checked by the cuda variant)")
    g = torch.Generator().manual_seed(1)
    if src.is_floating_point:
        x = ((torch.rand(N, generator=g) * 2 - 1) * 100).to(src)
    elif src == torch.bool:
        x = torch.rand(N, generator=g) > 0.5
    else:
        x = _ints(N, src, "cpu", g, -300, 300)
    x = x.to(device)
    bld = SpecBuilder("t_convert", (N,))
    bld.store("out", bld.x(0), bld.convert(bld.load("x", bld.x(0), src), dst))
    ref = P.convert_element_type(x, dst)
    out = torch.empty_like(ref)
    run_spec(bld.build(), x, out)
    assert torch.equal(out, ref)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.float64])
def test_float_to_uint8_wraps_through_int64(run_spec, src, device):
    # ATen converts float -> uint8 through int64 (-1.0 -> 255, 300.0 -> 44) on CPU and CUDA;
    # Triton's fptoui saturates on a GPU (-1.0 -> 0). The interpreter wraps like numpy, so on the
    # CPU the rendered conversion itself is checked too: it must go through a signed integer
    x = torch.tensor([-1.0, -2.5, 300.0, -129.5, 255.9, 0.0, 7.0, 1000.0, -255.0], dtype=src).to(device)
    bld = SpecBuilder("t_convert_u8", (x.numel(),))
    bld.store("out", bld.x(0), bld.convert(bld.load("x", bld.x(0), src), torch.uint8))
    ref = P.convert_element_type(x, torch.uint8)
    out = torch.empty_like(ref)
    run_spec(bld.build(), x, out)
    assert torch.equal(out, ref), (out, ref)
    rule = render("convert_element_type", ExprCtx((src,), torch.uint8), "v")
    assert rule.endswith(".to(tl.int64).to(tl.uint8)"), rule


# ---- reductions -----------------------------------------------------------------------------

REDUCTIONS = ["sum", "prod", "amax", "amin", "any", "all", "argmax", "argmin"]


def _reduction_spec(kind, rows, cols, dtype):
    b = SpecBuilder(f"t_{kind}", (rows,), (cols,))
    x = b.load("x", b.x(0) * cols + b.r(0), dtype)
    if kind in ("argmax", "argmin"):
        v = b.reduce(kind, x, b.index(b.r(0)), dtype=torch.int64)
    elif kind in ("any", "all"):
        v = b.reduce(kind, x, dtype=torch.bool)
    else:
        v = b.reduce(kind, x, dtype=dtype)
    b.store("out", b.x(0), v)
    return b.build()


def _reference(kind, x):
    if kind in ("argmax", "argmin"):
        return getattr(P, kind)(x, 1)
    return getattr(P, kind)(x, [1])


def _reduction_input(kind, rows, cols, dtype, g):
    if dtype == torch.bool:
        return torch.rand(rows, cols, generator=g) > (0.97 if kind == "any" else 0.03)
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, (rows, cols), generator=g).to(dtype)
    if kind == "prod":
        x = 1 + (torch.rand(rows, cols, generator=g) - 0.5) * 0.1
    else:
        x = torch.randint(-8, 9, (rows, cols), generator=g).to(torch.float32)  # ties for arg*
        x = x + (torch.rand(rows, cols, generator=g) < 0.5) * 0.5
    x = x.to(dtype)
    if rows > 2:
        x[1, cols // 3] = float("nan")  # NaN propagates (amax/amin) and wins (arg*)
        x[2, :] = float("-inf")
    return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("looped", [False, True], ids=["persistent", "looped"])
@pytest.mark.parametrize("kind", REDUCTIONS)
def test_reductions(run_spec, kind, looped, device, monkeypatch):
    if looped:  # force the loop at a small size: the interpreter is slow
        monkeypatch.setattr(triton_codegen, "PERSISTENT_MAX_RBLOCK", 16)
    dtype = torch.bool if kind in ("any", "all") else torch.float32
    g = torch.Generator().manual_seed(_seed(kind, looped))
    rows, cols = 5, 77
    x = _reduction_input(kind, rows, cols, dtype, g).to(device)
    ref = _reference(kind, x)
    spec = _reduction_spec(kind, rows, cols, dtype)
    out = torch.empty(rows, dtype=ref.dtype, device=device)
    launcher = run_spec(spec, x, out)
    assert launcher.meta["layout"] == ("looped" if looped else "persistent")
    if dtype.is_floating_point and kind in ("sum", "prod"):
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True)
    else:
        assert torch.equal(out, ref) or torch.allclose(out.float(), ref.float(), equal_nan=True), (out, ref)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["sum", "amax", "argmin"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.int32])
def test_reductions_other_dtypes(run_spec, kind, dtype, device):
    g = torch.Generator().manual_seed(7)
    rows, cols = 3, 50
    x = _reduction_input(kind, rows, cols, dtype, g).to(device)
    ref = _reference(kind, x)
    out = torch.empty(rows, dtype=ref.dtype, device=device)
    run_spec(_reduction_spec(kind, rows, cols, dtype), x, out)
    if dtype == torch.float16 and kind == "sum":
        torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-2, equal_nan=True)
    else:
        assert torch.equal(out, ref) or torch.allclose(out.float(), ref.float(), equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prim", ["shift_left", "shift_right"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_shift_out_of_range_amounts(run_spec, prim, dtype, device):
    # ATen: negative or >= bit-width amounts give 0 (left) or the sign fill (right)
    g = torch.Generator().manual_seed(3)
    lo = 0 if dtype == torch.uint8 else -100
    a = _ints(N, dtype, device, g, lo, 100)
    b = _ints(N, dtype, device, g, 0 if dtype == torch.uint8 else -4, 70)
    ref = getattr(P, prim)(a, b)
    out = torch.empty_like(ref)
    run_spec(_pointwise_spec(prim, [dtype, dtype], dtype, N), a, b, out)
    assert torch.equal(out, ref), (a, b, out, ref)


@pytest.mark.parametrize("device", DEVICES)
def test_narrow_int_sum_accumulates_in_result_dtype(run_spec, device):
    x = torch.full((3, 300), 100, dtype=torch.int8, device=device)
    b = SpecBuilder("t_sum_i8", (3,), (300,))
    b.store("out", b.x(0), b.reduce("sum", b.load("x", b.x(0) * 300 + b.r(0), torch.int8), dtype=torch.int64))
    out = torch.empty(3, dtype=torch.int64, device=device)
    run_spec(b.build(), x, out)
    assert torch.equal(out, x.sum(1))

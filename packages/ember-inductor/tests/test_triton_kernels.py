"""Triton renderer layouts against eager: tiled transposes, broadcasts, 64-bit indexing, full and
column reductions, multiple outputs, iota, masked and indirect loads, Philox random numbers.

Runs under the interpreter on CPU tensors; the `gpu` variants compile the same kernels on CUDA.
float32 tolerances: rtol 1e-5, atol 1e-5; random numbers, integers and copies bit-exact.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

import ember_prims
from ember_inductor.codegen import triton as triton_codegen
from ember_inductor.codegen.triton import TritonBackend, render_kernel
from ember_inductor.options import InductorOptions

sys.path.insert(0, os.path.dirname(__file__))
from test_triton_specs import SpecBuilder, simple_fn_spec, softmax_spec  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy on inf/NaN samples
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
F32 = torch.float32


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


def close(out, ref):
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_transpose_add_is_tiled(run_spec, device):
    m, n = 37, 45  # ragged in both directions
    b = SpecBuilder("t_transpose", (m, n))
    i, j = b.x(0), b.x(1)
    xt = b.load("x", j * m + i, F32)   # x is (n, m): read transposed
    y = b.load("y", i * n + j, F32)
    b.store("out", i * n + j, b.pw("add", xt, y))
    x, yv = torch.randn(n, m, device=device), torch.randn(m, n, device=device)
    out = torch.full((m, n), float("nan"), device=device)
    launcher = run_spec(b.build(), x, yv, out)
    assert launcher.meta["layout"] == "tiled"
    close(out, x.t() + yv)


@pytest.mark.parametrize("device", DEVICES)
def test_broadcast_and_3d_permute(run_spec, device):
    a_, b_, c_ = 3, 20, 17
    b = SpecBuilder("t_permute", (a_, b_, c_))
    i, j, k = b.x(0), b.x(1), b.x(2)
    # out[i, j, k] = x[k, j, i] * bias[j]   (x is (c, b, a))
    x = b.load("x", k * (b_ * a_) + j * a_ + i, F32)
    bias = b.load("bias", j, F32)
    b.store("out", (i * b_ + j) * c_ + k, b.pw("mul", x, bias))
    xv, bv = torch.randn(c_, b_, a_, device=device), torch.randn(b_, device=device)
    out = torch.empty(a_, b_, c_, device=device)
    run_spec(b.build(), xv, bv, out)
    close(out, xv.permute(2, 1, 0) * bv[None, :, None])


@pytest.mark.parametrize("device", DEVICES)
def test_storage_offset_and_strided_input(run_spec, device):
    base = torch.randn(10, 12, device=device)
    view = base[2:, 3:]  # offset 27, strides (12, 1); indices count from the storage start
    b = SpecBuilder("t_offset", (8, 9))
    i, j = b.x(0), b.x(1)
    b.store("out", i * 9 + j, b.pw("neg", b.load("x", 27 + i * 12 + j, F32)))
    out = torch.empty(8, 9, device=device)
    run_spec(b.build(), view, out)
    close(out, -view)


def test_int64_indexing_rendered():
    n = 2**31 + 7
    b = SpecBuilder("t_big", (n,))
    b.store("out", b.x(0), b.load("x", b.x(0), torch.int8))
    src = render_kernel(b.build()).source
    assert "tl.program_id(0).to(tl.int64)" in src
    small = render_kernel(simple_fn_spec(1000)).source
    assert "to(tl.int64)" not in small


def _flipped_last_rows(rows, n, total_rows):
    # out[i, j] = x[total_rows - rows + i, n - 1 - j]: the last rows of a tall int8 tensor, flipped
    b = SpecBuilder("t_flip_rows", (rows, n))
    i, j = b.x(0), b.x(1)
    b.store("out", i * n + j, b.load("x", (total_rows - rows + i) * n + (n - 1 - j), torch.int8))
    return b.build()


def test_int64_indexing_when_a_flipped_access_peaks_inside_the_ranges():
    # Note [32-bit index bounds]: x0*N + (N - 1 - x1) peaks at x0 = max, x1 = 0; both corners of
    # the ranges were below INT32_MAX, the largest index 2**31 + 2047 was not: on a GPU the
    # int32 address wrapped (a 2.1 GB int8 tensor's last two rows, flipped)
    n = 2**20 + 1
    spec = _flipped_last_rows(2, n, 2**11)
    assert render_kernel(spec).meta["int64"]
    assert not render_kernel(_flipped_last_rows(2, n, 2**11 - 1)).meta["int64"]  # fits: 32 bits


def test_int64_indexing_when_the_last_block_would_wrap():
    # pid * XBLOCK + arange runs one block past the last element: within a block of INT32_MAX it
    # wrapped negative and passed the mask `xindex < xnumel`
    b = SpecBuilder("t_edge", (2**31 - 5,))
    b.store("out", b.x(0), b.load("x", b.x(0), torch.int8))
    assert render_kernel(b.build()).meta["int64"]


@pytest.mark.gpu
def test_int64_indexing_of_a_flipped_access_runs_gpu(run_spec):
    n, total = 2**20 + 1, 2**11
    x = torch.randint(-100, 100, (total, n), dtype=torch.int8, device="cuda")
    out = torch.empty(2, n, dtype=torch.int8, device="cuda")
    run_spec(_flipped_last_rows(2, n, total), x, out)
    assert torch.equal(out, x[-2:].flip(1))


@pytest.mark.gpu
def test_int64_indexing_runs_gpu(run_spec):
    n = 2**31 + 7
    x = torch.randint(-100, 100, (n,), dtype=torch.int8, device="cuda")
    out = torch.zeros_like(x)
    b = SpecBuilder("t_big", (n,))
    b.store("out", b.x(0), b.load("x", b.x(0), torch.int8))
    run_spec(b.build(), x, out)
    assert torch.equal(out[-1000:], x[-1000:]) and torch.equal(out[:1000], x[:1000])
    assert torch.equal(out, x)


@pytest.mark.parametrize("device", DEVICES)
def test_full_reduction_and_epilogue_outputs(run_spec, device):
    # out_sum[()] = sum(x); out_centered = x - mean(x): a reduction with no outer range
    n = 300
    b = SpecBuilder("t_full", (), (n,))
    x = b.load("x", b.r(0), F32)
    s = b.reduce("sum", x)
    b.store("total", 0, s)
    mean = b.pw("div", s, b.const(float(n), F32))
    b.store("centered", b.r(0), b.pw("sub", x, mean))
    xv = torch.randn(n, device=device)
    total, centered = torch.empty((), device=device), torch.empty(n, device=device)
    run_spec(b.build(), xv, total, centered)
    close(total, xv.sum())
    close(centered, xv - xv.mean())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("looped", [False, True], ids=["persistent", "looped"])
def test_column_reduction_and_softmax(run_spec, device, looped, monkeypatch):
    if looped:
        monkeypatch.setattr(triton_codegen, "PERSISTENT_MAX_RBLOCK", 8)
    rows, cols = 33, 19
    b = SpecBuilder("t_colsum", (cols,), (rows,))
    b.store("out", b.x(0), b.reduce("amax", b.load("x", b.r(0) * cols + b.x(0), F32)))
    x = torch.randn(rows, cols, device=device)
    out = torch.empty(cols, device=device)
    col = run_spec(b.build(), x, out)
    assert col.meta["column"] and col.meta["layout"] == "looped"  # tiles of columns, coalesced
    close(out, x.amax(0))
    out2 = torch.empty(rows, cols, device=device)
    launcher = run_spec(softmax_spec(rows, cols), x, out2)
    assert launcher.meta["layout"] == ("looped" if looped else "persistent")
    close(out2, torch.softmax(x, -1))


@pytest.mark.parametrize("device", DEVICES)
def test_iota_masked_and_indirect_loads(run_spec, device):
    n, m = 50, 20
    b = SpecBuilder("t_gather", (n,))
    i = b.x(0)
    pos = b.index(i)
    # gather: out[i] = table[idx[i]] where i < 40, else iota i as float
    idx = b.load("idx", i, torch.int64)
    inb = b.cmp("lt", pos, b.const(40, torch.int64))
    from ember_inductor.kernel import value_symbol
    g_id = len(b.ops)
    b.arg("table", F32, "in")
    from ember_inductor.kernel import Op
    b.ops.append(Op(g_id, "load", "table", (idx,), F32, value_symbol(idx), mask=inb))
    val = b.pw("where", inb, g_id, b.convert(pos, F32), dtype=F32)
    b.store("out", i, val)
    table = torch.randn(m, device=device)
    idxv = torch.randint(0, m, (n,), device=device)
    idxv[40:] = 10**9  # out of range where masked: must not be read
    out = torch.empty(n, device=device)
    run_spec(b.build(), idxv, table, out)
    ref = torch.where(torch.arange(n, device=device) < 40, table[idxv.clamp(max=m - 1)],
                      torch.arange(n, device=device, dtype=F32))
    close(out, ref)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_rand_matches_prims_reference(run_spec, device, kind):
    n, offset = 1000, 12345
    seed = torch.tensor(987654321, dtype=torch.int64, device=device)
    b = SpecBuilder(f"t_{kind}", (n,))
    s = b.load("seed", 0, torch.int64)
    off = b.index(b.x(0) + offset)
    b.store("out", b.x(0), b.rand(kind, s, off))
    out = torch.empty(n, device=device)
    run_spec(b.build(), seed, out)
    ref = getattr(ember_prims.ops, kind)([n], seed, offset, dtype=F32, device=torch.device(device))
    if kind == "uniform":
        assert torch.equal(out, ref)
    else:  # log/cos/sqrt: libm vs libdevice may differ in the last bit
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_kernel_source_is_readable_and_stable():
    src = render_kernel(softmax_spec(8, 16)).source
    assert src == render_kernel(softmax_spec(8, 16)).source  # deterministic: the cache key
    assert "@jit\ndef softmax(p0, p1, XBLOCK: tl.constexpr):" in src
    assert src.count("tl.load(") == 1  # persistent: x is read once for three uses


@pytest.mark.parametrize("device", DEVICES)
def test_store_of_constant_and_scalar_load(run_spec, device):
    n = 70
    b = SpecBuilder("t_fill", (n,))
    b.store("ones", b.x(0), b.const(1.5, F32))                      # a [1] value into a block
    s = b.load("s", 0, F32)                                          # one scalar for all lanes
    b.store("out", b.x(0), b.pw("mul", s, b.load("x", b.x(0), F32)))
    sv, xv = torch.randn(1, device=device), torch.randn(n, device=device)
    ones, out = torch.empty(n, device=device), torch.empty(n, device=device)
    run_spec(b.build(), ones, sv, xv, out)
    assert torch.equal(ones, torch.full((n,), 1.5, device=device))
    close(out, sv * xv)


def test_empty_iteration_space_launches_nothing(run_spec):
    b = SpecBuilder("t_empty", (0,))
    b.store("out", b.x(0), b.pw("neg", b.load("x", b.x(0), F32)))
    run_spec(b.build(), torch.empty(0), torch.empty(0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("looped", [False, True], ids=["persistent", "looped-online"])
def test_softmax_special_rows(run_spec, device, looped, monkeypatch):
    # Note [Online softmax]: the merged max/sum loop must give what the two-pass decomposition
    # gives on NaN, +inf, all -inf and partly -inf rows; the spec also stores the sum itself.
    if looped:
        monkeypatch.setattr(triton_codegen, "PERSISTENT_MAX_RBLOCK", 8)
    rows, cols = 6, 45
    b = SpecBuilder("t_softmax_sum", (rows,), (cols,))
    idx = b.x(0) * cols + b.r(0)
    x = b.load("x", idx, F32)
    m = b.reduce("amax", x)
    e = b.pw("exp", b.pw("sub", x, m))
    s = b.reduce("sum", e)
    b.store("out", idx, b.pw("div", e, s))
    b.store("sums", b.x(0), s)
    spec = b.build()
    xv = torch.randn(rows, cols, device=device) * 30
    xv[1, 7] = float("nan")
    xv[2, 3] = float("inf")
    xv[3, :] = float("-inf")
    xv[4, ::2] = float("-inf")
    out = torch.empty(rows, cols, device=device)
    sums = torch.empty(rows, device=device)
    launcher = run_spec(spec, xv, out, sums)
    if looped:
        assert launcher.meta["layout"] == "looped" and "_scale" in launcher.source
    e_ref = torch.exp(xv - xv.amax(1, keepdim=True))
    close(sums, e_ref.sum(1))
    close(out, e_ref / e_ref.sum(1, keepdim=True))

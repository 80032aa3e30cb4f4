"""The GEMM template (templates/) against eager: plain and batched products, transposed operands,
ragged tiles, and epilogues (bias, activation, residual, scaling, dtype casts, several outputs).

CPU tests run the template under Triton's interpreter (float32: rtol/atol 1e-4, the K-loop adds
in another order than BLAS; float16 1e-2). The `gpu` tests run the autotuned path: candidates
timed against cuBLAS, the choice cached on disk.
"""
from __future__ import annotations

import json
import logging
import os

import pytest
import torch
import triton

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder
from ember_inductor.templates import choose, gemm
from ember_inductor.templates.epilogue import build_epilogue, plain
from ember_inductor.templates.kernel import GemmCall

P = ember_prims.ops
aten = torch.ops.aten
F32 = torch.float32


@pytest.fixture
def tuned(tmp_path):
    return InductorOptions(cache_dir=str(tmp_path), backend="triton", max_autotune=True)


def _full(b, shape, value, dtype=F32, device="cpu"):
    return b.call(P.full.default, list(shape), value, dtype=dtype, device=torch.device(device))


def _template_calls(compiled) -> list[str]:
    return [line for line in compiled.source.splitlines() if "gemm_template" in line and "op" in line]


@pytest.mark.parametrize("m,n,k", [(20, 40, 24), (33, 17, 70), (1, 64, 16)])
def test_plain_mm_matches_eager(m, n, k):
    problem = gemm.Problem(1, m, n, k, F32, "ieee")
    call = GemmCall(problem, plain(F32), gemm.configs(problem)[0], [((m, n), (n, 1), F32)], ("mat", "mat", "mat"),
                    "~/.cache/ember")
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.testing.assert_close(call(a, b), a @ b, rtol=1e-4, atol=1e-4)
    # a transposed operand, given untransposed (the weight of a linear layer)
    call_t = GemmCall(problem, plain(F32), gemm.configs(problem)[-1], [((m, n), (n, 1), F32)], ("mat", "matT", "mat"),
                      "~/.cache/ember")
    w = torch.randn(n, k)
    torch.testing.assert_close(call_t(a, w), a @ w.t(), rtol=1e-4, atol=1e-4)


def test_every_config_is_correct_on_a_ragged_batched_product():
    problem = gemm.Problem(3, 37, 45, 50, F32, "ieee")
    a, b = torch.randn(3, 37, 50), torch.randn(3, 50, 45)
    for config in gemm.configs(problem):
        call = GemmCall(problem, plain(F32), config, [((3, 37, 45), (37 * 45, 45, 1), F32)], ("mat", "mat", "mat"),
                        "~/.cache/ember")
        torch.testing.assert_close(call(a, b), torch.bmm(a, b), rtol=1e-4, atol=1e-4)


def linear_gelu_residual(b, x, w, bias, r, dtype=F32):
    """gelu(x @ wᵀ + bias) * 0.5 + r, cast to float32: bias, activation, scaling, residual, cast."""
    h = b.call(aten.mm.default, x, b.call(P.permute.default, w, [1, 0]))
    m, n = h.meta["val"].shape
    dev = h.meta["val"].device.type
    h = b.call(P.convert_element_type.default, h, F32)
    h = b.call(P.add.default, h, b.call(P.broadcast_in_dim.default,
                                         b.call(P.convert_element_type.default, bias, F32), [m, n], [1]))
    half = _full(b, (m, n), 0.5, device=dev)
    gelu = b.call(P.mul.default, b.call(P.mul.default, h, half), b.call(
        P.add.default, _full(b, (m, n), 1.0, device=dev),
        b.call(P.erf.default, b.call(P.mul.default, h, _full(b, (m, n), 0.7071067811865476, device=dev)))))
    out = b.call(P.add.default, b.call(P.mul.default, gelu, half), b.call(P.convert_element_type.default, r, F32))
    return b.call(P.convert_element_type.default, out, dtype)


def _eager_linear_gelu_residual(x, w, bias, r, dtype=F32):
    h = (x @ w.t()).float() + bias.float()
    return (torch.nn.functional.gelu(h) * 0.5 + r.float()).to(dtype)


@pytest.mark.parametrize("dtype", [F32, torch.float16])
def test_epilogue_bias_gelu_scale_residual_cast(tuned, dtype):
    b = GraphBuilder()
    x, w = b.input(torch.randn(20, 24, dtype=dtype)), b.input(torch.randn(40, 24, dtype=dtype))
    bias, r = b.input(torch.randn(40, dtype=dtype)), b.input(torch.randn(20, 40, dtype=dtype))
    b.output(linear_gelu_residual(b, x, w, bias, r, dtype))
    gm = b.build()
    compiled = compile_graph(gm, b.examples, tuned)
    [line] = _template_calls(compiled)  # one call does the product and the whole epilogue
    assert "erf" in line and "add" in line and compiled.kernels == []
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == F32 else dict(rtol=1e-2, atol=1e-2)
    for _ in range(2):
        inputs = [torch.randn(20, 24, dtype=dtype), torch.randn(40, 24, dtype=dtype),
                  torch.randn(40, dtype=dtype), torch.randn(20, 40, dtype=dtype)]
        torch.testing.assert_close(compiled(inputs)[0], _eager_linear_gelu_residual(*inputs, dtype=dtype), **tol)
        unfused = compile_graph(gm, b.examples, tuned.replace(max_autotune=False))
        torch.testing.assert_close(compiled(inputs)[0], unfused(inputs)[0], **tol)


def test_epilogue_with_an_intermediate_used_outside(tuned):
    # relu(x @ y) is returned and so is the pre-activation: the template stores both
    b = GraphBuilder()
    x, y = b.input(torch.randn(16, 8)), b.input(torch.randn(8, 24))
    h = b.call(aten.mm.default, x, y)
    s = b.call(P.mul.default, h, _full(b, (16, 24), 2.0))
    r = b.call(P.maximum.default, s, _full(b, (16, 24), 0.0))
    b.output(r, s)
    compiled = compile_graph(b.build(), b.examples, tuned)
    assert len(_template_calls(compiled)) == 1
    inputs = [torch.randn(16, 8), torch.randn(8, 24)]
    out_r, out_s = compiled(inputs)
    ref_s = inputs[0] @ inputs[1] * 2
    torch.testing.assert_close(out_s, ref_s, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out_r, torch.relu(ref_s), rtol=1e-4, atol=1e-4)


def test_value_computed_from_the_product_is_not_an_epilogue_operand(tuned):
    # softmax's row max depends on the product: it cannot be read by the product's epilogue
    b = GraphBuilder()
    x, y = b.input(torch.randn(16, 8)), b.input(torch.randn(8, 24))
    h = b.call(aten.mm.default, x, y)
    mx = b.call(P.broadcast_in_dim.default, b.call(P.amax.default, h, [1]), [16, 24], [0])
    b.output(b.call(P.exp.default, b.call(P.sub.default, h, mx)))
    gm = b.build()
    epilogue, region, outputs = build_epilogue(next(n for n in gm.graph.nodes if n.target is aten.mm.default))
    assert [o.kind for o in epilogue.ops] == ["mm"] and len(region) == 1
    compiled = compile_graph(gm, b.examples, tuned)
    inputs = [torch.randn(16, 8), torch.randn(8, 24)]
    hh = inputs[0] @ inputs[1]
    torch.testing.assert_close(compiled(inputs)[0], torch.exp(hh - hh.amax(1, keepdim=True)), rtol=1e-4, atol=1e-4)


def test_choice_cache_is_atomic_json_keyed_by_triton_version(tmp_path):
    problem = gemm.Problem(1, 64, 64, 64, torch.float16, "ieee")
    key = choose.choice_key(torch.device("cpu"), problem, [((64, 64), (64, 1))], plain(torch.float16).signature())
    assert triton.__version__ in key
    choose.store(str(tmp_path), key, {"choice": "extern"})
    choose.store(str(tmp_path), key + "x", {"choice": "template", "config": {"BLOCK_M": 64}})
    path = choose.cache_path(str(tmp_path))
    assert json.load(open(path))[key] == {"choice": "extern"}
    assert not [f for f in os.listdir(os.path.dirname(path)) if f.endswith(".tmp")]
    assert choose.lookup(str(tmp_path), key + "x")["choice"] == "template"


def conv_bn_relu_residual(b, x, w, scale, shift, r):
    """relu(conv1x1(x, w) * scale + shift + r): batch norm's inference affine, ReLU, residual."""
    h = b.call(aten.convolution.default, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    shape = list(h.meta["val"].shape)
    h = b.call(P.mul.default, h, b.call(P.broadcast_in_dim.default, scale, shape, [1]))
    h = b.call(P.add.default, h, b.call(P.broadcast_in_dim.default, shift, shape, [1]))
    h = b.call(P.add.default, h, r)
    return b.call(P.maximum.default, h, _full(b, shape, 0.0))


@pytest.mark.parametrize("conv_layout", ["preserve", "auto"])
@pytest.mark.parametrize("channels_last", [False, True])
def test_conv1x1_implicit_gemm_with_bn_relu_residual(tuned, channels_last, conv_layout):
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    examples = [torch.randn(2, 12, 5, 7).to(memory_format=fmt), torch.randn(20, 12, 1, 1),
                torch.randn(20), torch.randn(20), torch.randn(2, 20, 5, 7)]
    b = GraphBuilder()
    x, w, scale, shift, r = (b.input(e) for e in examples)
    b.output(conv_bn_relu_residual(b, x, w, scale, shift, r))
    compiled = compile_graph(b.build(), b.examples, tuned.replace(conv_layout=conv_layout))
    [line] = _template_calls(compiled)
    assert "maximum" in line and compiled.kernels == []  # convolution and epilogue: one kernel
    for _ in range(2):
        inputs = [torch.randn_like(e) for e in examples]
        xx, ww, sc, sh, rr = inputs
        ref = torch.relu(torch.nn.functional.conv2d(xx, ww) * sc[:, None, None] + sh[:, None, None] + rr)
        torch.testing.assert_close(compiled(inputs)[0], ref, rtol=1e-4, atol=1e-4)


def test_strided_or_grouped_convolutions_stay_with_the_library(tuned):
    b = GraphBuilder()
    x, w = b.input(torch.randn(2, 8, 6, 6)), b.input(torch.randn(8, 8, 1, 1))
    b.output(b.call(aten.convolution.default, x, w, None, [2, 2], [0, 0], [1, 1], False, [0, 0], 1))
    compiled = compile_graph(b.build(), b.examples, tuned)
    assert not _template_calls(compiled)
    inputs = [torch.randn(2, 8, 6, 6), torch.randn(8, 8, 1, 1)]
    torch.testing.assert_close(compiled(inputs)[0], torch.nn.functional.conv2d(*inputs, stride=2))


# --- the autotuned path, on a GPU -----------------------------------------------------------------

def _linear_graph(m, n, k, dtype, device, epilogue: bool):
    b = GraphBuilder()
    x = b.input(torch.randn(m, k, dtype=dtype, device=device))
    w = b.input(torch.randn(n, k, dtype=dtype, device=device))
    bias = b.input(torch.randn(n, dtype=dtype, device=device))
    r = b.input(torch.randn(m, n, dtype=dtype, device=device))
    if epilogue:
        b.output(linear_gelu_residual(b, x, w, bias, r, dtype))
    else:
        b.output(b.call(aten.mm.default, x, b.call(P.permute.default, w, [1, 0])))
    return b


@pytest.mark.gpu
@pytest.mark.parametrize("epilogue", [False, True])
@pytest.mark.parametrize("shape", [(512, 2048, 1024), (1024, 3072, 768), (96, 80, 200)])
def test_autotuned_gemm_matches_eager_and_caches_choice_gpu(tmp_path, shape, epilogue, caplog):
    m, n, k = shape
    b = _linear_graph(m, n, k, torch.float16, "cuda", epilogue)
    opts = InductorOptions(cache_dir=str(tmp_path), backend="triton", max_autotune=True)
    with caplog.at_level(logging.INFO, logger="ember_inductor.templates"):
        compiled = compile_graph(b.build(), b.examples, opts)
    assert any("extern" in r.getMessage() for r in caplog.records)  # cuBLAS was timed too
    inputs = [torch.randn(m, k, dtype=torch.float16, device="cuda"), torch.randn(n, k, dtype=torch.float16, device="cuda"),
              torch.randn(n, dtype=torch.float16, device="cuda"), torch.randn(m, n, dtype=torch.float16, device="cuda")]
    ref = _eager_linear_gelu_residual(*inputs, dtype=torch.float16) if epilogue else inputs[0] @ inputs[1].t()
    torch.testing.assert_close(compiled(inputs)[0], ref, rtol=2e-2, atol=2e-2)
    data = json.load(open(choose.cache_path(str(tmp_path))))
    assert len(data) == 1 and torch.cuda.get_device_name() in next(iter(data))
    # a second compile (another process: the in-memory memo cleared) times nothing
    choose._memo.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="ember_inductor.templates"):
        again = compile_graph(b.build(), b.examples, opts)
    assert not [r for r in caplog.records if r.getMessage().startswith("GEMM")]
    torch.testing.assert_close(again(inputs)[0], ref, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_autotuned_bmm_with_epilogue_gpu(tmp_path):
    b = GraphBuilder()
    x = b.input(torch.randn(12, 128, 64, dtype=torch.float16, device="cuda"))
    y = b.input(torch.randn(12, 64, 128, dtype=torch.float16, device="cuda"))
    h = b.call(aten.bmm.default, x, y)
    b.output(b.call(P.mul.default, h, _full(b, (12, 128, 128), 0.125, torch.float16, "cuda")))
    compiled = compile_graph(b.build(), b.examples, InductorOptions(cache_dir=str(tmp_path), backend="triton",
                                                                    max_autotune=True))
    inputs = [torch.randn(12, 128, 64, dtype=torch.float16, device="cuda"),
              torch.randn(12, 64, 128, dtype=torch.float16, device="cuda")]
    torch.testing.assert_close(compiled(inputs)[0], torch.bmm(*inputs) * 0.125, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, F32])
def test_autotuned_conv1x1_with_epilogue_gpu(tmp_path, dtype):
    dev = dict(device="cuda", dtype=dtype)
    examples = [torch.randn(8, 256, 14, 14, **dev).to(memory_format=torch.channels_last),
                torch.randn(512, 256, 1, 1, **dev), torch.randn(512, **dev), torch.randn(512, **dev),
                torch.randn(8, 512, 14, 14, **dev)]
    b = GraphBuilder()
    x, w, scale, shift, r = (b.input(e) for e in examples)
    h = b.call(aten.convolution.default, x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    shape = list(h.meta["val"].shape)
    h = b.call(P.mul.default, h, b.call(P.broadcast_in_dim.default, scale, shape, [1]))
    h = b.call(P.add.default, b.call(P.add.default, h, b.call(P.broadcast_in_dim.default, shift, shape, [1])), r)
    b.output(b.call(P.maximum.default, h, _full(b, shape, 0.0, dtype, "cuda")))
    compiled = compile_graph(b.build(), b.examples, InductorOptions(cache_dir=str(tmp_path), backend="triton",
                                                                    max_autotune=True))
    for _ in range(3):  # the third call takes the checked direct launch
        inputs = [torch.randn_like(e) for e in examples]
        xx, ww, sc, sh, rr = inputs
        ref = torch.relu(torch.nn.functional.conv2d(xx, ww) * sc[:, None, None] + sh[:, None, None] + rr)
        tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.float16 else dict(rtol=1e-3, atol=1e-3)
        torch.testing.assert_close(compiled(inputs)[0], ref, **tol)


def test_gemm_candidates_are_not_compiled_on_threads_without_a_thread_safe_ast(monkeypatch):
    """CPython 3.11's `ast` is not thread-safe: there, max-autotune compiles no candidate ahead on
    threads (each compiles when it is timed)."""
    from ember_inductor.templates import choose

    read = []

    class Untouchable:
        def __getattr__(self, name):
            read.append(name)
            raise AttributeError(name)

    monkeypatch.setattr(choose, "THREADED_COMPILE", False)
    choose._compile_all([Untouchable()], [])
    assert read == [], f"a candidate was compiled ahead (read {read})"

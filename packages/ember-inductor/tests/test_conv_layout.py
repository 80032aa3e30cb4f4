"""Note [channels-last convolutions]: 2-D convolutions run on channels-last activations.

Hand-built prims graphs (a conv between elementwise work, the backward's conv), through the C++
backend and the Triton one (interpreted on CPU tensors, compiled for CUDA in the `gpu` variant),
each compared with eager on fresh inputs (float32 rtol/atol 1e-4: the convolution library sums
in another order for each layout).
"""
from __future__ import annotations

import operator
import re

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder
from ember_inductor.layout import channels_last_strides

P = ember_prims.ops
aten = torch.ops.aten
CONV = (None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)  # bias, stride, padding, dilation, ...
BACKENDS = [("cpp", "cpu"), ("triton", "cpu"), pytest.param("triton", "cuda", marks=pytest.mark.gpu)]


def _options(backend, cache, **kw):
    kw.setdefault("conv_layout", "channels_last")
    return InductorOptions(cache_dir=str(cache), backend=backend, **kw)


def _block(b, x, w, scale):
    """relu(conv(x * scale)): elementwise work on both sides of a convolution. Returns the
    result, the convolution's input and its output."""
    pre = b.call(P.mul.default, x, scale)
    conv = b.call(aten.convolution.default, pre, w, *CONV)
    zeros = b.call(P.full.default, [2, 8, 6, 5], 0.0, dtype=torch.float32, device=x.meta["val"].device)
    return b.call(P.maximum.default, conv, zeros), pre, conv


def _build(device, saved_from=None):
    x = torch.randn(2, 4, 6, 5, device=device)
    w = torch.randn(8, 4, 3, 3, device=device)
    scale = torch.randn(1, 4, 1, 1, device=device).expand(2, 4, 6, 5)
    b = GraphBuilder()
    nx, nw, ns = b.input(x), b.input(w), b.input(scale)
    b.output(*_block(b, nx, nw, ns))
    gm = b.build()
    if saved_from is not None:
        gm.graph.output_node().meta["ember_saved_outputs"] = saved_from
    return gm, b, [x, w, scale]


def _check_values(cg, inputs):
    fresh = [torch.randn_like(inputs[0]), torch.randn_like(inputs[1]), inputs[2]]
    b = GraphBuilder()
    want = [n.meta["val"] for n in _block(b, *[b.input(t) for t in fresh])]
    got = cg(fresh)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)
    return got


@pytest.mark.parametrize("backend,device", BACKENDS)
def test_conv_input_is_written_channels_last_and_outputs_keep_their_layout(backend, device, tmp_path):
    gm, b, inputs = _build(device)
    cg = compile_graph(gm, b.examples, _options(backend, tmp_path))
    # the conv's input is written in (N, H, W, C) order and passed as a strided view of it
    assert f"(2, 4, 6, 5), {channels_last_strides((2, 4, 6, 5))}" in cg.source, cg.source
    got = _check_values(cg, inputs)
    for g, e in zip(got, b.values):  # user-visible outputs: the layout eager gives
        assert g.stride() == e.stride(), (g.stride(), e.stride())


@pytest.mark.parametrize("backend,device", BACKENDS)
def test_outputs_saved_for_the_backward_leave_channels_last(backend, device, tmp_path):
    gm, b, inputs = _build(device, saved_from=1)
    cg = compile_graph(gm, b.examples, _options(backend, tmp_path))
    got = _check_values(cg, inputs)
    assert got[0].stride() == b.values[0].stride()
    assert got[1].stride() == channels_last_strides((2, 4, 6, 5))  # the conv input, no copy back
    assert got[2].stride() == channels_last_strides((2, 8, 6, 5))  # the conv output, as the library gave it


def test_preserve_keeps_every_layout(tmp_path):
    gm, b, inputs = _build("cpu", saved_from=1)
    cg = compile_graph(gm, b.examples, _options("cpp", tmp_path, conv_layout="preserve"))
    got = _check_values(cg, inputs)
    assert [g.stride() for g in got] == [e.stride() for e in b.values]
    assert "as_strided" not in cg.source, cg.source


@pytest.mark.parametrize("backend,device", BACKENDS)
def test_conv_backward_reads_channels_last_inputs(backend, device, tmp_path):
    """The backward graph, compiled for a channels-last saved input, passes it through as it is
    and gets a channels-last input gradient; the weight gradient keeps its recorded layout."""
    x = torch.randn(2, 4, 6, 5, device=device).contiguous(memory_format=torch.channels_last)
    w = torch.randn(8, 4, 3, 3, device=device)
    g = torch.randn(2, 8, 6, 5, device=device)
    half = torch.full((2, 8, 6, 5), 0.5, device=device)
    b = GraphBuilder()
    nx, nw, ng, nh = b.input(x), b.input(w), b.input(g), b.input(half)
    relu_grad = b.call(P.mul.default, ng, nh)
    grads = b.call(aten.convolution_backward.default, relu_grad, nx, nw, [8], [1, 1], [1, 1], [1, 1],
                   False, [0, 0], 1, [True, True, False])
    gi = b.graph.call_function(operator.getitem, (grads, 0))
    gi.meta["val"] = grads.meta["val"][0]
    gw = b.graph.call_function(operator.getitem, (grads, 1))
    gw.meta["val"] = grads.meta["val"][1]
    b.output(b.call(P.mul.default, gi, gi), gw)
    cg = compile_graph(b.build(), b.examples, _options(backend, tmp_path))
    assert ".as_strided((2, 4, 6, 5)" not in cg.source, cg.source  # the saved input: no copy
    fresh = [torch.randn_like(x), w, torch.randn_like(g), half]
    gi_want, gw_want, _ = aten.convolution_backward.default(
        fresh[2] * 0.5, fresh[0], w, [8], [1, 1], [1, 1], [1, 1], False, [0, 0], 1, [True, True, False])
    got = cg(fresh)
    torch.testing.assert_close(got[0], gi_want * gi_want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[1], gw_want, rtol=1e-4, atol=1e-4)
    assert got[1].stride() == b.values[1].stride()  # as recorded


def test_invalid_conv_layout_is_a_clear_error():
    with pytest.raises(ValueError, match="conv_layout must be one of"):
        InductorOptions(conv_layout="nhwc")


def test_auto_chooses_channels_last_on_both_backends(tmp_path):
    # batch norm decomposes on CUDA too now (Note [vendor batch norm]): nothing copies back
    gm, b, inputs = _build("cpu")
    laid_out = f"{channels_last_strides((2, 4, 6, 5))})"
    for backend in ("cpp", "triton"):
        cg = compile_graph(gm, b.examples, InductorOptions(cache_dir=str(tmp_path), backend=backend))
        assert laid_out in cg.source, cg.source
    preserve = compile_graph(gm, b.examples, InductorOptions(cache_dir=str(tmp_path), backend="triton",
                                                              conv_layout="preserve"))
    assert laid_out not in preserve.source and "as_strided" not in preserve.source, preserve.source


@pytest.mark.parametrize("backend,device", BACKENDS)
def test_weights_reach_the_library_channels_last_and_buffers_need_no_view(backend, device, tmp_path):
    """Note [channels-last weights]: the 3x3 weight is copied channels-last by a kernel of the
    graph (the library would convert it on every call); Note [allocated as read]: the buffers
    the convolution reads are allocated in the layout it reads them in, so no `as_strided`."""
    gm, b, inputs = _build(device)
    cg = compile_graph(gm, b.examples, _options(backend, tmp_path))
    assert f"(8, 4, 3, 3), {channels_last_strides((8, 4, 3, 3))})" in cg.source, cg.source
    assert "as_strided" not in cg.source, cg.source
    _check_values(cg, inputs)


def test_one_by_one_and_depthwise_weights_are_not_copied(tmp_path):
    """A 1x1 or depthwise weight is the same memory channels-last: nothing to copy."""
    x = torch.randn(2, 4, 6, 5)
    w1, wd = torch.randn(4, 4, 1, 1), torch.randn(4, 1, 3, 3)
    b = GraphBuilder()
    nx, n1, nd = b.input(x), b.input(w1), b.input(wd)
    pre = b.call(P.mul.default, nx, nx)
    one = b.call(aten.convolution.default, pre, n1, *CONV[:1], [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    dw = b.call(aten.convolution.default, one, nd, *CONV[:-1], 4)
    b.output(b.call(P.mul.default, dw, dw))
    cg = compile_graph(b.build(), b.examples, _options("cpp", tmp_path))
    assert cg.source.count("kernel") == 2, cg.source  # the two multiplications, no weight copy
    fresh = [torch.randn_like(x), w1, wd]
    want = aten.convolution.default(aten.convolution.default(fresh[0] * fresh[0], w1, *CONV[:1], [1, 1], [0, 0],
                                                             [1, 1], False, [0, 0], 1), wd, *CONV[:-1], 4)
    torch.testing.assert_close(cg(fresh)[0], want * want, rtol=1e-4, atol=1e-4)


def test_fit_reads_an_equivalent_layout_without_copying():
    """A 1x1 convolution's weight gradient comes back channels-last from the library when the
    activations are: strides (C, 1, C, C) against the recorded (C, 1, 1, 1) differ only on
    dims of size 1, so the same memory is read through the recorded strides, no copy. A real
    difference still copies."""
    from ember_inductor.wrapper import fit_layout
    g = torch.randn(8, 4, 1, 1).to(memory_format=torch.channels_last)
    assert g.stride() == (4, 1, 4, 4)
    got = fit_layout(g, (8, 4, 1, 1), (4, 1, 1, 1))
    assert got.stride() == (4, 1, 1, 1) and got.data_ptr() == g.data_ptr()
    torch.testing.assert_close(got, g, rtol=0, atol=0)
    w = torch.randn(8, 4, 3, 3).to(memory_format=torch.channels_last)
    copied = fit_layout(w, (8, 4, 3, 3), (36, 9, 3, 1))
    assert copied.stride() == (36, 9, 3, 1) and copied.data_ptr() != w.data_ptr()
    torch.testing.assert_close(copied, w, rtol=0, atol=0)


def _conv_then_attention(b, x, w, h, scale):
    """A ViT's patch embedding and first attention: conv(x), then attention over heads split
    from `h * scale` by reshape + permute (lazy 4-D values realized for the extern)."""
    conv = b.call(aten.convolution.default, x, w, *CONV)
    qkv = [b.call(P.permute.default, b.call(P.reshape.default, b.call(P.mul.default, h, s), [2, 17, 2, 16]),
                  [0, 2, 1, 3]) for s in scale]
    out = b.call(aten._scaled_dot_product_flash_attention_for_cpu.default, *qkv, scale=0.25)
    attn = b.graph.call_function(operator.getitem, (out, 0))
    attn.meta["val"] = out.meta["val"][0]
    return conv, b.call(P.clone.default, attn)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_attention_in_a_conv_graph_gets_eager_layouts(backend, tmp_path):
    """Note [externs see eager's layouts]: in a graph with a convolution, a 4-D value realized
    for another extern (attention's q, k, v) is laid out as eager had it, not channels-last:
    the CPU flash-attention kernel reads its operands as if their last dimension were dense
    (a ViT's outputs were off by ~1 before)."""
    def inputs():
        return [torch.randn(2, 4, 6, 5), torch.randn(8, 4, 3, 3), torch.randn(2, 17, 32)] + [
            torch.randn(2, 17, 32) for _ in range(3)]
    b = GraphBuilder()
    nodes = [b.input(t) for t in inputs()]
    b.output(*_conv_then_attention(b, nodes[0], nodes[1], nodes[2], nodes[3:]))
    cg = compile_graph(b.build(), b.examples, _options(backend, tmp_path))
    for call in range(2):
        fresh = b.examples if call == 0 else inputs()
        rb = GraphBuilder()
        fn = [rb.input(t) for t in fresh]
        want = [n.meta["val"] for n in _conv_then_attention(rb, fn[0], fn[1], fn[2], fn[3:])]
        for g, e in zip(cg(fresh), want):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def _conv_then_attention_on_views(b, x, w, h, bias):
    """torchvision's ViT block after its patch convolution, as a training forward: one
    in-projection `h + bias` of q, k and v together, a 4-D value (2, 2, 17, 48) saved for the
    backward (so realized, in the plan's layout) and read by the attention as three slices of
    its last dimension (views of that one buffer)."""
    conv = b.call(aten.convolution.default, x, w, *CONV)
    proj = b.call(P.clone.default, b.call(P.permute.default, b.call(P.reshape.default, b.call(
        P.add.default, h, bias), [2, 17, 2, 48]), [0, 2, 1, 3]))
    qkv = [b.call(P.slice.default, proj, [0, 0, 0, 16 * i], [2, 2, 17, 16 * (i + 1)], [1, 1, 1, 1])
           for i in range(3)]
    out = b.call(aten._scaled_dot_product_flash_attention_for_cpu.default, *qkv, scale=0.25)
    attn = b.graph.call_function(operator.getitem, (out, 0))
    attn.meta["val"] = out.meta["val"][0]
    return conv, b.call(P.clone.default, attn), proj


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_attention_on_views_of_a_channels_last_buffer_gets_eager_layouts(backend, tmp_path):
    """Note [externs see eager's layouts], for views: q, k and v sliced from one 4-D buffer
    that the plan realized channels-last are views of that buffer, and reached the CPU flash
    attention with a last dimension of stride 2; it read past them (torchvision's ViT training
    step: NaN or garbage loss, intermittently, on the C++ backend)."""
    def inputs():
        return [torch.randn(2, 4, 6, 5), torch.randn(8, 4, 3, 3), torch.randn(2, 17, 96), torch.randn(2, 17, 96)]
    b = GraphBuilder()
    nodes = [b.input(t) for t in inputs()]
    b.output(*_conv_then_attention_on_views(b, *nodes))
    gm = b.build()
    gm.graph.output_node().meta["ember_saved_outputs"] = 2  # Note [saved outputs]
    cg = compile_graph(gm, b.examples, _options(backend, tmp_path))
    for call in range(2):
        fresh = b.examples if call == 0 else inputs()
        rb = GraphBuilder()
        want = [n.meta["val"] for n in _conv_then_attention_on_views(rb, *[rb.input(t) for t in fresh])]
        for g, e in zip(cg(fresh), want):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def _attention_on_slices(b, proj):
    qkv = [b.call(P.slice.default, proj, [0, 0, 0, 16 * i], [2, 2, 17, 16 * (i + 1)], [1, 1, 1, 1])
           for i in range(3)]
    out = b.call(aten._scaled_dot_product_flash_attention_for_cpu.default, *qkv, scale=0.25)
    attn = b.graph.call_function(operator.getitem, (out, 0))
    attn.meta["val"] = out.meta["val"][0]
    return (b.call(P.clone.default, attn),)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_attention_on_slices_of_a_channels_last_input_gets_a_dense_last_dimension(backend, tmp_path):
    """Note [attention operands with a dense last dimension]: a backward graph receives the
    forward's saved in-projection channels-last (Note [saved outputs]) and slices q, k, v from
    it; the CPU flash attention (here its forward, the same reads) got them with a last-dimension
    stride of 2 and read past them (torchvision ViT's gradients were off by ~1)."""
    def inputs():
        return [torch.randn(2, 2, 17, 48).contiguous(memory_format=torch.channels_last)]
    b = GraphBuilder()
    b.output(*_attention_on_slices(b, b.input(inputs()[0])))
    cg = compile_graph(b.build(), b.examples, _options(backend, tmp_path))
    for call in range(2):
        fresh = b.examples if call == 0 else inputs()
        rb = GraphBuilder()
        want = [n.meta["val"] for n in _attention_on_slices(rb, rb.input(fresh[0]))]
        for g, e in zip(cg(fresh), want):
            torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4)


def test_the_layout_plan_is_one_pass_that_reads_the_saved_outputs_contract():
    """plan_layouts decides a graph's layouts before lowering (Note [saved outputs]: autograd's
    meta["ember_saved_outputs"] is read there, and only there)."""
    from ember_inductor.layout import LayoutPlan, plan_layouts
    gm, _, _ = _build("cpu", saved_from=1)
    assert plan_layouts(gm, "auto") == LayoutPlan(channels_last=True, saved_from=1)
    assert plan_layouts(gm, "preserve") == LayoutPlan(channels_last=False, saved_from=1)
    plan = plan_layouts(_build("cpu")[0], "channels_last")
    assert plan.saved_from is None and not plan.leaves_as_planned(0) and not plan.leaves_as_planned(2)


def test_lowering_lays_out_what_the_plan_says(options):
    """Lowering holds no layout policy: handed a channels-last plan, a graph without any
    convolution realizes its 4-D value channels-last; the default plan keeps it contiguous."""
    from ember_inductor.layout import LayoutPlan
    from ember_inductor.lowering import lower_graph
    b = GraphBuilder()
    x = b.input(torch.randn(2, 4, 6, 5))
    y = b.call(P.exp.default, x)
    b.output(b.call(P.sum.default, y, [1]), y)
    gm = b.build()
    planned = lower_graph(gm, b.examples, options, LayoutPlan(channels_last=True, saved_from=1))
    assert planned.outputs[1].strides == channels_last_strides((2, 4, 6, 5))
    default = lower_graph(gm, b.examples, options)
    assert default.outputs[1].strides == (120, 30, 5, 1)


@pytest.mark.gpu
def test_convolutions_go_straight_to_cudnn_with_the_callers_flags(tmp_path):
    """Note [convolutions straight to cuDNN]: the wrapper calls cuDNN's convolution itself, with
    the flags read on every call; with cuDNN disabled it calls aten.convolution. Each way gives
    eager's result."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    gm, b, inputs = _build("cuda")
    cg = compile_graph(gm, b.examples, _options("triton", tmp_path))
    assert re.search(r"fit\(conv\d+\(buf", cg.source), cg.source
    flags = [dict(), dict(benchmark=True), dict(deterministic=True), dict(enabled=False),
             dict(allow_tf32=False)]
    for f in flags:
        with torch.backends.cudnn.flags(**{**dict(enabled=True, benchmark=False, deterministic=False,
                                                  allow_tf32=False), **f}):
            _check_values(cg, inputs)


@pytest.mark.parametrize("batch,device,want", [(1, "cpu", True), (1, "cuda", False), (32, "cuda", True)])
def test_auto_on_cuda_chooses_channels_last_by_the_convolutions_size(batch, device, want):
    """Note [channels-last by the convolutions' size]: a 64->64 3x3 convolution at 56x56 is 0.23
    GFLOP at batch 1 (host-bound on a GPU: eager's layout) and 7.4 at batch 32 (channels-last);
    on the CPU channels-last at any size. Fake tensors: no GPU needed to plan."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from ember_inductor.layout import plan_layouts
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(batch, 64, 56, 56, device=device)
        w = torch.empty(64, 64, 3, 3, device=device)
    b = GraphBuilder()
    nx, nw = b.input(x), b.input(w)
    b.output(b.call(aten.convolution.default, nx, nw, *CONV))
    gm = b.build()
    assert plan_layouts(gm, "auto").channels_last is want
    assert plan_layouts(gm, "channels_last").channels_last is True
    assert plan_layouts(gm, "preserve").channels_last is False
    # replayed as a CUDA graph (reduce-overhead) no host work is left to save: channels-last
    assert plan_layouts(gm, "auto", cudagraphs=True).channels_last is True
    assert plan_layouts(gm, "preserve", cudagraphs=True).channels_last is False

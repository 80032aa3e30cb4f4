"""Note [buffers taken over in place], Note [an extern's operand written in place] (planner.py,
inplace.py) and Note [scatter into a sum] (passes.py): a kernel's result takes the memory of a
buffer the same kernel reads for the last time, an extern index_put writes into its own dying
operand, and x + index_put(zeros, ...) becomes index_put(x, ...); where a reader could tell,
fresh memory. Both backends (Triton under its interpreter on CPU); every graph is checked
against eager on fresh inputs (float32: rtol=atol=1e-5)."""
from __future__ import annotations

import operator

import pytest
import torch

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.graph_builder import GraphBuilder
from ember_inductor.planner import in_place_externs

P = ember_prims.ops
aten = torch.ops.aten
CPU = torch.device("cpu")


CPU_OPTIONS = {"backend": "cpp"}


@pytest.fixture(scope="module", params=["cpp", "triton"])
def options(request, tmp_path_factory):
    return InductorOptions(cache_dir=str(tmp_path_factory.mktemp(f"takeover_{request.param}")),
                           backend=request.param)


def compiled(build, examples, options):
    b = GraphBuilder()
    b.output(*build(b, *[b.input(x) for x in examples]))
    return compile_graph(b.build(), b.examples, options)


def check(cg, build, examples):
    fresh = [torch.randn_like(x) if x.is_floating_point() else x for x in examples]
    b = GraphBuilder()
    b.output(*build(b, *[b.input(x.clone()) for x in fresh]))
    got = cg(fresh)
    for g, e in zip(got, b.values):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_a_pointwise_result_takes_a_dying_products_memory(options):
    def build(b, x, w):  # relu(x @ w) * 2: the product dies in the kernel that reads it
        m = b.call(aten.mm.default, x, w)
        return [b.call(P.mul.default, b.call(P.maximum.default, m, b.call(P.full.default, [16, 8], 0.0,
                                                                          dtype=torch.float32, device=CPU)),
                       b.call(P.full.default, [16, 8], 2.0, dtype=torch.float32, device=CPU))]
    examples = [torch.randn(16, 4), torch.randn(4, 8)]
    cg = compiled(build, examples, options)
    assert "new_empty_strided" not in cg.source and "empty_strided" not in cg.source.split("def call")[-1]
    assert any(a.role == "inout" for k in cg.kernels for a in k.kernel.args)
    check(cg, build, examples)


def test_a_result_read_elsewhere_than_its_store_index_gets_fresh_memory(options):
    def build(b, x, w):  # (x @ w) reversed along its rows, + 1: element (i, j) reads (7 - i, j)
        m = b.call(aten.mm.default, x, w)
        return [b.call(P.add.default, b.call(P.rev.default, m, [0]),
                       b.call(P.full.default, [8, 8], 1.0, dtype=torch.float32, device=CPU))]
    examples = [torch.randn(8, 4), torch.randn(4, 8)]
    cg = compiled(build, examples, options)
    assert not any(a.role == "inout" for k in cg.kernels for a in k.kernel.args)
    check(cg, build, examples)


def _tied(b, g, idx, h, w):
    """The tied embedding's gradient: gᵀ @ h (the output layer) + the scatter of w's rows at idx."""
    zeros = b.call(P.full.default, [10, 4], 0, dtype=torch.float32, device=CPU)
    scattered = b.call(P.index_put.default, zeros, [idx], w, True)
    product = b.call(aten.mm.default, b.call(P.permute.default, g, [1, 0]), h)
    return [b.call(P.add.default, product, scattered)]


def test_a_scatter_into_a_sum_is_one_buffer_written_in_place(options):
    examples = [torch.randn(6, 10), torch.tensor([1, 3, 3, 0, 9, 1]), torch.randn(6, 4), torch.randn(6, 4)]
    cg = compiled(_tied, examples, options)
    assert any(c is fn for fn in in_place_externs().values() for c in cg._fn.__globals__.values())
    assert "aten.add" not in str(cg.source) and "empty_strided" not in cg.source.split("def call")[-1]
    check(cg, _tied, examples)


def test_an_index_put_whose_operand_is_read_afterwards_keeps_its_copy(options):
    def build(b, x, idx, v):  # index_put(2x, ...) and 2x itself returned
        doubled = b.call(P.mul.default, x, b.call(P.full.default, [10, 4], 2.0, dtype=torch.float32, device=CPU))
        return [b.call(P.index_put.default, doubled, [idx], v, True), doubled]
    examples = [torch.randn(10, 4), torch.tensor([1, 3, 3]), torch.randn(3, 4)]
    cg = compiled(build, examples, options)
    check(cg, build, examples)
    got = cg([torch.ones(10, 4), torch.tensor([2, 2, 5]), torch.ones(3, 4)])
    assert got[1].eq(2).all() and got[0][2].eq(4).all()


def test_an_index_put_into_its_own_zero_fill_is_written_in_place(options):
    def build(b, idx, v):
        zeros = b.call(P.full.default, [10, 4], 0, dtype=torch.float32, device=CPU)
        return [b.call(P.mul.default, b.call(P.index_put.default, zeros, [idx], v, True),
                       b.call(P.full.default, [10, 4], 3.0, dtype=torch.float32, device=CPU))]
    examples = [torch.tensor([1, 3, 3, 7]), torch.randn(4, 4)]
    cg = compiled(build, examples, options)
    assert any(c is fn for fn in in_place_externs().values() for c in cg._fn.__globals__.values())
    check(cg, build, examples)


def test_a_product_returned_through_reshapes_is_not_copied(options):
    """A language model's logits without a bias (GPT-2's lm_head): the product's own buffer,
    viewed (aten._unsafe_view), not a copy kernel into a second buffer of its size."""
    def build(b, x, w):
        flat = b.call(P.reshape.default, x, [16, 4])
        return [b.call(P.reshape.default, b.call(aten.mm.default, flat, w), [2, 8, 10])]
    examples = [torch.randn(2, 8, 4), torch.randn(4, 10)]
    cg = compiled(build, examples, options)
    assert not cg.kernels and "_unsafe_view" in cg.source
    check(cg, build, examples)


def test_a_bias_before_a_fused_attentions_q_k_v_stays_in_the_product():
    """Note [bias in the matmul]: a qkv projection split in three and read only by a fused
    attention kernel (as strided views, as eager passes them) keeps its bias in the BLAS call,
    not in a kernel copying q, k and v out."""
    def build(b, x, w, bias):
        mm = b.call(aten.mm.default, x, w)
        qkv = b.call(P.add.default, mm, b.call(P.broadcast_in_dim.default, bias, [8, 12], [1]))
        heads = []
        for k in range(3):
            part = b.call(P.slice.default, qkv, [0, 4 * k], [8, 4 * k + 4], [1, 1])
            heads.append(b.call(P.permute.default, b.call(P.reshape.default, part, [1, 8, 2, 2]), [0, 2, 1, 3]))
        out = b.call(aten._scaled_dot_product_flash_attention_for_cpu.default, *heads)
        return [b.call(operator.getitem, out, 0)]
    examples = [torch.randn(8, 4), torch.randn(4, 12), torch.randn(12)]
    cg = compiled(build, examples, CPU_OPTIONS)
    assert "addmm" in cg.source and not cg.kernels
    check(cg, build, examples)

"""options.shape_padding: pad matrix products to aligned sizes, slice the result back.

Note [shape padding]
    A matrix whose row length is not a multiple of the vector width (16 bytes: 8 halves, 4
    floats) makes every row start misaligned: cuBLAS then falls back to kernels without
    vectorized (tensor-core) loads, often 2x slower for a 1023-wide fp16 product. Padding the
    reduction dim K and the output dim N with zeros (exact: a zero adds nothing to a dot product)
    and slicing the output back costs one copy of each operand, which pays only when the product
    is large against those copies: we pad when the product does at least MIN_WORK multiply-adds
    per padded element. The row dim M aligns nothing and is never padded. The result is a strided
    view of the padded product (consumers read it in place; a graph output is copied, as every
    output is a fresh buffer).
"""
from __future__ import annotations

import torch
import torch.fx as fx

import ember_prims
from ember_inductor.sizes import has_symbolic_layout

aten = torch.ops.aten
_PAD = ember_prims.PRIMS["pad"].op
_SLICE = ember_prims.PRIMS["slice"].op
_MATMULS = (aten.mm.default, aten.bmm.default)

# device type -> alignment in bytes of a row (16: one vector load on the GPU; 64: a cache line)
ALIGN_BYTES = {"cuda": 16, "cpu": 64}
MIN_WORK = 64  # multiply-adds of the product per element copied by the padding


def _padded(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def plan_padding(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int] | None:
    """(K', N') for the product a @ b (or a batched one), or None where padding does not pay."""
    align_bytes = ALIGN_BYTES.get(a.device.type)
    if align_bytes is None or not a.dtype.is_floating_point or a.dtype != b.dtype:
        return None
    if has_symbolic_layout(a) or has_symbolic_layout(b):
        return None  # the padding would depend on the sizes' values (a guard): not padded
    align = max(1, align_bytes // a.element_size())
    *batch, m, k = a.shape
    n = b.shape[-1]
    k2, n2 = _padded(k, align), _padded(n, align)
    if (k2, n2) == (k, n) or min(m, k, n) == 0:
        return None
    nb = 1
    for d in batch:
        nb *= d
    copied = nb * (m * k2 + k2 * n2 + m * n2)
    if nb * m * n * k < MIN_WORK * copied:
        return None
    return k2, n2


def _matches(node: fx.Node) -> bool:
    if node.op != "call_function" or node.target not in _MATMULS:
        return False
    vals = [a.meta.get("val") if isinstance(a, fx.Node) else None for a in node.args[:2]]
    return all(isinstance(v, torch.Tensor) for v in vals) and plan_padding(*vals) is not None


def pad_matmul_shapes(gm: fx.GraphModule) -> fx.GraphModule:
    """See Note [shape padding]. Returns `gm` itself when no product is padded (else a copy)."""
    if not any(_matches(n) for n in gm.graph.nodes):
        return gm
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out).meta.update(gm.graph.output_node().meta)
    for mm in [n for n in graph.nodes if _matches(n)]:
        a, b = mm.args[:2]
        va, vb = a.meta["val"], b.meta["val"]
        k2, n2 = plan_padding(va, vb)
        *batch, m, k = va.shape
        n = vb.shape[-1]
        zeros = [0] * len(va.shape)
        with graph.inserting_before(mm):
            pa = _call(graph, _PAD, a, 0.0, zeros, [0] * len(batch) + [0, k2 - k]) if k2 != k else a
            pb = _call(graph, _PAD, b, 0.0, zeros, [0] * len(batch) + [k2 - k, n2 - n]) \
                if (k2, n2) != (k, n) else b
            prod = _call(graph, mm.target, pa, pb)
            sliced = _call(graph, _SLICE, prod, zeros, [*batch, m, n], [1] * len(zeros))
        mm.replace_all_uses_with(sliced)
        graph.erase_node(mm)
    graph.lint()
    return fx.GraphModule(gm, graph)


def _call(graph: fx.Graph, target, *args) -> fx.Node:
    node = graph.call_function(target, args)
    vals = fx.node.map_arg(args, lambda n: n.meta["val"])
    node.meta["val"] = target(*vals)
    return node

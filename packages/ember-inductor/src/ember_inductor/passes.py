"""Graph rewrites run before lowering (on a copy: the caller's graph is never changed).

Note [transposed matmul outputs]
    A backward graph often takes a matrix product and transposes it: the weight gradient of a
    linear layer arrives as permute(mm(xᵀ, g), [1, 0]). Since a compiled graph returns fresh
    buffers, the transpose would be a copy with a strided read on every step. When the product
    has no other user, (a @ b)ᵀ is computed as bᵀ @ aᵀ: the transposes become strided operands
    of the library call (BLAS reads either layout) and the result is written in its final
    layout. The same holds for bmm and a swap of its last two dimensions.
"""
from __future__ import annotations

import torch
import torch.fx as fx

import ember_prims

aten = torch.ops.aten
_PERMUTE = ember_prims.PRIMS["permute"].op
_SWAPS = {aten.mm.default: [1, 0], aten.bmm.default: [0, 2, 1]}


def _matches(p: fx.Node) -> bool:
    if p.op != "call_function" or p.target is not _PERMUTE or not isinstance(p.args[0], fx.Node):
        return False
    m = p.args[0]
    swap = _SWAPS.get(m.target)
    return (swap is not None and list(p.args[1]) == swap and len(m.users) == 1
            and all(isinstance(a, fx.Node) and isinstance(a.meta.get("val"), torch.Tensor) for a in m.args[:2]))


def transpose_matmul_outputs(gm: fx.GraphModule) -> fx.GraphModule:
    """See Note [transposed matmul outputs]. Returns `gm` itself when nothing matches."""
    if not any(_matches(n) for n in gm.graph.nodes):
        return gm
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(gm.graph, env)
    graph.output(out).meta.update(gm.graph.output_node().meta)
    for p in [n for n in graph.nodes if _matches(n)]:
        m = p.args[0]
        a, b = m.args[:2]
        swap = _SWAPS[m.target]
        with graph.inserting_before(p):
            bt = graph.call_function(p.target, (b, swap))
            at = graph.call_function(p.target, (a, swap))
            mm = graph.call_function(m.target, (bt, at))
        bt.meta["val"] = b.meta["val"].permute(swap)
        at.meta["val"] = a.meta["val"].permute(swap)
        mm.meta = dict(m.meta)
        mm.meta["val"] = m.target(bt.meta["val"], at.meta["val"])
        p.replace_all_uses_with(mm)
        graph.erase_node(p)
        graph.erase_node(m)
    graph.lint()
    return fx.GraphModule(gm, graph)

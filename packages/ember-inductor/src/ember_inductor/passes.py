"""Graph rewrites run before lowering (on a copy: the caller's graph is never changed).

Note [transposed matmul outputs]
    A backward graph often takes a matrix product and transposes it: the weight gradient of a
    linear layer arrives as permute(mm(xᵀ, g), [1, 0]). Since a compiled graph returns fresh
    buffers, the transpose would be a copy with a strided read on every step. When the product
    has no other user, (a @ b)ᵀ is computed as bᵀ @ aᵀ: the transposes become strided operands
    of the library call (BLAS reads either layout) and the result is written in its final
    layout. The same holds for bmm and a swap of its last two dimensions.

Note [bias in the matmul]
    Decomposition turns a linear layer's addmm into mm + broadcast bias + add (so that the add
    can fuse with the activation or the residual after it). When nothing after it is pointwise
    work (the add's value only leaves the graph, or only feeds other matrix products, possibly
    through reshapes: a language model's logits, a classifier's head), the add is a kernel of
    its own that reads and writes the whole product once more: BERT's 8x128x30522 logits cost
    0.08 ms on an H100 for that, after a separate 125 MB product buffer. Then the three nodes
    are put back as one aten.addmm (an extern: the BLAS applies the bias in its epilogue) when
    the bias is one row of the product's dtype (no conversion in between: float32/float64).
    The same when the add's value feeds only fused attention kernels as their q, k and v,
    through reshapes and slices (a transformer's qkv projection split in three: GPT-2's were
    one extra kernel per layer copying q, k and v out with the bias added); the kernel reads
    them as strided views of the product, as eager passes them.
    The same when the add's value leaves the graph and pointwise work reads it too (a language
    model's logits, returned and fed to the loss's log-softmax in one graph): the value is
    stored either way, and with the bias in the BLAS call it is stored once, where the product
    and then the sum were two buffers of its size (BERT's forward: 125 MB more at its peak).
    A graph output is never a view of a buffer (lowering copies it), so when the product's only
    use is a chain of reshapes into the output (a 3-D linear's view back), the last reshape
    becomes aten._unsafe_view of the addmm's result, as eager's linear does: the same storage,
    no view relation, no copy kernel. The planner never recycles an extern's result, so that
    storage is the output's alone.

Note [scatter into a sum]
    An embedding whose weight is also the output layer's (a language model's tied word
    embeddings) gets two gradients that the backward adds: the output layer's matrix product,
    and the embedding's backward, a scatter-add of rows into zeros. As three buffers of the
    weight's size (the product, the zeros with the rows added, their sum) they were BERT-base's
    backward peak (3 x 89 MB). `add(x, index_put(zeros, i, v, accumulate=True))` is
    `index_put(x, i, v, accumulate=True)`: the rows are added straight into x, which the
    wrapper then writes in place when nothing reads it afterwards (Note [an extern's operand
    written in place] in planner.py): one buffer. The sums of a row are taken in another order
    (x + v1 + v2 instead of x + (v1 + v2)), as any reassociation, and a -0.0 of x where no row
    is added stays -0.0 (x + 0.0 gives +0.0).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.fx as fx

import ember_prims
from ember_inductor.sizes import same_sizes

aten = torch.ops.aten
_PERMUTE = ember_prims.PRIMS["permute"].op
_SWAPS = {aten.mm.default: [1, 0], aten.bmm.default: [0, 2, 1]}
_ADD = ember_prims.PRIMS["add"].op
_BROADCAST = ember_prims.PRIMS["broadcast_in_dim"].op
# what a bias-added product may feed for the bias to go into the BLAS call: Note [bias in the matmul]
_LIBRARY_USERS = frozenset({aten.mm.default, aten.bmm.default, aten.addmm.default})
# a fused attention kernel reads its q, k, v as strided views, as eager passes them (a
# transformer's qkv projection split into three): a bias added there is a kernel and a copy
_ATTENTION = frozenset(getattr(aten, name).default for name in (
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu"))
_RESHAPE = ember_prims.PRIMS["reshape"].op
_INDEX_PUT = ember_prims.PRIMS["index_put"].op
_FULL = ember_prims.PRIMS["full"].op
_RESHAPES = frozenset(ember_prims.PRIMS[name].op for name in ("reshape", "squeeze", "permute"))
_SLICE = ember_prims.PRIMS["slice"].op


def _matches(p: fx.Node) -> bool:
    if p.op != "call_function" or p.target is not _PERMUTE or not isinstance(p.args[0], fx.Node):
        return False
    m = p.args[0]
    swap = _SWAPS.get(m.target)
    return (swap is not None and list(p.args[1]) == swap and len(m.users) == 1
            and all(isinstance(a, fx.Node) and isinstance(a.meta.get("val"), torch.Tensor) for a in m.args[:2]))


def _copy(gm: fx.GraphModule) -> fx.Graph:
    """A copy of gm's graph to rewrite (the caller's graph is never changed)."""
    graph = fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out).meta.update(gm.graph.output_node().meta)
    return graph


def _double_permute(p: fx.Node) -> bool:
    return (p.op == "call_function" and p.target is _PERMUTE and isinstance(p.args[0], fx.Node)
            and p.args[0].op == "call_function" and p.args[0].target is _PERMUTE
            and isinstance(p.args[0].args[0], fx.Node))


def fold_permutes(gm: fx.GraphModule) -> fx.GraphModule:
    """Note [permutes folded]: permute(permute(x, p), q) is one permute of x by p[q] and, when
    that is the identity, x itself. Decomposition makes such chains (a linear's backward
    transposes a product that it then transposes back: the weight gradient of a 3-D linear):
    left in place, the outer permute of a graph output was a copy of the whole gradient, and
    the product it read was held to the end of the graph. Returns `gm` itself when nothing
    matches."""
    if not any(_double_permute(n) for n in gm.graph.nodes):
        return gm
    graph = _copy(gm)
    for p in list(graph.nodes):
        if not _double_permute(p):
            continue
        inner = p.args[0]
        x, dims = inner.args[0], [list(inner.args[1])[d] for d in p.args[1]]
        if dims == list(range(len(dims))) and x.op == "placeholder":
            continue  # an input is never an output itself: its copy stays (outputs are fresh)
        if dims == list(range(len(dims))) and _val(x) is not None and _val(p) is not None \
                and tuple(_val(x).shape) == tuple(_val(p).shape):
            p.replace_all_uses_with(x)
        else:
            with graph.inserting_before(p):
                q = graph.call_function(_PERMUTE, (x, dims))
            q.meta = dict(p.meta)
            p.replace_all_uses_with(q)
        graph.erase_node(p)
        if not inner.users:
            graph.erase_node(inner)
    graph.lint()
    return fx.GraphModule(gm, graph)


def transpose_matmul_outputs(gm: fx.GraphModule) -> fx.GraphModule:
    """See Note [transposed matmul outputs]. Returns `gm` itself when nothing matches."""
    if not any(_matches(n) for n in gm.graph.nodes):
        return gm
    graph = _copy(gm)
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


def _val(n) -> torch.Tensor | None:
    v = n.meta.get("val") if isinstance(n, fx.Node) else None
    return v if isinstance(v, torch.Tensor) else None


def _feeds_only_libraries(n: fx.Node, attention: bool = False) -> bool:
    """Every use of `n` (through reshapes) is the graph's output or a matrix product; or (through
    reshapes and slices) a fused attention kernel's q, k or v."""
    for u in n.users:
        if u.op == "output" or (u.op == "call_function" and u.target in _LIBRARY_USERS):
            continue
        if attention and u.op == "call_function" and u.target in _ATTENTION and n in u.args[:3]:
            continue
        if (u.op == "call_function" and (u.target in _RESHAPES or (attention and u.target is _SLICE))
                and u.args[0] is n and _feeds_only_libraries(u, attention)):
            continue
        return False
    return True


def _bias_match(add: fx.Node) -> tuple[fx.Node, fx.Node] | None:
    """(mm, bias) if `add` is mm + broadcast row bias that can be one addmm (Note [bias in the matmul])."""
    if add.op != "call_function" or add.target is not _ADD or add.kwargs or len(add.args) != 2:
        return None
    for mm, b in (add.args, add.args[::-1]):
        if not (isinstance(mm, fx.Node) and isinstance(b, fx.Node) and mm.op == "call_function"
                and mm.target is aten.mm.default and len(mm.users) == 1 and b.op == "call_function"
                and b.target is _BROADCAST):
            continue
        prod, out, bias = _val(mm), _val(add), _val(b.args[0])
        if (prod is None or out is None or bias is None or any(_val(a) is None for a in mm.args[:2])
                or bias.dim() != 1 or list(b.args[2]) != [1] or _val(b) is None
                or not same_sizes(_val(b).shape, prod.shape)  # symbolic sizes: no guard
                or not (bias.dtype == prod.dtype == out.dtype) or bias.device != prod.device
                or not same_sizes(out.shape, prod.shape)):
            continue
        if _feeds_only_libraries(add) or _leaves_the_graph(add) or _feeds_only_libraries(add, attention=True):
            return mm, b
    return None


def _leaves_the_graph(n: fx.Node) -> bool:
    """`n`'s value (or a reshape of it) is a graph output: it is stored whatever reads it."""
    return any(u.op == "output" or (u.op == "call_function" and u.target in _RESHAPES and u.args[0] is n
                                    and _leaves_the_graph(u)) for u in n.users)


def _rewrite_matches(gm: fx.GraphModule, match: Callable, rewrite: Callable) -> fx.GraphModule:
    """`gm` itself when `match(node)` is falsy for every node; else a copy in which
    `rewrite(graph, node, match(node))` ran on each node that matches (in order)."""
    if not any(match(n) for n in gm.graph.nodes):
        return gm
    graph = _copy(gm)
    for n in list(graph.nodes):
        found = match(n)
        if found:
            rewrite(graph, n, found)
    graph.lint()
    return fx.GraphModule(gm, graph)


def _bias_rewrite(graph: fx.Graph, add: fx.Node, match: tuple[fx.Node, fx.Node]) -> None:
    mm, b = match
    bias = b.args[0]
    with graph.inserting_before(add):
        fused = graph.call_function(aten.addmm.default, (bias, *mm.args[:2]))
    fused.meta = dict(add.meta)
    fused.meta["val"] = aten.addmm.default(_val(bias), _val(mm.args[0]), _val(mm.args[1]))
    add.replace_all_uses_with(fused)
    graph.erase_node(add)
    graph.erase_node(mm)
    if not b.users:
        graph.erase_node(b)
    _reshape_chain_to_unsafe_view(graph, fused)


def bias_into_matmul(gm: fx.GraphModule) -> fx.GraphModule:
    """See Note [bias in the matmul]. Returns `gm` itself when nothing matches."""
    return _rewrite_matches(gm, _bias_match, _bias_rewrite)


def _reshape_chain_to_unsafe_view(graph: fx.Graph, fused: fx.Node) -> None:
    """addmm -> reshape -> ... -> reshape -> output, each with one user: the chain becomes one
    aten._unsafe_view of the addmm (Note [bias in the matmul])."""
    chain, n = [], fused
    while len(n.users) == 1:
        (u,) = n.users
        if u.op != "call_function" or u.target is not _RESHAPE or u.args[0] is not n:
            break
        chain.append(u)
        n = u
    if not chain or len(n.users) != 1 or next(iter(n.users)).op != "output":
        return
    last = chain[-1]
    with graph.inserting_before(last):
        # the reshape's own sizes (nodes where they are symbolic), which are its value's
        flat = graph.call_function(aten._unsafe_view.default, (fused, list(last.args[1])))
    flat.meta = dict(last.meta)
    last.replace_all_uses_with(flat)
    for r in reversed(chain):
        graph.erase_node(r)


def _product_viewed_out(n: fx.Node) -> bool:
    """`n` is a matrix product whose only use is a chain of reshapes into the graph's output."""
    if n.op != "call_function" or n.target not in _LIBRARY_USERS:
        return False
    while len(n.users) == 1:
        (u,) = n.users
        if u.op == "output":
            return n.target is _RESHAPE
        if u.op != "call_function" or u.target is not _RESHAPE or u.args[0] is not n:
            return False
        n = u
    return False


def products_viewed_out(gm: fx.GraphModule) -> fx.GraphModule:
    """Note [bias in the matmul], its last paragraph, for every matrix product: a product
    returned through reshapes (a language model's logits without a bias: GPT-2's lm_head,
    4 x 512 x 50257 floats) is returned as aten._unsafe_view of the library's result, not
    copied into an output buffer (a second 411 MB buffer and a pass over it). Returns `gm`
    itself when nothing matches."""
    return _rewrite_matches(gm, _product_viewed_out, lambda graph, n, _: _reshape_chain_to_unsafe_view(graph, n))


def _scatter_sum_match(add: fx.Node) -> tuple[fx.Node, fx.Node] | None:
    """(x, index_put) if `add` is x + index_put(zeros, ..., accumulate=True) (Note [scatter into a sum])."""
    if add.op != "call_function" or add.target is not _ADD or add.kwargs or len(add.args) != 2:
        return None
    for x, ip in (add.args, add.args[::-1]):
        if not (isinstance(x, fx.Node) and isinstance(ip, fx.Node) and ip.op == "call_function"
                and ip.target is _INDEX_PUT and len(ip.users) == 1 and ip.args[3] is True):
            continue
        zeros = ip.args[0]
        if not (isinstance(zeros, fx.Node) and zeros.op == "call_function" and zeros.target is _FULL
                and len(zeros.users) == 1 and zeros.args[1] == 0):
            continue
        vx, vi, vo = _val(x), _val(ip), _val(add)
        if (vx is None or vi is None or vo is None or not (vx.dtype == vi.dtype == vo.dtype)
                or vx.device != vi.device or not same_sizes(vx.shape, vo.shape)
                or not same_sizes(vi.shape, vo.shape)):
            continue
        return x, ip
    return None


def _scatter_rewrite(graph: fx.Graph, add: fx.Node, match: tuple[fx.Node, fx.Node]) -> None:
    x, ip = match
    zeros = ip.args[0]
    with graph.inserting_before(add):
        fused = graph.call_function(_INDEX_PUT, (x, *ip.args[1:]))
    fused.meta = dict(add.meta)
    add.replace_all_uses_with(fused)
    graph.erase_node(add)
    graph.erase_node(ip)
    graph.erase_node(zeros)


def scatter_into_sum(gm: fx.GraphModule) -> fx.GraphModule:
    """See Note [scatter into a sum]. Returns `gm` itself when nothing matches."""
    return _rewrite_matches(gm, _scatter_sum_match, _scatter_rewrite)

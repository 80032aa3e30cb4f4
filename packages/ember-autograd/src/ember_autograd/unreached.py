"""Backward graphs for calls where the loss does not reach every differentiable output.

Note [unreached outputs]: eager autograd never runs the backward of a value the loss does not
reach: its inputs get no gradient (`.grad` stays None), and nothing is computed from it. A
compiled backward is one graph taking a tangent per differentiable output; an unreached output's
tangent would be a zero tensor, and the graph would still compute from it: `0 * inf` and `0 / 0`
are NaN (a normalize's backward on an input holding inf), and an input reached only through
that output would get a zero gradient instead of None. A graph break makes this common: every
value live across the break is an output of the graph before it, used by the loss or not.

So a call with unreached outputs runs a backward specialized to the set of absent tangents
(`prune_unreached`): every node that depends on absent tangents and on no present one is, in
exact arithmetic, zero (a backward is linear in its tangents); where such a node meets a node
that depends on a present tangent, it is replaced by an input fed a zero tensor, and gradients
made only of it are dropped (the runtime returns None for them). What stays computes what eager
computes, operation for operation. Nothing here knows any operator: it is reachability.

A gradient that is a constant (round's backward is zeros: it depends on no tangent) says nothing
about which outputs reach its input, so the joint trace also records, from the autograd graph,
which outputs reach each input (`Signature.grad_reach`); the runtime gives None to an input that
no reached output leads to (fuzz seed 3895).

Note [zero, not None]: the converse holds too. An input that a reached output leads to gets a
tensor in eager, zeros where every path from the reached outputs has a zero derivative (floor,
round, a narrow to nothing): eager's engine runs those nodes, and `p.grad is None` checks or an
optimizer that skips None see the difference. Such a gradient, in the pruned graph, is made only
of the absent tangents and constants (floor's backward is a constant once decomposed): it is not
computed, and the runtime gives zeros of its layout to the inputs `grad_reach` says a reached
output leads to (fuzz seeds 41080 and 41085: a value live across a graph break and unused,
beside one that reaches the input through floor). `grad_reach` follows only the edges along which
the traced backward delivered a gradient (a node may give None for an input it has an edge to:
a custom autograd.Function returning None), as eager's engine delivers them.

Note [gradients eager computes from no tangent]: "made of absent tangents only" is not "zero in
eager" where a reached output's path delivers a constant (floor's zeros, an empty narrow's
`slice_backward`, once decomposed): eager runs the nodes after it on those zeros, and `0 / 0`
there is NaN (fuzz seed 90111: a division by a truncation that is 0). The sum of that constant
and an absent tangent's part looked absent-only, and the input got zeros. So the joint trace
marks each gradient an autograd node delivered with the outputs that reach that node
(`meta["ember_grad_reach"]`, carried by the warm-start cache), and a node so marked for a
present output counts as depending on a present tangent: it is computed, its absent-only inputs
fed zeros, as eager computes it.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.fx

_NONE: frozenset = frozenset()


@dataclasses.dataclass
class PrunedBackward:
    gm: torch.fx.GraphModule
    zeros: list  # meta["val"] of each added input, fed a zero tensor of that layout
    kept: list[bool]  # per output of the original backward: computed (True) or not
    # per output not kept: the meta["val"] of a gradient that is zero for these tangents (made of
    # zeros where a reached output leads to its input, Note [zero, not None]); None for one that
    # is None in the original backward
    lost: list
    dropped: frozenset[int]  # positions of the original inputs (absent tangents) the graph no longer takes


def prune_unreached(bw: torch.fx.GraphModule, absent: tuple[bool, ...]) -> PrunedBackward | None:
    """`bw` (inputs ending with one tangent per differentiable output) for calls whose tangents
    `absent[i]` are None; None when the graph cannot be specialized (a symbolic or non-tensor
    value would have to become a zero input)."""
    graph = torch.fx.Graph()
    results = graph.graph_copy(bw.graph, {})  # the output node's value; no output node yet
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    tangents = placeholders[len(placeholders) - len(absent):]
    dep_absent: dict[torch.fx.Node, bool] = {}
    dep_present: dict[torch.fx.Node, bool] = {}
    for t, gone in zip(tangents, absent):
        dep_absent[t], dep_present[t] = gone, not gone
    present = frozenset(i for i, gone in enumerate(absent) if not gone)
    for n in graph.nodes:
        if n in dep_absent:
            continue
        ins = n.all_input_nodes
        dep_absent[n] = any(dep_absent[a] for a in ins)
        # Note [gradients eager computes from no tangent]
        dep_present[n] = any(dep_present[a] for a in ins) or bool(n.meta.get("ember_grad_reach", _NONE) & present)

    def pure(n) -> bool:
        return isinstance(n, torch.fx.Node) and dep_absent.get(n, False) and not dep_present.get(n, False)

    zero_inputs: dict[torch.fx.Node, torch.fx.Node] = {}
    zeros: list = []
    last = placeholders[-1]
    for n in list(graph.nodes):
        if n.op == "placeholder" or not dep_present[n]:
            continue
        for a in [a for a in n.all_input_nodes if pure(a)]:
            if a not in zero_inputs:
                val = a.meta.get("val")
                if not isinstance(val, torch.Tensor) or not all(isinstance(s, int) for s in (*val.shape, *val.stride())):
                    return None
                with graph.inserting_after(last):
                    z = graph.placeholder(f"unreached_zero_{len(zeros)}")
                z.meta = dict(a.meta)
                last = z
                zero_inputs[a] = z
                zeros.append(val)
            n.replace_input_with(a, zero_inputs[a])
    flat = list(results) if isinstance(results, (tuple, list)) else [results]
    kept = [not (r is None or pure(r)) for r in flat]
    lost = [None if k or r is None else r.meta.get("val") for r, k in zip(flat, kept)]
    graph.output(tuple(r for r, k in zip(flat, kept) if k))
    graph.eliminate_dead_code()
    # an absent tangent that nothing reads any more is no input at all: the runtime then never
    # builds a zero tensor for it (a language model's unreached logits: 119 MB for BERT-base b8)
    dropped = frozenset(k for k, (t, gone) in enumerate(zip(tangents, absent), len(placeholders) - len(absent))
                        if gone and not t.users)
    for k in dropped:
        graph.erase_node(placeholders[k])
    gm = torch.fx.GraphModule(bw, graph)
    gm.meta.update(bw.meta)
    return PrunedBackward(gm, zeros, kept, lost, dropped)


def zero_like_meta(val: torch.Tensor) -> torch.Tensor:
    """A zero tensor with `val`'s shape, strides, dtype and device."""
    return torch.empty_strided(val.shape, val.stride(), dtype=val.dtype, device=val.device).zero_()

"""The min-cut rematerialization partitioner: save the cheapest set of values (in bytes) from
which the backward can recompute everything else it needs, recomputing only cheap ops.

Cost model (also in the README):
- cost of saving a value = the bytes it keeps alive: numel * element size of its storage's
  owner (a view costs its whole base, `storage_root`); primals count too;
- recomputing is free for *recomputable* ops: ops tagged `pointwise`, view/alias ops, getitem,
  conversions, copies and fills (`RECOMPUTABLE`), and ops listed in `AotConfig.recompute_ops`; anything else (matmul, convolution, reductions,
  softmax, norms...) is never recomputed: it runs in the forward and, if the backward needs it,
  it or a recomputable descendant is saved;
- stateful ops are never recomputed (Note [Stateful ops are never recomputed], partition.py);
- a non-recomputable op that only the backward needs (and that reads no tangent) runs once, in
  the backward, as with the default partitioner.
The choice is a minimum s-t cut: every node v splits into v_in -> v_out with capacity bytes(v)
(infinite for tuple-valued nodes, whose getitems are cut instead); the source feeds v_in for
primals, constants, and non-recomputable nodes that the forward runs; v_out feeds the sink when
a tangent-dependent node (the backward proper) reads v, or v is a gradient; data edges are
infinite. A cut edge v_in -> v_out means "save v"; nodes on the sink side of the cut that the
backward needs are recomputed there.
"""
from __future__ import annotations

import operator
from collections import defaultdict, deque

import torch
import torch.fx

from ember_autograd.functionalize import is_view
from ember_autograd.partition import (
    JointGraph,
    Partition,
    ancestors,
    descendants,
    extract,
    forced_forward,
    is_stateful,
    nbytes,
    storage_root,
)

INF = 1 << 62
aten = torch.ops.aten

# Cheap non-pointwise ops: conversions, copies, fills.
RECOMPUTABLE = {
    aten._to_copy.default, aten.clone.default, aten.full.default, aten.full_like.default,
    aten.zeros.default, aten.zeros_like.default, aten.ones.default, aten.ones_like.default,
    aten.scalar_tensor.default, aten.empty.memory_format, aten.empty_like.default,
}


def is_recomputable(node: torch.fx.Node, config) -> bool:
    if node.op != "call_function" or is_stateful(node, config):
        return False
    op = node.target
    if op is operator.getitem:
        return True
    if not isinstance(op, torch._ops.OpOverload):
        return False
    return (torch.Tag.pointwise in op.tags or is_view(op) or op in RECOMPUTABLE
            or op._schema.name in config.recompute_ops)


def min_cut_partition(joint: JointGraph) -> Partition:
    """Saves a minimum-bytes set of values, recomputing cheap ops in the backward (module doc)."""
    tangent_side = descendants(joint.tangents)
    backward_needed = ancestors(joint.grad_outputs)
    forward = forced_forward(joint)
    candidates = [n for n in joint.gm.graph.nodes
                  if n.op in ("placeholder", "get_attr", "call_function")
                  and n not in tangent_side and (n in backward_needed or n in forward)]
    cand = set(candidates)
    grad_outputs = set(joint.grad_outputs)
    flow = FlowGraph()
    for n in candidates:
        savable = isinstance(n.meta.get("val"), torch.Tensor)
        flow.add((n, "in"), (n, "out"), nbytes(storage_root(n)) if savable else INF)
        if n.op != "call_function" or (n in forward and not is_recomputable(n, joint.config)):
            flow.add("source", (n, "in"), INF)  # available in the forward, never recomputed
        if n in grad_outputs:
            flow.add((n, "out"), "sink", INF)
        for u in n.users:
            if u in cand:
                flow.add((n, "out"), (u, "in"), INF)
            elif u in tangent_side and u in backward_needed:
                flow.add((n, "out"), "sink", INF)
    if flow.max_flow("source", "sink") >= INF:
        raise ValueError("min-cut partition: the backward reads a value that cannot be saved")
    reach = flow.reachable("source")
    saved = [n for n in candidates if (n, "in") in reach and (n, "out") not in reach]
    return extract(joint, saved)


class FlowGraph:
    """A small directed flow network with Edmonds-Karp max-flow (BFS augmenting paths)."""

    def __init__(self):
        self.cap: dict = defaultdict(dict)  # residual capacities: cap[u][v]

    def add(self, u, v, c: int):
        self.cap[u][v] = min(self.cap[u].get(v, 0) + c, INF)
        self.cap[v].setdefault(u, 0)

    def max_flow(self, s, t) -> int:
        total = 0
        while True:
            parent = self._bfs(s, t)
            if parent is None:
                return total
            path, v = [], t
            while v != s:
                path.append((parent[v], v))
                v = parent[v]
            push = min(self.cap[u][v] for u, v in path)
            if push >= INF:
                return INF
            for u, v in path:
                self.cap[u][v] -= push
                self.cap[v][u] += push
            total += push

    def _bfs(self, s, t):
        parent = {s: None}
        todo = deque([s])
        while todo:
            u = todo.popleft()
            for v, c in self.cap[u].items():
                if c > 0 and v not in parent:
                    parent[v] = u
                    if v == t:
                        return parent
                    todo.append(v)
        return None

    def reachable(self, s) -> set:
        seen = {s}
        todo = deque([s])
        while todo:
            u = todo.popleft()
            for v, c in self.cap[u].items():
                if c > 0 and v not in seen:
                    seen.add(v)
                    todo.append(v)
        return seen

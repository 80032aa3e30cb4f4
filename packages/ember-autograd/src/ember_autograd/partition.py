"""Splitting a joint graph into forward and backward graphs, and the default partitioner.

A partitioner is a plain function `partition(joint: JointGraph) -> Partition`; pass your own to
`aot(..., partition=fn)`. It decides only *which values are saved*; `extract` builds both graphs
from that choice, so every partitioner shares one correct construction.

Note [Stateful ops are never recomputed]: an op that draws random numbers (tag
`nondeterministic_seeded`, e.g. `aten.native_dropout`, `ember_prims::random_seed`) or has side
effects (a mutable schema) runs exactly once, in the forward; when the backward needs it or
anything derived from it, its output (or a descendant) is saved. So a dropout mask recomputed in
the backward comes from the same seed the forward drew.

Note [sizes across the partition]: in a symbolic joint graph (Note [symbolic traces], joint.py)
size values (nodes whose `meta["val"]` is a SymInt: `aten.sym_size.int`, `operator.*`, symbolic
int inputs) are not values a partitioner chooses: `ancestors` and `descendants` do not walk
through them, so reading a tensor's size never makes the tensor saved. `extract` rebuilds the
sizes each graph uses from that graph's own inputs (`SizeNodes`). Every symbol in the backward
(in a size it computes or in a tensor's shape) that is not a size or stride of a saved tensor or
of a tangent is passed to it as an int: the forward returns it after the saved tensors
(`Partition.saved_symbols`), and the backward takes it as a placeholder (SymInt `meta["val"]`)
between the saved tensors and the tangents.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Callable, Iterable

import sympy
import torch
import torch.fx
from ember_symbolic import SizeNodes, env_of, expr_of, hint_of

from ember_autograd.config import AotConfig
from ember_autograd.functionalize import is_view


@dataclass(frozen=True)
class JointGraph:
    """A joint graph: placeholders `num_primals` primals then the tangents; outputs
    `num_fw_outputs` forward outputs (user outputs, new values of mutated inputs) then one
    gradient per primal requiring grad (None where unused)."""

    gm: torch.fx.GraphModule
    num_primals: int
    num_fw_outputs: int
    config: AotConfig = field(default_factory=AotConfig)

    @property
    def placeholders(self) -> list[torch.fx.Node]:
        return [n for n in self.gm.graph.nodes if n.op == "placeholder"]

    @property
    def primals(self) -> list[torch.fx.Node]:
        return self.placeholders[: self.num_primals]

    @property
    def tangents(self) -> list[torch.fx.Node]:
        return self.placeholders[self.num_primals:]

    @property
    def outputs(self) -> list:
        return list(self.gm.graph.output_node().args[0])

    @property
    def fw_outputs(self) -> list:
        return self.outputs[: self.num_fw_outputs]

    @property
    def grad_outputs(self) -> list:
        return self.outputs[self.num_fw_outputs:]


@dataclass
class Partition:
    """forward: primals -> (*forward outputs, *saved, *saved symbols); backward: (*saved, *saved
    symbols, *tangents) -> grads (Note [sizes across the partition]).

    saved_bytes: memory the saved values keep alive: each distinct storage once, a view
    counting as its whole base (see `storage_root`)."""

    forward: torch.fx.GraphModule
    backward: torch.fx.GraphModule
    saved: list[str]
    saved_bytes: int = 0
    saved_symbols: list[str] = field(default_factory=list)


Partitioner = Callable[[JointGraph], Partition]


def nbytes(node: torch.fx.Node) -> int:
    """Bytes of `node`'s value (for symbolic sizes, at the hints: a cost, never a decision)."""
    val = node.meta.get("val")
    return hint_of(val.numel()) * val.element_size() if isinstance(val, torch.Tensor) else 0


def is_size(node) -> bool:
    """A size value: an int-valued node (Note [sizes across the partition])."""
    return isinstance(node, torch.fx.Node) and isinstance(node.meta.get("val"), (torch.SymInt, torch.SymFloat))


def storage_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node that owns `node`'s memory: walks up view ops (and getitems of list-returning
    views such as split); saving a view keeps its whole base alive."""
    while node.op == "call_function":
        target = node.target
        if target is operator.getitem:
            producer = node.args[0]
            if not (isinstance(producer.target, torch._ops.OpOverload) and is_view(producer.target)):
                break
            node = producer.args[0]
        elif isinstance(target, torch._ops.OpOverload) and is_view(target):
            node = node.args[0]
        else:
            break
    return node


def storage_bytes(nodes) -> int:
    return sum(nbytes(root) for root in {storage_root(n) for n in nodes})


def is_stateful(node: torch.fx.Node, config: AotConfig) -> bool:
    """See Note [Stateful ops are never recomputed]."""
    op = node.target
    if node.op != "call_function" or not isinstance(op, torch._ops.OpOverload):
        return False
    return (torch.Tag.nondeterministic_seeded in op.tags or op._schema.is_mutable
            or op._schema.name in config.stateful_ops)


def ancestors(roots: Iterable, stop: set = frozenset()) -> set[torch.fx.Node]:
    """`roots` and every node they depend on, not looking past nodes in `stop`."""
    seen: set[torch.fx.Node] = set()
    todo = [r for r in roots if isinstance(r, torch.fx.Node)]
    while todo:
        n = todo.pop()
        if n in seen or is_size(n):  # Note [sizes across the partition]
            continue
        seen.add(n)
        if n not in stop:
            todo.extend(n.all_input_nodes)
    return seen


def descendants(roots: Iterable[torch.fx.Node]) -> set[torch.fx.Node]:
    seen: set[torch.fx.Node] = set()
    todo = list(roots)
    while todo:
        n = todo.pop()
        if n not in seen and not is_size(n):
            seen.add(n)
            todo.extend(u for u in n.users if u.op != "output")
    return seen


def with_getitems(nodes: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """Adds the getitem projections of tuple-valued nodes: a tuple is never saved, its items are."""
    out = set(nodes)
    for n in nodes:
        if not isinstance(n.meta.get("val"), torch.Tensor):
            out |= {u for u in n.users if u.target is operator.getitem}
    return out


def forced_forward(joint: JointGraph) -> set[torch.fx.Node]:
    """What the forward computes whatever the partitioner: the forward outputs' ancestors, the
    primals, and every stateful op that does not depend on a tangent, with its ancestors."""
    tangent_side = descendants(joint.tangents)
    stateful = [n for n in joint.gm.graph.nodes
                if n not in tangent_side and is_stateful(n, joint.config)]
    return with_getitems(ancestors([*joint.fw_outputs, *stateful, *joint.primals]))


def default_partition(joint: JointGraph) -> Partition:
    """Save what is needed: the forward computes what its outputs need (plus stateful ops);
    every forward value that a backward node reads is saved. Nothing is recomputed except
    tangent-independent work that only the backward uses, which runs in the backward."""
    forward = forced_forward(joint)
    backward = ancestors(joint.grad_outputs, stop=forward) - forward
    grads = set(joint.grad_outputs)
    needed = [n for n in joint.gm.graph.nodes
              if n in forward and (n in grads or any(u in backward for u in n.users))]
    # A view is saved as its base and re-taken in the backward: a layout-changing view (a
    # weight's transpose) would otherwise be materialized by a compiler that returns fresh
    # buffers, and a broadcast would be saved at its full size.
    saved = list(dict.fromkeys(n if n in grads else view_base(n, joint.config) for n in needed))
    if joint.config.recompute_pointwise:
        saved = recompute_pointwise(joint, saved)
    return extract(joint, saved)


# Note [pointwise values recomputed from saved ones]: saving what the backward reads kept every
# intermediate of a pointwise chain whose input was saved anyway: GPT-2's tanh GELU saved four
# (rows, 3072) tensors a layer besides its input (1.2 GB a step at batch 4 x 512, written by the
# forward and read back by the backward), where the backward can recompute them from the input
# inside the kernels that read them. So a saved value computed by a few pointwise ops
# (`torch.Tag.pointwise` or named in `AotConfig.pointwise_ops`, not stateful) from values that
# stay saved anyway is recomputed in the backward instead: its walk back through pointwise ops
# and views (at most RECOMPUTE_OPS computing ops) must end
# at values kept saved (not pointwise, a forward output, a gradient, or a saved value that could
# not be recomputed itself). Nothing new is saved, so the saved bytes only shrink; reductions,
# matrix products, views and random ops are never recomputed (the min-cut partitioner's model
# recomputes more: `min_cut_partition`). Off with `AotConfig(recompute_pointwise=False)`.
RECOMPUTE_OPS = 16


def _pointwise(node: torch.fx.Node, config: AotConfig) -> bool:
    op = node.target
    return (node.op == "call_function" and isinstance(op, torch._ops.OpOverload)
            and (torch.Tag.pointwise in op.tags or op._schema.name in config.pointwise_ops)
            and not is_stateful(node, config) and isinstance(node.meta.get("val"), torch.Tensor))


def _pointwise_or_view(node: torch.fx.Node, config: AotConfig) -> bool:
    """What a recomputation may pass through: pointwise ops and views (re-indexing is free)."""
    if _pointwise(node, config):
        return True
    op = node.target
    return (node.op == "call_function" and isinstance(op, torch._ops.OpOverload) and not is_stateful(node, config)
            and (is_view(op) or op._schema.name in config.view_ops))


def recompute_pointwise(joint: JointGraph, saved: list[torch.fx.Node]) -> list[torch.fx.Node]:
    """`saved` less the values the backward can recompute from the rest (Note [pointwise values
    recomputed from saved ones])."""
    config = joint.config
    outputs = set(joint.outputs)
    anchors = {n for n in saved if n in outputs or not _pointwise(n, config)}
    order = {n: i for i, n in enumerate(joint.gm.graph.nodes)}
    for n in sorted(saved, key=order.__getitem__):
        if n in anchors or not _recomputable_from(n, anchors, config):
            anchors.add(n)
    return [n for n in saved if n in anchors]


def _recomputable_from(node: torch.fx.Node, anchors: set, config: AotConfig) -> bool:
    seen, todo, ops = set(), [node], 0
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        ops += bool(n.all_input_nodes) and _pointwise(n, config)  # views and constants are free
        if ops > RECOMPUTE_OPS or len(seen) > 4 * RECOMPUTE_OPS:
            return False
        for a in n.all_input_nodes:
            if a in anchors or is_size(a) or not isinstance(a.meta.get("val"), torch.Tensor):
                continue
            if not _pointwise_or_view(a, config):
                return False
            todo.append(a)
    return True


def view_base(node: torch.fx.Node, config: AotConfig) -> torch.fx.Node:
    """The value `node` re-indexes, through single-input views (schema aliases, `config.view_ops`)."""
    while (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
           and not is_stateful(node, config) and node.args and isinstance(node.args[0], torch.fx.Node)
           and isinstance(node.args[0].meta.get("val"), torch.Tensor)
           and (is_view(node.target) or node.target._schema.name in config.view_ops)):
        node = node.args[0]
    return node


def extract(joint: JointGraph, saved: list[torch.fx.Node]) -> Partition:
    """Builds the forward and backward graphs for a choice of saved values (sizes: Note [sizes
    across the partition])."""
    for n in saved:
        if not isinstance(n.meta.get("val"), torch.Tensor):
            raise ValueError(f"partitioner chose to save {n.name}, which is not a tensor")
    bw_inputs = [*saved, *joint.tangents]
    bw_needed = ancestors(joint.grad_outputs, stop=set(bw_inputs))
    for n in bw_needed:
        if n.op == "placeholder" and n not in bw_inputs:
            raise ValueError(f"the backward needs primal {n.name}, which the partition did not save")
    bw_nodes = [n for n in joint.gm.graph.nodes
                if n in bw_needed and n not in bw_inputs and n.op not in ("output", "placeholder")]
    symbols = _symbols_to_pass(bw_inputs, bw_nodes, joint.grad_outputs)

    fw_graph = torch.fx.Graph()
    fw_sizes = SizeNodes(fw_graph)
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    fw_needed = ancestors([*joint.fw_outputs, *saved])
    for n in joint.gm.graph.nodes:
        if n.op == "placeholder" and n in joint.primals:
            env[n] = _copy_placeholder(fw_graph, fw_sizes, n)
        elif n.op != "placeholder" and n.op != "output" and n in fw_needed:
            env[n] = fw_graph.node_copy(n, _mapper(env, fw_sizes))
    fw_out = [_lookup(env, fw_sizes, x) for x in [*joint.fw_outputs, *saved]]
    fw_graph.output(tuple(fw_out + [fw_sizes.expr_node(s) for s in symbols]))

    bw_graph = torch.fx.Graph()
    bw_sizes = SizeNodes(bw_graph)
    benv: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in saved:
        benv[n] = _copy_placeholder(bw_graph, bw_sizes, n)
    if symbols:
        size_env = env_of(_sizes_of(joint.primals))
        for s in symbols:
            node = bw_graph.placeholder(str(s))
            bw_sizes.bind_input(node, size_env.wrap(s, int))
    for n in joint.tangents:
        benv[n] = _copy_placeholder(bw_graph, bw_sizes, n)
    for n in bw_nodes:
        benv[n] = bw_graph.node_copy(n, _mapper(benv, bw_sizes))
    bw_graph.output(tuple(_lookup(benv, bw_sizes, x) for x in joint.grad_outputs))
    fw = torch.fx.GraphModule(joint.gm, fw_graph, class_name="AotForward")
    bw = torch.fx.GraphModule(joint.gm, bw_graph, class_name="AotBackward")
    return Partition(fw, bw, [n.name for n in saved], storage_bytes(saved), [str(s) for s in symbols])


def _copy_placeholder(graph: torch.fx.Graph, sizes: SizeNodes, n: torch.fx.Node) -> torch.fx.Node:
    node = graph.placeholder(n.name)
    node.meta = dict(n.meta)
    sizes.bind_input(node, n.meta.get("val"))
    return node


def _sizes_of(nodes) -> list:
    """Every SymInt in the nodes' values (tensor sizes and strides, size values)."""
    out = []
    for n in nodes:
        val = n.meta.get("val")
        for v in val if isinstance(val, (list, tuple)) else [val]:
            if isinstance(v, torch.Tensor):
                out += [x for x in (*v.shape, *v.stride()) if isinstance(x, torch.SymInt)]
            elif isinstance(v, (torch.SymInt, torch.SymFloat)):
                out.append(v)
    return out


def _symbols_to_pass(inputs: list, nodes: list, outputs: list) -> list:
    """The symbols the backward uses that none of its tensor inputs has as a whole size or stride
    (Note [sizes across the partition])."""
    size_args = [a for n in nodes for a in n.all_input_nodes if is_size(a)]
    values = [*inputs, *nodes, *size_args, *(o for o in outputs if isinstance(o, torch.fx.Node))]
    used = set().union(*(expr_of(v).free_symbols for v in _sizes_of(values)))
    readable = {expr_of(v) for v in _sizes_of(inputs) if isinstance(expr_of(v), sympy.Symbol)}
    return sorted(used - readable, key=str)


def _mapper(env: dict, sizes: SizeNodes):
    """Argument mapping for node_copy: values through `env`, size values rebuilt by `sizes`."""
    return lambda a: sizes.node_of(a.meta["val"]) if is_size(a) else env[a]


def _lookup(env: dict, sizes: SizeNodes, x):
    if is_size(x):
        return sizes.node_of(x.meta["val"])
    return env[x] if isinstance(x, torch.fx.Node) else x

"""DistributedDataParallel: each captured graph split at DDP's gradient buckets.

Note [DDP buckets]: DDP all-reduces gradients bucket by bucket: parameters are grouped, in
reverse registration order (roughly the order their gradients are produced by the backward),
into buckets of at most `bucket_bytes_cap` bytes (the first one `first_bucket_bytes_cap`), and a
bucket's all-reduce starts, asynchronously, as soon as every gradient in it has been accumulated.
A compiled graph is one autograd node: its backward hands over all parameter gradients at the
end, so every all-reduce would wait for the whole backward. So, while a DDP forward is running
(`DistributedDataParallel._get_active_ddp_module()`, which DDP sets around its module's call for
exactly this), a captured graph is cut into pieces the way torch's DDPOptimizer cuts it: walking
the graph from its output back, operations join the current piece until the parameters they
read fill a bucket's capacity; each piece is compiled on its own, so each has its own backward,
and when a piece's backward ends, the gradients of its parameters are final, their bucket is
ready and its all-reduce overlaps the backward of the pieces before it.

The pieces are contiguous runs of the graph's nodes (the walk only ever starts a new piece), so
they run one after the other, each taking what it reads from the graph inputs and the earlier
pieces' outputs. Each piece is a captured graph in its own right (placeholders with
`meta["example_value"]`, a flat tuple out) and goes through the backend and its fallback (Note
[one failure path]) as any captured graph does. A piece that ended full but has no value used
outside it keeps growing: a piece whose outputs nobody reads has no backward, and the gradients
of its parameters would never be produced.

The split follows DDP's own bucketing (the same caps, the same parameter order), so the pieces
are as many as the buckets DDP builds when the gradients are produced in reverse order of use;
graphs under `torch.compile` go through Dynamo's DDPOptimizer instead, not through this.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any

import ember_capture
import torch
import torch.distributed as dist
import torch.fx

from ember.fallback import site_of
from ember.module import OptimizedModule

CompilerFn = Callable[[torch.fx.GraphModule, list], Callable]


def is_ddp(model: Any) -> bool:
    return dist.is_available() and isinstance(model, torch.nn.parallel.DistributedDataParallel)


def active_ddp() -> Any:
    """The DistributedDataParallel module whose forward is running now, or None."""
    if not dist.is_available():
        return None
    return torch.nn.parallel.DistributedDataParallel._get_active_ddp_module()


# --- ember.compile(ddp_model) ----------------------------------------------------------------

def compile_ddp(ddp: Any, compile_module: Callable[[torch.nn.Module], OptimizedModule]) -> OptimizedModule:
    """`ember.compile(DDP(model))`: DDP's own forward runs as it is (its reducer bookkeeping,
    buffer broadcasts, the hooks of find_unused_parameters and static_graph), and the module it
    wraps runs compiled (`compile_module` compiles it with the user's arguments), as in
    `DDP(ember.compile(model))`; its graphs split at the buckets."""
    inner = compile_module(ddp.module)
    compiled = OptimizedModule(ddp, functools.partial(_call_ddp, ddp, inner), compile_module)
    object.__setattr__(compiled, "_ember_record", inner._ember_record)
    return compiled


def _call_ddp(ddp: Any, inner: OptimizedModule, *args: Any, **kwargs: Any) -> Any:
    # DDP calls `self.module(...)`: for this call, that is the compiled module (same parameters,
    # same submodules), and the DDP module is left as it was afterwards.
    module = ddp._modules["module"]
    ddp._modules["module"] = inner
    try:
        return ddp(*args, **kwargs)
    finally:
        ddp._modules["module"] = module


# --- splitting a graph at the buckets --------------------------------------------------------

def split_at_ddp_buckets(compile_graph: CompilerFn) -> CompilerFn:
    """`compile_graph`, splitting each graph captured inside a DDP forward (Note [DDP buckets])."""

    def compile_one(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        ddp = active_ddp()
        if ddp is None:
            return compile_graph(gm, example_inputs)
        pieces = bucket_pieces(gm, example_inputs, _reduced_parameters(ddp), _bucket_caps(ddp))
        if len(pieces) < 2:
            return compile_graph(gm, example_inputs)
        try:
            plan = plan_pieces(gm, pieces)
            piece_inputs = plan.example_inputs(example_inputs)
        except _CannotSplit as exc:  # correct, without the overlap: say so at the user's line
            site = site_of(gm)
            message = (f"ember: a graph inside DistributedDataParallel is compiled whole, not split at its "
                       f"gradient buckets ({exc}): its all-reduces wait for its whole backward")
            if site is None:
                warnings.warn(message, stacklevel=2)
            else:
                warnings.warn_explicit(message, UserWarning, site.filename, site.lineno)
            return compile_graph(gm, example_inputs)
        compiled = [compile_graph(p.gm, ex) for p, ex in zip(plan.pieces, piece_inputs)]
        return plan.runner(compiled)

    # what the wrapped compiler takes, it takes (Note [static graphs for ember_autograd])
    setattr(compile_one, ember_capture.SYMBOLIC_SIZES_ATTR, ember_capture.takes_symbolic_sizes(compile_graph))
    return compile_one


def _reduced_parameters(ddp: Any) -> dict[int, int]:
    """id(parameter) -> its size in bytes, for the parameters DDP all-reduces."""
    ignored = getattr(ddp, "parameters_to_ignore", set())
    return {id(p): p.numel() * p.element_size() for name, p in ddp.module.named_parameters()
            if p.requires_grad and name not in ignored}


def _bucket_caps(ddp: Any) -> list[int]:
    """The byte cap of bucket 0, 1, ... (the last one repeats), as DDP's reducer caps them."""
    per_bucket = list(getattr(ddp, "bucket_bytes_cap_list", None) or [])
    if per_bucket:
        return per_bucket
    config = getattr(ddp, "_bucket_config", None)
    first = config.first_bucket_bytes_cap if config is not None else ddp.bucket_bytes_cap
    return [first, ddp.bucket_bytes_cap]


@dataclasses.dataclass
class _Bucket:
    nodes: list = dataclasses.field(default_factory=list)  # in reverse graph order
    size: int = 0  # bytes of the parameters it reads first


def bucket_pieces(gm: torch.fx.GraphModule, example_inputs: list, params: dict[int, int],
                  caps: list[int]) -> list[list[torch.fx.Node]]:
    """The graph's operations cut into contiguous pieces, in graph order, one per DDP bucket."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    size_of = {n: params[id(x)] for n, x in zip(placeholders, example_inputs)
               if isinstance(x, torch.Tensor) and id(x) in params}
    buckets = [_Bucket()]
    counted: set = set()
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        current = buckets[0]
        cap = caps[min(len(buckets) - 1, len(caps) - 1)]
        if current.size >= cap and _has_external_output(current):
            buckets.insert(0, _Bucket())
        buckets[0].nodes.append(node)
        for arg in node.all_input_nodes:
            if arg in size_of and arg not in counted:
                counted.add(arg)
                buckets[0].size += size_of[arg]
    return [list(reversed(b.nodes)) for b in buckets if b.nodes]


def _has_external_output(bucket: _Bucket) -> bool:
    inside = set(bucket.nodes)
    return any(user not in inside for node in bucket.nodes for user in node.users)


class _CannotSplit(Exception):
    pass


@dataclasses.dataclass
class _Piece:
    gm: torch.fx.GraphModule
    inputs: list  # slots read (graph inputs first, then each piece's outputs in order)
    outputs: list[torch.fx.Node]  # the nodes of the original graph it returns
    free_after: list = dataclasses.field(default_factory=list)  # slots no later piece reads


@dataclasses.dataclass
class PiecePlan:
    """How the pieces of one graph run: slot i holds graph input i, then each piece's outputs."""

    pieces: list[_Piece]
    n_inputs: int
    output: list  # per graph output: ("slot", i) or ("const", value)
    slot_nodes: list[torch.fx.Node]

    def example_inputs(self, example_inputs: list) -> list[list]:
        """Each piece's example inputs: the graph's own, and tensors shaped like the values that
        flow between pieces (their `meta["example_value"]`); the values themselves are not needed
        to compile (a backend reads shapes, strides, dtypes and requires_grad)."""
        slots = list(example_inputs)
        for node in self.slot_nodes[self.n_inputs:]:
            slots.append(_example_like(node))
        return [[slots[i] for i in p.inputs] for p in self.pieces]

    def runner(self, compiled: list[Callable]) -> Callable:
        steps = [(fn, p.inputs, p.free_after) for fn, p in zip(compiled, self.pieces)]
        output = self.output

        def run(*args: Any) -> tuple:
            slots = list(args)
            for fn, reads, free in steps:
                outs = fn(*[slots[i] for i in reads])
                slots.extend(outs)
                for i in free:  # an activation no later piece reads is not held until the end
                    slots[i] = None
            return tuple(slots[v] if kind == "slot" else v for kind, v in output)

        run.pieces = [p.gm for p in self.pieces]  # for inspection and tests
        return run


def _example_like(node: torch.fx.Node) -> Any:
    value = node.meta.get("example_value")
    if isinstance(value, torch.Tensor):
        real = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device)
        real = real.zero_() if real.numel() else real
        return real.requires_grad_(value.requires_grad) if value.requires_grad else real
    if value is None or isinstance(value, (torch.SymInt, torch.SymFloat)):
        raise _CannotSplit(f"the value of {node.format_node()} between pieces has no example")
    return value


def plan_pieces(gm: torch.fx.GraphModule, pieces: list[list[torch.fx.Node]]) -> PiecePlan:
    graph_inputs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output_node = next(n for n in gm.graph.nodes if n.op == "output")
    piece_of = {node: k for k, nodes in enumerate(pieces) for node in nodes}
    slot_of = {n: i for i, n in enumerate(graph_inputs)}
    slot_nodes = list(graph_inputs)
    last_read: dict[int, int] = {}  # slot -> the last piece that reads it
    built = []
    for k, nodes in enumerate(pieces):
        inputs: list[torch.fx.Node] = []
        for node in nodes:
            for arg in node.all_input_nodes:
                if piece_of.get(arg) != k and arg not in inputs:
                    inputs.append(arg)
        outputs = [n for n in nodes if any(u is output_node or piece_of.get(u, k) != k for u in n.users)]
        piece_gm = _piece_module(gm, nodes, inputs, outputs)
        reads = [slot_of[n] for n in inputs]
        for i in reads:
            last_read[i] = k
        for n in outputs:
            slot_of[n] = len(slot_nodes)
            slot_nodes.append(n)
        built.append(_Piece(piece_gm, reads, outputs))
    output = []
    for value in output_node.args[0]:
        if isinstance(value, torch.fx.Node):
            output.append(("slot", slot_of[value]))
        else:
            output.append(("const", value))
    kept = {v for kind, v in output if kind == "slot"}
    for i, k in last_read.items():
        if i >= len(graph_inputs) and i not in kept:
            built[k].free_after.append(i)
    return PiecePlan(built, len(graph_inputs), output, slot_nodes)


def _piece_module(gm: torch.fx.GraphModule, nodes: list, inputs: list, outputs: list) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in inputs:
        placeholder = graph.placeholder(node.name)
        placeholder.meta = dict(node.meta)
        env[node] = placeholder
    for node in nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[n] for n in outputs))
    return torch.fx.GraphModule(gm, graph)

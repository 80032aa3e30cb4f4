"""Build a prims-level FX graph by hand, with meta["val"] filled in by running each op.

    >>> import torch, ember_prims
    >>> b = GraphBuilder()
    >>> x = b.input(torch.randn(4))
    >>> b.output(b.call(ember_prims.ops.sin, x))
    >>> gm = b.build()

Each node's `meta["val"]` is the op's real result on the example inputs (so the builder also
gives the eager reference: `b.values`), which is what compile_graph needs to know shapes,
dtypes and strides.
"""
from __future__ import annotations

import torch
import torch.fx as fx


class GraphBuilder:
    def __init__(self):
        self.graph = fx.Graph()
        self.examples: list = []
        self.values: list = []  # the eager results of the output node's values

    def input(self, example, name: str | None = None) -> fx.Node:
        node = self.graph.placeholder(name or f"arg{len(self.examples)}")
        node.meta["val"] = example
        self.examples.append(example)
        return node

    def call(self, op, *args, **kwargs) -> fx.Node:
        node = self.graph.call_function(op, args, kwargs)
        real = lambda a: a.meta["val"] if isinstance(a, fx.Node) else a  # noqa: E731
        node.meta["val"] = op(*fx.node.map_aggregate(args, real), **fx.node.map_aggregate(kwargs, real))
        return node

    def output(self, *nodes: fx.Node) -> None:
        self.graph.output(tuple(nodes))
        self.values = [n.meta["val"] for n in nodes]

    def build(self) -> fx.GraphModule:
        return fx.GraphModule(torch.nn.Module(), self.graph)

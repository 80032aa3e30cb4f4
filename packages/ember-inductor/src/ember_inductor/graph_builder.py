"""Build a prims-level FX graph by hand, with meta["val"] filled in by running each op.

    >>> import torch, ember_prims
    >>> b = GraphBuilder()
    >>> x = b.input(torch.randn(4))
    >>> b.output(b.call(ember_prims.ops.sin, x))
    >>> gm = b.build()

Each node's `meta["val"]` is the op's real result on the example inputs (so the builder also
gives the eager reference: `b.values`), which is what compile_graph needs to know shapes,
dtypes and strides.

With symbolic sizes (issue #18): `GraphBuilder(fake_mode=ember_symbolic.plain_fake_mode())` and
`b.input(example, sizes=(n, 16))` with `n` a SymInt of an `ember_symbolic.SizeEnv`: the
input's `meta["val"]` is a fake tensor of those sizes and every op runs on fakes, so the
graph's `meta["val"]`s carry SymInts (then `b.values` are fakes, not a reference). Sizes an op
takes are nodes: `b.call(torch.ops.aten.sym_size.int, x, 0)`.
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx as fx


class GraphBuilder:
    def __init__(self, fake_mode=None):
        self.graph = fx.Graph()
        self.examples: list = []
        self.values: list = []  # the eager results of the output node's values
        self.fake_mode = fake_mode

    def input(self, example, name: str | None = None, sizes=None) -> fx.Node:
        node = self.graph.placeholder(name or f"arg{len(self.examples)}")
        node.meta["val"] = example
        if sizes is not None:
            from ember_symbolic import fake_with_sizes
            node.meta["val"] = fake_with_sizes(self.fake_mode, example, sizes)
        self.examples.append(example)
        return node

    def int_input(self, example: int, value, name: str | None = None) -> fx.Node:
        """An int placeholder whose meta["val"] is `value` (a SymInt for a dynamic int)."""
        node = self.graph.placeholder(name or f"arg{len(self.examples)}")
        node.meta["val"] = value
        self.examples.append(example)
        return node

    def call(self, op, *args, **kwargs) -> fx.Node:
        node = self.graph.call_function(op, args, kwargs)
        real = lambda a: a.meta["val"] if isinstance(a, fx.Node) else a  # noqa: E731
        with self.fake_mode if self.fake_mode is not None else contextlib.nullcontext():
            node.meta["val"] = op(*fx.node.map_aggregate(args, real), **fx.node.map_aggregate(kwargs, real))
        return node

    def output(self, *nodes: fx.Node) -> None:
        self.graph.output(tuple(nodes))
        self.values = [n.meta["val"] for n in nodes]

    def build(self) -> fx.GraphModule:
        return fx.GraphModule(torch.nn.Module(), self.graph)

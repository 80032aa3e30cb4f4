"""Prims graphs with symbolic sizes, built by hand (issue #18), the way ember_autograd hands them
to the inductor: placeholders whose meta["val"] has SymInt sizes of one ember_symbolic.SizeEnv,
sizes an op takes given as nodes (aten.sym_size.int, operator.*) whose meta["val"] is the SymInt.

The prims whose schemas take `int[]` sizes (reshape, broadcast_in_dim, slice, full) would turn a
SymInt argument into its hint when their fake kernel runs (a guard, and a static result), so
their meta["val"] is computed here from the equivalent ATen op, which takes SymInts.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

import ember_prims
from ember_inductor.graph_builder import GraphBuilder
from ember_symbolic import SizeEnv, plain_fake_mode

P = ember_prims.ops
aten = torch.ops.aten


def _broadcast(a, shape, bdims):
    view = [1] * len(shape)
    for j, d in enumerate(bdims):
        view[d] = a.shape[j]
    return a.reshape(view).expand(list(shape))


def _slice(a, start, limit, step):
    for d, (lo, hi, k) in enumerate(zip(start, limit, step)):
        a = aten.slice.Tensor(a, d, lo, hi, k)
    return a


# prim -> the same result computed by ATen (shapes only: the result is made fresh)
ATEN_SHAPES = {
    P.reshape.default: lambda a, shape: a.reshape(list(shape)),
    P.broadcast_in_dim.default: _broadcast,
    P.slice.default: _slice,
    P.full.default: lambda shape, value, *, dtype, device: torch.empty(list(shape), dtype=dtype, device=device),
}


class SymbolicGraph(GraphBuilder):
    """A GraphBuilder over fake tensors with symbolic sizes.

        g = SymbolicGraph()
        n = g.symbol(8)                       # s0, hint 8
        x = g.input(torch.randn(8, 16), (n, 16))
        rows = g.size(x, 0)                   # aten.sym_size.int node
    """

    def __init__(self):
        self.env = SizeEnv()
        super().__init__(plain_fake_mode())

    def symbol(self, hint: int):
        return self.env.symint(hint, f"size{len(self.env.hints)}")

    def input(self, example, sizes=None, name=None) -> fx.Node:  # noqa: D102
        return super().input(example, name, sizes=sizes if sizes is not None else tuple(example.shape))

    def size(self, node: fx.Node, dim: int) -> fx.Node:
        return self.call(aten.sym_size.int, node, dim)

    def arith(self, op, a, b) -> fx.Node:
        """operator.add/mul/floordiv... of size nodes (or ints)."""
        return self.call(op, a, b)

    def call(self, op, *args, **kwargs) -> fx.Node:
        equivalent = ATEN_SHAPES.get(op)
        if equivalent is None:
            return super().call(op, *args, **kwargs)
        node = self.graph.call_function(op, args, kwargs)
        val = lambda a: a.meta["val"] if isinstance(a, fx.Node) else a  # noqa: E731
        with self.fake_mode:
            out = equivalent(*fx.node.map_aggregate(args, val), **fx.node.map_aggregate(kwargs, val))
            node.meta["val"] = torch.empty(out.shape, dtype=out.dtype, device=out.device)
        return node


__all__ = ["ATEN_SHAPES", "P", "SymbolicGraph", "aten", "operator"]

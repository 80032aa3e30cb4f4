"""The lowering table: prim name -> lowering function (filled by @lowering in each module).

`ember_prims.PRIMS` is the one list of prims: lowerings are registered under its names (elementwise
ones by category), and every prim either has a lowering or is listed in `RUNS_EAGERLY` with the
reason (tests/test_prim_coverage.py checks both, and that both backends render what is lowered).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.fx as fx

import ember_prims
from ember_inductor.ir import Pointwise
from ember_inductor.sizes import as_sizes

# prim name -> fn(ctx, node, *args, **kwargs) -> IRNode (args already lowered)
LOWERINGS: dict[str, Callable] = {}

# OpOverload (torch.ops.ember_prims.add.default) -> prim name ("add")
PRIM_NAMES = {info.op: name for name, info in ember_prims.PRIMS.items()}

# Prims deliberately not lowered: the wrapper calls them eagerly (an extern call), for this reason.
RUNS_EAGERLY = {
    "empty_strided": "uninitialised memory with given strides: nothing to compute",
    "random_seed": "stateful: it must advance torch's generator",
    "scatter": "a scatter: its writes are not an index function of the output",
    "scatter_add": "a scatter: its writes are not an index function of the output",
    "index_put": "a scatter: its writes are not an index function of the output",
    "device_put": "a copy between devices (a 0-d CPU operand moved to the graph's device)",
}


def prims_in(*categories: str) -> tuple[str, ...]:
    """The names of the prims of these `ember_prims` categories, in PRIMS order."""
    return tuple(name for name, info in ember_prims.PRIMS.items() if info.category in categories)


def lowering(*names: str):
    def register(fn):
        for name in names:
            assert name in ember_prims.PRIMS, f"lowering for {name}, which is not in ember_prims.PRIMS"
            assert name not in LOWERINGS, f"two lowerings for {name}"
            LOWERINGS[name] = fn
        return fn
    return register


def prim_of(node: fx.Node) -> str:
    """The prim name of a call_function node whose target is a prim."""
    return PRIM_NAMES[node.target]


def meta_val(node: fx.Node) -> torch.Tensor:
    return node.meta["val"]


def pointwise(node: fx.Node, fn, sizes=None, dtype=None) -> Pointwise:
    """A lazy elementwise value shaped like the node's meta["val"]."""
    val = node.meta["val"]
    return Pointwise(as_sizes(val.shape) if sizes is None else tuple(sizes),
                     val.dtype if dtype is None else dtype, val.device, fn, node.name)

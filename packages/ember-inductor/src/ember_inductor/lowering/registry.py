"""The lowering table: prim name -> lowering function (filled by @lowering in each module)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.fx as fx

from ember_inductor.ir import Pointwise

# prim name -> fn(ctx, node, *args, **kwargs) -> IRNode (args already lowered)
LOWERINGS: dict[str, Callable] = {}


def lowering(*names: str):
    def register(fn):
        for name in names:
            assert name not in LOWERINGS, f"two lowerings for {name}"
            LOWERINGS[name] = fn
        return fn
    return register


def meta_val(node: fx.Node) -> torch.Tensor:
    return node.meta["val"]


def pointwise(node: fx.Node, fn, sizes=None, dtype=None) -> Pointwise:
    """A lazy elementwise value shaped like the node's meta["val"]."""
    val = node.meta["val"]
    return Pointwise(tuple(val.shape) if sizes is None else tuple(sizes),
                     val.dtype if dtype is None else dtype, val.device, fn, node.name)

"""The inductor's input spec, checked when options.debug_verify is on (STYLE.md rule 2)."""
from __future__ import annotations

import operator

import torch
import torch.fx as fx


class GraphSpecError(ValueError):
    pass


def verify_graph(gm: fx.GraphModule) -> None:
    """Only ember_prims ops, extern ATen ops and getitem; meta["val"] on every node; no mutation."""
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if node.op != "call_function":
            raise GraphSpecError(f"{node.name}: {node.op} nodes are not part of a prims graph")
        if "val" not in node.meta:
            raise GraphSpecError(f"{node.name}: missing meta['val']")
        target = node.target
        if target is operator.getitem:
            continue
        if not isinstance(target, torch._ops.OpOverload):
            raise GraphSpecError(f"{node.name}: target {target} is not an op overload")
        if target._schema.is_mutable:
            raise GraphSpecError(f"{node.name}: {target} mutates its inputs")

"""The inductor's input spec (ARCHITECTURE.md interface 4, STYLE.md rule 2), checked when
`options.debug_verify` is on (the facade turns it on with EMBER_CHECK=1)."""
from __future__ import annotations

import torch
import torch.fx as fx

import ember_prims


class SpecError(ValueError):
    """A graph handed to `compile_graph` is not one it compiles (see `verify_graph`)."""


GraphSpecError = SpecError  # the former name


def verify_graph(gm: fx.GraphModule) -> None:
    """A prims-level graph (`ember_prims.verify`: only ember_prims ops, ember_prims' extern ATen
    ops and getitem, `meta["val"]` on every node) that mutates nothing. Raises `SpecError`
    naming every violation."""
    try:
        ember_prims.verify(gm)
    except ember_prims.SpecError as exc:
        raise SpecError(f"ember_inductor.verify_graph: {exc}") from None
    mutating = [f"{n.name}: {n.target} mutates its inputs" for n in gm.graph.nodes
                if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
                and n.target._schema.is_mutable]
    if mutating:
        raise SpecError("ember_inductor.verify_graph: " + "; ".join(mutating))

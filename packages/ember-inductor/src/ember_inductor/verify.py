"""The inductor's input spec (ARCHITECTURE.md interface 4, STYLE.md rule 2), checked when
`options.debug_verify` is on (the facade turns it on with EMBER_CHECK=1)."""
from __future__ import annotations

import torch
import torch.fx as fx

import ember_prims
from ember_inductor.sizes import is_size_target


class SpecError(ValueError):
    """A graph handed to `compile_graph` is not one it compiles (see `verify_graph`)."""


GraphSpecError = SpecError  # the former name


def _functional_op(target) -> bool:
    # an ATen op, a user's torch.library op, ember_autograd's auto-functionalized ops (Note
    # [auto-functionalization] in ember_autograd/autofunctional.py): the wrapper calls any of
    # them. torch's own prims are not among them: only a decomposition table that is not
    # ember_prims' emits those, the mistake this check is there to catch.
    return isinstance(target, torch._ops.OpOverload) and target.namespace != "prims" \
        and not target._schema.is_mutable


def verify_graph(gm: fx.GraphModule, strict: bool = False) -> None:
    """A prims-level graph (`ember_prims.verify`: ember_prims ops, ember_prims' extern ATen ops
    and getitem, `meta["val"]` on every node) that mutates nothing. Other functional ops (ATen's,
    torch.library custom ops) are accepted unless `strict`: the lowering runs them as library
    calls (a fallback, listed in `CompiledGraph.fallbacks` and the "fallback" log), correct but
    unfused. Raises `SpecError`
    naming every violation."""
    problems = [f"{n.name}: {n.target} mutates its inputs" for n in gm.graph.nodes
                if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
                and n.target._schema.is_mutable]
    try:
        # sizes computed from sizes (Note [size arithmetic nodes] in sizes.py) are part of the spec
        ember_prims.verify(gm, also_allowed=is_size_target if strict else
                           (lambda t: is_size_target(t) or _functional_op(t)))
    except ember_prims.SpecError as exc:
        problems.append(str(exc))
    if problems:
        raise SpecError("ember_inductor.verify_graph: " + "; ".join(problems))

"""The checkable spec of this layer's output graphs (interface 2 of ARCHITECTURE.md)."""
from __future__ import annotations

import operator

import torch
import torch.fx
from ember_symbolic import is_size_node

from ember_autograd.errors import SpecError


def verify_functional(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Checks that `gm` is a functional ATen/prims graph: every call is an `OpOverload` (or a
    `getitem` of a multi-output op) whose schema mutates nothing, and every placeholder,
    constant and call carries `meta["val"]` (a fake tensor, or a tuple of them). Size nodes
    (`aten.sym_size.int`, `operator.mul`, ... with a SymInt `meta["val"]`: Note [symbolic traces]
    in joint.py) are allowed. Returns `gm`;
    raises `SpecError` listing every violation.

    >>> import torch, torch.fx
    >>> g = torch.fx.Graph()
    >>> _ = g.output(g.placeholder("x"))
    >>> verify_functional(torch.fx.GraphModule({}, g))
    Traceback (most recent call last):
    ...
    ember_autograd.errors.SpecError: [not_functional]: x: no meta['val']
    """
    problems = []
    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        if n.op in ("call_module", "call_method"):
            problems.append(f"{n.name}: {n.op} is not allowed (only call_function of ATen ops)")
            continue
        if "val" not in n.meta:
            problems.append(f"{n.name}: no meta['val']")
        if n.op != "call_function" or is_size_node(n):
            continue
        if n.target is operator.getitem:
            if n.args[0].op != "call_function":
                problems.append(f"{n.name}: getitem of a non-call")
        elif not isinstance(n.target, torch._ops.OpOverload):
            problems.append(f"{n.name}: target {n.target} is not an OpOverload")
        elif n.target._schema.is_mutable:
            problems.append(f"{n.name}: {n.target} mutates its inputs")
    if problems:
        raise SpecError("not_functional", "; ".join(problems))
    return gm

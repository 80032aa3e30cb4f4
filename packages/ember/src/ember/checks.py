"""Boundary checks: one switch turns on every layer's verifier.

Note [checked boundaries] (ARCHITECTURE.md, "Every boundary can be checked"): with
EMBER_CHECK=1 (or `options={"check": True}`), each graph is checked where it crosses a layer:

  capture -> backend        ember_capture.verify_graph   torch-level graph, stack traces, fakes
  autograd, after each pass ember_autograd.verify_functional (AotConfig.verify)
  prims -> inductor         ember_inductor.verify_graph (InductorOptions.debug_verify), which
                            runs ember_prims.verify (prims and externs only) and adds no-mutation
  compiled graph -> runtime `check_outputs`: the first call's outputs have the shapes, dtypes
                            and devices the graph's meta["val"] promised

Each layer raises its own `SpecError` (the layers do not import each other, so they cannot
share a class); the facade, which imports them all, re-raises any of them as `ember.SpecError`,
one type to catch, with the layer's error as its cause. A violation is never a fallback: it is
a bug in the layer that made the graph, and the check exists to make it loud.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ember_autograd
import ember_capture
import ember_inductor
import ember_prims
import torch
from torch.utils import _pytree as pytree

from ember.errors import SpecError
from ember.introspect import attr_or

LAYER_SPEC_ERRORS: dict[type, str] = {
    ember_capture.SpecError: "capture",
    ember_autograd.SpecError: "autograd",
    ember_prims.SpecError: "prims",
    ember_inductor.SpecError: "inductor",
}


def as_spec_error(exc: BaseException) -> SpecError | None:
    """`exc` as an `ember.SpecError` if a layer's verifier raised it, else None."""
    if isinstance(exc, SpecError):
        return exc
    for cls, layer in LAYER_SPEC_ERRORS.items():
        if isinstance(exc, cls):
            err = SpecError(f"[{layer}] {exc}", layer)
            err.__cause__ = exc
            return err
    return None


def check_captured(gm: torch.fx.GraphModule, example_inputs: list) -> None:
    """The capture -> backend boundary (interface 1)."""
    try:
        ember_capture.verify_graph(gm, example_inputs)
    except ember_capture.SpecError as exc:
        raise as_spec_error(exc) from exc  # noqa: B904 - the cause is set to exc either way


def _spec_of(value: Any) -> tuple | None:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape), value.dtype, value.device.type
    return None


def check_outputs(gm: torch.fx.GraphModule, compiled: Callable) -> Callable:
    """The compiled graph's side of interface 4: its first call returns, for each output of `gm`,
    a tensor of the shape, dtype and device type that `meta["val"]` promised (strides are the
    compiler's choice). Keeps `compiled`'s calling convention."""
    outputs = pytree.tree_leaves(gm.graph.output_node().args[0])
    promised = [_spec_of(o.meta.get("val")) if isinstance(o, torch.fx.Node) else None for o in outputs]
    boxed = attr_or(compiled, "_boxed_call", False)
    checked = [False]

    def check(outs: Any) -> Any:
        if not checked[0]:
            checked[0] = True
            got = [_spec_of(o) for o in (outs if isinstance(outs, (list, tuple)) else [outs])]
            problems = [f"output {i}: {g} where the graph promised {p}"
                        for i, (g, p) in enumerate(zip(got, promised)) if p is not None and g != p]
            if len(got) != len(promised):
                problems.append(f"{len(got)} outputs where the graph has {len(promised)}")
            if problems:
                raise SpecError("[compiled graph] " + "; ".join(problems), "compiled graph")
        return outs

    if boxed:
        def run(args: list) -> Any:
            return check(compiled(args))
        run._boxed_call = True
    else:
        def run(*args: Any) -> Any:
            return check(compiled(*args))
    run.compiled_graph = attr_or(compiled, "compiled_graph")
    return run

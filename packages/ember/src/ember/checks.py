"""Boundary checks: one switch turns on every layer's verifier.

Note [checked boundaries] (ARCHITECTURE.md, "Every boundary can be checked"): with
EMBER_CHECK=1 (or `options={"check": True}`), each graph is checked where it crosses a layer:

  capture -> backend        ember_capture.verify_graph   torch-level graph, stack traces, fakes
  autograd, after each pass ember_autograd.verify_functional (AotConfig.verify)
  prims -> inductor         ember_inductor.verify_graph (InductorOptions.debug_verify), which
                            runs ember_prims.verify (prims and externs only) and adds no-mutation

Each layer raises its own `SpecError` (the layers do not import each other, so they cannot
share a class); the facade, which imports them all, re-raises any of them as `ember.SpecError`,
one type to catch, with the layer's error as its cause. A violation is never a fallback: it is
a bug in the layer that made the graph, and the check exists to make it loud.
"""
from __future__ import annotations

import ember_autograd
import ember_capture
import ember_inductor
import ember_prims
import torch

from ember.errors import SpecError

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

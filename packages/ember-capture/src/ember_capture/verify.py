"""The spec of capture's output (ARCHITECTURE.md, interface 1), as a checker.

``verify_graph(gm, example_inputs)`` raises ``SpecError`` naming the first violation (a real
check, not an ``assert``: it holds under ``python -O`` too):

- placeholders come first, one per example input, and the inputs are tensors, or ints whose
  placeholder holds a SymInt (Note [Dynamic shapes in capture], sizes.py);
- every other node calls a torch-level target: a ``torch`` function, a ``torch.nn.functional``
  function, an ``operator`` function, ``getattr``, a Tensor method (``call_method``), or one of
  the grad-mode/autocast region markers, or a size read (``aten.sym_size.int``);
- every node but the output has ``meta["stack_trace"]``; every node that makes a tensor has
  ``meta["example_value"]`` (a FakeTensor) whose shape and dtype the node really produces (a
  symbolic size compared by its value in this call), and every int-valued node a SymInt;
- the output node returns a flat tuple of nodes.
"""
from __future__ import annotations

import operator

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ember_symbolic import hint_of

from .calls import is_torch_op
from .sizes import SIZE_READ


class SpecError(ValueError):
    """A captured graph broke the backend protocol's spec (ARCHITECTURE.md, interface 1)."""


def _check(ok, message: str) -> None:
    if not ok:
        raise SpecError(f"ember_capture.verify_graph: {message}")


REGION_MARKERS = {torch._C._set_grad_enabled, torch.amp.autocast_mode._enter_autocast,
                  torch.amp.autocast_mode._exit_autocast}
_OPERATOR_FUNCTIONS = {v for v in vars(operator).values() if callable(v)}


def verify_graph(gm: torch.fx.GraphModule, example_inputs) -> None:
    nodes = list(gm.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    _check(nodes[:len(placeholders)] == placeholders, "placeholders must come first")
    _check(len(placeholders) == len(example_inputs), "one placeholder per example input")
    _check(all(isinstance(x, torch.Tensor) or type(x) is int for x in example_inputs),
           "example inputs are tensors or ints")
    for node in nodes:
        if node.op == "output":
            (out,) = node.args
            _check(isinstance(out, tuple) and all(isinstance(o, torch.fx.Node) for o in out),
                   "the output is a flat tuple of nodes")
            continue
        _check(node.meta.get("stack_trace"), f"{node.name} has no stack_trace")
        if node.op == "call_function":
            t = node.target
            _check(t in REGION_MARKERS or t is SIZE_READ or t is getattr or t in _OPERATOR_FUNCTIONS or is_torch_op(t)
                   or _applies_autograd_function(t),
                   f"{node.name} calls {t!r}, not a torch-level function")
        elif node.op == "call_method":
            _check(isinstance(node.target, str) and hasattr(torch.Tensor, node.target),
                   f"{node.name} calls unknown Tensor method {node.target!r}")
        elif node.op != "placeholder":
            raise SpecError(f"ember_capture.verify_graph: {node.name}: unexpected node kind {node.op}")
        value = node.meta.get("example_value")
        if node.target is SIZE_READ:
            _check(isinstance(value, torch.SymInt), f"{node.name} reads a size but its example_value is no SymInt")
        elif node.op == "placeholder" and not isinstance(value, torch.Tensor):
            _check(isinstance(value, torch.SymInt), f"{node.name} has no FakeTensor or SymInt example_value")
        elif node.op == "placeholder" or isinstance(value, torch.Tensor):
            _check(isinstance(value, FakeTensor), f"{node.name} has no FakeTensor example_value")
    for node, real in zip(placeholders, example_inputs):
        fake = node.meta["example_value"]
        if isinstance(fake, torch.SymInt):
            _check(type(real) is int and hint_of(fake) == real, f"{node.name}: example_value differs from input")
            continue
        _check(isinstance(real, torch.Tensor) and tuple(hint_of(s) for s in fake.shape) == tuple(real.shape)
               and fake.dtype == real.dtype, f"{node.name}: example_value differs from input")


def _applies_autograd_function(target) -> bool:
    """A user's torch.autograd.Function, called through its `apply` (Note [autograd.Function]
    in autograd_function.py): torch's Function machinery runs it, so it is torch-level."""
    cls = getattr(target, "autograd_function", None)
    return isinstance(cls, type) and issubclass(cls, torch.autograd.Function)

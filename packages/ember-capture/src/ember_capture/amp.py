"""torch.amp.GradScaler under capture: the decision to skip an optimizer step, without a break.

Note [GradScaler steps]: ``GradScaler`` is plain Python over tensors, and capture inlines it
(``library.TORCH_INLINED``): ``scale`` multiplies by the scale tensor, ``unscale_`` runs
``torch._amp_foreach_non_finite_check_and_unscale_`` on the gradients, ``update`` runs
``torch._amp_update_scale_`` on the scale and growth-tracker tensors, and its Python state
(``_per_optimizer_states``, keyed by ``id(optimizer)``, guarded by identity) is modelled like any
object's. The scale is a tensor, so a scale that grows or backs off never recompiles.

One line reads tensor data: ``GradScaler._maybe_opt_step`` calls ``optimizer.step()`` only
``if not sum(v.item() for v in found_inf_per_device.values())``. torch.compile breaks there.
Capture models that method instead: it sums the ``found_inf`` tensors in the graph (in float64,
in eager's order, as Python sums the ``.item()`` floats) into ``skip = total != 0`` and records
the optimizer's step so that ``skip`` undoes it (Note [skipped steps] in ``optim.py``): a skipped
step changes nothing, bit for bit, as in eager; a step that runs is the usual compiled step. Where the step is not one capture models
(a subclass's own ``step``, a closure, a fused optimizer), the model refuses, and the method
runs natively at a graph break.
"""
from __future__ import annotations

import torch
from torch.amp.grad_scaler import GradScaler

from .config import Unsupported
from .optim import step_model_for
from .semantics import getattr_var
from .variables import ConstVar, DictVar, ObjVar, TensorVar


def model_for(fn_var, self_var):
    """The capture model of ``scaler._maybe_opt_step(...)``, or None (inlined as Python)."""
    if not (isinstance(self_var, ObjVar) and isinstance(self_var.value, GradScaler) and isinstance(fn_var, ObjVar)):
        return None
    if fn_var.value is GradScaler._maybe_opt_step and type(self_var.value)._maybe_opt_step is fn_var.value:
        return _maybe_opt_step
    return None


def _maybe_opt_step(fr, scaler_var, args, kwargs):
    """``optimizer.step(*args, **kwargs)`` unless a ``found_inf`` is set, in one graph."""
    opt_var, state_var, *rest = args
    if rest or kwargs:
        raise Unsupported("data_dependent", "GradScaler.step(optimizer, ...) with step arguments reads found_inf")
    step = step_model_for(getattr_var(fr, opt_var, "step"))
    if step is None:
        raise Unsupported("data_dependent", "GradScaler.step skips an optimizer step that capture does not model "
                                            "on found_inf (tensor data)")
    step(fr, [], {}, skip_if=_found_any(fr, state_var))
    return ConstVar(None)


def _found_any(fr, state_var) -> TensorVar:
    """``sum(v.item() for v in state["found_inf_per_device"].values()) != 0`` as a 0-d bool tensor."""
    found = state_var.items.get("found_inf_per_device") if isinstance(state_var, DictVar) else None
    if not isinstance(found, DictVar) or not found.items:
        raise Unsupported("data_dependent", "GradScaler.step: found_inf_per_device is not modelled")
    values = list(found.items.values())
    if not all(isinstance(v, TensorVar) and v.fake.numel() == 1 for v in values):
        raise Unsupported("data_dependent", "GradScaler.step: found_inf_per_device holds a non-tensor")
    if len({v.fake.device for v in values}) > 1:
        raise Unsupported("data_dependent", "GradScaler.step: found_inf on several devices")
    graph = fr.tr.graph
    total = None
    for v in values:
        term = graph.call("call_method", "double", [v], {})
        total = term if total is None else graph.call("call_function", torch.add, [total, term], {})
    return graph.call("call_method", "ne", [graph.call("call_method", "reshape", [total, ConstVar(())], {}),
                                            ConstVar(0)], {})

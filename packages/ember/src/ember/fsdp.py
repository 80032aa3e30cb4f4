"""FSDP2 (`torch.distributed.fsdp.fully_shard`): the forwards compiled, FSDP's hooks left to torch.

Note [FSDP hooks stay native]: `fully_shard(module)` makes the module an FSDP unit whose forward
pre-hook all-gathers its parameters (and registers the backward's all-gather and
reduce-scatter), and whose forward hook frees them again; the collectives, their streams and the
prefetching of the next unit are FSDP's. ember compiles what is between the hooks: for each FSDP
unit in the compiled model (the model itself included), the unit's call runs
`Module.__call__` natively, hooks and all, and its `forward` is a captured function of the
unit's class forward (set on the instance for the duration of the compiled call, so the model is
unchanged afterwards). Inside a captured forward, the call of a child FSDP unit is a graph break
(FSDP's hook code is torch.distributed, which capture runs natively, Note [Inlining]); the child
runs natively, its own forward captured in turn. So there is one captured graph (or more, with
the user's own graph breaks) per FSDP unit and the code between units; the parameters a graph
reads are the unsharded ones the pre-hook made, and each graph's backward runs after FSDP's
pre-backward all-gather, so its gradients reach FSDP's reduce-scatter as eager's do.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from ember.module import OptimizedModule

try:
    from torch.distributed.fsdp import FSDPModule
except ImportError:  # a torch without distributed support
    FSDPModule = None


def is_fsdp_unit(module: Any) -> bool:
    return FSDPModule is not None and dist.is_available() and isinstance(module, FSDPModule)


def has_fsdp_units(model: Any) -> bool:
    return isinstance(model, torch.nn.Module) and any(is_fsdp_unit(m) for m in model.modules())


def compile_fsdp(model: torch.nn.Module, capture: Callable[[Callable], Callable],
                 recompile: Callable | None) -> OptimizedModule:
    """`ember.compile(model)` for a model holding FSDP units (Note [FSDP hooks stay native]);
    `capture` captures a function with the user's compile arguments."""
    forwards = {unit: capture(_class_forward(unit)) for unit in model.modules() if is_fsdp_unit(unit)}
    run = model if is_fsdp_unit(model) else capture(_class_forward(model))
    return OptimizedModule(model, functools.partial(_call, forwards, run), recompile)


def _class_forward(module: torch.nn.Module) -> Callable:
    forward = type(module).forward

    def fsdp_forward(*args: Any, **kwargs: Any) -> Any:
        return forward(module, *args, **kwargs)

    fsdp_forward.__qualname__ = f"{type(module).__qualname__}.forward"
    return fsdp_forward


def _call(forwards: dict, run: Callable, *args: Any, **kwargs: Any) -> Any:
    saved = {unit: unit.__dict__.get("forward") for unit in forwards}
    for unit, forward in forwards.items():
        unit.__dict__["forward"] = forward
    try:
        return run(*args, **kwargs)
    finally:
        for unit, previous in saved.items():
            if previous is None:
                unit.__dict__.pop("forward", None)
            else:
                unit.__dict__["forward"] = previous
